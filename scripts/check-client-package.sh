#!/usr/bin/env bash
# `make test`: TouchSyncClient used from another package, as a Swift app
# would. Builds Tests/ClientPackage (it depends on this package by path),
# starts a hub on ipc:// endpoints, and draws one stroke through it; the
# example exits 0 only when the hub acknowledged the stroke and a subscriber
# shows it with every sample.
set -euo pipefail
swift=${SWIFT:-swift}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/touchsync-client-package-XXXXXX)
hub_pid=
cleanup() {
    [ -n "$hub_pid" ] && kill "$hub_pid" 2>/dev/null && wait "$hub_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

echo "client package: building Tests/ClientPackage against TouchSyncClient (by path)"
"$swift" build --package-path "$root/Tests/ClientPackage" --scratch-path "$root/.build-client-package" 2>&1 | tail -n 3

ingest="ipc://$work/ingest" publish="ipc://$work/publish" snapshot="ipc://$work/snapshot"
"$root/.build/debug/touchsync" hub --no-journal --ingest "$ingest" --publish "$publish" --snapshot "$snapshot" >"$work/hub.log" 2>&1 &
hub_pid=$!
for _ in $(seq 100); do grep -q "Ctrl-C stops it." "$work/hub.log" 2>/dev/null && break; sleep 0.1; done
grep -q "Ctrl-C stops it." "$work/hub.log" || { echo "client package: the hub did not start:"; cat "$work/hub.log"; exit 1; }

if output=$("$root/.build-client-package/debug/draw-one-stroke" "$ingest" "$publish" "$snapshot" client-package 2>&1); then
    echo "client package: $output"
else
    echo "client package: FAILED: $output"
    exit 1
fi
