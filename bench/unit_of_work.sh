#!/usr/bin/env bash
# SAVE of 1 department + 10,000 employees: recordsd vs psql \copy vs SQLAlchemy's Session.
#   bench/unit_of_work.sh            (BENCH_ROWS, BENCH_REPEAT to change the size)
source "$(dirname "$0")/lib.sh"
python=$(bench_venv)
start_recordsd
export PGURL RECORDSD_PORT RECORDSD_PID
python3 bench/unit_of_work.py "$python"
