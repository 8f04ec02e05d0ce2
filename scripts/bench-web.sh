#!/bin/bash
# The browser path under load (docs/performance.md, "Through the browser
# path"): for each tab count, a release hub with a journal, a release
# gateway in its own process, and `touchsync load --web` with ten tabs per
# board, one finger each at 60 Hz, 10 s of drawing after 5 s idle.
#   scripts/bench-web.sh [GATEWAY_BINARY] TABS...
# GATEWAY_BINARY (default .build/release/touchsync) lets an older gateway
# be measured with the same hub and load; WEB_ARGS adds options to the
# gateway (WEB_ARGS="--max-message-bytes 65536"), HUB_ARGS to the hub
# (HUB_ARGS="--fsync never"), LOAD_ARGS to the load (LOAD_ARGS="--browser-wire
# binary"), HUB_BINARY another hub binary (HUB_BINARY=/tmp/old/touchsync).
# AGENTS=zeromq measures the same hub with native ZeroMQ agents in the
# tabs' shape instead (TABS agents, one finger at 60 Hz, one coalesced and
# one predicted sample, ten per board, one subscriber per board as the
# gateway is; v2 frames as the gateway sends): what a browser sample costs
# the hub against a native one (docs/performance.md).
# JSON reports go to /tmp/bench-web-TABS.json (/tmp/bench-zeromq-TABS.json).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.build/release/touchsync
GATEWAY=$BIN
if [ $# -gt 0 ] && [ -x "$1" ]; then GATEWAY=$1; shift; fi
[ $# -gt 0 ] || { echo "usage: $0 [GATEWAY_BINARY] TABS..." >&2; exit 2; }
[ -x "$BIN" ] || swift build -c release --product touchsync
for TABS in "$@"; do
  DATA=$(mktemp -d /tmp/bench-web.XXXX)
  PORT=$((20000 + RANDOM % 20000))
  HUB=(--ingest tcp://127.0.0.1:$PORT --publish tcp://127.0.0.1:$((PORT + 1)) --snapshot tcp://127.0.0.1:$((PORT + 2)) --history tcp://127.0.0.1:$((PORT + 3)))
  # The gateway is one remote address of a hub without an access list, which
  # allows an address 4 x --max-snapshots-per-second snapshot requests (20 a
  # second by default: docs/security.md); the gateway asks one per board, so
  # 200 boards took 10 s to open and its refused requests weighed on the
  # idle and memory figures. 50 lets it open 200 boards a second.
  ${HUB_BINARY:-$BIN} hub ${HUB_STORAGE:---data "$DATA/data"} "${HUB[@]}" --max-snapshots-per-second 50 ${HUB_ARGS:-} > "$DATA/hub.log" 2>&1 &
  HUB_PID=$!
  sleep 1
  if [ "${AGENTS:-web}" = zeromq ]; then
    echo "=== $TABS native agents in the tabs' shape"
    timeout 300 $BIN load --hub tcp://127.0.0.1:$PORT --users "$TABS" --boards $((TABS / 10)) --fingers 1 --hz 60 --coalesced 1 --predicted 1 \
      --wire v2 --duration 10 --hub-pid $HUB_PID --json /tmp/bench-zeromq-$TABS.json ${LOAD_ARGS:-} 2>&1 | grep -vE "^(connecting|report| +[0-9.]+ s )" || true
    kill $HUB_PID 2>/dev/null || true
    wait $HUB_PID 2>/dev/null || true
    rm -rf "$DATA"
    continue
  fi
  "$GATEWAY" web --listen 127.0.0.1:$((PORT + 10)) --hub tcp://127.0.0.1:$PORT --publish tcp://127.0.0.1:$((PORT + 1)) \
    --snapshot tcp://127.0.0.1:$((PORT + 2)) --history tcp://127.0.0.1:$((PORT + 3)) \
    --max-tabs $((TABS + 100)) --max-tabs-per-address 0 --max-connections $((2 * TABS + 100)) ${WEB_ARGS:-} > "$DATA/web.log" 2>&1 &
  WEB_PID=$!
  sleep 2
  echo "=== $TABS tabs, gateway $GATEWAY"
  # The load generator shares the machine: its CPU says how much of the two cores the gateway and hub had.
  TIMEFORMAT='load generator CPU  %U s user + %S s system over %R s'
  time timeout 300 $BIN load --web http://127.0.0.1:$((PORT + 10)) --users "$TABS" --boards $((TABS / 10)) --duration 10 --idle 5 \
    --hub-pid $HUB_PID --json /tmp/bench-web-$TABS.json ${LOAD_ARGS:-} 2>&1 | grep -vE "^(connecting|report)" || true
  kill $WEB_PID $HUB_PID 2>/dev/null || true
  wait $WEB_PID $HUB_PID 2>/dev/null || true
  rm -rf "$DATA"
done
