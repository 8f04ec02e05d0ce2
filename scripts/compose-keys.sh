#!/usr/bin/env bash
# Makes the keys and the access list compose.yaml mounts as secrets, in
# deploy/keys (never committed): the hubs' pair (shared by the three hubs), a
# health checker and a relay (watchers), the web gateway (acting for browser
# users, web:…), a drawer for the demo board, the load profile's users, and
# the board store's password.
#
# Who may read them: compose mounts each secret file as it is on this
# machine (its owner and mode: compose cannot change them for file
# secrets), and the services run as the image's user (uid 10001) and, for
# the store, PostgreSQL's (uid 999). So every file stays 0600 (this
# machine's other users read nothing) and gets an ACL entry for the uids
# that read it: 10001 for the touchsync services' keys, 999 too for the
# store's password. Without setfacl (Debian's acl package) the files are
# handed to those uids instead, which needs root.
#
# The load profile gets a folder of its own, deploy/keys/load, mounted
# read-only: its users' and watcher's keys and the hubs' public key, never
# the hubs' secret key or the store's password.
#
# Existing keys are kept. TOUCHSYNC names the binary (default: the debug
# build, built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-deploy/keys}
touchsync=${TOUCHSYNC:-.build/debug/touchsync}
service_uid=${TOUCHSYNC_SERVICE_UID:-10001}
postgres_uid=${POSTGRES_SERVICE_UID:-999}
if [ ! -x "$touchsync" ]; then swift build --product touchsync >/dev/null; fi
mkdir -p "$keys"
for name in hub health relay gateway alice; do
  [ -f "$keys/$name.key" ] || "$touchsync" keys generate "$name" --dir "$keys" >/dev/null
done
access="$keys/access.json"
"$touchsync" keys allow health --boards touchsync-health --role watch --access "$access" --dir "$keys" >/dev/null
"$touchsync" keys allow relay --boards '*' --role watch --access "$access" --dir "$keys" >/dev/null
"$touchsync" keys allow alice --boards demo --role draw --access "$access" --dir "$keys" >/dev/null
"$touchsync" keys allow gateway --boards '*' --role admin --acts-for web: --access "$access" --dir "$keys" >/dev/null
# The store's password: PostgreSQL's (POSTGRES_PASSWORD_FILE) and the hubs' (--store-password-file).
if [ ! -f "$keys/store.password" ]; then
  (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$keys/store.password")
fi
# The load profile's 20 users (load-0-0 … load-0-19) and its watcher: a short
# local run makes their keys and access entries (the same names the profile uses).
"$touchsync" load --users 20 --fingers 1 --duration 0.2 --access-dir "$keys" >/dev/null
load="$keys/load"
mkdir -p "$load"
cp -p "$keys"/load-*.key "$keys"/load-*.pub "$keys/hub.pub" "$access" "$load/"

# Readable by the services that mount them, and by nobody else.
secrets=(hub.key hub.pub access.json health.key relay.key gateway.key store.password)
chmod 0600 "${secrets[@]/#/$keys/}" "$load"/*
chmod 0700 "$keys" "$load"
if command -v setfacl >/dev/null 2>&1; then
  setfacl -m "u:$service_uid:r" "${secrets[@]/#/$keys/}" "$load"/*
  setfacl -m "u:$postgres_uid:r" "$keys/store.password"
  setfacl -m "u:$service_uid:rx" "$load"
elif [ "$(id -u)" = 0 ]; then
  chown "$service_uid" "${secrets[@]/#/$keys/}" "$load" "$load"/*
  chown "$service_uid:$postgres_uid" "$keys/store.password" && chmod 0440 "$keys/store.password"
else
  echo "warning: neither setfacl (apt-get install acl) nor root: the services (uid $service_uid, PostgreSQL uid $postgres_uid)" >&2
  echo "cannot read the secrets in $keys. Install acl and run this again, or run it as root." >&2
fi
echo "keys and access list in $keys (the load profile's in $load):"
"$touchsync" keys list --access "$access"
