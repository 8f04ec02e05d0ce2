import CoreMetrics
import Logging
import TouchSyncCore
import TouchSyncJournal
import TouchSyncWire
import ZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What other threads may ask of the hub loop.
enum HubCommand: Sendable {
    /// Publish what is pending, close the sockets and return from `run`.
    case stop
    /// Hand a copy of a board's published state to `reply` (nil: no such board).
    case inspect(board: String, reply: @Sendable (BoardState?) -> Void)
}

/// The hub's single writer: one thread runs `run()`, owns the three sockets,
/// every board and every agent session; nothing else touches them. It sleeps
/// in `zmq_poll` on the sockets and the mailbox until input or a timer is due
/// (the way CZMQ's zloop works), handles up to `maxMessagesPerTurn` messages,
/// then publishes one batch per changed board and acknowledges agents.
final class HubLoop {
    private let configuration: HubConfiguration
    private var logger: Logger
    private var metrics: HubMetrics
    private let mailbox: Mailbox<HubCommand>
    private let ingest: ZMQSocket
    private let publish: ZMQSocket
    private let snapshots: ZMQSocket
    private let snapshotService: SnapshotService
    let endpoints: HubEndpoints

    /// Boards by slot, found by name only on hello and snapshot requests; a
    /// session keeps its board's slot, so a frame reaches its board by array
    /// subscript (mutating a dictionary value in place heap-allocates a
    /// coroutine frame each time). Boards are never removed (`maxBoards`).
    private var channels: [BoardChannel] = []
    private var boardSlots: [String: Int] = [:]
    /// Slots with diffs to publish, each once: added when its channel goes
    /// from nothing pending to pending (see `change`).
    private var dirtyBoards: [Int] = []
    private var sessions: [[UInt8]: AgentSession] = [:]
    private var ackQueue: [[UInt8]] = []
    /// Rate buckets of peers that have not said hello (so garbage floods are bounded too).
    private var strangers: [[UInt8]: TokenBucket] = [:]
    private var subscriptions: [[UInt8]: Int] = [:]

    private let clock = ContinuousClock()
    private var nextHeartbeat: ContinuousClock.Instant
    private var nextSweep: ContinuousClock.Instant
    private var nextPublish: ContinuousClock.Instant
    private let sweepInterval: Duration

    /// Durable boards (nil: memory only). Acks wait until what they cover is journaled.
    private let journal: Journal?
    /// A journal write failed: nothing more can be promised durable, so
    /// nothing more is acknowledged (agents keep their frames and resend).
    private var journalFailed = false
    /// Users with touches down on a recovered board and no session yet: if
    /// they do not say hello within the liveness time-out, their touches are
    /// cancelled as a silent agent's would be (no stroke stays stuck).
    private var recoveredUsers: [(slot: Int, user: UserNamespace)] = []
    private var recoveredAt: ContinuousClock.Instant? = nil
    /// What the journal gave back at start-up.
    private(set) var recovered: [RecoveredBoardSummary] = []

    // Reused for every receive: no allocation per message.
    private let routing = ZMQMessage()
    private let payload = ZMQMessage()

