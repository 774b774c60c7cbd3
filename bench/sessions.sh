#!/usr/bin/env bash
# Sessions 1..10,000 against pgbench: connect time, PING and SAVE throughput, memory; writes
# bench/results/sessions.txt and sessions.png.  (BENCH_SESSIONS, BENCH_SECONDS to change.)
source "$(dirname "$0")/lib.sh"
python=$(bench_venv)
"$python" -c "import matplotlib" 2>/dev/null || "$(dirname "$python")/pip" install -q matplotlib >&2
start_recordsd --pool-size "${BENCH_POOL:-32}" --max-sessions 20000
export PGURL RECORDSD_PORT RECORDSD_PID BENCH_TMP RESULTS="$root/bench/results"
"$python" bench/sessions.py
