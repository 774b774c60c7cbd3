#!/usr/bin/env bash
# Big binary values beside text of the same length, in one run: 1 MB photos (base64 on the
# wire, bytea in PostgreSQL) against 1 MB of text, through INSERT and SAVE; and, while one
# session sends them, another session's PING latency (the event loop must never be held).
source "$(dirname "$0")/lib.sh"
start_recordsd --pool-size 4 --max-line-length 4194304
export RECORDSD_PORT
python3 bench/big_values.py | tee "$root/bench/results/big_values.txt"
