#!/usr/bin/env bash
# Rolling restarts behind a real balancer: HAProxy (TCP) in front of two release recordsd,
# PgBouncer (session pooling) between them and PostgreSQL. 100 clients keep units of 1-50
# pending inserts and keep saving while both replicas are restarted one after the other,
# twice: with SIGTERM (sessions handed off), then with SIGKILL and --durable-units. Then the
# cost of --durable-units on one-insert SAVEs (32 clients, no restarts), off and on.
# Prints lost units, lost and doubled rows (all must be 0), commands that failed, and the
# longest pause a client saw. Loopback only; about two minutes.
source "$(dirname "$0")/lib.sh"
scripts/setup haproxy pgbouncer
export PGURL
"$root/.build/release/recordsd" migrate --database "$PGURL" --migrations "$root/migrations" >/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
BOUNCER_PORT=$(free_port); BALANCER_PORT=$(free_port); R0=$(free_port); R1=$(free_port)
printf '"postgres" ""\n' >"$BENCH_TMP/userlist.txt"
fill() { sed -e "s|@PG_HOST@|127.0.0.1|; s|@PG_PORT@|$PGPORT_BENCH|; s|@BOUNCER_PORT@|$BOUNCER_PORT|; s|@DIR@|$BENCH_TMP|g" \
  -e "s|@BALANCER_PORT@|$BALANCER_PORT|; s|@REPLICA_PORT_0@|$R0|; s|@REPLICA_PORT_1@|$R1|" "$root/scripts/local-stack/$1"; }
fill pgbouncer.ini.in >"$BENCH_TMP/pgbouncer.ini"
fill haproxy.cfg.in >"$BENCH_TMP/haproxy.cfg"
chmod 644 "$BENCH_TMP"/*.ini "$BENCH_TMP"/*.txt "$BENCH_TMP"/*.cfg
as_user=(); [ "$(id -u)" = 0 ] && as_user=(runuser -u postgres --)
"${as_user[@]}" /usr/sbin/pgbouncer -d "$BENCH_TMP/pgbouncer.ini"
/usr/sbin/haproxy -D -p "$BENCH_TMP/haproxy.pid" -f "$BENCH_TMP/haproxy.cfg" 2>/dev/null
stack_cleanup() {
  [ -n "${KEEP_LOGS:-}" ] && cp "$BENCH_TMP"/replica-*.log "$BENCH_TMP"/pgbouncer.log "$KEEP_LOGS"/ 2>/dev/null
  for pidfile in "$BENCH_TMP"/replica-*.pid; do [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null || true; done
  kill "$(cat "$BENCH_TMP/haproxy.pid")" 2>/dev/null || true
  kill "$(cat "$BENCH_TMP/pgbouncer.pid" 2>/dev/null)" 2>/dev/null || true
  bench_cleanup
}
trap stack_cleanup EXIT

# start_pair [args]: both replicas through PgBouncer; REPLICA_CMD_N starts replica N again the
# same way (the driver runs it after each stop) and returns once it listens.
start_pair() {
  for n in 0 1; do
    local port; port=$([ "$n" = 0 ] && echo "$R0" || echo "$R1")
    cat >"$BENCH_TMP/start-$n.sh" <<START
"$root/.build/release/recordsd" serve --no-migrate --listen 127.0.0.1:$port --proxy-from 127.0.0.1 --database postgresql://postgres@127.0.0.1:$BOUNCER_PORT/postgres \\
  --pool-size 8 --log-level warning $* >>"$BENCH_TMP/replica-$n.log" 2>&1 &
echo \$! >"$BENCH_TMP/replica-$n.pid"
for i in \$(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
START
    export "REPLICA_CMD_$n=bash $BENCH_TMP/start-$n.sh" "REPLICA_PID_FILE_$n=$BENCH_TMP/replica-$n.pid"
    bash "$BENCH_TMP/start-$n.sh"
  done
}
stop_pair() { for n in 0 1; do kill "$(cat "$BENCH_TMP/replica-$n.pid")" 2>/dev/null || true; done; sleep 1; }

export BALANCER_PORT
if [ -z "${ONLY_KILL:-}" ]; then
echo "== SIGTERM, both replicas in turn, twice (sessions handed off)"
start_pair
CLIENTS=${CLIENTS:-100} MODE=term RUN=term python3 bench/rolling_restart.py
stop_pair
fi
echo "== SIGKILL with --durable-units, both replicas in turn, twice"
start_pair --durable-units
CLIENTS=${CLIENTS:-100} MODE=kill RUN=kill python3 bench/rolling_restart.py
stop_pair
echo "== one-insert SAVEs, 32 clients, 10 s, no restarts: --durable-units off, then on"
start_pair
off=$(CLIENTS=32 MEASURE_SECONDS=10 RUN=off python3 bench/rolling_restart.py)
stop_pair
start_pair --durable-units
on=$(CLIENTS=32 MEASURE_SECONDS=10 RUN=on python3 bench/rolling_restart.py)
stop_pair
echo "durable off: $off"
echo "durable on:  $on"
