/// When boards publish, by slot: the boards with diffs waiting (each queued
/// once), the publish interval, every board's periodic heartbeat, and the
/// heartbeat a board owes its new subscribers (at most one per interval per
/// board, so a flood of subscriptions is not a flood of heartbeats to
/// everyone). It decides when; the core seals and encodes.
struct Publisher {
    private let publishInterval: Duration
    private let heartbeatInterval: Duration
    private let subscribeHeartbeatInterval: Duration
    /// Slots with diffs to publish, each once.
    private(set) var dirtyBoards: [Int] = []
    private var nextPublish: Moment
    private var nextHeartbeat: Moment
    /// When each board last sent a heartbeat for a new subscriber, and the
    /// boards that owe one (subscribers arrived within the interval).
    private var subscribeHeartbeats: [Int: Moment] = [:]
    private var owedHeartbeats: Set<Int> = []
    private let origin: Moment

    init(publishInterval: Duration, heartbeatInterval: Duration, subscribeHeartbeatInterval: Duration, now: Moment) {
        self.publishInterval = publishInterval
        self.heartbeatInterval = heartbeatInterval
        self.subscribeHeartbeatInterval = subscribeHeartbeatInterval
        nextPublish = now
        nextHeartbeat = now + heartbeatInterval
        origin = now
    }

    /// The board has diffs waiting now and had none before.
    mutating func markDirty(_ slot: Int) { dirtyBoards.append(slot) }

    /// The slot's board is gone (forgotten or moved): nothing is owed for it.
    mutating func forget(_ slot: Int) {
        dirtyBoards.removeAll { $0 == slot }
        subscribeHeartbeats[slot] = nil
        owedHeartbeats.remove(slot)
    }

    /// The dirty boards when publishing is due (`force`: now, whatever the
    /// interval): swapped into `due` (both keep their capacity), then none
    /// is dirty. False: nothing to publish now.
    mutating func takeDue(force: Bool, now: Moment, into due: inout [Int]) -> Bool {
        guard !dirtyBoards.isEmpty, force || now >= nextPublish else { return false }
        due.removeAll(keepingCapacity: true)
        swap(&due, &dirtyBoards)
        nextPublish = now + publishInterval
        return true
    }

    /// A subscriber arrived for the slot's board: true when the board sends
    /// a heartbeat now; otherwise it owes one (`owedHeartbeatsDue`).
    mutating func subscriberArrived(at slot: Int, now: Moment) -> Bool {
        if let last = subscribeHeartbeats[slot], now - last < subscribeHeartbeatInterval {
            owedHeartbeats.insert(slot)
            return false
        }
        subscribeHeartbeats[slot] = now
        return true
    }

    /// Boards whose owed heartbeat is due now (each then counts as sent).
    mutating func owedHeartbeatsDue(now: Moment) -> [Int] {
        guard !owedHeartbeats.isEmpty else { return [] }
        var due: [Int] = []
        for slot in owedHeartbeats where now - (subscribeHeartbeats[slot] ?? origin) >= subscribeHeartbeatInterval {
            owedHeartbeats.remove(slot)
            subscribeHeartbeats[slot] = now
            due.append(slot)
        }
        return due.sorted()
    }

    /// Whether every board's periodic heartbeat is due now (then the next is an interval later).
    mutating func periodicHeartbeatDue(now: Moment) -> Bool {
        guard now >= nextHeartbeat else { return false }
        nextHeartbeat = now + heartbeatInterval
        return true
    }

    /// The earliest moment something here is due.
    var nextDeadline: Moment {
        var deadline = nextHeartbeat
        if !dirtyBoards.isEmpty { deadline = min(deadline, nextPublish) }
        for slot in owedHeartbeats { deadline = min(deadline, (subscribeHeartbeats[slot] ?? origin) + subscribeHeartbeatInterval) }
        return deadline
    }
}
