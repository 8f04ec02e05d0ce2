import CoreMetrics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the adapter counts of the journal I/O it carries out.
struct JournalMetrics {
    let bytes: Counter
    let syncs: Counter
    let syncDuration: Timer

    init(factory: any MetricsFactory) {
        bytes = Counter(label: "touchsync_hub_journal_bytes_total", factory: factory)
        syncs = Counter(label: "touchsync_hub_journal_syncs_total", factory: factory)
        syncDuration = Timer(label: "touchsync_hub_journal_sync_seconds", factory: factory)
    }
}

/// Microseconds since the Unix epoch.
func wallClockMicroseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
}


