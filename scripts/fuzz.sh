#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/ (address sanitizer on, in their own
# build folder) and runs each for a bounded time from its committed seed
# corpus. Prints each target's executions and the total; exits non-zero on
# any crash, leak or hang (libFuzzer writes the input as crash-*/leak-*/
# timeout-* in the working folder it names).
#   FUZZ_SECONDS  seconds per target (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
targets=(FuzzHubCore FuzzDiffStream FuzzSnapshot FuzzJournal FuzzOSC FuzzBrowserWire)
echo "building the fuzz targets (first time: several minutes)"
for target in "${targets[@]}"; do
  # -Xswiftc, not --sanitize: every module (not only the target's) gets coverage counters; lld (gold
  # fails on these objects).
  # Quiet unless it fails: then the compiler's errors are shown.
  if ! out=$(TOUCHSYNC_FUZZ=1 swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld \
    --scratch-path .build-fuzz --product "$target" 2>&1); then
    echo "$out" | grep -E "error" -A3 | head -40 >&2
    echo "error: building $target failed" >&2
    exit 1
  fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/touchsync-fuzz.XXXXXX")
echo "working folder (new corpus entries, any crash input): $work"
total=0
status=0
for target in "${targets[@]}"; do
  mkdir -p "$work/$target/corpus" "$work/$target/artifacts"
  cp Fuzz/Corpus/"$target"/* "$work/$target/corpus/"
  log="$work/$target/log"
  if ! .build-fuzz/release/"$target" "$work/$target/corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/$target/artifacts/" >"$log" 2>&1; then
    echo "$target: FAILED (see $log and $work/$target/artifacts)"
    grep -E "ERROR|Fatal|SUMMARY" "$log" | head -5 || true
    status=1
  fi
  runs=$(grep -E "stat::number_of_executed_units" "$log" | awk '{print $2}' | tail -1)
  runs=${runs:-0}
  total=$((total + runs))
  printf '%-16s %12d executions in %s s, corpus %s entries\n' "$target" "$runs" "$seconds" "$(ls "$work/$target/corpus" | wc -l)"
done
printf '%-16s %12d executions\n' "total" "$total"
exit $status
