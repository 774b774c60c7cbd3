#!/usr/bin/env bash
# Honest clients' PING/GET/SAVE p50/p99 alone, then while hostile clients pin the pool, flood
# the loop and fan out (see hostile.py). HOSTILE_BEFORE=path/to/an/older/recordsd runs the same
# against that binary first, for a before-and-after in one run.
source "$(dirname "$0")/lib.sh"
export PGURL
out="$root/bench/results/hostile.txt"
: >"$out"
run() {
  local label=$1 binary=$2
  "$binary" serve --listen 127.0.0.1:0 --database "$PGURL" --migrations "$root/migrations" --log-level error --pool-size 4 \
    >"$BENCH_TMP/recordsd.out" 2>"$BENCH_TMP/recordsd.err" &
  RECORDSD_PID=$!
  for _ in $(seq 1 100); do grep -q "listening on" "$BENCH_TMP/recordsd.out" 2>/dev/null && break; sleep 0.1; done
  RECORDSD_PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$BENCH_TMP/recordsd.out")
  export RECORDSD_PORT RECORDSD_PID HOSTILE_LABEL=$label
  python3 bench/hostile.py | tee -a "$out"
  kill -9 "$RECORDSD_PID" 2>/dev/null || true; wait "$RECORDSD_PID" 2>/dev/null || true
  RECORDSD_PID=
  psql "$PGURL" -qc "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'recordsd'" >/dev/null || true
}
if [ -n "${HOSTILE_BEFORE:-}" ]; then run before "$HOSTILE_BEFORE"; fi
run after "$root/.build/release/recordsd"
