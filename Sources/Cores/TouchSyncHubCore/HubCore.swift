import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

/// The hub without I/O: every board, every agent session, the numbering and
/// rate rules, acknowledgements held until the journal is durable, liveness,
/// heartbeats and snapshots, as a state machine. A transport adapter feeds it
/// `HubEvent`s with the time and carries out the `HubAction`s it returns, in
/// order; it never reads a clock, a socket or a file, so every rule can be
/// tested with a manual clock (`Tests/TouchSyncHubCoreTests`).
///
/// The rules live in parts, each a value type with its own tests:
/// `Admission` (a hello to a role or a refusal), `SessionTable` (sessions,
/// liveness, the ack queue), `Durability` (acknowledgements held for
/// storage), `Publisher` (when boards publish and send heartbeats),
/// `BoardTable` (boards by slot), `StoreWaits`, `UserQuotas` and
/// `SnapshotAllowance`. This type routes each event to them and to the
/// boards; its handlers are split by concern into the `HubCore+…` files
/// (agents, publishing, snapshots, storage, timers).
///
/// Single writer: one thread owns a core (the hub loop's).
public struct HubCore {
    public let configuration: HubConfiguration
    /// Who hears what the core noticed (nil: nobody).
    let observer: (any HubObserver)?
    /// What the core counts, for its adapter to export.
    public internal(set) var counters = HubCounters()
    /// Live touches of each board with any, for the total in `counters`. Kept
    /// out of `counters`, which the adapter copies every turn: a shared
    /// dictionary there would be copied whole at the next batch.
    var liveTouchesByBoard: [String: Int] = [:]

    /// The boards held, by slot (a session keeps its board's slot).
    var channels = BoardTable()
    var nextReclaim: Moment
    /// When boards publish: dirty boards (see `change`), heartbeats.
    var publisher: Publisher
    /// Reused by every publish turn: the slots being published.
    var publishing: [Int] = []
    /// Agent sessions by principal (one per user namespace), their
    /// connections and delegations, liveness and the ack queue.
    var sessions: SessionTable
    var subscriptions: [[UInt8]: Int] = [:]
    /// Subscriptions that are not one board's topic (a relay's `*` or
    /// `team-*`: prefixes): they may want any board's v1 stream.
    var prefixSubscriptions = 0
    /// Authenticated hubs: the boards and prefixes each user subscribed to
    /// (up to 1,024 per user), so that a reload that takes one away ends the stream.
    var watchedBoards: [UserNamespace: Set<Watched>] = [:]

    /// What one subscription of an authenticated hub watches.
    enum Watched: Hashable {
        /// One board's topic (any stream).
        case board(String)
        /// Every board whose name starts with these UTF-8 bytes (empty: every board).
        case prefix([UInt8])
    }
    /// What each user holds and may take, against the per-user quotas and
    /// allowances: this core's own, or the one its hub's board threads share.
    var ledger: LedgerAccess

    /// Users with touches down on a recovered board and no session yet: if
    /// they do not resume within the abandon time-out, their touches are
    /// cancelled as a silent agent's would be (no stroke stays stuck).
    var recoveredUsers: [(slot: Int, user: UserNamespace)] = []
    var recoveredUntil: Moment? = nil

    /// What acknowledgements wait for (nil: nothing is stored, frames are acknowledged once applied).
    var journal: Durability?
    /// Board store: hellos and snapshot requests waiting for their board's claim or look-up.
    var storeWaits = StoreWaits()
    /// Who serves which board: the cluster file's map, or the board store's
    /// live hubs; and the boards the store moved away (bounded by the boards this hub held).
    var routing: BoardRouting
    /// Who may do what where; nil: the transport does not authenticate, and
    /// everyone may do everything (loopback only, by the hub's start policy).
    var access: AccessList?

    /// Since when every turn has ended with input still waiting (nil: caught up).
    var behindSince: Moment? = nil
    var lastBusyNotice: Moment? = nil

