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
    /// Authenticated hubs: the boards each user subscribed to (up to 1,024
    /// per user), so that a reload that takes a board away ends the stream.
    var watchedBoards: [UserNamespace: Set<String>] = [:]
    /// Samples and boards each user holds here, against the per-user quotas.
    var quotas: UserQuotas
    /// Snapshot and board-list requests per requester and second.
    var snapshotAllowance: SnapshotAllowance
    /// The sample and byte allowances of each invited user a gateway acts
    /// for, shared by all its tabs (each tab is a session of its own).
    var invitedUserRates: [String: (samples: TokenBucket, bytes: TokenBucket)] = [:]

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
    public init(
        configuration: HubConfiguration, recovered: [RecoveredBoard] = [], now instant: ContinuousClock.Instant,
        wallClockMicroseconds: Int64, observer: (any HubObserver)? = nil, access: AccessList? = nil
    ) {
        epoch = instant
        let now = Moment(nanoseconds: 0)
        self.configuration = configuration
        self.access = access
        routing = BoardRouting(cluster: configuration.cluster, storeCommits: configuration.storeCommits)
        sessions = SessionTable(strangerRate: configuration.maxMessagesPerSecond)
        quotas = UserQuotas(
            maxSamplesPerUser: configuration.maxSamplesPerUser, maxBoardsPerUser: configuration.maxBoardsCreatedPerUser,
            maxBoardsPerUserPerMinute: configuration.maxBoardsCreatedPerUserPerMinute)
        snapshotAllowance = SnapshotAllowance(perSecond: configuration.maxSnapshotsPerSecond)
        self.observer = observer
        origin = now
        nextDeadline = instant  // computed once the rest is set up (below)
        wallOrigin = wallClockMicroseconds
        publisher = Publisher(
            publishInterval: configuration.publishInterval, heartbeatInterval: configuration.heartbeatInterval,
            subscribeHeartbeatInterval: configuration.subscribeHeartbeatInterval, now: now)
        housekeepingInterval = min(configuration.livenessTimeout / 4, .milliseconds(250))
        nextHousekeeping = now + housekeepingInterval
        nextReclaim = now + configuration.idleEmptyBoardTimeout
        nextAck = now
        if let policy = configuration.durability {
            journal = Durability(policy: policy, retryInterval: configuration.journalRetryInterval, now: now)
        }
        for board in recovered { install(board) }
        if !recoveredUsers.isEmpty { recoveredUntil = now + configuration.abandonTimeout }
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
        if !sessions.ackQueue.isEmpty && configuration.ackInterval > .zero { deadline = min(deadline, nextAck) }
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

    mutating func handle(_ event: HubEvent, at now: Moment, into actions: inout [HubAction]) {
        switch event {
        case .agentMessage(let peer, let request, let bytes):
            counters.messages += 1
            if peer.id.channel == 0 {
                handleConnectionMessage(request, from: peer, now: now, into: &actions)
            } else if case .hello(let hello) = request {
                handleHello(hello, from: peer, now: now, into: &actions)
            } else {
                handle(request, bytes: bytes, from: sessions.acting(peer), now: now, into: &actions)
            }
        case .undecodable(let authenticated, let error):
            counters.messages += 1
            let peer = sessions.acting(authenticated)
            if sessions.isCurrent(peer) || sessions.admitStranger(peer.id, now: now) {
                refuse(peer.id, HubRefusal(error.code, error.reason), into: &actions)
            }
        case .peerGone(let id):
            if let principal = sessions.principal(connectedAs: id) {
                end(principal, why: "its connection closed")
            }
            sessions.connectionClosed(id)
        case .subscribed(let topic, let user):
            if let access {
                // Only whole board topics (any stream), and only boards the user may watch.
                guard let name = PublishStream.parse(topic: topic)?.board, let user, access.role(of: user.rawValue, on: name) != nil
                else {
                    counters.refused(.forbidden)
                    observer?.observe(.subscriptionRefused(user: user))
                    return
                }
                actions.append(.allowSubscription(topic: topic))
                if watchedBoards[user, default: []].count < 1024 { watchedBoards[user, default: []].insert(name) }
            }
            subscriptions[topic, default: 0] += 1
            counters.subscriptions = subscriptions.values.reduce(0, +)
            if !isBoardTopic(topic) {
                // A prefix may cover any board: every board is encoded in v1 again.
                prefixSubscriptions += 1
                for slot in channels.heldSlots where !channels[slot].publishesV1 { updateWireFormats(slot: slot, now: now, into: &actions) }
            }
            // Tell the newcomer where the board stands, so it can spot a gap at
            // once, but at most once per interval per board (a flood of
            // subscriptions must not become a flood of heartbeats to everyone).
            let boardTopic = PublishStream.parse(topic: topic)
            if let name = boardTopic?.board, let slot = channels.slot(of: name) {
                // The streams its batches are encoded for may change (a first subscriber of one).
                updateWireFormats(slot: slot, now: now, into: &actions)
                if publisher.subscriberArrived(at: slot, now: now) {
                    publishPending(slot: slot, now: now, into: &actions)
                    publishHeartbeat(slot: slot, now: now, into: &actions)
                }
            } else if let (name, stream) = boardTopic, stream != .v1, !configuration.storeCommits, wrongHub(for: name) == nil {
                // A board nobody drew on yet: one heartbeat at sequence 0 (the
                // empty board) tells the v2 subscriber that this hub speaks v2.
                var message = Touchsync_V1_PublishMessage()
                message.heartbeat.board = name
                message.heartbeat.hubTime = hubTime(at: now)
                message.heartbeat.digest = BoardState.emptyDigest.rawValue
                if !stream.carriesPredictions { message.heartbeat.digestWithoutPredictions = BoardState.emptyDigest.rawValue }
                actions.append(
                    .publish(
                        Publication(
                            board: name, kind: .heartbeat(sequence: 0, digest: BoardState.emptyDigest), topic: topic,
                            bytes: WireCodec.encode(message))))
            }
        case .unsubscribed(let topic, _):
            if access != nil { actions.append(.dropSubscription(topic: topic)) }
            if let count = subscriptions[topic] { subscriptions[topic] = count > 1 ? count - 1 : nil }
            counters.subscriptions = subscriptions.values.reduce(0, +)
            if !isBoardTopic(topic) { prefixSubscriptions = max(0, prefixSubscriptions - 1) }
            // The last subscriber of a format gone: the board may stop encoding it.
            if subscriptions[topic] == nil, let name = PublishStream.parse(topic: topic)?.board, let slot = channels.slot(of: name) {
                updateWireFormats(slot: slot, now: now, into: &actions)
            }
        case .snapshotRequested(let peer, let user, let board, let requestID, let onBehalf):
            guard let party = party(of: peer, user: user, onBehalf, requestID: requestID, into: &actions),
                admitSnapshot(by: peer, party: party, requestID: requestID, now: now, into: &actions)
            else { return }
            if let wrong = wrongHub(for: board) {
                counters.refused(.wrongHub)
                actions.append(.refuseSnapshot(to: peer, requestID: requestID, wrong))
                return
            }
            guard party.mayWatch(board, access: access) else {
                counters.refused(.forbidden)
                actions.append(
                    .refuseSnapshot(
                        to: peer, requestID: requestID,
                        HubRefusal(.forbidden, "\(party.user ?? "this peer") may not watch board \(board)")))
                return
            }
            snapshot(board, for: peer, requestID: requestID, now: now, into: &actions)
        case .boardListRequested(let peer, let user, let prefix, let after, let limit, let requestID, let onBehalf):
            guard let party = party(of: peer, user: user, onBehalf, requestID: requestID, into: &actions),
                admitSnapshot(by: peer, party: party, requestID: requestID, now: now, into: &actions)
            else { return }
            let (boards, more) = boardList(prefix: prefix, after: after, limit: limit, for: party)
            actions.append(.sendBoardList(to: peer, requestID: requestID, boards: boards, more: more))
        case .accessChanged(let list):
            accessChanged(list, into: &actions)
        case .journalProgress(let written, let synced):
            journal?.progress(written: written, synced: synced)
            sendAcks(now: now, force: false, into: &actions)
        case .journalFailed(let board, let reason):
            if storeWaits.isWaiting(for: board) && channels.slot(of: board) == nil {
                claimFailed(board, reason: reason, into: &actions)
                return
            }
            journalFailed(board: board, reason: reason, now: now, into: &actions)
        case .journalRestored(let board):
            guard journal?.restored(board) == true else { return }
            observer?.observe(.journalRestored(board: board))
            // Its agents waited: everything they sent is in the checkpoint just made durable.
            sessions.requestAcks(onBoard: board)
            sendAcks(now: now, force: true, into: &actions)
        case .boardMoved(let board, let owner):
            boardMoved(board, to: owner, into: &actions)
        case .boardAdopted(let board):
            adopt(board, now: now, into: &actions)
        case .boardAbsent(let board):
            answerWaitingSnapshots(of: board, now: now, into: &actions)
        case .membershipChanged(let map):
            if let name = configuration.storeHubName ?? routing.cluster?.name { routing.cluster = (map, name) }
        case .turnEnded(let inputWaiting):
            if !inputWaiting {
                if behindSince != nil && lastBusyNotice != nil { counters.behindSeconds = 0 }
                behindSince = nil
            } else if behindSince == nil {
                behindSince = now
            }
            publishDirtyBoards(force: false, now: now, into: &actions)
            syncJournalIfDue(force: false, now: now, into: &actions)
            sendAcks(now: now, force: false, into: &actions)
            runTimers(now: now, into: &actions)
        case .publishNow:
            publishDirtyBoards(force: true, now: now, into: &actions)
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
