#!/usr/bin/env bash
# The admin listener under a flood: 1,000 idle connections held open against it (an attacker
# who reaches the port), then /live, /ready and /metrics each asked 200 times on connections of
# their own, and PING on the client port, beside the same asked with no flood, in one run.
source "$(dirname "$0")/lib.sh"
start_recordsd --pool-size 4 --admin-listen 127.0.0.1:0
export RECORDSD_PORT RECORDSD_ADMIN_PORT
python3 bench/admin_flood.py | tee "$root/bench/results/admin_flood.txt"
