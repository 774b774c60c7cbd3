#!/usr/bin/env bash
# Sessions 1..10,000 against pgbench: connect time, PING and SAVE throughput, memory; writes
# bench/results/sessions.txt and sessions.png.  (BENCH_SESSIONS, BENCH_SECONDS, BENCH_ROUNDS, BENCH_WATCH_ROUNDS to change.)
source "$(dirname "$0")/lib.sh"
python=$(bench_venv)
"$python" -c "import matplotlib" 2>/dev/null || "$(dirname "$python")/pip" install -q matplotlib >&2
build_loadgen
# Both sides reach PostgreSQL over its Unix socket; the pool is the server's default, 4
# connections: with group commit a small pool groups more (64 clients over TCP, same sitting:
# 10,174-10,950 SAVEs/s with 4, 8,967-9,685 with 8, 8,449-8,999 with 16).
# A second server reaches PostgreSQL over TCP, for the comparison with pgbench over TCP.
RECORDSD_DATABASE=$PGURL start_recordsd --pool-size "${BENCH_POOL:-4}" --max-sessions 20000
RECORDSD_TCP_PORT=$RECORDSD_PORT RECORDSD_TCP_PID=$RECORDSD_PID
trap 'kill "$RECORDSD_TCP_PID" 2>/dev/null; bench_cleanup' EXIT
RECORDSD_DATABASE=$PGSOCKETURL start_recordsd --pool-size "${BENCH_POOL:-4}" --max-sessions 20000
export PGURL PGSOCKETURL RECORDSD_PORT RECORDSD_PID RECORDSD_TCP_PORT BENCH_TMP RESULTS="$root/bench/results"
"$python" bench/sessions.py
