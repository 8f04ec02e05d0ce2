import Foundation
import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncHubCore

/// What the store writer tells the hub, in the order the hub must apply it:
/// a board's failure or move before the commit that would acknowledge it.
public enum BoardStoreReport: Sendable {
    /// The board's batches could not be committed: its agents are not
    /// acknowledged until a restart of it is (`restart`).
    case failed(board: String, reason: String)
    /// Another hub holds the board's lease now.
    case moved(board: String, owner: String)
    /// The restart of a failed board was committed: everything the hub holds of it is stored.
    case restored(board: String)
    /// Every append through this ticket is committed (or belongs to a board reported above).
    case committed(through: UInt64)
    /// This hub took the board's lease (a claim, or its hub stopped) and loaded it.
    case adopted(RecoveredBoard)
    /// A look-up (`lookUp`) found no such board in the store: nobody has drawn on it.
    case absent(board: String)
    /// The live hubs changed (names and endpoints).
    case membership(ClusterMap)
}

/// The leases one hub holds in the board store and what it knows of each
/// board, as a value without I/O (issue 41: these rules were interleaved
/// with the SQL that feeds them). Each transition takes what a statement
/// returned and says what follows: the reports for the hub, and the
/// statements the store adapter (`BoardStoreWriter`) runs next. The
/// adapter only turns `LeaseStatement`s into SQL and their rows into these
/// calls. Time is an argument.
///
/// The rules: a batch is written only under the epoch of a lease this hub
/// holds; a board another hub took (`moved`) is never written again; a board
/// whose commit failed (`broken`) writes nothing until a restart stores it
/// whole; leases are renewed with the hub's heartbeat, a lease whose epoch
/// changed is lost; past three quarters of the lease without a renewal the
/// hub's boards are fenced (failed: they might pass to another hub); a
/// lapsed board goes to the live hub with the highest rendezvous weight
/// other than its last holder.
public struct BoardLeases: Sendable {
    public let hubName: String
    public let leaseTimeout: Duration
    /// A board gets a compacted snapshot once this many bytes of batches were stored since its last.
    public let snapshotEveryBytes: Int
    /// Epoch of each lease held.
    public private(set) var epochs: [String: Int64]
    /// Every agent's progress per board (a snapshot stores it).
    public private(set) var progress: [String: [UserNamespace: AgentProgress]]
    /// Boards whose commit failed, until a restart of them commits.
    public private(set) var broken: Set<String> = []
    /// Boards another hub took: nothing more is written for them.
    public private(set) var moved: Set<String> = []
    /// Bytes of batches stored since each board's last snapshot.
    public private(set) var sinceSnapshot: [String: Int] = [:]
    /// The live hubs last read.
    public private(set) var members: ClusterMap? = nil
    /// When the last renewal that succeeded began.
    public private(set) var renewedAt: ContinuousClock.Instant

    public init(
        hubName: String, leaseTimeout: Duration, snapshotEveryBytes: Int, epochs: [String: Int64],
        progress: [String: [UserNamespace: AgentProgress]], now: ContinuousClock.Instant
    ) {
        self.hubName = hubName
        self.leaseTimeout = leaseTimeout
        self.snapshotEveryBytes = snapshotEveryBytes
        self.epochs = epochs
        self.progress = progress
        renewedAt = now
    }

    public func holds(_ board: String) -> Bool { epochs[board] != nil }

    // MARK: Commit

    /// One append of a commit group, as the rules see it.
    public struct Append: Sendable, Equatable {
        public var board: String
        public var agents: [AgentProgress]
        public init(board: String, agents: [AgentProgress]) {
            self.board = board
            self.agents = agents
        }
    }

    /// What a commit group writes.
    public struct CommitPlan: Sendable {
        /// Indices of the appends to insert, each with its board's epoch.
        public var written: [(index: Int, epoch: Int64)]
        /// The boards written (their leases are read `FOR SHARE` with the insert).
        public var boards: Set<String>
        /// Boards appended to that this hub does not hold (never written): lost.
        public var notHeld: [String]
    }

    /// Which appends go into the group's insert: not a broken or moved
    /// board's (their agents' progress is kept for the restart), not a board
    /// this hub does not hold.
    public mutating func planCommit(_ appends: [Append]) -> CommitPlan {
        var plan = CommitPlan(written: [], boards: [], notHeld: [])
        for (index, append) in appends.enumerated() {
            if broken.contains(append.board) || moved.contains(append.board) {
                remember(append.agents, of: append.board)
                continue
            }
            guard let epoch = epochs[append.board] else {
                if !plan.notHeld.contains(append.board) { plan.notHeld.append(append.board) }
                continue
            }
            plan.boards.insert(append.board)
            plan.written.append((index, epoch))
        }
        return plan
    }

