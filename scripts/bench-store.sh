#!/bin/bash
# The board store's figures (docs/performance.md, "The board store"): the
# writer's throughput beside the file journal (touchsync bench --store), then
# what the store adds to latency: `touchsync load` of USERS x 5 fingers at
# 120 Hz for 10 s against a release hub with --store, with --fsync batch and
# with no journal, one after another in the same run.
#   scripts/bench-store.sh [USERS...]        (default: 20 100)
# A PostgreSQL cluster of its own is started (scripts/bench-postgres.sh)
# unless STORE=postgres://… names one. JSON reports
# go to /tmp/bench-store-*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.build/release/touchsync
[ -x "$BIN" ] || swift build -c release --product touchsync
USERS=("$@"); [ ${#USERS[@]} -gt 0 ] || USERS=(20 100)
source scripts/bench-postgres.sh
echo "=== writer throughput (bench --store), windows 4096 and 20"
$BIN bench --store "$STORE" --store-window 4096 | grep -vE "^  (recording|writing|removing)"
$BIN bench --store "$STORE" --store-window 20 | grep -vE "^  (recording|writing|removing)"
for N in "${USERS[@]}"; do
  for MODE in store batch memory; do
    DATA=$(mktemp -d /tmp/bench-store.XXXX)
    PORT=$((30000 + RANDOM % 2000))
    HUB=(--ingest tcp://127.0.0.1:$PORT --publish tcp://127.0.0.1:$((PORT + 1)) --snapshot tcp://127.0.0.1:$((PORT + 2)) --history tcp://127.0.0.1:$((PORT + 3)))
    case $MODE in
      store) $BIN hub --store "$STORE" --name bench-$N "${HUB[@]}" > "$DATA/hub.log" 2>&1 & ;;
      batch) $BIN hub --data "$DATA/data" --fsync batch "${HUB[@]}" > "$DATA/hub.log" 2>&1 & ;;
      memory) $BIN hub --no-journal "${HUB[@]}" > "$DATA/hub.log" 2>&1 & ;;
    esac
    HUB_PID=$!
    sleep 1.5
    timeout 300 $BIN load --hub tcp://127.0.0.1:$PORT --publish tcp://127.0.0.1:$((PORT + 1)) --snapshot tcp://127.0.0.1:$((PORT + 2)) \
      --users "$N" --fingers 5 --duration 10 --seed $((N + 7)) --hub-pid $HUB_PID --json /tmp/bench-store-$N-$MODE.json > "$DATA/load.log" 2>&1 || true
    python3 - "$N" "$MODE" /tmp/bench-store-$N-$MODE.json <<'PY'
import json, sys
n, mode, path = sys.argv[1:]
r = json.load(open(path))
l = r["latency_us"]
print(f"{n:>4} x 5  {mode:<7} p50 {l['p50']/1000:7.2f} ms  p99 {l['p99']/1000:7.2f} ms  lost {r['lost']}  dup {r['duplicated']}  converged {r['converged']}  samples {r['samples_sent']}")
PY
    kill $HUB_PID 2>/dev/null || true
    wait $HUB_PID 2>/dev/null || true
    rm -rf "$DATA"
  done
done
