#!/usr/bin/env bash
# GET by id from 8 pipelining clients vs pgbench -S; FIND of 1,000,000 rows vs COPY TO STDOUT.
#   bench/queries.sh        (BENCH_CLIENTS, BENCH_SECONDS, BENCH_ROWS change the load)
source "$(dirname "$0")/lib.sh"
build_loadgen
start_recordsd --pool-size 4 --admin-listen 127.0.0.1:0
export PGURL RECORDSD_PORT RECORDSD_ADMIN_PORT RECORDSD_PID BENCH_TMP
python3 bench/queries.py