    // Timers.
    var nextHousekeeping: Moment
    var nextAck: Moment
    let housekeepingInterval: Duration

    /// Wall-clock microseconds at `origin`: batch times are derived from the
    /// monotonic `now`, so the core never reads a clock.
    let wallOrigin: Int64
    let origin: Moment
    /// The instant the core started at: its `Moment`s count from it.
    let epoch: ContinuousClock.Instant

    /// - Parameters:
    ///   - recovered: the boards the journal gave back (empty without one).
    ///   - access: the access list of an authenticated transport (peers' principals are authenticated users).
    ///   - now, wallClockMicroseconds: the time the core starts at, on the monotonic clock events will use and on the wall clock.
    ///   - ledger: the per-user quotas and allowances every board thread of the hub shares (nil: the core's own);
    ///     the core's time then counts from the ledger's epoch, as every sharer's does.
    public init(
        configuration: HubConfiguration, recovered: [RecoveredBoard] = [], now start: ContinuousClock.Instant,
        wallClockMicroseconds: Int64, observer: (any HubObserver)? = nil, access: AccessList? = nil, ledger shared: HubLedger? = nil
    ) {
        let instant = shared?.epoch ?? start
        epoch = instant
        let now = Moment(nanoseconds: 0)
        self.configuration = configuration
        self.access = access
        routing = BoardRouting(cluster: configuration.cluster, storeCommits: configuration.storeCommits)
        sessions = SessionTable(strangerRate: configuration.limits.maxMessagesPerSecond)
        ledger = LedgerAccess(limits: configuration.limits, shared: shared)
        self.observer = observer
        origin = now
        nextDeadline = instant  // computed once the rest is set up (below)
        wallOrigin = wallClockMicroseconds
        publisher = Publisher(
            publishInterval: configuration.timing.publishInterval, heartbeatInterval: configuration.timing.heartbeatInterval,
            subscribeHeartbeatInterval: configuration.timing.subscribeHeartbeatInterval, now: now)
        housekeepingInterval = min(configuration.timing.livenessTimeout / 4, .milliseconds(250))
        nextHousekeeping = now + housekeepingInterval
        nextReclaim = now + configuration.timing.idleEmptyBoardTimeout
        nextAck = now
        if let policy = configuration.durability {
            journal = Durability(policy: policy, retryInterval: configuration.timing.journalRetryInterval, now: now)
        }
        for board in recovered { install(board) }
        if !recoveredUsers.isEmpty { recoveredUntil = now + configuration.timing.abandonTimeout }
        counters.boards = channels.count
        nextDeadline = computedNextDeadline.instant(since: epoch)
    }

    // MARK: Reading the state

    /// A board as published so far (nil: nobody has drawn on it).
    public func board(_ name: String) -> BoardState? { channels.slot(of: name).map { channels[$0].state } }

    public var boardNames: [String] { channels.heldSlots.map { channels[$0].name } }

    /// Boards held now.
    var boardCount: Int { channels.count }
    public var sessionCount: Int { sessions.count }

    /// When the core next needs a `.turnEnded` though nothing arrives.
    /// Kept as a stored value, refreshed at the end of every `handle`: the hub
    /// loop reads it once a wake-up, and a computed property of a struct held
    /// by a class is read on a copy of the whole core (measured: the core's
    /// copy and destroy were 3% of the hub thread).
    public private(set) var nextDeadline: ContinuousClock.Instant

    private var computedNextDeadline: Moment {
        var deadline = min(publisher.nextDeadline, nextHousekeeping)
        if channels.mayForgetEmptyBoards { deadline = min(deadline, nextReclaim) }
        if let due = sessions.livenessDue { deadline = min(deadline, due) }
        if let recoveredUntil { deadline = min(deadline, recoveredUntil) }
        // An ack waiting for the journal is sent by the journal's progress, not by a deadline (one already past spins the loop).
        if !sessions.ackQueue.isEmpty && configuration.timing.ackInterval > .zero && acksWaitOnlyForTheInterval { deadline = min(deadline, nextAck) }
        if let due = journal?.syncDue { deadline = min(deadline, due) }
        if let retry = journal?.nextRetry { deadline = min(deadline, retry) }
        return deadline
    }

