#!/usr/bin/env bash
# Failover under load (issue #46): 50 clients inserting and saving with SAVE KEY, and 50
# readers, on one release recordsd, while its PostgreSQL goes through three planned switches
# and three crashes of the primary's machine (kill -9 of every process of the node; it is
# started again and rejoins as the standby, under the same load). First the reference: the
# same load and the same faults on a single PostgreSQL (a fast restart, and kill -9 of the
# server then a start), with recordsd's defaults for one host. Then a pg_auto_failover
# formation (scripts/formation: a monitor, a primary, a synchronous standby). Prints one line
# of figures each (bench/failover.py). Loopback only; about five minutes after the build.
source "$(dirname "$0")/lib.sh"
scripts/setup postgresql-15-auto-failover pg-auto-failover-cli
export WRITERS=${WRITERS:-50} READERS=${READERS:-50} SETTLE=${SETTLE:-5}
export FAULTS=${FAULTS:-"planned planned planned crash crash crash"}

# --- the reference: one PostgreSQL ---------------------------------------------------------------
cat >"$BENCH_TMP/single-fault.sh" <<FAULT
set -e
case \$1 in
planned) ${as_pg[*]} "$pgbin/pg_ctl" -D "$BENCH_TMP/data" -m fast -w -o "$PG_START_OPTS" -l "$BENCH_TMP/postgres.log" restart ;;
crash)
  # pg_ctl made the server a session leader: its backends die with it, as on a machine's death.
  pkill -9 -s "\$(head -n 1 "$BENCH_TMP/data/postmaster.pid")"
  for _ in \$(seq 100); do ${as_pg[*]} "$pgbin/pg_ctl" -D "$BENCH_TMP/data" -w -o "$PG_START_OPTS" -l "$BENCH_TMP/postgres.log" start && break; sleep 0.2; done ;;
esac
FAULT
if [ -z "${ONLY_FORMATION:-}" ]; then
start_recordsd
echo "== one PostgreSQL: $FAULTS (recordsd's defaults for one host: --failover-wait 0)"
PORT=$RECORDSD_PORT VERIFY_URL=$PGURL FAULT_CMD="bash $BENCH_TMP/single-fault.sh" RUN=single python3 bench/failover.py
kill "$RECORDSD_PID"; wait "$RECORDSD_PID" 2>/dev/null || true; RECORDSD_PID=
fi

# --- a formation ----------------------------------------------------------------------------------
formation=$BENCH_TMP/formation
formation_cleanup() { scripts/formation stop "$formation" >/dev/null 2>&1 || true; bench_cleanup; }
trap formation_cleanup EXIT
url=$(scripts/formation start "$formation" | sed -n 's/^url=//p')
cat >"$BENCH_TMP/formation-fault.sh" <<FAULT
set -e
case \$1 in
planned) scripts/formation failover "$formation" ;;
crash) scripts/formation crash "$formation"; scripts/formation revive "$formation" ;;
esac
FAULT
RECORDSD_DATABASE=$url start_recordsd ${RECORDSD_ARGS:-}
echo "== pg_auto_failover formation: $FAULTS (--failover-wait 30, the default for several hosts)"
PORT=$RECORDSD_PORT VERIFY_URL=$url FAULT_CMD="bash $BENCH_TMP/formation-fault.sh" RUN=formation python3 bench/failover.py
[ -n "${KEEP_LOGS:-}" ] && cp "$BENCH_TMP/recordsd.err" "$formation"/*.log "$KEEP_LOGS"/ 2>/dev/null || true
