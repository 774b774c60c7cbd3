#!/usr/bin/env bash
# The line path: pipelined INSERT lines on one session from the C load generator (400 lines a
# round, a round's replies read before the next is sent), with the server's CPU per line.
#   bench/lines.sh         (BENCH_SECONDS, BENCH_ROUNDS change the load)
source "$(dirname "$0")/lib.sh"
build_loadgen
start_recordsd
# A round's unit holds every line sent (about 53 bytes of values each, counted against the
# 64 MiB a unit may hold): 3 s rounds passed it at 425,000 lines a second, so rounds are 1 s.
seconds=${BENCH_SECONDS:-1}
line='INSERT employee first_name="Ada" last_name="Lovelace" gender=2 age=36 department_id=5'
rates=() micros=()
for round in $(seq "${BENCH_ROUNDS:-5}"); do
  before=$(awk '{print $14 + $15}' "/proc/$RECORDSD_PID/stat")
  out=$("$BENCH_TMP/loadgen" -p "$RECORDSD_PORT" -c 1 -j 1 -T "$seconds" -e "+OK" -r 400 "$line")
  after=$(awk '{print $14 + $15}' "/proc/$RECORDSD_PID/stat")
  rounds=$(echo "$out" | awk '{print $1}')
  rates+=("$(echo "$out" | awk '{printf "%.0f", $3 * 400}')")
  # The server's CPU (clock ticks) over the lines it answered, in microseconds a line.
  micros+=("$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n=$((rounds * 400)) 'BEGIN {printf "%.1f", t / hz * 1e6 / n}')")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
{
  echo "Pipelined INSERT lines on one session (5 fields, bench/loadgen.c, 400 lines a round), ${seconds} s a round, ${BENCH_ROUNDS:-5} rounds"
  echo "  lines a second          ${rates[*]}, median $(median "${rates[@]}") (target >= 200000)"
  echo "  server CPU a line (us)  ${micros[*]}, median $(median "${micros[@]}")"
  echo "measured $(date +%F) on $(nproc) cores; the client shares the machine"
} | tee bench/results/lines.txt
