#!/usr/bin/env bash
# TLS beside plain on one server: GET throughput (8 clients pipelining) and resident memory per
# open session, each measured over plain TCP and over the TLS listener in the same run.
source "$(dirname "$0")/lib.sh"
certs="$BENCH_TMP/certs"
mkdir -p "$certs"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$certs/ca.key" -out "$certs/ca.pem" -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$certs/server.key" -out "$certs/server.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$certs/ext"
openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" -CAcreateserial -out "$certs/server.pem" -days 2 -extfile "$certs/ext" 2>/dev/null
start_recordsd --pool-size 8 --tls-cert "$certs/server.pem" --tls-key "$certs/server.key" --tls-listen 127.0.0.1:0
TLS_PORT=$(sed -n 's/.*listening for TLS on .*:\([0-9]*\)$/\1/p' "$BENCH_TMP/recordsd.out")
export PGURL RECORDSD_PORT RECORDSD_PID TLS_PORT TLS_CA="$certs/ca.pem"
python3 bench/tls.py | tee "$root/bench/results/tls.txt"
