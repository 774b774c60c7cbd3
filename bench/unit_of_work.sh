#!/usr/bin/env bash
# SAVE of 1 department + 10,000 employees: recordsd vs psql \copy vs SQLAlchemy's Session.
#   bench/unit_of_work.sh            (BENCH_ROWS, BENCH_REPEAT to change the size)
source "$(dirname "$0")/lib.sh"
python=$(bench_venv)
# A copy of the tables keyed by uuids with a default: served beside the sample domain.
psql "$PGURL" -qXc "CREATE TABLE u_department (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), name text NOT NULL, number integer NOT NULL);
  CREATE TABLE u_employee (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), first_name text NOT NULL, last_name text NOT NULL,
    gender smallint NOT NULL, age integer, department_id uuid REFERENCES u_department (id) ON DELETE CASCADE);
  CREATE INDEX ON u_employee (department_id);"
build_unitclient
start_recordsd
export PGURL RECORDSD_PORT RECORDSD_PID BENCH_TMP
python3 bench/unit_of_work.py "$python"
