#!/bin/bash
# Subscribers of large idle boards (docs/performance.md, "Heartbeats of idle
# boards no longer walk them"): a release hub with a journal, four boards
# filled by `touchsync load` (about 360 k samples each), then on each board a
# `touchsync spectate --json` of BINARY_BEFORE beside one of this build; each
# process's CPU over IDLE seconds (default 30) of heartbeats only, from /proc.
#   scripts/bench-idle-subscribers.sh BINARY_BEFORE
# FILL (seconds of drawing, default 40) and USERS (default 40) size the boards.
set -euo pipefail
cd "$(dirname "$0")/.."
AFTER=.build/release/touchsync
BEFORE=${1:?usage: $0 BINARY_BEFORE}
[ -x "$AFTER" ] || swift build -c release --product touchsync
DATA=$(mktemp -d /tmp/bench-idle.XXXX)
PORT=$((20000 + RANDOM % 20000))
ENDPOINTS=(--publish tcp://127.0.0.1:$((PORT + 1)) --snapshot tcp://127.0.0.1:$((PORT + 2)))
$AFTER hub --data "$DATA/data" --ingest tcp://127.0.0.1:$PORT "${ENDPOINTS[@]}" --history tcp://127.0.0.1:$((PORT + 3)) > "$DATA/hub.log" 2>&1 &
HUB_PID=$!
PIDS=()
trap 'kill $HUB_PID "${PIDS[@]}" 2>/dev/null || true; rm -rf "$DATA"' EXIT
sleep 1
$AFTER load --hub tcp://127.0.0.1:$PORT "${ENDPOINTS[@]}" --users "${USERS:-40}" --fingers 5 --boards 4 --duration "${FILL:-40}" --seed 7 \
  | grep -E "samples sent|lost|kept up"
for BOARD in 0 1 2 3; do
  for BIN in "$BEFORE" "$AFTER"; do
    "$BIN" spectate --board load-7-$BOARD --json --hub tcp://127.0.0.1:$PORT "${ENDPOINTS[@]}" > /dev/null 2>&1 &
    PIDS+=($!)
  done
done
sleep 8  # every spectator synced
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A START
for PID in "${PIDS[@]}"; do START[$PID]=$(ticks "$PID"); done
sleep "${IDLE:-30}"
INDEX=0
for PID in "${PIDS[@]}"; do
  SPENT=$(( ($(ticks "$PID") - START[$PID]) * 1000 / $(getconf CLK_TCK) ))
  echo "board load-7-$((INDEX / 2)) $([ $((INDEX % 2)) = 0 ] && echo "before" || echo "after ") ${SPENT} ms of CPU over ${IDLE:-30} s idle"
  INDEX=$((INDEX + 1))
done
