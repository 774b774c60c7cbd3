# Shared by the benchmarks: a throwaway PostgreSQL and a release recordsd, both cleaned up on exit.
# Sourcing scripts set BENCH_NAME; they get $PGURL, $RECORDSD_PORT, $RECORDSD_PID, $BENCH_TMP.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
scripts/setup python3-venv
export PATH=/opt/swift/usr/bin:$PATH
echo "== building release binaries" >&2
swift build -c release >/tmp/recordsd-bench-build.log 2>&1 || { cat /tmp/recordsd-bench-build.log; exit 1; }

BENCH_TMP=$(mktemp -d /tmp/recordsd-bench.XXXXXX)
chmod 755 "$BENCH_TMP"
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
export PATH="$pgbin:$PATH"
as_pg=()
if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$BENCH_TMP"; as_pg=(runuser -u postgres --); fi
PGPORT_BENCH=$(( 20000 + RANDOM % 10000 ))
bench_cleanup() {
  [ -n "${RECORDSD_PID:-}" ] && kill "$RECORDSD_PID" 2>/dev/null && wait "$RECORDSD_PID" 2>/dev/null || true
  "${as_pg[@]}" "$pgbin/pg_ctl" -D "$BENCH_TMP/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$BENCH_TMP"
}
trap bench_cleanup EXIT
"${as_pg[@]}" "$pgbin/initdb" -D "$BENCH_TMP/data" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
# Durable settings (fsync on), as a production server would run: every figure pays for its commits.
# (PG_START_OPTS: a bench that restarts PostgreSQL starts it the same way.)
export PG_START_OPTS="-c listen_addresses=127.0.0.1 -c port=$PGPORT_BENCH -c unix_socket_directories=$BENCH_TMP -c max_connections=300 -c shared_buffers=512MB"
"${as_pg[@]}" "$pgbin/pg_ctl" -D "$BENCH_TMP/data" -l "$BENCH_TMP/postgres.log" -w -o "$PG_START_OPTS" start >/dev/null
PGURL="postgresql://postgres@127.0.0.1:$PGPORT_BENCH/postgres"
# The same database over its Unix socket: cheaper than loopback TCP, as a server placed next to
# PostgreSQL would connect (pgbench gets the same socket where it is the reference).
PGSOCKETURL="postgresql://postgres@/postgres?host=$BENCH_TMP&port=$PGPORT_BENCH"

# build_loadgen: the C load generator (bench/loadgen.c) at $BENCH_TMP/loadgen.
build_loadgen() {
  "${CC:-clang}" -O2 -pthread -o "$BENCH_TMP/loadgen" "$root/bench/loadgen.c"
}

# build_unitclient: one unit sent as a program would (bench/unitclient.c) at $BENCH_TMP/unitclient.
build_unitclient() {
  "${CC:-clang}" -O2 -o "$BENCH_TMP/unitclient" "$root/bench/unitclient.c"
}

# start_recordsd [args...]: a release server on a free port, migrations applied
# (RECORDSD_DATABASE picks the URL; $PGURL by default; BENCH_RECORDSD another build to compare).
start_recordsd() {
  "${BENCH_RECORDSD:-$root/.build/release/recordsd}" serve --listen 127.0.0.1:0 --database "${RECORDSD_DATABASE:-$PGURL}" --migrations "$root/migrations" --log-level "${RECORDSD_LOG_LEVEL:-warning}" "$@" \
    >"$BENCH_TMP/recordsd.out" 2>"$BENCH_TMP/recordsd.err" &
  RECORDSD_PID=$!
  for _ in $(seq 1 100); do
    if grep -q "listening on" "$BENCH_TMP/recordsd.out" 2>/dev/null; then break; fi
    sleep 0.1
  done
  RECORDSD_PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$BENCH_TMP/recordsd.out")
  [ -n "$RECORDSD_PORT" ] || { cat "$BENCH_TMP/recordsd.err"; exit 1; }
  # With --admin-listen HOST:0, the port it was given (for /metrics).
  RECORDSD_ADMIN_PORT=$(sed -n 's/^recordsd admin on .*:\([0-9]*\)$/\1/p' "$BENCH_TMP/recordsd.out")
}

# A virtualenv with the peer implementations (SQLAlchemy over psycopg), made once.
bench_venv() {
  local venv="$root/.build/bench-venv"
  if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv (SQLAlchemy, psycopg)" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q 'sqlalchemy>=2' 'psycopg[binary]>=3' >&2
  fi
  echo "$venv/bin/python"
}
