#!/usr/bin/env bash
# PostgreSQL stopped with -m immediate and restarted N times while 16 clients save: prints
# acknowledged, present, duplicated (must be 0), partial (must be 0), and answered "nothing was
# saved" but committed (must be 0). FAULT_ROUNDS and FAULT_CLIENTS change its size.
source "$(dirname "$0")/lib.sh"
start_recordsd --pool-size 8
export PGURL RECORDSD_PORT PG_CTL="$pgbin/pg_ctl" PGDATA="$BENCH_TMP/data" PGLOG="$BENCH_TMP/postgres.log" AS_PG="${as_pg[*]}"
python3 bench/fault_pg_restart.py | tee "$root/bench/results/fault_pg_restart.txt" || status=$?
echo "COMMITs that got no answer, as the server resolved them:" | tee -a "$root/bench/results/fault_pg_restart.txt"
{ grep -o "transaction [0-9]* .*" "$BENCH_TMP/recordsd.err" | awk '{ $2 = ""; print }' | sort | uniq -c || true; } | tee -a "$root/bench/results/fault_pg_restart.txt"
exit ${status:-0}
