#!/usr/bin/env bash
# kill -9 of recordsd during concurrent saves, then restart: prints how many acknowledged saves
# were found and how many partial units (must be 0). Loopback only; a few rounds of seconds.
source "$(dirname "$0")/lib.sh"
export PGURL RECORDSD_BIN="$root/.build/release/recordsd" MIGRATIONS="$root/migrations"
"$RECORDSD_BIN" migrate --database "$PGURL" --migrations "$MIGRATIONS" >/dev/null
python3 bench/fault_kill9.py
