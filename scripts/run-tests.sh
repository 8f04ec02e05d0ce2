#!/usr/bin/env bash
# `make test`: runs the suite so that it leaves nothing behind, also when a
# test fails, times out or the test process crashes:
# - temporary files: the run gets a TMPDIR of its own, removed afterwards
#   (anything a test left in it is listed first, so it can be fixed);
# - processes: tests spawn children under `setpriv --pdeathsig KILL`, and
#   every process that still carries this run's TOUCHSYNC_TEST_RUN afterwards
#   is listed, killed, and fails the run;
# - network namespaces (and their /etc/netns files) carry the run's tag in
#   their names and are removed, and mounts under the run's folder unmounted.
set -uo pipefail
swift=${SWIFT:-swift}
run=$(mktemp -d /tmp/touchsync-test-XXXXXX)
tag=${run##*-}

# Processes (not this script) whose environment names this run.
leftover_processes() {
    local entry pid
    for entry in /proc/[0-9]*/environ; do
        pid=${entry#/proc/}; pid=${pid%/environ}
        [ "$pid" = "$$" ] && continue
        if { tr '\0' '\n' < "$entry"; } 2>/dev/null | grep -qx "TOUCHSYNC_TEST_RUN=$tag"; then echo "$pid"; fi
    done
}

cleanup() {
    if command -v ip >/dev/null 2>&1; then
        for namespace in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -- "-$tag-"); do
            echo "removing network namespace $namespace left by the tests"
            ip netns del "$namespace" 2>/dev/null
            rm -rf "/etc/netns/$namespace"
        done
    fi
    # Mounts a test made under the run's folder (small tmpfs for the full-disk tests).
    for mount in $(awk -v run="$run" 'index($2, run) == 1 {print $2}' /proc/self/mounts | sort -r); do
        echo "unmounting $mount left by the tests"
        umount -l "$mount" 2>/dev/null
    done
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# How busy the machine is as the run starts: other processes ready to run,
# per core (the median of five looks over a second; not the load average,
# which the build just before still inflates). Waits for other processes
# scale with it, so a loaded machine is given more time rather than failed
# (TOUCHSYNC_TEST_SLOWNESS, 1 to 8; set it to override).
if [ -z "${TOUCHSYNC_TEST_SLOWNESS:-}" ]; then
    samples=()
    for _ in 1 2 3 4 5; do
        read -r _ _ _ running _ < /proc/loadavg  # a builtin: this shell is the one runnable process of ours
        samples+=("${running%%/*}")
        sleep 0.2
    done
    median=$(printf '%s\n' "${samples[@]}" | sort -n | sed -n 3p)
    TOUCHSYNC_TEST_SLOWNESS=$(awk -v ready="$median" -v cores="$(nproc)" 'BEGIN { s = 1 + (ready - 1) / cores; if (s < 1) s = 1; if (s > 8) s = 8; printf "%.2f", s }')
fi
export TOUCHSYNC_TEST_SLOWNESS
echo "test run: slowness factor $TOUCHSYNC_TEST_SLOWNESS (1 + other processes ready to run per core)"
TMPDIR="$run" TOUCHSYNC_TEST_RUN="$tag" "$swift" test "$@"
status=$?

# Children die with the test process (SIGKILL from the kernel); give them a moment.
for _ in $(seq 50); do
    [ -z "$(leftover_processes)" ] && break
    sleep 0.2
done
left=$(leftover_processes)
if [ -n "$left" ]; then
    echo "error: the tests left these processes running (now killed):" >&2
    ps -o pid,args -p $(echo $left | tr ' ' ',') >&2 || true
    kill -9 $left 2>/dev/null
    [ $status -eq 0 ] && status=1
fi
# (SwiftPM's own TemporaryDirectory.* folders and *.lock files are not the tests'.)
files=$(ls -A "$run" 2>/dev/null | grep -v -e '^TemporaryDirectory\.' -e '\.lock$' -e '^swift-generated-sources$')
if [ -n "$files" ]; then
    echo "note: the tests left $(echo "$files" | wc -l) temporary path(s), removed now:" $(echo "$files" | head -5 | tr '\n' ' ')
fi
exit $status
