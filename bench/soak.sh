#!/usr/bin/env bash
# A million lines from the grammar-aware fuzzer (tests' GrammarFuzzer), pipelined into one
# server: prints the lines sent, the status lines received (one a line, else it fails), the
# seed, and the server's peak memory; a crash fails the run. SOAK_LINES and SOAK_SEED change it.
set -euo pipefail
cd "$(dirname "$0")/.."
export RECORDS_FUZZ_LINES=${SOAK_LINES:-1000000}
[ -n "${SOAK_SEED:-}" ] && export RECORDS_FUZZ_SEED=$SOAK_SEED
scripts/test --filter grammarAwareFuzzingGetsOneStatusALine 2>&1 | tee /tmp/recordsd-soak.log | grep -E "grammar fuzzing:|passed|failed|✘"
grep "grammar fuzzing:" /tmp/recordsd-soak.log > bench/results/soak.txt
