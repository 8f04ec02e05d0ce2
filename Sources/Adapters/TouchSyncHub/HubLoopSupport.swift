import CoreMetrics
import TouchSyncHubCore

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



/// Publications waiting for the board store's commit: each waits for the
/// last append made before it (so a board's heartbeat never overtakes its
/// batch), and they go out in order.
struct HeldPublications {
    private var queue: [(ticket: UInt64, publication: Publication)] = []
    private var head = 0
    private var lastAppended: UInt64 = 0
    private var committed: UInt64 = 0
    /// Boards whose commits fail (or that moved): their batches are never published.
    var broken: Set<String> = []

    /// Some append is not committed yet: a publication now must wait.
    var waiting: Bool { lastAppended > committed }

    mutating func appended(_ ticket: UInt64) { lastAppended = ticket }

    mutating func hold(_ publication: Publication) { queue.append((lastAppended, publication)) }

    /// The publications committed by `ticket`, in order, less broken boards' batches.
    mutating func release(through ticket: UInt64) -> [Publication] {
        committed = max(committed, ticket)
        var released: [Publication] = []
        while head < queue.count, queue[head].ticket <= committed {
            let publication = queue[head].publication
            head += 1
            if case .batch = publication.kind, broken.contains(publication.board) { continue }
            released.append(publication)
        }
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        }
        return released
    }
}
