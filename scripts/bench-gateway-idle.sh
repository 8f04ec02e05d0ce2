#!/bin/bash
# A gateway's idle CPU with large boards open (docs/performance.md, "Heartbeats
# of idle boards no longer walk them"): a release hub; the gateway of
# GATEWAY_BEFORE (a touchsync binary with its TouchSync_TouchSyncWeb.resources
# beside it) and one of this build, side by side on it; TABS tabs (default
# 200) fill BOARDS boards (default 8) for FILL seconds (default 300) through
# this build's gateway; then the same tabs open the same boards through each
# gateway in turn and stay idle for IDLE seconds (default 20): each run's
# "gateway idle" line is the figure.
#   scripts/bench-gateway-idle.sh GATEWAY_BEFORE
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.build/release/touchsync
OLD=${1:?usage: $0 GATEWAY_BEFORE}
[ -x "$BIN" ] || swift build -c release --product touchsync
DATA=$(mktemp -d /tmp/bench-gateway-idle.XXXX)
PORT=$((20000 + RANDOM % 20000))
HUB=(--publish tcp://127.0.0.1:$((PORT + 1)) --snapshot tcp://127.0.0.1:$((PORT + 2)) --history tcp://127.0.0.1:$((PORT + 3)))
TABS=${TABS:-200}; BOARDS=${BOARDS:-8}
WEB=(--max-tabs $((TABS + 100)) --max-tabs-per-address 0 --max-connections $((2 * TABS + 100)))
$BIN hub --data "$DATA/data" --ingest tcp://127.0.0.1:$PORT "${HUB[@]}" --max-snapshots-per-second 50 > "$DATA/hub.log" 2>&1 &
PIDS=($!)
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$DATA"' EXIT
sleep 1
$BIN web --listen 127.0.0.1:$((PORT + 10)) --hub tcp://127.0.0.1:$PORT "${HUB[@]}" "${WEB[@]}" > "$DATA/new.log" 2>&1 &
PIDS+=($!)
"$OLD" web --listen 127.0.0.1:$((PORT + 11)) --hub tcp://127.0.0.1:$PORT "${HUB[@]}" "${WEB[@]}" > "$DATA/old.log" 2>&1 &
PIDS+=($!)
sleep 2
echo "filling: $TABS tabs on $BOARDS boards for ${FILL:-300} s"
$BIN load --web http://127.0.0.1:$((PORT + 10)) --users "$TABS" --boards "$BOARDS" --duration "${FILL:-300}" --idle 1 --seed 9 \
  | grep -E "samples sent|lost /|kept up"
for ROUND in 1 2; do
  for WHICH in before this; do
    GATEWAY_PORT=$([ $WHICH = before ] && echo $((PORT + 11)) || echo $((PORT + 10)))
    echo "== the gateway $WHICH, round $ROUND"
    $BIN load --web http://127.0.0.1:$GATEWAY_PORT --users "$TABS" --boards "$BOARDS" --duration 1 --idle "${IDLE:-20}" --seed 9 2>&1 \
      | grep -E "gateway idle|lost /|Error" || echo "(no figures: see $DATA/$([ $WHICH = before ] && echo old || echo new).log)"
  done
done