    init(
        configuration: HubConfiguration, logger: Logger, metricsFactory: any MetricsFactory, context: ZMQContext,
        mailbox: Mailbox<HubCommand>
    ) throws {
        self.configuration = configuration
        self.logger = logger
        self.mailbox = mailbox
        metrics = HubMetrics(factory: metricsFactory)
        if let journalConfiguration = configuration.journal {
            let journal = try Journal(configuration: journalConfiguration, logger: logger)
            let clock = ContinuousClock()
            let started = clock.now
            for board in try journal.recover(limits: configuration.boardLimits) {
                var channel = BoardChannel(name: board.name, recovered: board.state)
                for agent in board.agents { channel.recoveredProgress[agent.routingID] = agent }
                boardSlots[board.name] = channels.count
                for user in board.state.touches.keys where !(board.state.touches[user]?.isEmpty ?? true) {
                    recoveredUsers.append((channels.count, user))
                }
                channels.append(channel)
                recovered.append(
                    RecoveredBoardSummary(
                        board: board.name, sequence: board.state.sequence, digest: board.state.digest,
                        samples: board.state.storedSampleCount, damage: board.damage))
                logger.info(
                    "board recovered",
                    metadata: [
                        "board": "\(board.name)", "sequence": "\(board.state.sequence)",
                        "records": "\(board.recordsApplied)", "damage": "\(board.damage.count)",
                        "milliseconds": "\(milliseconds(clock.now - started))",
                    ])
            }
            self.journal = journal
            recoveredAt = clock.now
        } else {
            journal = nil
        }

        ingest = try ZMQSocket(context, type: .router)
        try ingest.setRouterMandatory(true)
        // A reconnecting agent keeps its routing id, and with it its namespace.
        try ingest.setRouterHandover(true)
        try ingest.setMaxMessageSize(configuration.hardMessageLimit)
        try ingest.setReceiveHighWaterMark(configuration.ingestHighWaterMark)
        try ingest.setSendHighWaterMark(configuration.ingestHighWaterMark)
        try ingest.bind(configuration.ingestEndpoint)

        publish = try ZMQSocket(context, type: .xpub)
        try publish.setXPubVerbose(true)
        try publish.setSendHighWaterMark(configuration.publishHighWaterMark)
        if configuration.publishSendBufferBytes > 0 { try publish.setSendBuffer(bytes: configuration.publishSendBufferBytes) }
        try publish.bind(configuration.publishEndpoint)

        snapshots = try ZMQSocket(context, type: .router)
        try snapshots.setRouterMandatory(true)
        try snapshots.setSendHighWaterMark(100_000)
        try snapshots.setMaxMessageSize(64 << 10)
        try snapshots.bind(configuration.snapshotEndpoint)
        snapshotService = SnapshotService(socket: snapshots, logger: logger)

        endpoints = HubEndpoints(
            ingest: try ingest.lastEndpoint, publish: try publish.lastEndpoint, snapshot: try snapshots.lastEndpoint)
        let now = clock.now
        nextHeartbeat = now + configuration.heartbeatInterval
        sweepInterval = min(configuration.livenessTimeout / 4, .milliseconds(250))
        nextSweep = now + sweepInterval
        nextPublish = now
    }

    /// Runs until `.stop` arrives or the context is terminated; closes the sockets.
    func run() {
        defer {
            ingest.close()
            publish.close()
            snapshots.close()
            // Whoever still waits for an answer gets one: the hub is gone.
            for case .inspect(_, let reply) in mailbox.close() { reply(nil) }
        }
        var poller = ZMQPoller()
        do {
            let ingestIndex = try poller.add(ingest)
            let snapshotIndex = try poller.add(snapshots)
            let publishIndex = try poller.add(publish)
            let mailboxIndex = poller.add(fileDescriptor: mailbox.fileDescriptor)
            logger.info(
                "hub listening",
                metadata: [
                    "ingest": "\(endpoints.ingest)", "publish": "\(endpoints.publish)",
                    "snapshot": "\(endpoints.snapshot)",
                ])
            while true {
                try poller.poll(timeoutMilliseconds: pollTimeout())
                if poller.isReadable(mailboxIndex) {
                    for command in mailbox.drain() {
                        switch command {
                        case .stop:
                            publishDirtyBoards(force: true)
                            syncJournal(force: true)
                            sendAcks()
                            journal?.close()
                            logger.info("hub stopped")
                            return
                        case .inspect(let board, let reply):
                            publishDirtyBoards(force: true)
                            reply(boardSlots[board].map { channels[$0].state })
                        }
                    }
                }
                if poller.isReadable(ingestIndex) { try drainIngest() }
                if poller.isReadable(publishIndex) { try drainSubscriptions() }
                if poller.isReadable(snapshotIndex) { try drainSnapshotRequests() }
                publishDirtyBoards(force: false)
                syncJournal(force: false)
                sendAcks()
                runTimers()
            }
        } catch {
            if error.isTerminated {
                logger.info("hub stopped: context terminated")
            } else {
                logger.critical("hub loop failed", metadata: ["error": "\(error)"])
            }
        }
    }

    // MARK: Timers

    private func pollTimeout() -> Int {
        let now = clock.now
        var deadline = min(nextHeartbeat, nextSweep)
        if !dirtyBoards.isEmpty { deadline = min(deadline, nextPublish) }
        if let due = journal?.nextSyncDue { deadline = min(deadline, due) }
        return ZMQPoller.timeout(until: deadline, now: now)
    }

    private func runTimers() {
        let now = clock.now
        if now >= nextSweep {
            sweepSessions(now: now)
            nextSweep = now + sweepInterval
        }
        if now >= nextHeartbeat {
            let time = hubTime()
            for slot in channels.indices { sendHeartbeat(slot: slot, time: time) }
            nextHeartbeat = now + configuration.heartbeatInterval
        }
    }

