import Synchronization
import Glibc
import Logging
import TouchSyncHubCore

/// The snapshot socket's side of `UnreadSnapshots`: which connection (its
/// descriptor) and owner each request came from, the bytes each snapshot
/// queued, and a look at every watched connection's unsent bytes four times
/// a second (`SIOCOUTQNSD`: bytes the kernel has not sent because the peer's
/// window is shut). A connection still not reading after the patience is
/// shut down, which frees what libzmq and the kernel held for it. On the
/// hub thread, which owns the snapshot socket.
struct SnapshotReaders {
    private var unread: UnreadSnapshots
    /// The connection and owner of each peer's latest request, until its answer goes.
    private var requesters: [PeerID: Requester] = [:]
    private var lastSweep: ContinuousClock.Instant? = nil
    private let logger: Logger

    init(limits: UnreadSnapshots.Limits = .init(), logger: Logger) {
        unread = UnreadSnapshots(limits: limits)
        self.logger = logger
    }

    /// Whether a request of `peer` on connection `descriptor` may be answered
    /// now: false while its owner (its user, else its remote address, else the
    /// peer) has the most snapshot bytes unread, or the hub has.
    mutating func admit(_ peer: PeerID, descriptor: Int32?, user: String?, address: String?) -> Bool {
        let owner = user.map { "user " + $0 } ?? address.map { "address " + $0 } ?? "peer \(peer)"
        guard unread.admits(owner) else { return false }
        if let descriptor {
            if requesters.count >= 4096 { requesters.removeAll() }  // answered ones are removed; a flood of unanswered ones is not kept
            requesters[peer] = Requester(descriptor: descriptor, owner: owner)
        }
        return true
    }

    /// The connection and owner of `peer`'s request, taken when its answer
    /// is handed to the encoder (nil: not a TCP connection, not watched).
    mutating func takeRequester(_ peer: PeerID) -> Requester? {
        requesters.removeValue(forKey: peer)
    }

    /// Whether `requester`'s owner may still be sent a snapshot (checked
    /// again at its first chunk: requests admitted in one turn are encoded later).
    func admits(_ requester: Requester) -> Bool { unread.admits(requester.owner) }

    /// A chunk of `bytes` went to `requester`'s connection: its owner's unread bytes grow.
    mutating func sent(to requester: Requester, bytes: Int, now: ContinuousClock.Instant) {
        guard let name = Self.remoteName(of: requester.descriptor) else { return }
        remoteNames[requester.descriptor] = name
        unread.sent(to: requester.descriptor, owner: requester.owner, bytes: bytes, now: now)
    }

    struct Requester {
        let descriptor: Int32
        let owner: String
    }

    /// Each watched descriptor's remote end when its snapshot went: a descriptor
    /// that now names another is a closed connection's number, reused.
    private var remoteNames: [Int32: [UInt8]] = [:]

    static func remoteName(of descriptor: Int32) -> [UInt8]? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let found = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        }
        guard found == 0 else { return nil }
        return withUnsafeBytes(of: &storage) { Array($0.prefix(Int(length))) }
    }

    /// Every 250 ms: forgets connections that took everything, shuts down those unread past the patience.
    mutating func sweepIfDue(now: ContinuousClock.Instant) {
        guard unread.count > 0, lastSweep.map({ now - $0 >= .milliseconds(250) }) ?? true else { return }
        lastSweep = now
        let names = remoteNames
        let overdue = unread.sweep(now: now) { descriptor in
            // Closed, or its number now another connection's: nothing of ours waits on it.
            guard let name = names[descriptor], Self.remoteName(of: descriptor) == name else { return nil }
            var waiting: Int32 = 0
            return ioctl(descriptor, UInt(Self.unsentBytesRequest), &waiting) == 0 ? Int(waiting) : nil
        }
        if remoteNames.count > unread.count { remoteNames = remoteNames.filter { unread.isWatching($0.key) } }
        for descriptor in overdue {
            // Linger 0: when libzmq closes the descriptor (it sees the shutdown), the kernel resets the
            // connection and drops the bytes it still held, instead of trying to deliver them.
            var abort = linger(l_onoff: 1, l_linger: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
            shutdown(descriptor, Int32(SHUT_RDWR))  // libzmq sees the connection end and frees its queue
        }
        if !overdue.isEmpty {
            logger.notice("snapshot connections closed: they did not read their snapshots", metadata: ["connections": "\(overdue.count)"])
        }
    }

    /// `SIOCOUTQNSD` (linux/sockios.h): bytes queued and not yet sent.
    static let unsentBytesRequest: Int32 = 0x894B
}

/// The `SnapshotReaders` of a hub, under a lock: a hub with several board
/// threads has one for all of them, so that an owner's unread snapshot
/// bytes count once over every thread (its budget and the hub's total are
/// the hub's, not each thread's). A hub with one thread takes the lock uncontended.
final class SnapshotReaderTable: Sendable {
    private let readers: Mutex<SnapshotReaders>

    init(_ readers: SnapshotReaders) { self.readers = Mutex(readers) }

    func withLock<Result>(_ body: (inout SnapshotReaders) -> Result) -> Result {
        readers.withLock { body(&$0) }
    }
}
