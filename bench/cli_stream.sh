#!/usr/bin/env bash
# records -c 'FIND employee' on 10^6 rows, as a user pipes it: time to the first line, total
# time and the CLI's peak memory, beside `records export` of the same rows.
#   bench/cli_stream.sh      (BENCH_ROWS changes the size)
source "$(dirname "$0")/lib.sh"
start_recordsd --pool-size 4
rows=${BENCH_ROWS:-1000000}
psql "$PGURL" -qX -c "INSERT INTO employee (first_name, last_name, gender, age) SELECT 'f' || i, 'l' || i, 1, 30 FROM generate_series(1, $rows) i"
# BENCH_RECORDS_BEFORE: another build of the CLI, measured in the same run (before/after).
export RECORDS_BIN="$root/.build/release/records" BEFORE="${BENCH_RECORDS_BEFORE:-}" RECORDSD_PORT rows
python3 - <<'PY' | tee bench/results/cli_stream.txt
import os, resource, subprocess, time
port, binary, rows = os.environ["RECORDSD_PORT"], os.environ["RECORDS_BIN"], int(os.environ["rows"])

def run(args, first_line_only=False, binary=binary):
    """Seconds to the first line, seconds in all, this child's peak resident MiB (wait4)."""
    started = time.perf_counter()
    child = subprocess.Popen([binary, "-p", port, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    first = None
    for line in child.stdout:
        if first is None:
            first = time.perf_counter() - started
            if first_line_only:
                child.kill()
                break
    _, _, usage = os.wait4(child.pid, 0)
    total = time.perf_counter() - started
    return first, total, usage.ru_maxrss / 1024

print(f"{rows} employees through the records CLI, output read by a pipe")
cases = [("records -c 'FIND employee' --format csv", ["--format", "csv", "-c", "FIND employee"], binary),
         ("records -c 'FIND employee' (json)", ["--format", "json", "-c", "FIND employee"], binary),
         ("records export employee", ["export", "employee"], binary)]
if os.environ.get("BEFORE"):
    cases.insert(0, ("before: records -c 'FIND employee' --format csv", ["--format", "csv", "-c", "FIND employee"], os.environ["BEFORE"]))
for label, args, program in cases:
    first, _, _ = run(args, first_line_only=True, binary=program)
    _, total, peak = run(args, binary=program)
    print(f"  {label:<50} first line {first * 1000:7.0f} ms   total {total:6.2f} s   peak {peak:6.1f} MiB")
print(f"measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores; server, PostgreSQL and the CLI share the machine")
PY