    /// The per-board live-touch counts changed since the last call (for metrics labelled by board).
    public mutating func takeLiveTouchChanges() -> [String: Int] {
        counters.liveTouchesChanged.isEmpty ? [:] : counters.takeLiveTouchChanges()
    }

    /// Wall-clock microseconds at `now`.
    public func hubTime(at now: ContinuousClock.Instant) -> Int64 { hubTime(at: Moment(now, since: epoch)) }
    func hubTime(at now: Moment) -> Int64 { wallOrigin + (now.nanoseconds &- origin.nanoseconds) / 1000 }

    // MARK: Events

    /// Handles one event at `now`, appending what to do to `actions`.
    public mutating func handle(_ event: HubEvent, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        handle(event, at: Moment(now, since: epoch), into: &actions)
        nextDeadline = computedNextDeadline.instant(since: epoch)
    }

    /// Routes each event to its rule (the rules live in the extensions by concern:
    /// `+Agents`, `+Subscriptions`, `+Snapshots`, `+Storage`, `+Publishing`, `+Timers`).
    mutating func handle(_ event: HubEvent, at now: Moment, into actions: inout [HubAction]) {
        switch event {
        case .agentMessage(let peer, let request, let bytes): agentMessage(request, bytes: bytes, from: peer, now: now, into: &actions)
        case .undecodable(let authenticated, let error): undecodable(error, from: authenticated, now: now, into: &actions)
        case .peerGone(let id): peerGone(id)
        case .subscribed(let topic, let user): subscribed(topic, by: user, now: now, into: &actions)
        case .unsubscribed(let topic, _): unsubscribed(topic, now: now, into: &actions)
        case .snapshotRequested(let peer, let user, let board, let requestID, let onBehalf, let address):
            snapshotRequested(board, by: peer, user: user, onBehalf: onBehalf, address: address, requestID: requestID, now: now, into: &actions)
        case .boardListRequested(let peer, let user, let prefix, let after, let limit, let requestID, let onBehalf, let address):
            boardListRequested(
                prefix: prefix, after: after, limit: limit, by: peer, user: user, onBehalf: onBehalf, address: address, requestID: requestID,
                now: now, into: &actions)
        case .accessChanged(let list): accessChanged(list, into: &actions)
        case .journalProgress(let written, let synced):
            journal?.progress(written: written, synced: synced)
            sendAcks(now: now, force: false, into: &actions)
        case .journalFailed(let board, let reason): storageFailed(board, reason: reason, now: now, into: &actions)
        case .journalRestored(let board): storageRestored(board, now: now, into: &actions)
        case .boardMoved(let board, let owner): boardMoved(board, to: owner, into: &actions)
        case .boardAdopted(let board): adopt(board, now: now, into: &actions)
        case .boardAbsent(let board): answerWaitingSnapshots(of: board, now: now, into: &actions)
        case .membershipChanged(let map):
            if let name = configuration.storeHubName ?? routing.cluster?.name { routing.cluster = (map, name) }
            routing.forgetOwnersNotAmong(map)
        case .turnEnded(let inputWaiting): turnEnded(inputWaiting: inputWaiting, now: now, into: &actions)
        case .publishNow: publishDirtyBoards(force: true, now: now, into: &actions)
        case .stopping:
            publishDirtyBoards(force: true, now: now, into: &actions)
            syncJournalIfDue(force: true, now: now, into: &actions)
            sendAcks(now: now, force: true, into: &actions)
        }
    }

    /// `handle(_:now:into:)` returning a new array (tests).
    public mutating func handle(_ event: HubEvent, now: ContinuousClock.Instant) -> [HubAction] {
        var actions: [HubAction] = []
        handle(event, now: now, into: &actions)
        return actions
    }
}
