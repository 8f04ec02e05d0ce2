import TouchSyncAccess
import TouchSyncCore
import TouchSyncWire

/// The hub without I/O: every board, every agent session, the numbering and
/// rate rules, acknowledgements held until the journal is durable, liveness,
/// heartbeats and snapshots, as a state machine. A transport adapter feeds it
/// `HubEvent`s with the time and carries out the `HubAction`s it returns, in
/// order; it never reads a clock, a socket or a file, so every rule can be
/// tested with a manual clock (`Tests/TouchSyncHubCoreTests`).
///
/// Single writer: one thread owns a core (the hub loop's).
public struct HubCore {
    public let configuration: HubConfiguration
    /// Who hears what the core noticed (nil: nobody).
    private let observer: (any HubObserver)?
    /// What the core counts, for its adapter to export.
    public private(set) var counters = HubCounters()

    /// The boards held, by slot (a session keeps its board's slot).
    private var channels = BoardTable()
    private var nextReclaim: ContinuousClock.Instant
    /// When boards publish: dirty boards (see `change`), heartbeats.
    private var publisher: Publisher
    /// Reused by every publish turn: the slots being published.
    private var publishing: [Int] = []
    /// Agent sessions by principal (one per user namespace), their
    /// connections and delegations, liveness and the ack queue.
    private var sessions: SessionTable
    private var subscriptions: [[UInt8]: Int] = [:]
    /// Authenticated hubs: the boards each user subscribed to (up to 1,024
    /// per user), so that a reload that takes a board away ends the stream.
    private var watchedBoards: [UserNamespace: Set<String>] = [:]
    /// Samples and boards each user holds here, against the per-user quotas.
    private var quotas: UserQuotas
    /// Snapshot and board-list requests per requester and second.
    private var snapshotAllowance: SnapshotAllowance

    /// Users with touches down on a recovered board and no session yet: if
    /// they do not resume within the abandon time-out, their touches are
    /// cancelled as a silent agent's would be (no stroke stays stuck).
    private var recoveredUsers: [(slot: Int, user: UserNamespace)] = []
    private var recoveredUntil: ContinuousClock.Instant? = nil

    /// What acknowledgements wait for (nil: nothing is stored, frames are acknowledged once applied).
    private var journal: Durability?
    /// Board store: hellos and snapshot requests waiting for their board's claim or look-up.
    private var storeWaits = StoreWaits()
    /// Who serves which board: the cluster file's map, or the board store's
    /// live hubs; and the boards the store moved away (bounded by the boards this hub held).
    private var routing: BoardRouting
    /// Who may do what where; nil: the transport does not authenticate, and
    /// everyone may do everything (loopback only, by the hub's start policy).
    private var access: AccessList?

    /// Since when every turn has ended with input still waiting (nil: caught up).
    private var behindSince: ContinuousClock.Instant? = nil
    private var lastBusyNotice: ContinuousClock.Instant? = nil

    // Timers.
    private var nextHousekeeping: ContinuousClock.Instant
    private var nextAck: ContinuousClock.Instant
    private let housekeepingInterval: Duration

    /// Wall-clock microseconds at `origin`: batch times are derived from the
    /// monotonic `now`, so the core never reads a clock.
    private let wallOrigin: Int64
    private let origin: ContinuousClock.Instant

    /// - Parameters:
    ///   - recovered: the boards the journal gave back (empty without one).
    ///   - access: the access list of an authenticated transport (peers' principals are authenticated users).
    ///   - now, wallClockMicroseconds: the time the core starts at, on the monotonic clock events will use and on the wall clock.
    public init(
        configuration: HubConfiguration, recovered: [RecoveredBoard] = [], now: ContinuousClock.Instant,
        wallClockMicroseconds: Int64, observer: (any HubObserver)? = nil, access: AccessList? = nil
    ) {
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
    }

    // MARK: Reading the state

    /// A board as published so far (nil: nobody has drawn on it).
    public func board(_ name: String) -> BoardState? { channels.slot(of: name).map { channels[$0].state } }

    public var boardNames: [String] { channels.heldSlots.map { channels[$0].name } }

    /// Boards held now.
    private var boardCount: Int { channels.count }
    public var sessionCount: Int { sessions.count }

