#!/usr/bin/env bash
# Makes the keys and the access list compose.yaml mounts as secrets, in
# deploy/keys (never committed): the hub's pair, a health checker and a relay
# (watchers), a drawer for the demo board, and the load profile's users.
# Existing keys are kept. TOUCHSYNC names the binary (default: the debug
# build, built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
keys=${1:-deploy/keys}
touchsync=${TOUCHSYNC:-.build/debug/touchsync}
if [ ! -x "$touchsync" ]; then swift build --product touchsync >/dev/null; fi
mkdir -p "$keys"
for name in hub health relay alice; do
  [ -f "$keys/$name.key" ] || "$touchsync" keys generate "$name" --dir "$keys" >/dev/null
done
access="$keys/access.json"
"$touchsync" keys allow health --boards touchsync-health --role watch --access "$access" --dir "$keys" >/dev/null
"$touchsync" keys allow relay --boards demo --role watch --access "$access" --dir "$keys" >/dev/null
"$touchsync" keys allow alice --boards demo --role draw --access "$access" --dir "$keys" >/dev/null
# The load profile's 20 users (load-0-0 … load-0-19) and its watcher: a short
# local run makes their keys and access entries (the same names the profile uses).
"$touchsync" load --users 20 --fingers 1 --duration 0.2 --access-dir "$keys" >/dev/null
echo "keys and access list in $keys:"
"$touchsync" keys list --access "$access"