    /// Cancels the touches of agents silent past the liveness time-out and
    /// forgets sessions silent past the retention.
    private func sweepSessions(now: ContinuousClock.Instant) {
        var forgotten: [[UInt8]] = []
        if let recoveredAt, now - recoveredAt > configuration.livenessTimeout {
            for (slot, user) in recoveredUsers
            where !sessions.values.contains(where: { $0.user == user && $0.boardSlot == slot }) {
                var cancelled = 0
                change(slot) { cancelled = $0.cancelTouches(of: user) }
                logger.info(
                    "agent did not return after the restart: touches cancelled",
                    metadata: ["user": "\(user)", "board": "\(channels[slot].name)", "touches": "\(cancelled)"])
            }
            recoveredUsers.removeAll()
            self.recoveredAt = nil
        }
        for (routingID, session) in sessions {
            let silence = now - session.lastHeard
            if silence > configuration.livenessTimeout && !session.silenced {
                sessions[routingID]!.silenced = true
                var cancelled = 0
                change(session.boardSlot) { cancelled = $0.cancelTouches(of: session.user) }
                if cancelled > 0 {
                    logger.info(
                        "agent silent: touches cancelled",
                        metadata: ["user": "\(session.user)", "board": "\(session.board)", "touches": "\(cancelled)"])
                }
            }
            if silence > configuration.sessionRetention { forgotten.append(routingID) }
        }
        for routingID in forgotten { sessions[routingID] = nil }
        strangers.removeAll(keepingCapacity: true)
        metrics.agents.record(sessions.count)
    }

    // MARK: Ingest

    private func drainIngest() throws(ZMQError) {
        for _ in 0..<configuration.maxMessagesPerTurn {
            guard try ingest.receive(into: routing, dontWait: true) else { return }
            guard routing.hasMore, try ingest.receive(into: payload, dontWait: true) else {
                continue  // a ROUTER always prefixes the routing id; a lone frame is not from a DEALER
            }
            var extraParts = false
            while payload.hasMore {
                extraParts = true
                guard try ingest.receive(into: payload, dontWait: true) else { break }
            }
            let routingID = routing.bytes
            metrics.messages.increment()
            if extraParts {
                refuse(routingID, WireError.malformed("an agent message is one frame, not several"), sequence: 0)
                continue
            }
            handleAgentMessage(from: routingID)
        }
    }

    private func handleAgentMessage(from routingID: [UInt8]) {
        let now = clock.now
        if payload.count > configuration.maxMessageBytes {
            refuse(
                routingID,
                WireError(.messageTooLarge, "\(payload.count) bytes, the limit is \(configuration.maxMessageBytes)"),
                sequence: 0)
            return
        }
        let decoded = payload.withUnsafeBytes { bytes in
            Result { () throws(WireError) in try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: bytes) }
        }
        let message: Touchsync_V1_AgentMessage
        switch decoded {
        case .success(let value): message = value
        case .failure(let error):
            if admitStranger(routingID, now: now) { refuse(routingID, error, sequence: 0) }
            return
        }

        if case .hello(let hello) = message.body {
            handleHello(hello, from: routingID, now: now)
            return
        }
        // One lookup in, one write back: the session changes as a local value.
        guard var session = sessions[routingID] else {
            if admitStranger(routingID, now: now) {
                refuse(routingID, WireError(.notWelcomed, "say hello first"), sequence: message.sequence)
            }
            return
        }
        let appliedBefore = session.lastApplied
        let styleBefore = session.style
        defer {
            if journal != nil && (session.lastApplied != appliedBefore || session.style != styleBefore) {
                channels[session.boardSlot].progressPending[routingID] = AgentProgress(
                    routingID: routingID, appliedThrough: session.lastApplied, style: session.style)
            }
            sessions[routingID] = session
        }
        session.lastHeard = now
        session.silenced = false
        guard session.bucket.take(now: now) else {
            refuseNumbered(
                &session, message.sequence,
                WireError(.rateLimited, "more than \(configuration.maxMessagesPerSecond) messages per second"))
            return
        }

