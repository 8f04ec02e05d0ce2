/// Snapshot connections that have not taken what they were sent. A snapshot
/// queued for a peer that never reads stays in the hub's memory (libzmq's
/// pipe, up to its high-water mark, and the kernel's send buffer): 300 such
/// connections of one watch-only key took a hub from 47 to 794 MiB. So each
/// connection sent a snapshot is watched until the kernel has sent all its
/// bytes (`unsent` 0); one whose bytes still wait after `patience` is closed
/// (its queues are freed), and an owner (a user, or a plain hub's remote
/// address) with `maxBytesPerOwner` of snapshots unread, or a hub with
/// `maxBytesTotal`, gets no more until they are read or closed.
/// Pure: time and the probe of a connection's unsent bytes are arguments.
public struct UnreadSnapshots: Sendable {
    public typealias Instant = ContinuousClock.Instant

    public struct Limits: Sendable, Equatable {
        /// Snapshot bytes one owner may have unread. Default 64 MiB.
        public var maxBytesPerOwner = 64 << 20
        /// Snapshot bytes unread over all connections. Default 512 MiB.
        public var maxBytesTotal = 512 << 20
        /// How long a connection may leave a snapshot unread before it is closed.
        public var patience: Duration = .seconds(10)
        /// A connection's bytes are judged only this long after its snapshot went (libzmq writes them a moment later).
        public var settle: Duration = .milliseconds(200)
        public init() {}
    }

    struct Entry: Sendable {
        var owner: String
        var since: Instant
        var bytes: Int
    }

    public let limits: Limits
    private var entries: [Int32: Entry] = [:]
    private var byOwner: [String: Int] = [:]
    public private(set) var bytes = 0

    public init(limits: Limits = Limits()) { self.limits = limits }

    /// Connections watched.
    public var count: Int { entries.count }
    public func isWatching(_ descriptor: Int32) -> Bool { entries[descriptor] != nil }
    /// Snapshot bytes `owner` has unread.
    public func bytes(of owner: String) -> Int { byOwner[owner] ?? 0 }

    /// Whether `owner` may be sent another snapshot now.
    public func admits(_ owner: String) -> Bool { bytes(of: owner) < limits.maxBytesPerOwner && bytes < limits.maxBytesTotal }

    /// A snapshot of `size` bytes went to connection `descriptor` of `owner`.
    public mutating func sent(to descriptor: Int32, owner: String, bytes size: Int, now: Instant) {
        var size = size
        if let previous = entries[descriptor] {
            forget(descriptor, previous)
            // The same connection's earlier snapshot still counts (a reused number of a closed one is the new owner's).
            if previous.owner == owner { size += previous.bytes }
        }
        entries[descriptor] = Entry(owner: owner, since: now, bytes: size)
        byOwner[owner, default: 0] += size
        bytes += size
    }

    /// Forgets connections whose bytes have all left (`unsent` 0) or that are
    /// closed (`unsent` nil); returns those unread past `patience`, to be
    /// closed (and forgets them too).
    public mutating func sweep(now: Instant, unsent: (Int32) -> Int?) -> [Int32] {
        var overdue: [Int32] = []
        for (descriptor, entry) in entries where now - entry.since >= limits.settle {
            guard let waiting = unsent(descriptor), waiting > 0 else {
                forget(descriptor, entry)
                continue
            }
            if now - entry.since >= limits.patience {
                forget(descriptor, entry)
                overdue.append(descriptor)
            }
        }
        return overdue.sorted()
    }

    private mutating func forget(_ descriptor: Int32, _ entry: Entry) {
        entries[descriptor] = nil
        let left = (byOwner[entry.owner] ?? entry.bytes) - entry.bytes
        byOwner[entry.owner] = left > 0 ? left : nil
        bytes -= entry.bytes
    }
}