    /// The group's insert ran: `inserted` counts the rows per board
    /// (`written` bytes per written append, in plan order). A board of the
    /// group with no row has another epoch now: the returned `lost` are to
    /// be lost (`lose`). `snapshotsDue` are the appends whose board is owed a
    /// compacted snapshot, with the epoch to store it under.
    public mutating func committed(
        _ plan: CommitPlan, appends: [Append], inserted: [String: Int], bytes: [Int]
    ) -> (lost: [String], snapshotsDue: [(index: Int, epoch: Int64)]) {
        let lost = plan.boards.filter { inserted[$0] == nil }.sorted()
        var due: [(index: Int, epoch: Int64)] = []
        for (position, (index, _)) in plan.written.enumerated() where inserted[appends[index].board] != nil {
            let board = appends[index].board
            remember(appends[index].agents, of: board)
            sinceSnapshot[board, default: 0] += bytes[position]
            if sinceSnapshot[board]! >= snapshotEveryBytes, let epoch = epochs[board] {
                sinceSnapshot[board] = 0
                due.append((index, epoch))
            }
        }
        return (lost, due)
    }

    /// The group's insert failed: nothing of it is known stored, its boards wait for a restart.
    public mutating func commitFailed(_ plan: CommitPlan, appends: [Append], reason: String) -> [BoardStoreReport] {
        var reports: [BoardStoreReport] = []
        for board in plan.boards.sorted() {
            broken.insert(board)
            reports.append(.failed(board: board, reason: reason))
        }
        for (index, _) in plan.written { remember(appends[index].agents, of: appends[index].board) }
        return reports
    }

    // MARK: Moves

    /// Whether the live hubs must be read before `owner` is reported (it is not among those known).
    public func needsMembers(toName owner: String) -> Bool {
        members?.hubs.contains { $0.name == owner } != true
    }

    /// The board is `owner`'s now (`members`: the live hubs read for it, if
    /// `needsMembers`): reported once, never written again.
    public mutating func lose(_ board: String, to owner: String, members read: ClusterMap? = nil) -> [BoardStoreReport] {
        var reports: [BoardStoreReport] = []
        if let read, read != members {
            members = read
            reports.append(.membership(read))
        }
        epochs[board] = nil
        broken.remove(board)
        moved.insert(board)
        progress[board] = nil
        reports.append(.moved(board: board, owner: owner))
        return reports
    }

    // MARK: Restart

    /// What a failed board's restart does.
    public enum RestartPlan: Sendable, Equatable {
        /// Not failed, or moved: nothing.
        case nothing
        /// Not held any more: lose it.
        case lose
        /// Store its whole state as a snapshot under this epoch, with the agents' progress.
        case store(epoch: Int64, agents: [AgentProgress])
    }

    public func planRestart(_ board: String) -> RestartPlan {
        guard broken.contains(board), !moved.contains(board) else { return .nothing }
        guard let epoch = epochs[board] else { return .lose }
        return .store(epoch: epoch, agents: progress[board].map { Array($0.values) } ?? [])
    }

    /// The restart's snapshot was stored (true) or found the lease gone
    /// (false: lose the board). Nil when stored: the report to send.
    public mutating func restarted(_ board: String, stored: Bool) -> BoardStoreReport? {
        guard stored else { return nil }
        broken.remove(board)
        sinceSnapshot[board] = 0
        return .restored(board: board)
    }

    // MARK: Claims and adoption

    /// Why a board's lease is claimed.
    public enum ClaimKind: Sendable, Equatable {
        /// A hello: the board is created when the store lacks it.
        case hello
        /// A snapshot request: never created; `absent` when the store lacks it.
        case lookUp
        /// A lapsed lease this hub owns now: nothing reported if another hub was quicker.
        case adoption
    }

    /// What follows a claim whose lease another hub holds.
    public enum RefusedClaim: Sendable, Equatable {
        /// Lose the board to its holder.
        case lose
        /// Ask whether the store has the board: `absent` when not, else lose it.
        case checkExists
        case nothing
    }