        switch message.body {
        case .heartbeat:
            requestAck(&session)
        case .frame, .style, .clear:
            let sequence = message.sequence
            if sequence <= session.lastApplied {
                metrics.duplicates.increment()  // resent after a reconnect: already applied
                requestAck(&session)
                return
            }
            guard sequence == session.lastApplied + 1 else {
                if !session.gapReported {
                    session.gapReported = true
                    refuse(
                        routingID,
                        WireError(.outOfOrder, "expected message \(session.lastApplied + 1), received \(sequence)"),
                        sequence: sequence)
                    requestAck(&session)
                }
                return
            }
            session.lastApplied = sequence
            session.gapReported = false
            requestAck(&session)
            apply(message, to: &session)
        case .hello, nil:
            refuse(routingID, WireError.malformed("an agent message with no body"), sequence: message.sequence)
        }
    }

    /// Applies a numbered message that is next in its session's order.
    private func apply(_ message: Touchsync_V1_AgentMessage, to session: inout AgentSession) {
        let routingID = session.routingID
        switch message.body {
        case .frame(let proto):
            let frame: TouchFrame
            do {
                frame = try TouchFrame(proto, sequence: message.sequence)
            } catch {
                refuse(routingID, error, sequence: message.sequence)
                return
            }
            let (user, style) = (session.user, session.style)
            do {
                try change(session.boardSlot) { (channel: inout BoardChannel) throws(TouchInputError) in
                    try channel.reduce(frame, from: user, style: style)
                }
            } catch {
                metrics.error(error.code)
                reply(routingID, error: Touchsync_V1_Error(error, sequence: message.sequence))
                return
            }
            var samples = 0
            for index in frame.changes.indices { samples += frame.changes[index].samples.count }  // no copy of each change
            metrics.frames.increment()
            metrics.samples.increment(by: Int64(samples))
        case .style(let style):
            let width = style.style.width
            guard width > 0 && width <= 1000 * UInt32(Sample.unitsPerPoint) else {
                refuse(routingID, WireError(.invalidValue, "stroke width must be above 0 and at most 1000 points"), sequence: message.sequence)
                return
            }
            session.style = StrokeStyle(style.style)
        case .clear(let clear):
            let user = session.user
            change(session.boardSlot) { $0.clear(clear.scope == .board ? .board : .own, by: user) }
        default:
            break
        }
    }

    private func handleHello(_ hello: Touchsync_V1_Hello, from routingID: [UInt8], now: ContinuousClock.Instant) {
        guard admitStranger(routingID, now: now) || sessions[routingID] != nil else { return }
        guard hello.protocolVersion == touchSyncProtocolVersion else {
            refuse(
                routingID,
                WireError(.unsupportedVersion, "this hub speaks protocol \(touchSyncProtocolVersion), not \(hello.protocolVersion)"),
                sequence: 0)
            return
        }
        guard isValidBoardName(hello.board) else {
            refuse(routingID, WireError(.unknownBoard, "a board name is 1 to 128 bytes of UTF-8 without NUL"), sequence: 0)
            return
        }
        let slot: Int
        if let existing = boardSlots[hello.board] {
            slot = existing
        } else {
            guard channels.count < configuration.maxBoards else {
                refuse(routingID, WireError(.unknownBoard, "this hub holds its maximum of \(configuration.maxBoards) boards"), sequence: 0)
                return
            }
            slot = channels.count
            channels.append(BoardChannel(name: hello.board, limits: configuration.boardLimits))
            boardSlots[hello.board] = slot
            metrics.boards.record(channels.count)
            logger.info("board created", metadata: ["board": "\(hello.board)"])
        }
        if let existing = sessions[routingID], existing.board == hello.board {
            // The same agent again (a reconnect): it resends everything after what we applied.
            sessions[routingID]!.lastHeard = now
            sessions[routingID]!.silenced = false
        } else {
            if let previous = sessions[routingID] {
                change(previous.boardSlot) { _ = $0.cancelTouches(of: previous.user) }
            }
            var session = AgentSession(
                routingID: routingID, user: AgentSession.namespace(of: routingID), board: hello.board, boardSlot: slot,
                lastApplied: hello.resumeAfter, lastHeard: now,
                bucket: TokenBucket(rate: configuration.maxMessagesPerSecond, now: now))
            // After a restart the journal knows how far this agent got: frames
            // it resends that the board already has are not applied twice.
            if let progress = channels[slot].recoveredProgress.removeValue(forKey: routingID) {
                session.lastApplied = max(session.lastApplied, progress.appliedThrough)
                session.style = progress.style
            }
            sessions[routingID] = session
            metrics.agents.record(sessions.count)
            logger.debug(
                "agent joined",
                metadata: ["user": "\(AgentSession.namespace(of: routingID))", "board": "\(hello.board)", "client": "\(hello.clientName)"])
        }
        let session = sessions[routingID]!
        var welcome = Touchsync_V1_Welcome()
        welcome.protocolVersion = touchSyncProtocolVersion
        welcome.board = session.board
        welcome.user = session.user.rawValue
        welcome.appliedThrough = session.lastApplied
        welcome.heartbeatIntervalMs = UInt32(milliseconds(configuration.heartbeatInterval))
        welcome.livenessTimeoutMs = UInt32(milliseconds(configuration.livenessTimeout))
        welcome.maxLiveTouches = UInt32(configuration.boardLimits.maxLiveTouchesPerUser)
        welcome.maxMessageBytes = UInt32(configuration.maxMessageBytes)
        var reply = Touchsync_V1_HubReply()
        reply.welcome = welcome
        send(reply, to: routingID)
    }

    /// Peers without a session are rate limited too, so garbage cannot flood the hub.
    private func admitStranger(_ routingID: [UInt8], now: ContinuousClock.Instant) -> Bool {
        if sessions[routingID] != nil { return true }
        if strangers[routingID] == nil {
            strangers[routingID] = TokenBucket(rate: configuration.maxMessagesPerSecond, now: now)
        }
        return strangers[routingID]!.take(now: now)
    }

    private func refuseNumbered(_ session: inout AgentSession, _ sequence: UInt64, _ error: WireError) {
        // A numbered message refused still counts as handled: the agent must not resend it.
        if sequence == session.lastApplied + 1 {
            session.lastApplied = sequence
            requestAck(&session)
        }
        refuse(session.routingID, error, sequence: sequence)
    }

    private func refuse(_ routingID: [UInt8], _ error: WireError, sequence: UInt64) {
        metrics.error(error.code)
        logger.debug("refused", metadata: ["error": "\(error)", "sequence": "\(sequence)"])
        reply(routingID, error: Touchsync_V1_Error(error, sequence: sequence))
    }

    private func reply(_ routingID: [UInt8], error: Touchsync_V1_Error) {
        var reply = Touchsync_V1_HubReply()
        reply.error = error
        send(reply, to: routingID)
    }

    private func requestAck(_ session: inout AgentSession) {
        if !session.ackPending {
            session.ackPending = true
            ackQueue.append(session.routingID)
        }
    }

    private func sendAcks() {
        // An ack promises the frame is as durable as the fsync policy says:
        // every applied diff journaled (no board waiting to publish) and synced.
        if journal != nil {
            guard dirtyBoards.isEmpty, journal?.hasUnsyncedWrites == false, !journalFailed else { return }
        }
        for routingID in ackQueue {
            guard let session = sessions[routingID], session.ackPending else { continue }
            sessions[routingID]!.ackPending = false
            var ack = Touchsync_V1_Ack()
            ack.through = session.lastApplied
            var reply = Touchsync_V1_HubReply()
            reply.ack = ack
            send(reply, to: routingID)
        }
        ackQueue.removeAll(keepingCapacity: true)
    }

    private func send(_ reply: Touchsync_V1_HubReply, to routingID: [UInt8]) {
        do {
            try ingest.send(multipart: [routingID, WireCodec.encode(reply)], dontWait: true)
        } catch {
            // EHOSTUNREACH: the agent left; it will hear the news when it reconnects.
            logger.debug("reply not delivered", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Publishing

    /// Changes a board, queueing it for publishing when it now has diffs
    /// pending and had none before (so each dirty board is queued once).
    private func change<Failure: Error>(_ slot: Int, _ body: (inout BoardChannel) throws(Failure) -> Void) throws(Failure) {
        let wasPending = channels[slot].hasPending
        defer { if !wasPending && channels[slot].hasPending { dirtyBoards.append(slot) } }
        try body(&channels[slot])
    }

    private func publishDirtyBoards(force: Bool) {
        guard !dirtyBoards.isEmpty else { return }
        let now = clock.now
        guard force || now >= nextPublish else { return }
        let time = hubTime()
        for slot in dirtyBoards { publishPending(slot: slot, time: time) }
        dirtyBoards.removeAll(keepingCapacity: true)
        nextPublish = now + configuration.publishInterval
    }

    private func publishPending(slot: Int, time: Int64) {
        guard let batch = channels[slot].sealBatch(hubTime: time) else { return }
        let encodedBatch = WireCodec.encode(batch)
        // Journaled before it is published: no subscriber sees a batch the journal may not have.
        if let journal, !journalFailed {
            let progress = Array(channels[slot].progressPending.values)
            channels[slot].progressPending.removeAll(keepingCapacity: true)
            let (name, state) = (channels[slot].name, channels[slot].state)
            withJournal(journal, doing: "write") { () throws(JournalError) in
                try journal.append(
                    board: name, encodedBatch: encodedBatch, sequence: batch.sequence, hubTime: time, agents: progress,
                    state: state)
            }
        }
        let bytes = WireCodec.field(1, wrapping: encodedBatch)  // PublishMessage.batch
        do {
            try publish.send(multipart: [channels[slot].topic, bytes], dontWait: true)
        } catch {
            logger.warning("publish failed", metadata: ["board": "\(channels[slot].name)", "error": "\(error)"])
        }
        metrics.batches.increment()
        metrics.publishedBytes.increment(by: Int64(bytes.count))
        metrics.liveTouches(board: channels[slot].name, count: channels[slot].state.liveTouchCount)
    }

    /// Syncs the journal when its policy says so (`force`: now, if anything is unsynced).
    private func syncJournal(force: Bool) {
        guard let journal, !journalFailed else { return }
        withJournal(journal, doing: "sync") { () throws(JournalError) in
            if force { try journal.sync() } else { _ = try journal.syncIfDue(now: clock.now) }
        }
    }

    /// Runs a journal operation, counting the bytes and syncs it did; a
    /// failure stops acknowledgements for good (nothing more can be promised durable).
    private func withJournal(_ journal: Journal, doing what: String, _ body: () throws(JournalError) -> Void) {
        let (bytesBefore, syncsBefore, started) = (journal.bytesWritten, journal.syncs, clock.now)
        do {
            try body()
        } catch {
            metrics.journalFailures.increment()
            journalFailed = true
            logger.critical(
                "journal \(what) failed: no further frame will be acknowledged until the hub restarts",
                metadata: ["error": "\(error)"])
            return
        }
        if journal.bytesWritten > bytesBefore { metrics.journalBytes.increment(by: Int64(journal.bytesWritten - bytesBefore)) }
        if journal.syncs > syncsBefore {
            metrics.journalSyncs.increment()
            metrics.journalSyncDuration.recordNanoseconds(nanoseconds(clock.now - started))
        }
    }

    private func sendHeartbeat(slot: Int, time: Int64) {
        var message = Touchsync_V1_PublishMessage()
        message.heartbeat = channels[slot].heartbeat(hubTime: time)
        do {
            try publish.send(multipart: [channels[slot].topic, WireCodec.encode(message)], dontWait: true)
        } catch {
            logger.warning("heartbeat failed", metadata: ["board": "\(channels[slot].name)", "error": "\(error)"])
        }
    }

    /// XPUB hands up subscribe (1) and unsubscribe (0) messages.
    private func drainSubscriptions() throws(ZMQError) {
        for _ in 0..<configuration.maxMessagesPerTurn {
            guard try publish.receive(into: payload, dontWait: true) else { return }
            let event = payload.bytes
            guard let kind = event.first else { continue }
            let topic = Array(event.dropFirst())
            if kind == 1 {
                subscriptions[topic, default: 0] += 1
                // Tell the newcomer where the board stands, so it can spot a gap at once.
                if topic.last == 0, let name = String(validating: topic.dropLast(), as: UTF8.self),
                    let slot = boardSlots[name]
                {
                    publishPending(slot: slot, time: hubTime())
                    sendHeartbeat(slot: slot, time: hubTime())
                }
            } else if let count = subscriptions[topic] {
                subscriptions[topic] = count > 1 ? count - 1 : nil
            }
            metrics.subscriptions.record(subscriptions.values.reduce(0, +))
        }
    }

    // MARK: Snapshots

    private func drainSnapshotRequests() throws(ZMQError) {
        try snapshotService.drain(limit: configuration.maxMessagesPerTurn) { request in
            if let slot = boardSlots[request.board] {
                // Publish first: the snapshot must be exactly the state at its sequence.
                publishPending(slot: slot, time: hubTime())
                return channels[slot].snapshotChunks(samplesPerChunk: configuration.snapshotSamplesPerChunk)
            }
            // Nobody has drawn here yet: the board is empty at sequence 0, and its
            // first batch will be 1. Nothing is created for a mere spectator.
            return SnapshotCodec.chunks(of: BoardState().snapshot(), board: request.board, digest: BoardState().digest)
        } refused: { code in
            metrics.error(code)
        }
    }
}

/// Microseconds since the Unix epoch.
func hubTime() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
}

func microseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
}

func nanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
}

func milliseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1000 + attoseconds / 1_000_000_000_000_000
}
