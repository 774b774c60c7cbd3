#!/bin/bash
# The stand-in postgres image's entrypoint (see Containerfile): written here, to the contract of
# the official image's documentation, not copied from it.
#   docker-entrypoint.sh postgres [-c name=value ...]
# On first start (no PG_VERSION in $PGDATA) it runs initdb as POSTGRES_USER with
# POSTGRES_PASSWORD, creates POSTGRES_DB, and runs /docker-entrypoint-initdb.d in name order
# against a server that listens on its Unix socket only; then it runs the real server.
set -Eeuo pipefail

# Options alone mean options of postgres.
if [ "${1:0:1}" = "-" ]; then set -- postgres "$@"; fi
[ "$1" = postgres ] || exec "$@"

# The server never runs as root: fix ownership, then run this script again as postgres.
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

# VAR_FILE names a file holding VAR's value (a secret); setting both is a mistake.
from_file() {
  local name=$1 default=${2:-} file_name="${1}_FILE"
  local value=${!name:-} file=${!file_name:-}
  if [ -n "$value" ] && [ -n "$file" ]; then
    echo "error: both $name and $file_name are set; set one" >&2
    exit 1
  fi
  if [ -n "$file" ]; then value=$(<"$file"); fi
  export "$name"="${value:-$default}"
  unset "$file_name"
}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  from_file POSTGRES_USER postgres
  from_file POSTGRES_PASSWORD
  from_file POSTGRES_DB "$POSTGRES_USER"
  from_file POSTGRES_INITDB_ARGS
  auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
  if [ -z "$POSTGRES_PASSWORD" ] && [ "$auth" != trust ]; then
    echo "error: the database is not initialized and no superuser password is set:" >&2
    echo "       set POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE), or POSTGRES_HOST_AUTH_METHOD=trust" >&2
    exit 1
  fi

  # shellcheck disable=SC2086  # POSTGRES_INITDB_ARGS is a list of options
  initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
    --auth-local=trust --auth-host="$auth" $POSTGRES_INITDB_ARGS
  { echo; echo "listen_addresses = '*'"; } >>"$PGDATA/postgresql.conf"
  printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"

  # A server for the init scripts, reachable through its Unix socket only.
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
  psql_init=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc)
  if [ "$POSTGRES_DB" != postgres ]; then
    "${psql_init[@]}" --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
  fi
  export PGUSER=$POSTGRES_USER PGDATABASE=$POSTGRES_DB
  for file in /docker-entrypoint-initdb.d/*; do
    [ -e "$file" ] || continue
    case "$file" in
      *.sh)
        echo "initdb.d: running $file"
        if [ -x "$file" ]; then "$file"; else . "$file"; fi ;;
      *.sql)    echo "initdb.d: running $file"; "${psql_init[@]}" --dbname "$POSTGRES_DB" -f "$file" ;;
      *.sql.gz) echo "initdb.d: running $file"; gunzip -c "$file" | "${psql_init[@]}" --dbname "$POSTGRES_DB" ;;
      *)        echo "initdb.d: ignoring $file" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop
  unset PGUSER PGDATABASE
  echo "initdb.d: done; PostgreSQL is ready to start"
fi

exec "$@"
