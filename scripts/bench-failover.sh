#!/bin/bash
# The board store's failover time (docs/performance.md, "The board store"):
# three release hubs on one store, an agent drawing at 120 Hz given all
# three; the board's holder is killed with SIGKILL KILLS times (default 20)
# and each failover is the time from the kill to the first acknowledgement
# by the new holder. Runs at the default lease (5 s) and at 2 s, then at 2 s
# with the agent's silence time-out at 1 s instead of 3, and last with 36
# boards (an agent each; the killed hub holds 10 or more): each kill's figure
# is then the slowest of the boards it held. Each kill is reported twice: the
# first commit under the board's new lease epoch (from the store) and the
# first acknowledgement the agent gets.
#   scripts/bench-failover.sh [KILLS]
# A PostgreSQL cluster of its own is started (scripts/bench-postgres.sh)
# unless STORE=postgres://… names one.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.build/release/touchsync
[ -x "$BIN" ] || swift build -c release --product touchsync
KILLS=${1:-20}
source scripts/bench-postgres.sh
for LEASE in 5 2; do
  $BIN bench --store "$STORE" --failover --kills "$KILLS" --lease-timeout $LEASE
done
# The agent's silence time-out is the whole figure at 2 s: the same with 1 s.
$BIN bench --store "$STORE" --failover --kills "$KILLS" --lease-timeout 2 --hub-timeout 1
# Many boards moving at once (issue 39): the slowest board of the killed hub's.
$BIN bench --store "$STORE" --failover --kills "$KILLS" --failover-boards 36
