import Logging
import TouchSyncCore
import TouchSyncHubCore
import ZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ends every subscriber connection of an authenticated hub's publish
/// socket after a reload took `users`' right to watch: they connect again
/// through the handshake, which the reloaded list decides (the others resync).
func endSubscriberConnections(_ connections: ZMQAcceptedConnections, publishEndpoint: String, for users: [String], logger: Logger) {
    // tcp://HOST:PORT: its port; ipc://PATH: local sockets.
    let port = publishEndpoint.hasPrefix("tcp://") ? publishEndpoint.split(separator: ":").last.flatMap { UInt16($0) } : nil
    let ended = connections.shutDownAll(localPort: port)
    logger.notice(
        "subscriber connections ended: they connect again through the handshake (the others resync)",
        metadata: ["connections": "\(ended)", "for": "\(users)"])
}

/// Microseconds since the Unix epoch.
func wallClockMicroseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
}



/// What goes to subscribers only once storage has the batches before it:
/// publications, and snapshots (a snapshot is the board at a sequence).
enum HeldOutput {
    case publication(Publication)
    case snapshot(to: PeerID, requestID: UInt64, board: String, state: BoardState, digest: BoardDigest)
}

/// Publications and snapshots waiting for the journal (written, or synced
/// under `--fsync batch`) or the board store's commit: each waits for the
/// last append made before it (so a board's heartbeat never overtakes its
/// batch, and no subscriber sees a state storage may not have), and they go
/// out in order.
struct HeldPublications {
    private var queue: [(ticket: UInt64, output: HeldOutput)] = []
    private var head = 0
    private var lastAppended: UInt64 = 0
    private var committed: UInt64 = 0
    /// Boards whose commits or lease renewals fail (or that moved): their batches and heartbeats are never
    /// published, their snapshots refused (reads fenced: what they hold may not be what the store has).
    var broken: Set<String> = []

    /// Some append is not committed yet: a publication now must wait.
    var waiting: Bool { lastAppended > committed }

    mutating func appended(_ ticket: UInt64) { lastAppended = ticket }

    mutating func hold(_ output: HeldOutput) { queue.append((lastAppended, output)) }

    /// What `ticket` lets out, in order, less broken boards' batches.
    mutating func release(through ticket: UInt64) -> [HeldOutput] {
        committed = max(committed, ticket)
        var released: [HeldOutput] = []
        while head < queue.count, queue[head].ticket <= committed {
            let output = queue[head].output
            head += 1
            // A broken board's batches, and its heartbeats (their sequence may not be stored), never go out.
            if case .publication(let publication) = output, broken.contains(publication.board) { continue }
            released.append(output)
        }
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        }
        return released
    }
}