    /// Whether a claim is made at all (a board held already had its adoption reported).
    public func shouldClaim(_ board: String) -> Bool { epochs[board] == nil }

    public func claimRefused(_ kind: ClaimKind) -> RefusedClaim {
        switch kind {
        case .hello: .lose
        case .lookUp: .checkExists
        case .adoption: .nothing
        }
    }

    /// This hub took the board's lease under `epoch` and loaded it.
    public mutating func adopted(_ loaded: RecoveredBoard, epoch: Int64, agents: [UserNamespace: AgentProgress]) -> BoardStoreReport {
        let board = loaded.name
        epochs[board] = epoch
        progress[board] = agents
        moved.remove(board)
        broken.remove(board)
        sinceSnapshot[board] = 0
        return .adopted(loaded)
    }

    // MARK: Renewal and fencing

    /// Another process holds this hub's name now (its heartbeat was refused):
    /// every board held is to be lost, to that name's new holder.
    public var boardsToGive: [String] { epochs.keys.sorted() }

    /// The renewal `started` extended these leases (board → epoch): the
    /// boards held under another epoch, or not renewed, are to be lost.
    public mutating func renewed(_ held: [String: Int64], started: ContinuousClock.Instant) -> [String] {
        renewedAt = started
        return epochs.filter { held[$0.key] != $0.value }.map(\.key).sorted()
    }

    /// The live hubs as read: a report when they changed.
    public mutating func membersRead(_ read: ClusterMap?) -> [BoardStoreReport] {
        guard let read, read != members else { return [] }
        members = read
        return [.membership(read)]
    }

    /// Of the boards whose leases lapsed (with their last holder), those this
    /// hub is to take: not held already, and this hub their successor among
    /// the live hubs (the highest weight other than the holder, which may
    /// still look live for a renewal after its leases lapsed).
    public func adoptable(lapsed: [(board: String, holder: String)]) -> [String] {
        guard let members else { return [] }
        return lapsed.filter { epochs[$0.board] == nil && Self.successor(for: $0.board, after: $0.holder, among: members).name == hubName }
            .map(\.board)
    }

    /// When to renew early, after a renewal that found a lease of another
    /// hub lapsing in `lapse`: just after it lapses, when that comes before
    /// the next regular renewal (`interval` away), so that a dead hub's
    /// boards are adopted as soon as their leases allow (up to an interval
    /// sooner); nil: the regular renewal will do. A hub that turns out not
    /// to be the board's successor has renewed once more, which is harmless.
    public static func earlyRenewal(untilLapse lapse: Duration, interval: Duration) -> Duration? {
        guard lapse >= .zero, lapse < interval else { return nil }
        return lapse + pastLapse
    }

    /// How long after a lease's lapse the early renewal comes: the store
    /// says lapsed only once `expires_at < now()` by its own clock.
    public static let pastLapse: Duration = .milliseconds(5)

    /// Who should take a board whose lease `holder` let lapse.
    public static func successor(for board: String, after holder: String, among members: ClusterMap) -> ClusterMap.Hub {
        let others = members.hubs.filter { $0.name != holder }
        guard !others.isEmpty, others.count < members.hubs.count, let map = try? ClusterMap(hubs: others) else { return members.hub(for: board) }
        return map.hub(for: board)
    }

    /// A renewal failed at `now`. Past three quarters of the lease since the
    /// last one that succeeded, a lease may lapse before the next renewal and
    /// pass to another hub, whose board this one would then serve stale:
    /// every board held and not yet failed is failed (reads fenced: no
    /// snapshot or heartbeat of it goes out, agents are not acknowledged,
    /// and a restart brings it back or finds it moved once the store answers).
    public mutating func renewFailed(now: ContinuousClock.Instant, reason: String) -> [BoardStoreReport] {
        let since = now - renewedAt
        guard since >= leaseTimeout * 3 / 4 else { return [] }
        var reports: [BoardStoreReport] = []
        for board in epochs.keys.sorted() where !broken.contains(board) && !moved.contains(board) {
            broken.insert(board)
            reports.append(
                .failed(
                    board: board,
                    reason:
                        "its lease was not renewed for \(since.formatted(.units(allowed: [.seconds], fractionalPart: .show(length: 1)))) (\(reason)): it may pass to another hub"
                ))
        }
        return reports
    }

    private mutating func remember(_ agents: [AgentProgress], of board: String) {
        for agent in agents { progress[board, default: [:]][agent.principal] = agent }
    }
}
