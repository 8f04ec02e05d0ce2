import TouchSyncCore

/// What each user may hold on this hub: samples in accepted strokes over
/// all boards, and boards created (in all and per minute), so one user
/// cannot fill the hub for everyone.
struct UserQuotas {
    let maxSamplesPerUser: Int
    let maxBoardsPerUser: Int
    let maxBoardsPerUserPerMinute: Int
    /// Samples in each user's accepted strokes over all boards (users with none are absent).
    private var stored: [UserNamespace: Int] = [:]
    /// Boards each user created here (at most one entry per board created).
    private var created: [UserNamespace: (total: Int, minuteStart: Moment, inMinute: Int)] = [:]

    init(maxSamplesPerUser: Int, maxBoardsPerUser: Int, maxBoardsPerUserPerMinute: Int) {
        self.maxSamplesPerUser = maxSamplesPerUser
        self.maxBoardsPerUser = maxBoardsPerUser
        self.maxBoardsPerUserPerMinute = maxBoardsPerUserPerMinute
    }

    /// Samples `user` keeps in accepted strokes over all boards.
    func stored(by user: UserNamespace) -> Int { stored[user] ?? 0 }

    /// Whether `user` may begin a stroke, holding `inProgress` samples in strokes under way.
    func mayBeginStroke(_ user: UserNamespace, inProgress: Int) -> Bool { stored(by: user) + inProgress < maxSamplesPerUser }

    /// `user`'s accepted samples changed by `delta`.
    mutating func count(_ delta: Int, of user: UserNamespace) {
        guard delta != 0 else { return }
        let total = stored(by: user) + delta
        stored[user] = total == 0 ? nil : total
    }

    /// `user` creates a board now: counted, or the refusal past a quota.
    mutating func createBoard(by user: UserNamespace, now: Moment) -> HubRefusal? {
        var entry = created[user] ?? (total: 0, minuteStart: now, inMinute: 0)
        if now - entry.minuteStart >= .seconds(60) { entry = (entry.total, now, 0) }
        guard entry.total < maxBoardsPerUser else {
            return HubRefusal(.rateLimited, "\(user) has created its maximum of \(maxBoardsPerUser) boards on this hub")
        }
        guard entry.inMinute < maxBoardsPerUserPerMinute else {
            return HubRefusal(.rateLimited, "\(user) created \(maxBoardsPerUserPerMinute) boards in the last minute: wait")
        }
        created[user] = (entry.total + 1, entry.minuteStart, entry.inMinute + 1)
        return nil
    }
}

/// Snapshot and board-list requests per requester (its user, or its
/// connection) in the current one-second window: a flood of them from a
/// watcher once took a hub's memory to 1.86 GB.
struct SnapshotAllowance {
    let perSecond: Int
    private var window: (start: Moment, counts: [[UInt8]: Int])? = nil

    init(perSecond: Int) { self.perSecond = perSecond }

    /// Counts one request of `requester`; false past the allowance.
    mutating func admit(_ requester: [UInt8], now: Moment) -> Bool {
        if let current = window, now - current.start < .seconds(1) {
            let count = (current.counts[requester] ?? 0) + 1
            window!.counts[requester] = count
            return count <= perSecond
        }
        window = (now, [requester: 1])
        return perSecond >= 1
    }
}
