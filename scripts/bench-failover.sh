#!/bin/bash
# Failover on the board store (docs/performance.md, "The board store"): two
# release hubs share a PostgreSQL store (--lease-timeout 5); a board owned
# by hub A is drawn on; A is killed with SIGKILL; measured: the time until
# hub B serves the board (B's log says it took the lease and loaded it), and
# until an agent that was drawing on A (given both hubs: --hub A,B) has
# everything acknowledged again. Repeated KILLS times (default 20).
#   scripts/bench-failover.sh [KILLS]
# A cluster of its own is started (as in bench-store.sh) unless STORE=… is set.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.build/release/touchsync
[ -x "$BIN" ] || swift build -c release --product touchsync
KILLS=${1:-20}
LEASE=5
CLUSTER=
if [ -z "${STORE:-}" ]; then
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  CLUSTER=$(mktemp -d /tmp/bench-failover-pg.XXXX); chown postgres "$CLUSTER"
  PGPORT=$((20000 + RANDOM % 10000))
  runuser -u postgres -- "$PGBIN/initdb" -D "$CLUSTER/data" -U touchsync -A trust -E UTF8 > /dev/null
  runuser -u postgres -- "$PGBIN/pg_ctl" -D "$CLUSTER/data" -l "$CLUSTER/log" -w start \
    -o "-p $PGPORT -k $CLUSTER -c listen_addresses=127.0.0.1" > /dev/null
  STORE=postgres://touchsync@127.0.0.1:$PGPORT/postgres
fi
WORK=$(mktemp -d /tmp/bench-failover.XXXX)
cleanup() {
  pkill -P $$ 2>/dev/null || true
  [ -n "$CLUSTER" ] && { runuser -u postgres -- "$PGBIN/pg_ctl" -D "$CLUSTER/data" -m immediate stop > /dev/null; rm -rf "$CLUSTER"; }
  rm -rf "$WORK"
}
trap cleanup EXIT
PA=$((32000 + RANDOM % 500)); PB=$((PA + 10))
hub() { # NAME PORT
  $BIN hub --store "$STORE" --name "$1" --lease-timeout $LEASE --log-level info --ingest tcp://127.0.0.1:$2 \
    --publish tcp://127.0.0.1:$(($2 + 1)) --snapshot tcp://127.0.0.1:$(($2 + 2)) --history tcp://127.0.0.1:$(($2 + 3))
}
now_ms() { date +%s%3N; }
hub hub-a $PA > "$WORK/a.log" 2>&1 & A=$!
hub hub-b $PB > "$WORK/b.log" 2>&1 & B=$!
sleep 2
for i in $(seq 1 "$KILLS"); do
  # A board hub-a owns among the two: the first name hub-a accepts without a redirect.
  BOARD=
  for n in $(seq 1 200); do
    CANDIDATE=failover-$i-$n
    if ! $BIN cluster show --cluster <(printf '{"hubs":[{"name":"hub-a","ingest":"tcp://127.0.0.1:%d","publish":"tcp://127.0.0.1:%d","snapshot":"tcp://127.0.0.1:%d"},{"name":"hub-b","ingest":"tcp://127.0.0.1:%d","publish":"tcp://127.0.0.1:%d","snapshot":"tcp://127.0.0.1:%d"}]}' \
      $PA $((PA+1)) $((PA+2)) $PB $((PB+1)) $((PB+2))) --board $CANDIDATE | grep -q "hub hub-a"; then continue; fi
    BOARD=$CANDIDATE; break
  done
  $BIN draw --board $BOARD --hub tcp://127.0.0.1:$PA,tcp://127.0.0.1:$PB --publish tcp://127.0.0.1:$((PA + 1)) \
    --snapshot tcp://127.0.0.1:$((PA + 2)) --seconds 12 > "$WORK/draw.log" 2>&1 & D=$!
  sleep 3
  KILLED=$(now_ms); kill -9 $A; wait $A 2>/dev/null || true
  until grep -q "board=$BOARD .*board lease taken\|board lease taken.*board=$BOARD" "$WORK/b.log"; do sleep 0.02; done
  TAKEN=$(now_ms)
  wait $D && STATUS=ok || STATUS=failed
  echo "kill $i: board $BOARD served by hub-b after $((TAKEN - KILLED)) ms; the drawing agent: $STATUS ($(tail -1 "$WORK/draw.log"))"
  echo $((TAKEN - KILLED)) >> "$WORK/times"
  hub hub-a $PA > "$WORK/a.log" 2>&1 & A=$!
  sleep 2
done
sort -n "$WORK/times" | awk '{a[NR]=$1} END {p50=a[int((NR+1)/2)]; i=int(NR*0.99+0.999); if (i>NR) i=NR; print "failover (SIGKILL to the new owner serving the board), " NR " kills: p50 " p50 " ms, p99 " a[i] " ms, max " a[NR] " ms"}'