    /// When the core next needs a `.turnEnded` though nothing arrives.
    public var nextDeadline: ContinuousClock.Instant {
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
    public func hubTime(at now: ContinuousClock.Instant) -> Int64 { wallOrigin + microseconds(now - origin) }

    // MARK: Events

    /// Handles one event at `now`, appending what to do to `actions`.
    public mutating func handle(_ event: HubEvent, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        switch event {
        case .agentMessage(let peer, let request, let bytes):
            counters.messages += 1
            if case .hello(let hello) = request {
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
                // Only whole board topics, and only boards the user may watch.
                guard topic.last == 0, let name = String(validating: topic.dropLast(), as: UTF8.self), isValidBoardName(name),
                    let user, access.role(of: user.rawValue, on: name) != nil
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
            // Tell the newcomer where the board stands, so it can spot a gap at
            // once, but at most once per interval per board (a flood of
            // subscriptions must not become a flood of heartbeats to everyone).
            if topic.last == 0, let name = String(validating: topic.dropLast(), as: UTF8.self), let slot = channels.slot(of: name) {
                if publisher.subscriberArrived(at: slot, now: now) {
                    publishPending(slot: slot, now: now, into: &actions)
                    actions.append(.publish(heartbeat(slot: slot, now: now)))
                }
            }
        case .unsubscribed(let topic, _):
            if access != nil { actions.append(.dropSubscription(topic: topic)) }
            if let count = subscriptions[topic] { subscriptions[topic] = count > 1 ? count - 1 : nil }
            counters.subscriptions = subscriptions.values.reduce(0, +)
        case .snapshotRequested(let peer, let user, let board, let requestID):
            guard admitSnapshot(by: peer, user: user, requestID: requestID, now: now, into: &actions) else { return }
            if let wrong = wrongHub(for: board) {
                counters.refused(.wrongHub)
                actions.append(.refuseSnapshot(to: peer, requestID: requestID, wrong))
                return
            }
            if let access, user.flatMap({ access.role(of: $0.rawValue, on: board) }) == nil {
                counters.refused(.forbidden)
                actions.append(
                    .refuseSnapshot(
                        to: peer, requestID: requestID,
                        HubRefusal(.forbidden, "\(user?.rawValue ?? "this peer") may not watch board \(board)")))
                return
            }
            snapshot(board, for: peer, requestID: requestID, now: now, into: &actions)
        case .boardListRequested(let peer, let user, let prefix, let after, let limit, let requestID):
            guard admitSnapshot(by: peer, user: user, requestID: requestID, now: now, into: &actions) else { return }
            let (boards, more) = boardList(prefix: prefix, after: after, limit: limit, for: user)
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

    // MARK: Agents

    private mutating func handle(
        _ request: AgentRequest, bytes: Int, from peer: Peer, now: ContinuousClock.Instant, into actions: inout [HubAction]
    ) {
        // One lookup in, one write back: the session changes as a local value.
        guard var session = sessions[peer.principal], session.peer == peer.id else {
            if sessions.admitStranger(peer.id, now: now) {
                let sequence: UInt64
                switch request {
                case .numbered(let number, _), .empty(let number): sequence = number
                case .heartbeat, .hello, .goodbye: sequence = 0
                }
                refuse(peer.id, HubRefusal(.notWelcomed, "say hello first", sequence: sequence), into: &actions)
            }
            return
        }
        if case .goodbye = request {
            end(peer.principal, why: "it said goodbye")
            return
        }
        let appliedBefore = session.numbering.appliedThrough
        let styleBefore = session.style
        defer {
            if journal != nil && (session.numbering.appliedThrough != appliedBefore || session.style != styleBefore) {
                channels[session.boardSlot].progressPending[session.principal] = AgentProgress(
                    principal: session.principal, appliedThrough: session.numbering.appliedThrough, style: session.style,
                    sessionID: session.sessionID)
            }
            sessions[peer.principal] = session
        }
        if session.isSilent { channels[session.boardSlot].silentUsers.remove(session.principal) }
        session.heard(at: now)
        let overMessages = !session.bucket.take(now: now)
        if overMessages || !session.byteBucket.take(bytes, now: now) {
            var sequence: UInt64 = 0
            if case .numbered(let number, _) = request {
                sequence = number
                // Refused, but handled: the agent must not resend it.
                if session.numbering.skip(number) { sessions.requestAck(&session) }
            }
            refuse(
                peer.id,
                overMessages
                    ? HubRefusal(.rateLimited, "more than \(configuration.maxMessagesPerSecond) messages per second", sequence: sequence)
                    : HubRefusal(.byteRateLimited, "more than \(configuration.maxBytesPerSecond) message bytes per second", sequence: sequence),
                into: &actions)
            return
        }
        switch request {
        case .hello, .goodbye:
            preconditionFailure("handled above")
        case .heartbeat:
            sessions.requestAck(&session)
        case .empty(let sequence):
            refuse(peer.id, HubRefusal(.malformed, "an agent message with no body", sequence: sequence), into: &actions)
        case .numbered(0, _):
            // Numbers start at 1: 0 is no number, so this takes none.
            refuse(peer.id, HubRefusal(.malformed, "a numbered message (frame, style, clear, undo, redo, erase) needs sequence 1 or more", sequence: 0), into: &actions)
        case .numbered(let sequence, let body):
            do {
                switch try session.numbering.admit(sequence) {
                case .duplicate:
                    counters.duplicates += 1  // resent after a reconnect: already applied
                    sessions.requestAck(&session)
                case .next:
                    sessions.requestAck(&session)
                    apply(body, sequence: sequence, to: &session, now: now, into: &actions)
                }
            } catch {
                guard case .gap(let expected, let received, let report) = error, report else { return }
                refuse(peer.id, HubRefusal(.outOfOrder, "expected message \(expected), received \(received)", sequence: received), into: &actions)
                sessions.requestAck(&session)
            }
        }
    }

    /// Applies a numbered message that is next in its session's order.
    private mutating func apply(
        _ body: NumberedRequest, sequence: UInt64, to session: inout AgentSession, now: ContinuousClock.Instant,
        into actions: inout [HubAction]
    ) {
        // The role may have shrunk since the hello (an access list reload).
        // (Erasing others' strokes needs admin too: checked with the strokes' owners.)
        let needed: Role = if case .clear(.board) = body { .admin } else { .draw }
        guard session.role >= needed else {
            refuse(
                session.peer,
                HubRefusal(
                    .forbidden, "\(session.principal) may \(session.role == .watch ? "only watch" : "not clear") board \(session.board)",
                    sequence: sequence),
                into: &actions)
            return
        }
        switch body {
        case .frame(let frame):
            let (user, style) = (session.principal, session.style)
            var samples = 0
            for index in frame.changes.indices { samples += frame.changes[index].samples.count }  // no copy of each change
            guard session.sampleBucket.take(samples, now: now) else {
                refuse(
                    session.peer,
                    HubRefusal(.rateLimited, "more than \(configuration.maxSamplesPerSecond) samples per second: frame refused", sequence: sequence),
                    into: &actions)
                return
            }
            // A new stroke needs room in the user's quota over all boards (a stroke under way may finish):
            // accepted strokes everywhere, and the user's strokes in progress here (a user draws on one board at a time).
            if frame.changes.contains(where: { $0.phase == .began }),
                !quotas.mayBeginStroke(user, inProgress: channels[session.boardSlot].state.activeSamples(of: user))
            {
                refuse(
                    session.peer,
                    HubRefusal(
                        .boardFull,
                        "\(user) stores its maximum of \(configuration.maxSamplesPerUser) samples over this hub's boards: clear or erase some to draw more",
                        sequence: sequence),
                    into: &actions)
                return
            }
            do {
                // Only an ended touch moves samples into accepted strokes.
                let ends = frame.changes.contains { $0.phase == .ended }
                try change(session.boardSlot, accepted: ends ? .of(user) : .unchanged) { (channel: inout BoardChannel) throws(TouchInputError) in
                    try channel.reduce(frame, from: user, style: style)
                }
            } catch {
                refuse(session.peer, HubRefusal(error.code, error.description, sequence: sequence), into: &actions)
                return
            }
            counters.frames += 1
            counters.samples += samples
        case .style(let style):
            guard style.width > 0 && style.width <= 1000 * UInt32(Sample.unitsPerPoint) else {
                refuse(session.peer, HubRefusal(.invalidValue, "stroke width must be above 0 and at most 1000 points", sequence: sequence), into: &actions)
                return
            }
            session.style = style
        case .clear(let scope):
            let user = session.principal
            change(session.boardSlot, accepted: scope == .own ? .of(user) : .anyone) { $0.clear(scope, by: user) }
        case .undo:
            let user = session.principal
            change(session.boardSlot, accepted: .of(user)) { $0.undo(by: user) }
        case .redo:
            let user = session.principal
            change(session.boardSlot, accepted: .of(user)) { $0.redo(by: user) }
        case .erase(let ids):
            let (user, anyOwner) = (session.principal, session.role >= .admin)
            do {
                try change(session.boardSlot, accepted: anyOwner ? .anyone : .of(user)) { (channel: inout BoardChannel) throws(TouchInputError) in
                    try channel.erase(ids, by: user, anyOwner: anyOwner)
                }
            } catch {
                refuse(session.peer, HubRefusal(error.code, error.description, sequence: sequence), into: &actions)
            }
        case .invalid(let error):
            refuse(session.peer, HubRefusal(error.code, error.reason, sequence: sequence), into: &actions)
        }
    }

    private mutating func handleHello(
        _ hello: AgentHello, from authenticated: Peer, now: ContinuousClock.Instant, into actions: inout [HubAction]
    ) {
        let acting = sessions.acting(authenticated)
        guard sessions.isCurrent(acting) || sessions.admitStranger(acting.id, now: now) else { return }
        let admitted: Admission.Admitted
        switch Admission.admit(
            hello, from: authenticated, acting: acting, access: access, routing: routing, heldHere: channels.slot(of: hello.board) != nil)
        {
        case .success(let granted): admitted = granted
        case .failure(let refusal):
            refuse(acting.id, refusal, into: &actions)
            return
        }
        let (peer, role, delegation) = (admitted.peer, admitted.role, admitted.delegation)
        if access != nil { sessions.delegate(peer.id, delegation) }
        let slot: Int
        if let existing = channels.slot(of: hello.board) {
            slot = existing
        } else {
            guard boardCount < configuration.maxBoards else {
                refuse(peer.id, HubRefusal(.unknownBoard, "this hub holds its maximum of \(configuration.maxBoards) boards"), into: &actions)
                return
            }
            if let refusal = quotas.createBoard(by: peer.principal, now: now) {
                refuse(peer.id, refusal, into: &actions)
                return
            }
            if configuration.storeCommits {
                // The store may hold the board (or another hub its lease): wait for the claim.
                switch storeWaits.park(StoreWaits.ParkedHello(peer: authenticated, hello: hello, bytes: 0)) {
                case .parked(let askStore):
                    if askStore { actions.append(.claimBoard(hello.board)) }
                case .full:
                    refuse(peer.id, HubRefusal(.storageUnavailable, "board \(hello.board) is still being loaded from the board store: try again"), into: &actions)
                }
                return
            }
            slot = channels.insert(BoardChannel(name: hello.board, limits: configuration.boardLimits), emptySince: now)
            counters.boards = boardCount
            observer?.observe(.boardCreated(board: hello.board))
        }
        let principal = peer.principal
        let resumeAfter = hello.resumeAfter
        switch sessions.resume(
            principal, sessionID: hello.sessionID, board: hello.board, resumeAfter: resumeAfter, on: peer.id, role: role,
            delegation: delegation, now: now)
        {
        case .refused(let refusal):
            refuse(peer.id, refusal, into: &actions)
            return
        case .resumed(let wasSilent):
            // The same session again (a reconnect): it resends everything after what we acknowledged.
            if wasSilent { channels[slot].silentUsers.remove(principal) }
            sessions.expectHeard(by: now + configuration.livenessTimeout)
        case .notKnown:
            // A new session, or one the hub knows only from its journal (after a restart).
            let recorded = channels[slot].recoveredProgress[principal].flatMap { $0.sessionID == hello.sessionID ? $0 : nil }
            let appliedThrough = recorded?.appliedThrough ?? 0
            guard resumeAfter <= appliedThrough else {
                refuse(
                    peer.id,
                    HubRefusal(
                        .cannotResume,
                        recorded == nil
                            ? "this hub does not know this session (it restarted without it, or forgot it): start a new session, numbered from 1"
                            : "resume_after \(resumeAfter) is beyond the \(appliedThrough) message(s) this hub recorded for this session"),
                    into: &actions)
                return
            }
            guard sessions.makeRoom(for: principal, limit: configuration.maxSessions) else {
                refuse(
                    peer.id,
                    HubRefusal(.rateLimited, "this hub holds its maximum of \(configuration.maxSessions) agent sessions: try again later"),
                    into: &actions)
                return
            }
            // The user's previous session ends: its touches are cancelled now.
            if sessions[principal] != nil { end(principal, why: "a new session of the same user started") }
            if channels[slot].recoveredProgress.removeValue(forKey: principal) != nil && recorded == nil {
                change(slot, accepted: .unchanged) { _ = $0.cancelTouches(of: principal) }  // the session before the restart does not come back
            }
            var session = AgentSession(
                principal: principal, peer: peer.id, sessionID: hello.sessionID, board: hello.board, boardSlot: slot,
                appliedThrough: appliedThrough, now: now, messagesPerSecond: configuration.maxMessagesPerSecond,
                samplesPerSecond: configuration.maxSamplesPerSecond, bytesPerSecond: configuration.maxBytesPerSecond)
            if let recorded { session.style = recorded.style }
            session.role = role
            session.delegation = delegation
            sessions.open(session, liveness: configuration.livenessTimeout, now: now)
            counters.agents = sessions.count
            observer?.observe(.agentJoined(user: principal, board: hello.board, client: hello.clientName, resumed: recorded != nil))
        }
        let welcome = AgentWelcome(
            board: hello.board, user: principal, appliedThrough: sessions[principal]!.acknowledged,
            heartbeatIntervalMilliseconds: UInt32(milliseconds(configuration.heartbeatInterval)),
            livenessTimeoutMilliseconds: UInt32(milliseconds(configuration.livenessTimeout)),
            maxLiveTouches: UInt32(configuration.boardLimits.maxLiveTouchesPerUser),
            maxMessageBytes: UInt32(configuration.maxMessageBytes))
        actions.append(.reply(to: peer.id, .welcome(welcome)))
    }

    /// The refusal for a board the cluster gives to another hub, or the
    /// store moved to one (nil: ours).
    private func wrongHub(for board: String) -> HubRefusal? {
        routing.wrongHub(for: board, heldHere: channels.slot(of: board) != nil)
    }

    private mutating func refuse(_ peer: PeerID, _ refusal: HubRefusal, into actions: inout [HubAction]) {
        counters.refused(refusal.code)
        observer?.observe(.refused(refusal))
        actions.append(.reply(to: peer, .error(refusal)))
    }

    private mutating func sendAcks(now: ContinuousClock.Instant, force: Bool, into actions: inout [HubAction]) {
        // An ack promises the frame is as durable as the fsync policy says:
        // every applied diff journaled (no board waiting to publish) and synced.
        if let journal {
            if !journal.failedBoards.isEmpty { warnStorageUnavailable(now: now, into: &actions) }
            guard publisher.dirtyBoards.isEmpty, journal.isDurable else { return }
        }
        guard !sessions.ackQueue.isEmpty, force || now >= nextAck else { return }
        nextAck = now + configuration.ackInterval
        sessions.acknowledge(into: &actions)
    }

    /// A board's journal failed: its agents are not acknowledged until it is
    /// restored (retried every `journalRetryInterval`); they are told why.
    private mutating func journalFailed(board: String, reason: String, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        guard journal != nil else { return }
        switch journal!.failed(board, reason: reason, now: now) {
        case .first:
            counters.journalFailures += 1
            observer?.observe(.journalFailed(board: board, reason: reason, retryInterval: configuration.journalRetryInterval))
        case .again(let logIt):
            if logIt {
                observer?.observe(.journalStillFailing(board: board, reason: reason))
            }
        }
        // Its agents still waiting hear it now.
        sessions.requestAcks(onBoard: board)
        warnStorageUnavailable(now: now, into: &actions)
    }

    /// The agents in the ack queue whose board's journal failed are told so
    /// (at most once a second each) instead of acknowledged, and keep their frames.
    private mutating func warnStorageUnavailable(now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        guard let failed = journal?.failedBoards, !failed.isEmpty else { return }
        for session in sessions.withholdAcks(where: { failed[$0.board] != nil }) {
            if let warned = session.storageWarnedAt, now - warned < .seconds(1) { continue }
            sessions[session.principal]!.storageWarnedAt = now
            let reason = failed[session.board]!.reason
            refuse(
                session.peer,
                HubRefusal(
                    .storageUnavailable,
                    "the hub cannot make board \(session.board)'s frames durable (its journal failed: \(reason); retried every \(configuration.journalRetryInterval)): nothing after message \(session.acknowledged) is acknowledged; keep them",
                    sequence: session.numbering.appliedThrough),
                into: &actions)
        }
    }

    /// Failed boards due a retry: their pending diffs published (journaled
    /// as progress), then a restart from the board as published.
    private mutating func retryFailedJournals(now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        guard journal != nil else { return }
        for board in journal!.retriesDue(now: now) {
            guard let slot = channels.slot(of: board) else { continue }
            publishPending(slot: slot, now: now, into: &actions)
            actions.append(.restartJournal(board: board, state: channels[slot].state, hubTime: hubTime(at: now)))
        }
    }

    // MARK: Timers

    private mutating func runTimers(now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        // Behind, silence proves nothing: the agent's messages may be queued
        // for us. Liveness (and the wait for users after a restart) resumes
        // once the queue is drained.
        if let behindSince {
            if now - behindSince >= configuration.busyAfter,
                lastBusyNotice.map({ now - $0 >= configuration.busyNoticeInterval }) ?? true
            {
                noticeBusy(behindFor: now - behindSince, into: &actions)
                lastBusyNotice = now
            }
        } else {
            checkLiveness(now: now)
            if let until = recoveredUntil, now >= until { cancelUnreturnedUsers() }
        }
        retryFailedJournals(now: now, into: &actions)
        if now >= nextReclaim {
            forgetIdleEmptyBoards(now: now)
            nextReclaim = now + min(configuration.idleEmptyBoardTimeout, .seconds(10))
        }
        if now >= nextHousekeeping {
            forgetOldSessions(now: now)
            sessions.forgetStrangers()
            nextHousekeeping = now + housekeepingInterval
        }
        for slot in publisher.owedHeartbeatsDue(now: now) {
            publishPending(slot: slot, now: now, into: &actions)
            actions.append(.publish(heartbeat(slot: slot, now: now)))
        }
        if publisher.periodicHeartbeatDue(now: now) {
            for slot in channels.heldSlots { actions.append(.publish(heartbeat(slot: slot, now: now))) }
        }
    }

    /// A reloaded access list applies to sessions at once: a user no longer
    /// listed for its board is ended (touches cancelled; its connection
    /// stays, and a new hello is refused); one now only watching keeps its
    /// session, has its touches cancelled, and gets FORBIDDEN for frames.
    private mutating func accessChanged(_ list: AccessList, into actions: inout [HubAction]) {
        access = list
        // Subscribers who lost a board they watch: their streams end (XPUB cannot drop one peer's subscription later).
        let revoked = watchedBoards.filter { user, boards in boards.contains { list.role(of: user.rawValue, on: $0) == nil } }.keys
        if !revoked.isEmpty {
            for user in revoked { watchedBoards[user] = nil }
            observer?.observe(.watchersLostBoards(users: revoked.map(\.rawValue).sorted()))
            actions.append(.disconnectSubscribers(users: revoked.map(\.rawValue).sorted()))
        }
        for session in sessions.sessions.values {
            let principal = session.principal
            let granted: Role?
            if let delegation = session.delegation {
                // Still a gateway for this namespace, and the invitation not revoked or replaced.
                let prefix = list.delegatedPrefix(for: delegation.gateway.rawValue, token: delegation.token)
                granted = prefix?.user == delegation.user && principal.rawValue.hasPrefix(prefix?.prefix ?? "\u{0}")
                    ? list.role(of: delegation.user, through: delegation.gateway.rawValue, on: session.board) : nil
            } else {
                granted = list.role(of: principal.rawValue, on: session.board)
            }
            guard let role = granted else {
                end(principal, why: "the access list no longer grants it this board")
                continue
            }
            sessions[principal]!.role = role
            if role < .draw && session.role >= .draw {
                let cancelled = change(session.boardSlot, accepted: .unchanged) { $0.cancelTouches(of: principal) }
                observer?.observe(.agentOnlyWatches(user: principal, board: session.board, touches: cancelled))
            }
        }
        observer?.observe(.accessApplied(users: list.users.count))
    }

    /// Tells every agent still present that the hub is behind, so acks that
    /// lag are not taken for a lost connection (reconnecting would only add
    /// resends to the queue). The hint grows with the backlog's age.
    private mutating func noticeBusy(behindFor behind: Duration, into actions: inout [HubAction]) {
        let behindMilliseconds = milliseconds(behind)
        counters.behindSeconds = Double(behindMilliseconds) / 1000
        let hint = min(max(behind * 2, .seconds(1)), configuration.abandonTimeout)
        observer?.observe(.behind(milliseconds: behindMilliseconds))
        for session in sessions.sessions.values where !session.isAbandoned {
            counters.refused(.busy)
            let refusal = HubRefusal(
                .busy, "the hub is behind (\(behindMilliseconds) ms): your messages are queued, not lost; keep waiting",
                sequence: session.numbering.appliedThrough, retryAfterMilliseconds: UInt32(milliseconds(hint)))
            actions.append(.reply(to: session.peer, .error(refusal)))
        }
    }

    /// Moves sessions on as their silence grows: silent after the liveness
    /// time-out (touches kept, listed in heartbeats), abandoned after the
    /// abandon time-out (touches cancelled); finds the next such moment.
    private mutating func checkLiveness(now: ContinuousClock.Instant) {
        for transition in sessions.checkLiveness(now: now, liveness: configuration.livenessTimeout, abandon: configuration.abandonTimeout) {
            switch transition {
            case .silent(let principal, let slot):
                channels[slot].silentUsers.insert(principal)
                observer?.observe(.agentSilent(user: principal, board: channels[slot].name))
            case .abandoned(let principal, let slot):
                channels[slot].silentUsers.remove(principal)
                let cancelled = change(slot, accepted: .unchanged) { $0.cancelTouches(of: principal) }
                observer?.observe(.agentAbandoned(user: principal, board: channels[slot].name, touches: cancelled))
            }
        }
    }

    /// Ends a session now (goodbye, connection closed, replaced): its live
    /// touches are cancelled and its numbering forgotten.
    private mutating func end(_ principal: UserNamespace, why: String) {
        guard let session = sessions.remove(principal) else { return }
        channels[session.boardSlot].silentUsers.remove(principal)
        let cancelled = change(session.boardSlot, accepted: .unchanged) { $0.cancelTouches(of: principal) }
        observer?.observe(.agentEnded(user: principal, board: session.board, why: why, touches: cancelled))
        counters.agents = sessions.count
    }

    private mutating func cancelUnreturnedUsers() {
        for (slot, user) in recoveredUsers where sessions[user]?.boardSlot != slot {
            let cancelled = change(slot, accepted: .unchanged) { $0.cancelTouches(of: user) }
            observer?.observe(.agentDidNotReturn(user: user, board: channels[slot].name, touches: cancelled))
        }
        recoveredUsers.removeAll()
        recoveredUntil = nil
    }

    /// Boards a hello created but nobody drew on (nothing published, nothing
    /// journaled), with no agent and no subscriber for the time-out, are
    /// forgotten: their slot is free again (hellos alone filled the table).
    private mutating func forgetIdleEmptyBoards(now: ContinuousClock.Instant) {
        guard channels.mayForgetEmptyBoards else { return }
        let inUse = Set(sessions.sessions.values.map(\.boardSlot))
        let subscribed = subscriptions
        let idle = channels.idleEmptyBoards(now: now, timeout: configuration.idleEmptyBoardTimeout) { slot, topic in
            inUse.contains(slot) || subscribed[topic] != nil
        }
        for slot in idle {
            observer?.observe(.boardForgotten(board: channels[slot].name))
            channels.remove(slot)
            publisher.forget(slot)
        }
        counters.boards = boardCount
    }

    /// Another hub holds `board`'s lease now: its agents are refused with
    /// WRONG_HUB and their sessions ended (what the store did not commit was
    /// never acknowledged: they keep it), and the board is forgotten here.
    private mutating func boardMoved(_ board: String, to owner: String, into actions: inout [HubAction]) {
        guard routing.movedBoards[board] == nil else { return }
        routing.movedBoards[board] = owner
        journal?.forget(board)
        if let refusal = wrongHub(for: board) {  // always: the board is known moved now
            for parked in storeWaits.takeHellos(for: board) { refuse(parked.peer.id, refusal, into: &actions) }
            for parked in storeWaits.takeSnapshots(for: board) {
                actions.append(.refuseSnapshot(to: parked.peer, requestID: parked.requestID, refusal))
            }
        }
        observer?.observe(.boardMoved(board: board, owner: owner))
        guard let refusal = wrongHub(for: board), let slot = channels.slot(of: board) else { return }
        for session in sessions.removeAll(onSlot: slot) { refuse(session.peer, refusal, into: &actions) }
        for (user, count) in channels[slot].state.acceptedSamplesByOwner { quotas.count(-count, of: user) }
        channels.remove(slot)
        publisher.forget(slot)
        recoveredUsers.removeAll { $0.slot == slot }
        counters.agents = sessions.count
        counters.boards = boardCount
    }

    /// The store gave this hub the board: it is served from here on, and the
    /// hellos that waited for it are handled now.
    private mutating func adopt(_ board: RecoveredBoard, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        routing.movedBoards[board.name] = nil
        if channels.slot(of: board.name) == nil {
            install(board, emptySince: board.state.sequence == 0 ? now : nil)
            if !board.state.touches.isEmpty { recoveredUntil = now + configuration.abandonTimeout }
            counters.boards = boardCount
            observer?.observe(.boardAdopted(board: board.name, sequence: board.state.sequence))
        }
        answerWaitingSnapshots(of: board.name, now: now, into: &actions)
        for parked in storeWaits.takeHellos(for: board.name) { handle(.agentMessage(from: parked.peer, .hello(parked.hello), bytes: parked.bytes), now: now, into: &actions) }
    }

    /// Snapshot requests that waited for the board's look-up: the board as
    /// held now, or the empty board when the store has none (and no hello
    /// made it since).
    private mutating func answerWaitingSnapshots(of board: String, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        for parked in storeWaits.takeSnapshots(for: board) { sendSnapshot(of: board, to: parked.peer, requestID: parked.requestID, now: now, into: &actions) }
    }

    /// A board from storage (the journal at start, the store at any time)
    /// in a slot of its own, with its agents' progress, its owners' stored
    /// samples and its users with touches down; returns the slot.
    @discardableResult
    private mutating func install(_ board: RecoveredBoard, emptySince: ContinuousClock.Instant? = nil) -> Int {
        var state = board.state
        state.limits = configuration.boardLimits  // this run's limits, not the defaults the reader used
        var channel = BoardChannel(name: board.name, recovered: state)
        for agent in board.agents { channel.recoveredProgress[agent.principal] = agent }
        let slot = channels.insert(channel, emptySince: emptySince)
        for (user, count) in state.acceptedSamplesByOwner { quotas.count(count, of: user) }
        for (user, touches) in state.touches where !touches.isEmpty { recoveredUsers.append((slot, user)) }
        return slot
    }

    /// A claim that failed (the store unreachable): its hellos are told to try again.
    private mutating func claimFailed(_ board: String, reason: String, into actions: inout [HubAction]) {
        let refusal = HubRefusal(.storageUnavailable, "board \(board) could not be loaded from the board store (\(reason)): try again")
        for parked in storeWaits.takeSnapshots(for: board) {
            actions.append(.refuseSnapshot(to: parked.peer, requestID: parked.requestID, refusal))
        }
        for parked in storeWaits.takeHellos(for: board) { refuse(parked.peer.id, refusal, into: &actions) }
    }

    /// Forgets sessions silent past the retention (their duplicate detection with them).
    private mutating func forgetOldSessions(now: ContinuousClock.Instant) {
        let forgotten = sessions.forgetOld(now: now, retention: configuration.sessionRetention)
        guard !forgotten.isEmpty else { return }
        for session in forgotten { channels[session.boardSlot].silentUsers.remove(session.principal) }
        counters.agents = sessions.count
    }

    // MARK: Publishing

    /// Changes a board, queueing it for publishing when it now has diffs
    /// pending and had none before (so each dirty board is queued once).
    /// Whose accepted samples a change can alter, for the per-user quota.
    enum Accepted {
        /// Nobody's (strokes in progress only: began, moved, cancelled): the hot path counts nothing.
        case unchanged
        /// This user's only (an ended stroke, an undo, a clear of one's own).
        case of(UserNamespace)
        /// Anyone's (a board clear, an admin's erase): every owner on the board is counted again.
        case anyone
    }

    @discardableResult
    private mutating func change<Result, Failure: Error>(
        _ slot: Int, accepted: Accepted, _ body: (inout BoardChannel) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let wasPending = channels[slot].hasPending
        defer { if !wasPending && channels[slot].hasPending { publisher.markDirty(slot) } }
        switch accepted {
        case .unchanged:
            return try body(&channels[slot])
        case .of(let owner):
            let before = channels[slot].state.acceptedSamples(of: owner)
            defer { quotas.count(channels[slot].state.acceptedSamples(of: owner) - before, of: owner) }
            return try body(&channels[slot])
        case .anyone:
            let before = channels[slot].state.acceptedSamplesByOwner  // rare: clears and erases
            defer {
                let after = channels[slot].state.acceptedSamplesByOwner
                for user in Set(before.keys).union(after.keys) { quotas.count((after[user] ?? 0) - (before[user] ?? 0), of: user) }
            }
            return try body(&channels[slot])
        }
    }

    private mutating func publishDirtyBoards(force: Bool, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        guard publisher.takeDue(force: force, now: now, into: &publishing) else { return }
        for slot in publishing { publishPending(slot: slot, now: now, into: &actions) }
    }

    /// Seals a board's pending diffs into its next batch: journaled first, then published.
    private mutating func publishPending(slot: Int, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        let time = hubTime(at: now)
        guard let (sequence, encodedBatch) = channels[slot].sealBatch(hubTime: time) else { return }
        // Journaled before it is published: no subscriber sees a batch the journal may not have.
        if journal != nil {
            let ticket = journal!.append()
            actions.append(
                .appendToJournal(
                    JournalAppend(
                        ticket: ticket, board: channels[slot].name, encodedBatch: encodedBatch, sequence: sequence,
                        hubTime: time, agents: Array(channels[slot].progressPending.values), state: channels[slot].state)))
            channels[slot].progressPending.removeAll(keepingCapacity: true)
        }
        let bytes = WireCodec.field(1, wrapping: encodedBatch)  // PublishMessage.batch
        actions.append(
            .publish(Publication(board: channels[slot].name, kind: .batch(sequence: sequence), topic: channels[slot].topic, bytes: bytes)))
        counters.batches += 1
        counters.publishedBytes += bytes.count
        counters.liveTouches(board: channels[slot].name, count: channels[slot].state.liveTouchCount, labelled: configuration.metricsBoardLabels)
    }

    private mutating func syncJournalIfDue(force: Bool, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        guard journal != nil, let through = journal!.syncIfDue(force: force, now: now) else { return }
        actions.append(.syncJournal(through: through))
    }

    private mutating func heartbeat(slot: Int, now: ContinuousClock.Instant) -> Publication {
        var message = Touchsync_V1_PublishMessage()
        message.heartbeat = channels[slot].heartbeat(hubTime: hubTime(at: now))
        return Publication(
            board: channels[slot].name,
            kind: .heartbeat(sequence: message.heartbeat.sequence, digest: BoardDigest(rawValue: message.heartbeat.digest)),
            topic: channels[slot].topic, bytes: WireCodec.encode(message))
    }

    // MARK: Snapshots

    /// The most boards one list reply holds.
    public static let maxBoardsListed = 1_000

    /// Boards whose names start with `prefix` and sort after `after` (UTF-8
    /// bytes), that `user` may watch on an authenticated hub, in name order.
    private func boardList(prefix: String, after: String, limit: Int, for user: UserNamespace?) -> ([BoardSummary], more: Bool) {
        let limit = limit <= 0 || limit > Self.maxBoardsListed ? Self.maxBoardsListed : limit
        let afterBytes = Array(after.utf8)
        var names: [(name: String, slot: Int)] = []
        for (name, slot) in channels.slotsByName where name.hasPrefix(prefix) && (after.isEmpty || afterBytes.lexicographicallyPrecedes(Array(name.utf8))) {
            if let access, user.flatMap({ access.role(of: $0.rawValue, on: name) }) == nil { continue }
            names.append((name, slot))
        }
        names.sort { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
        let more = names.count > limit
        var agents: [Int: Int] = [:]
        for session in sessions.sessions.values { agents[session.boardSlot, default: 0] += 1 }
        let boards = names.prefix(limit).map { entry in
            let channel = channels[entry.slot]
            return BoardSummary(
                board: entry.name, sequence: channel.state.sequence, acceptedStrokes: channel.state.acceptedStrokes.count,
                activeStrokes: channel.state.touches.values.reduce(0) { $0 + $1.count }, agents: agents[entry.slot] ?? 0,
                lastChangeTime: channel.lastChangeHubTime)
        }
        return (boards, more)
    }

    /// Counts a snapshot or board list request in its requester's allowance
    /// (its user, or its connection); past it, refuses it and returns false.
    private mutating func admitSnapshot(
        by peer: PeerID, user: UserNamespace?, requestID: UInt64, now: ContinuousClock.Instant, into actions: inout [HubAction]
    ) -> Bool {
        guard snapshotAllowance.admit(user.map { Array($0.rawValue.utf8) } ?? peer.bytes, now: now) else {
            counters.refused(.rateLimited)
            actions.append(
                .refuseSnapshot(
                    to: peer, requestID: requestID,
                    HubRefusal(.rateLimited, "more than \(configuration.maxSnapshotsPerSecond) snapshot requests per second")))
            return false
        }
        return true
    }

    private mutating func snapshot(
        _ board: String, for peer: PeerID, requestID: UInt64, now: ContinuousClock.Instant, into actions: inout [HubAction]
    ) {
        guard isValidBoardName(board) else {
            counters.refused(.unknownBoard)
            actions.append(
                .refuseSnapshot(to: peer, requestID: requestID, HubRefusal(.unknownBoard, boardNameRule)))
            return
        }
        if channels.slot(of: board) == nil && configuration.storeCommits {
            // The store may hold the board (its hub died, or nobody claimed it
            // yet): an empty snapshot would be a lie. Look it up; nothing is created.
            switch storeWaits.park(StoreWaits.ParkedSnapshot(peer: peer, requestID: requestID), board: board) {
            case .parked(let askStore):
                if askStore { actions.append(.lookUpBoard(board)) }
            case .full:
                actions.append(
                    .refuseSnapshot(
                        to: peer, requestID: requestID,
                        HubRefusal(.storageUnavailable, "board \(board) is still being looked up in the board store: ask again")))
            }
            return
        }
        sendSnapshot(of: board, to: peer, requestID: requestID, now: now, into: &actions)
    }

    /// The board as published now, or, nobody having drawn on it, the empty
    /// board at sequence 0 (its first batch will be 1; nothing is created for
    /// a mere spectator).
    private mutating func sendSnapshot(
        of board: String, to peer: PeerID, requestID: UInt64, now: ContinuousClock.Instant, into actions: inout [HubAction]
    ) {
        guard let slot = channels.slot(of: board) else {
            let empty = BoardState()
            actions.append(.sendSnapshot(to: peer, requestID: requestID, board: board, state: empty, digest: empty.digest))
            return
        }
        // Publish first: the snapshot must be exactly the state at its sequence.
        publishPending(slot: slot, now: now, into: &actions)
        let digest = channels[slot].digest()
        actions.append(.sendSnapshot(to: peer, requestID: requestID, board: board, state: channels[slot].state, digest: digest))
    }
}

// Duration conversions shared by the core and its adapters.

package func nanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
}

package func microseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
}

package func milliseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1000 + attoseconds / 1_000_000_000_000_000
}
