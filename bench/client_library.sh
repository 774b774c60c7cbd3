#!/usr/bin/env bash
# Pipelined GET by id through RecordsClient (Swift, records decoded into structs) beside
# bench/loadgen.c on the raw protocol: 8 clients, 32 in flight each, 3 alternating rounds.
#   bench/client_library.sh      (BENCH_SECONDS, BENCH_ROUNDS change the load)
source "$(dirname "$0")/lib.sh"
build_loadgen
swift build -c release --package-path Examples/DepartmentApp --product GetBench >/tmp/recordsd-bench-example.log 2>&1 \
  || { cat /tmp/recordsd-bench-example.log; exit 1; }
start_recordsd --pool-size 4
seconds=${BENCH_SECONDS:-8}
rows=10000
psql "$PGURL" -qX -c "INSERT INTO employee (first_name, last_name, gender, age) SELECT 'f' || i, 'l' || i, 1, 30 FROM generate_series(1, $rows) i"
gets=()
for _ in $(seq 32); do gets+=("GET employee 1%d"); done  # ids 10 to 17
raw=() lib=()
for round in $(seq "${BENCH_ROUNDS:-3}"); do
  raw+=("$("$BENCH_TMP/loadgen" -p "$RECORDSD_PORT" -c 8 -j 2 -T "$seconds" -e "+OK 1 record" "${gets[@]}" | awk '{printf "%.0f", $3 * 32}')")
  lib+=("$("$root/Examples/DepartmentApp/.build/release/GetBench" "$RECORDSD_PORT" 8 32 "$seconds" "$rows" | awk '{print $3}')")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
{
  echo "GET by id, 8 clients pipelining 32, ${seconds} s a run, ${BENCH_ROUNDS:-3} alternating rounds"
  echo "  raw protocol (bench/loadgen.c, C)     ${raw[*]} per second, median $(median "${raw[@]}")"
  echo "  RecordsClient (Swift, decoded)        ${lib[*]} per second, median $(median "${lib[@]}")"
  echo "  ratio of medians                      $(awk -v a="$(median "${lib[@]}")" -v b="$(median "${raw[@]}")" 'BEGIN {printf "%.2f", a / b}')"
  echo "measured $(date +%F) on $(nproc) cores; server, PostgreSQL and both clients share the machine"
} | tee bench/results/client_library.txt
