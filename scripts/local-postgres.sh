#!/usr/bin/env bash
# A throw-away PostgreSQL for `touchsync hub --store`, started the way the
# tests start theirs: Debian's server in a temporary folder, trust
# authentication on 127.0.0.1 only, no fsync. It prints the --store URL and
# runs until Ctrl-C, then stops and removes everything (boards included).
#
#   scripts/local-postgres.sh [PORT]          # default port 5433
#   touchsync hub --store postgres://touchsync@127.0.0.1:5433/touchsync
#
# Installs Debian's postgresql when it is missing (as root, or with sudo).
# Not for production: nothing here survives, and anyone on this machine may
# connect. docs/architecture.md, "The board store", says what production needs.
set -euo pipefail
port=${1:-5433}
if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
  echo "usage: $0 [PORT]   (a port number, 1 to 65535; default 5433)" >&2
  exit 2
fi

if [ "$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null 2>&1; then sudo=sudo; else sudo=none; fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$sudo" = none ]; then echo "PostgreSQL is not installed and there is no root to install it: apt-get install postgresql" >&2; exit 1; fi
  echo "installing Debian's postgresql (apt-get)"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
  echo "port $port is taken on 127.0.0.1: give another, e.g. $0 5434" >&2
  exit 1
fi

# initdb refuses root: as root the cluster belongs to the postgres user.
folder=$(mktemp -d /tmp/touchsync-postgres-XXXXXX)
as_owner=()
if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$folder"; as_owner=(runuser -u postgres --); fi
chmod 0700 "$folder"
sleeper=
stop() {
  if [ -n "$sleeper" ]; then kill "$sleeper" 2>/dev/null || true; fi
  "${as_owner[@]}" "$bin/pg_ctl" -D "$folder/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$folder"
  echo "stopped; $folder removed"
}
trap stop EXIT
trap 'exit 130' INT TERM

"${as_owner[@]}" "$bin/initdb" -D "$folder/data" -U touchsync -A trust --no-sync -E UTF8 >"$folder/initdb.log" 2>&1 \
  || { cat "$folder/initdb.log" >&2; exit 1; }
"${as_owner[@]}" "$bin/pg_ctl" -D "$folder/data" -l "$folder/server.log" -w -t 60 start \
  -o "-p $port -k $folder -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off" >/dev/null \
  || { cat "$folder/server.log" >&2; exit 1; }
"${as_owner[@]}" psql -h 127.0.0.1 -p "$port" -U touchsync -d postgres -X -q -c "CREATE DATABASE touchsync" \
  || { echo "could not create the database" >&2; exit 1; }

url="postgres://touchsync@127.0.0.1:$port/touchsync"
echo "PostgreSQL (throw-away) on 127.0.0.1:$port, folder $folder"
echo "  touchsync hub --store $url"
echo "Ctrl-C stops it and removes its boards."
# (a sleep in the background and `wait`: a signal to this script alone interrupts the wait at once)
while :; do sleep 3600 & sleeper=$!; wait "$sleeper"; done
