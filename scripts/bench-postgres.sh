# Sourced by the store benchmarks: unless STORE=postgres://… names one, starts
# a PostgreSQL cluster of their own (Debian's postgresql, as the postgres
# user, fsync on, 127.0.0.1 on a random port), sets STORE to it and stops and
# removes it when the script exits.
if [ -z "${STORE:-}" ]; then
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$PGBIN" ] || { echo "PostgreSQL is not installed: make test-deps installs it (or set STORE=postgres://…)" >&2; exit 1; }
  CLUSTER=$(mktemp -d /tmp/bench-store-pg.XXXX); chown postgres "$CLUSTER"
  PGPORT=$((20000 + RANDOM % 10000))
  runuser -u postgres -- "$PGBIN/initdb" -D "$CLUSTER/data" -U touchsync -A trust -E UTF8 > /dev/null
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$CLUSTER/data" -l "$CLUSTER/log" -w start \
    -o "-p $PGPORT -k $CLUSTER -c listen_addresses=127.0.0.1" > /dev/null
  trap 'runuser -u postgres -- "$PGBIN/pg_ctl" -D "$CLUSTER/data" -m immediate stop > /dev/null; rm -rf "$CLUSTER"' EXIT
  STORE=postgres://touchsync@127.0.0.1:$PGPORT/postgres
fi
