import Synchronization
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
    /// Boards each user (and, on a plain hub, each remote address) created here.
    private var created: [Creator: (total: Int, minuteStart: Moment, inMinute: Int)] = [:]

    enum Creator: Hashable {
        case user(UserNamespace)
        /// A plain hub's users are connections: one machine opening a connection per board is
        /// counted by its address too, at four times a user's quota (a few people behind one NAT, a gateway's guests).
        case address(String)
    }

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

    /// `user` (from `address`, on a plain hub) creates a board now: counted, or the refusal past a quota.
    mutating func createBoard(by user: UserNamespace, from address: String? = nil, now: Moment) -> HubRefusal? {
        let creators: [(Creator, String, Int)] =
            [(.user(user), "\(user)", 1)] + (address.map { [(.address($0), "address \($0)", 4)] } ?? [])
        var entries: [(Creator, (total: Int, minuteStart: Moment, inMinute: Int))] = []
        for (creator, name, factor) in creators {
            var entry = created[creator] ?? (total: 0, minuteStart: now, inMinute: 0)
            if now - entry.minuteStart >= .seconds(60) { entry = (entry.total, now, 0) }
            guard entry.total < factor * maxBoardsPerUser else {
                return HubRefusal(.rateLimited, "\(name) has created its maximum of \(factor * maxBoardsPerUser) boards on this hub")
            }
            guard entry.inMinute < factor * maxBoardsPerUserPerMinute else {
                return HubRefusal(.rateLimited, "\(name) created \(factor * maxBoardsPerUserPerMinute) boards in the last minute: wait")
            }
            entries.append((creator, entry))
        }
        for (creator, entry) in entries { created[creator] = (entry.total + 1, entry.minuteStart, entry.inMinute + 1) }
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

/// What one user (or address, or gateway) may take of a whole hub: the
/// quotas of what it holds and creates, its snapshot allowances, and an
/// invited user's sample and byte rates over all its tabs. A hub with one
/// board thread keeps it in its core; a hub with several shares one
/// (`HubLedger`), so that spreading boards over threads does not multiply
/// what one user may take.
struct UserLedger: Sendable {
    var quotas: UserQuotas
    /// Snapshot and board-list requests per requester and second.
    var snapshotAllowance: SnapshotAllowance
    /// On a plain hub, a remote address's requests over all its connections: four times one requester's.
    var snapshotAllowancePerAddress: SnapshotAllowance
    /// A gateway's own requests (a principal with `acts_for`): it keeps one
    /// replica per board for all its tabs, so opening many boards at once is
    /// its normal work; `gatewaySnapshotFactor` times a user's.
    var snapshotAllowanceOfGateways: SnapshotAllowance
    static let gatewaySnapshotFactor = 20
    /// The sample and byte allowances of each invited user a gateway acts
    /// for, shared by all its tabs (each tab is a session of its own).
    var invitedUserRates: [String: (samples: TokenBucket, bytes: TokenBucket)] = [:]
    let samplesPerSecond: Int
    let bytesPerSecond: Int

    init(limits: HubConfiguration.Limits) {
        quotas = UserQuotas(
            maxSamplesPerUser: limits.maxSamplesPerUser, maxBoardsPerUser: limits.maxBoardsCreatedPerUser,
            maxBoardsPerUserPerMinute: limits.maxBoardsCreatedPerUserPerMinute)
        snapshotAllowance = SnapshotAllowance(perSecond: limits.maxSnapshotsPerSecond)
        snapshotAllowancePerAddress = SnapshotAllowance(perSecond: 4 * limits.maxSnapshotsPerSecond)
        snapshotAllowanceOfGateways = SnapshotAllowance(perSecond: Self.gatewaySnapshotFactor * limits.maxSnapshotsPerSecond)
        samplesPerSecond = limits.maxSamplesPerSecond
        bytesPerSecond = limits.maxBytesPerSecond
    }

    /// `user`'s rates, made at `now` the first time.
    mutating func invitedUserRates(of user: String, now: Moment) -> (samples: TokenBucket, bytes: TokenBucket) {
        invitedUserRates[user] ?? (TokenBucket(rate: samplesPerSecond, now: now), TokenBucket(rate: bytesPerSecond, now: now))
    }
}

/// The one `UserLedger` of a hub whose boards are spread over board
/// threads (`HubConfiguration.boardThreads`), under a lock: every thread's
/// core counts in it. Its `Moment`s count from `epoch`, which every core
/// that shares it starts from.
public final class HubLedger: Sendable {
    let state: Mutex<UserLedger>
    public let epoch: ContinuousClock.Instant

    public init(limits: HubConfiguration.Limits, epoch: ContinuousClock.Instant) {
        state = Mutex(UserLedger(limits: limits))
        self.epoch = epoch
    }
}

/// The core's way to its ledger: its own, or the hub's shared one.
struct LedgerAccess {
    private var local: UserLedger
    private let shared: HubLedger?

    init(limits: HubConfiguration.Limits, shared: HubLedger?) {
        local = UserLedger(limits: limits)
        self.shared = shared
    }

    mutating func with<Result>(_ body: (inout UserLedger) -> Result) -> Result {
        if let shared { return shared.state.withLock { body(&$0) } }
        return body(&local)
    }
}
