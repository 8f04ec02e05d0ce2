/// What acknowledgements wait for: the storage tickets the core handed out
/// (one per journaled batch), how far the journal or the board store reports
/// them written and synced, when the policy wants the next sync, and the
/// boards whose storage failed (their agents are not acknowledged until it is
/// restored, retried every `retryInterval`). No I/O: the core asks for
/// appends and syncs as actions and hears back as events.
struct Durability {
    let policy: FsyncPolicy
    let retryInterval: Duration
    private(set) var appended: UInt64 = 0
    private(set) var written: UInt64 = 0
    private(set) var synced: UInt64 = 0
    private var syncRequested: UInt64 = 0
    private var lastSyncAt: Moment
    /// Boards whose storage failed (their agents are not acknowledged); the others go on.
    private(set) var failedBoards: [String: FailedBoard] = [:]

    /// A board whose storage failed, until a restart of it succeeds.
    struct FailedBoard {
        var reason: String
        var nextRetry: Moment
        var lastLogged: Moment
    }

    init(policy: FsyncPolicy, retryInterval: Duration, now: Moment) {
        self.policy = policy
        self.retryInterval = retryInterval
        lastSyncAt = now
    }

    // MARK: Tickets

    /// The next append's ticket.
    mutating func append() -> UInt64 {
        appended += 1
        return appended
    }

    /// The storage's report: appends through `written` are written, through `synced` durable.
    mutating func progress(written: UInt64, synced: UInt64) {
        self.written = max(self.written, written)
        self.synced = max(self.synced, synced)
    }

    /// Everything appended is as durable as the policy promises.
    var isDurable: Bool { (policy == .never ? written : synced) >= appended }

    /// When an interval policy wants the next sync (nil: nothing to sync, or not that policy).
    var syncDue: Moment? {
        guard appended > syncRequested, case .interval(let interval) = policy else { return nil }
        return lastSyncAt + interval
    }

    /// The ticket to sync through when a sync is due now (`force`: whatever the policy).
    mutating func syncIfDue(force: Bool, now: Moment) -> UInt64? {
        guard appended > syncRequested || force else { return nil }
        let due: Bool
        switch policy {
        case .everyBatch: due = true
        case .interval: due = syncDue.map { now >= $0 } ?? false
        case .never: due = false
        }
        guard due || force else { return nil }
        syncRequested = appended
        lastSyncAt = now
        return appended
    }

    // MARK: Failed boards

    enum FailureNews: Equatable {
        /// The board's storage just failed.
        case first
        /// It failed again (a retry); `log`: a minute has passed since it was last said.
        case again(log: Bool)
    }

    mutating func failed(_ board: String, reason: String, now: Moment) -> FailureNews {
        guard let known = failedBoards[board] else {
            failedBoards[board] = FailedBoard(reason: reason, nextRetry: now + retryInterval, lastLogged: now)
            return .first
        }
        failedBoards[board]!.reason = reason
        guard now - known.lastLogged >= .seconds(60) else { return .again(log: false) }
        failedBoards[board]!.lastLogged = now
        return .again(log: true)
    }

    /// The board's storage works again: true if it had failed.
    mutating func restored(_ board: String) -> Bool { failedBoards.removeValue(forKey: board) != nil }

    /// The board is gone from this hub (moved to another): nothing to retry.
    mutating func forget(_ board: String) { failedBoards[board] = nil }

    /// Failed boards due a retry now; each is next due a retry interval later.
    mutating func retriesDue(now: Moment) -> [String] {
        var due: [String] = []
        for (board, failure) in failedBoards where now >= failure.nextRetry {
            failedBoards[board]!.nextRetry = now + retryInterval
            due.append(board)
        }
        return due.sorted()
    }

    /// The earliest retry (nil: no board failed).
    var nextRetry: Moment? { failedBoards.values.map(\.nextRetry).min() }
}
