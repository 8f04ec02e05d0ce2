#!/usr/bin/env bash
# Makes the keys and the access list compose.yaml mounts as secrets, in
# deploy/keys (never committed): the hubs' pair (shared by the three hubs), a
# health checker and a relay (watchers), the web gateway (acting for browser
# users, web:…), a drawer for the demo board, the load profile's users, and
# the board store's password.
# Existing keys are kept. TOUCHSYNC names the binary (default: the debug
# build, built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-deploy/keys}
touchsync=${TOUCHSYNC:-.build/debug/touchsync}
if [ ! -x "$touchsync" ]; then swift build --product touchsync >/dev/null; fi
mkdir -p "$keys"
for name in hub health relay gateway alice; do
  [ -f "$keys/$name.key" ] || "$touchsync" keys generate "$name" --dir "$keys" >/dev/null
done
access="$keys/access.json"
"$touchsync" keys allow health --boards touchsync-health --role watch --access "$access" --dir "$keys" >/dev/null
"$touchsync" keys allow relay --boards demo --role watch --access "$access" --dir "$keys" >/dev/null
"$touchsync" keys allow alice --boards demo --role draw --access "$access" --dir "$keys" >/dev/null
"$touchsync" keys allow gateway --boards '*' --role admin --acts-for web: --access "$access" --dir "$keys" >/dev/null
# The store's password: PostgreSQL's (POSTGRES_PASSWORD_FILE) and the hubs' (--store-password-file).
if [ ! -f "$keys/store.password" ]; then
  (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$keys/store.password")
fi
# The load profile's 20 users (load-0-0 … load-0-19) and its watcher: a short
# local run makes their keys and access entries (the same names the profile uses).
"$touchsync" load --users 20 --fingers 1 --duration 0.2 --access-dir "$keys" >/dev/null
echo "keys and access list in $keys:"
"$touchsync" keys list --access "$access"
