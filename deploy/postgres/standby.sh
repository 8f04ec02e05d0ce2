#!/bin/bash
# The store-standby service (compose.yaml, profile "standby"): on its first
# start, a copy of the store's cluster (pg_basebackup -R: it then follows
# the store's WAL as a hot standby); on every start, PostgreSQL under the
# name "standby", the one the store's synchronous_standby_names waits for.
# Promote it when the store is lost: docker compose exec store-standby pg_ctl promote
set -euo pipefail
password=$(cat /run/secrets/store_password)
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  echo "standby: copying the store's cluster (pg_basebackup from store)"
  until pg_isready -h store -U touchsync -q; do sleep 1; done
  # The password goes into primary_conninfo (-R) inside the standby's own data folder (0700).
  PGPASSWORD="$password" pg_basebackup -h store -U touchsync -D "$PGDATA" -R -X stream -c fast
  chmod 0700 "$PGDATA"
fi
exec postgres -c cluster_name=standby
