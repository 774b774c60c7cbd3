#!/bin/sh
# Run once by the postgres image when it initializes its data directory
# (/docker-entrypoint-initdb.d): creates the least-privileged role recordsd serves as.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v app_role=records_app -v app_password="$(cat /run/secrets/app_db_password)" -v owner="$POSTGRES_USER" \
  -f /docker-entrypoint-initdb.d/app-role.sql.in
