#!/usr/bin/env bash
# EXPORT and IMPORT of 1,000,000 employees vs psql \copy; WATCH latency with 100 watchers.
#   bench/bulk.sh            (BENCH_ROWS, BENCH_WATCHERS to change the load)
source "$(dirname "$0")/lib.sh"
# recordsd and psql both reach PostgreSQL over its Unix socket.
RECORDSD_DATABASE=$PGSOCKETURL start_recordsd --pool-size 4
export PGSOCKETURL RECORDSD_PORT RECORDSD_PID
python3 bench/bulk.py
