#!/usr/bin/env bash
# WATCH on a table with row-level security: 1,000 watching sessions spread over 10 and over 100
# users, 1,000 changes, beside the same table without policies. recordsd serves as an ordinary
# role (policies bind it); results in bench/results/watch_rls.txt.
#   bench/watch_rls.sh       (BENCH_WATCHERS, BENCH_CHANGES, BENCH_USERS="10 100" change the load)
source "$(dirname "$0")/lib.sh"
psql "$PGURL" -qX -v ON_ERROR_STOP=1 -v app_role=bench_app -v app_password=bench-app-pw -v owner=postgres \
  -f docker/postgres/app-role.sql >/dev/null
# The sample domain, and the same memo table without policies: the reference.
cp -r "$root/migrations" "$BENCH_TMP/migrations"
echo "CREATE TABLE memo_open (LIKE memo INCLUDING ALL);" >"$BENCH_TMP/migrations/0099_bench_memo_open.sql"
"$root/.build/release/recordsd" migrate --database "$PGURL" --migrations "$BENCH_TMP/migrations" >/dev/null
RECORDSD_DATABASE="postgresql://bench_app:bench-app-pw@127.0.0.1:$PGPORT_BENCH/postgres" start_recordsd --no-migrate --pool-size 8
export PGURL RECORDSD_PORT RECORDSD_PID
python3 bench/watch_rls.py | tee bench/results/watch_rls.txt
