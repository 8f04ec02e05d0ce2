#!/bin/sh
# Run once by the postgres image when it creates the store's cluster
# (mounted into /docker-entrypoint-initdb.d by compose.yaml): lets the
# store-standby service stream the cluster (pg_basebackup, then WAL) as the
# store's user, with its password. Whether commits wait for the standby is
# the store service's synchronous_standby_names (TOUCHSYNC_SYNC_STANDBY).
set -eu
echo "host replication ${POSTGRES_USER:-postgres} all scram-sha-256" >> "$PGDATA/pg_hba.conf"
