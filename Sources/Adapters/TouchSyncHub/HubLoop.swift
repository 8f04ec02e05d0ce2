import TouchSyncAccess
import CoreMetrics
import Logging
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncStore
import TouchSyncWire
import ZeroMQ


/// What other threads may ask of the hub loop (every case is answered).
enum HubLoopCommand: Sendable {
    /// Publish what is pending, close the sockets and return from `run`.
    case stop
    /// Hand a copy of a board's published state to `reply` (nil: no such board).
    case inspect(board: String, reply: @Sendable (BoardState?) -> Void)
    /// The access list was reloaded (authenticated hubs).
    case accessChanged(AccessList)
    /// The board store's writer committed, failed or lost boards.
    case store([BoardStoreReport])
    /// The journal thread's reports of one round, in order.
    case journal([HubEvent])
}

/// The hub's ZeroMQ adapter and single writer: one thread runs `run()`, owns
/// the three sockets and the `HubCore`; nothing else touches them. It
/// receives and decodes, hands each message to the core as an event and
/// carries out the actions the core returns; every rule lives in the core.
/// The journal runs on a thread of its own (`JournalThread`): the loop hands
/// it appends and never waits on the disk; batches are published once the
/// journal reports them written (synced, under `--fsync batch`).
final class HubLoop {
    private let configuration: HubConfiguration
    private let logger: Logger
    private var core: HubCore
    private var metrics: HubMetricsExporter
    private let journal: JournalThread?
    /// With a board store, batches are published only once committed.
    private let store: BoardStoreWriter?
    /// Publications waiting for the journal or the store to have their batches.
    private var held = HeldPublications()
    private let mailbox: Mailbox<HubLoopCommand>
    private let ingest: ZMQSocket
    private let publish: ZMQSocket
    private let subscriberConnections: ZMQAcceptedConnections?
    private let snapshotService: SnapshotService
    let endpoints: HubEndpoints

    /// Peers by routing id: the principal is derived once per connection, not per message.
    private var peers: [[UInt8]: Peer] = [:]
    /// Reused for every turn and receive: no allocation per message.
    private var actions: [HubAction] = []
    private let routing = ZMQMessage()
    private let payload = ZMQMessage()
    /// A multiplexed connection's agent messages (`payload` holds their channel parts).
    private let channelMessage = ZMQMessage()
    private let clock = ContinuousClock()
    /// CURVE + ZAP: principals are authenticated users.
    private let authenticated: Bool
    /// The last ingest drain stopped at the per-turn limit with messages left.
    private var ingestWaiting = false

    init(
        configuration: HubConfiguration, sockets: HubSockets, startup: HubStartup, store: BoardStoreWriter?,
        logger: Logger, metricsFactory: any MetricsFactory, mailbox: Mailbox<HubLoopCommand>
    ) {
        self.configuration = configuration
        core = startup.core
        journal = startup.journal
        self.store = store
        self.logger = logger
        metrics = HubMetricsExporter(factory: metricsFactory)
        self.mailbox = mailbox
        ingest = sockets.ingest
        publish = sockets.publish
        subscriberConnections = sockets.subscriberConnections
        snapshotService = SnapshotService(socket: sockets.snapshots, logger: logger)
        endpoints = sockets.endpoints
        authenticated = configuration.security != nil
    }

    /// Runs until `.stop` arrives or the context is terminated; closes the sockets.
    func run() {
        defer {
            ingest.close()
            subscriberConnections?.close()
            publish.close()
            snapshotService.socket.close()
            _ = journal?.stop()  // when the loop failed: the journal still closes
            // Whoever still waits for an answer gets one: the hub is gone.
            for case .inspect(_, let reply) in mailbox.close() { reply(nil) }
        }
        logger.info(
            "hub listening",
            metadata: ["ingest": "\(endpoints.ingest)", "publish": "\(endpoints.publish)", "snapshot": "\(endpoints.snapshot)"])
        do {
            var loop = try PollLoop(mailbox: mailbox, sockets: [ingest, publish, snapshotService.socket])
            try loop.run(
                deadline: { core.nextDeadline },
                commands: { commands in
                    for command in commands {
                        switch command {
                        case .stop:
                            handle(.stopping)
                            if let journal {
                                // The last sync's acknowledgements go out before the sockets close.
                                let last = journal.stop()
                                for command in mailbox.drain() {
                                    switch command {
                                    case .journal(let events): journalReported(events)
                                    case .inspect(let board, let reply): reply(core.board(board))
                                    case .stop, .accessChanged, .store: break
                                    }
                                }
                                journalReported(last)
                            }
                            metrics.export(core.counters, liveTouchChanges: core.takeLiveTouchChanges())
                            logger.info("hub stopped")
                            return .stop
                        case .inspect(let board, let reply):
                            handle(.publishNow)
                            reply(core.board(board))
                        case .accessChanged(let list):
                            handle(.accessChanged(list))
                        case .store(let reports):
                            storeReported(reports)
                        case .journal(let events):
                            journalReported(events)
                        }
                    }
                    return .proceed
                },
                readable: { index in
                    switch index {
                    case 0: try drainIngest()
                    case 1: try drainSubscriptions()
                    default: try drainSnapshotRequests()
                    }
                },
                turnEnded: {
                    subscriberConnections?.update()
                    snapshotReaders.sweepIfDue(now: clock.now)
                    handle(.turnEnded(inputWaiting: ingestWaiting))
                    ingestWaiting = false
                    metrics.export(core.counters, liveTouchChanges: core.takeLiveTouchChanges())
                })
        } catch let error as ZMQError where error.isTerminated {
            logger.info("hub stopped: context terminated")
        } catch {
            logger.critical("hub loop failed", metadata: ["error": "\(error)"])
        }
    }

    /// Hands `event` to the core and carries out what it returns. Storage
    /// answers later, through the mailbox (the journal thread's rounds, the
    /// store's commits), never from inside `perform`.
    private func handle(_ event: HubEvent) {
        actions.removeAll(keepingCapacity: true)
        core.handle(event, now: clock.now, into: &actions)
        if !actions.isEmpty { perform(actions) }
    }

    /// Carries out `actions` in order.
    private func perform(_ actions: [HubAction]) {
        defer { flushChannelReplies() }
        for action in actions {
            if case .reply(let peer, let reply) = action, peer.channel != nil {
                // Replies to one multiplexed connection's channels travel together.
                if let pending = channelReplies.first, pending != peer.bytes { flushChannelReplies() }
                if channelReplies.isEmpty { channelReplies.append(peer.bytes) }
                channelReplies.append(ChannelPart.encode(peer.channel!))
                channelReplies.append(reply.encoded)
                continue
            }
            flushChannelReplies()
            switch action {
            case .reply(let peer, let reply):
                send(reply, to: peer)
            case .publish(let publication):
                if held.waiting {
                    held.hold(.publication(publication))
                } else if held.broken.isEmpty || !held.broken.contains(publication.board) {  // no hash per batch while all is well
                    send(publication)
                }
            case .appendToJournal(let append):
                if let store {
                    store.append(
                        ticket: append.ticket, board: append.board, encodedBatch: append.encodedBatch, sequence: append.sequence,
                        hubTime: append.hubTime, agents: append.agents, state: append.state)
                } else if let journal {
                    journal.post(.append(append))
                }
                held.appended(append.ticket)
            case .syncJournal(let through):
                journal?.post(.sync(through: through))
            case .claimBoard(let board):
                store?.claim(board)  // reported as adopted, moved or failed
            case .lookUpBoard(let board):
                store?.lookUp(board)  // reported as adopted, moved, absent or failed
            case .restartJournal(let board, let state, let hubTime):
                // Reported when done: restored, or failed.
                if let store {
                    store.restart(board: board, state: state, hubTime: hubTime)
                } else {
                    journal?.post(.restart(board: board, state: state, hubTime: hubTime))
                }
            case .sendSnapshot(let peer, let requestID, let board, let state, let digest):
                // The board at a sequence: after storage has it, like the batches.
                if held.waiting {
                    held.hold(.snapshot(to: peer, requestID: requestID, board: board, state: state, digest: digest))
                } else {
                    sendSnapshot(to: peer, requestID: requestID, board: board, state: state, digest: digest)
                }
            case .sendBoardList(let peer, let requestID, let boards, let more):
                snapshotService.sendBoardList(to: peer.bytes, requestID: requestID, boards: boards, more: more)
            case .refuseSnapshot(let peer, let requestID, let refusal):
                snapshotService.sendError(to: peer.bytes, requestID: requestID, code: refusal.code, refusal.message, owner: refusal.owner?.proto)
            case .allowSubscription(let topic):
                // XPUB_MANUAL: applies to the pipe the subscription just came from.
                do { try publish.subscribe(topic) } catch { logger.warning("subscribe failed", metadata: ["error": "\(error)"]) }
            case .dropSubscription(let topic):
                try? publish.unsubscribe(topic)
            case .disconnectSubscribers(let users):
                guard let subscriberConnections else { continue }
                // tcp://HOST:PORT: its port; ipc://PATH: local sockets.
                let port = endpoints.publish.hasPrefix("tcp://") ? endpoints.publish.split(separator: ":").last.flatMap { UInt16($0) } : nil
                let ended = subscriberConnections.shutDownAll(localPort: port)
                logger.notice(
                    "subscriber connections ended: they connect again through the handshake (the others resync)",
                    metadata: ["connections": "\(ended)", "for": "\(users)"])
            }
        }
    }

    /// The journal thread's reports of one round, in order: failures and
    /// restarts, then its progress, which lets out the publications waiting
    /// for it (written; synced under `--fsync batch`) before the core acknowledges.
    private func journalReported(_ events: [HubEvent]) {
        for event in events {
            if case .journalProgress(let written, let synced) = event {
                send(held.release(through: configuration.journal?.fsync == .everyBatch ? synced : written))
            }
            handle(event)
        }
    }

    private func send(_ released: [HeldOutput]) {
        for output in released {
            switch output {
            case .publication(let publication):
                send(publication)
            case .snapshot(let peer, let requestID, let board, let state, let digest):
                sendSnapshot(to: peer, requestID: requestID, board: board, state: state, digest: digest)
            }
        }
    }

    private func sendSnapshot(to peer: PeerID, requestID: UInt64, board: String, state: BoardState, digest: BoardDigest) {
        guard held.broken.isEmpty || !held.broken.contains(board) else {
            // Reads fenced: the board's storage or lease is failing, so its state here may not be the store's.
            packedSnapshotRequests.remove(SnapshotRequestKey(peer: peer, requestID: requestID))
            snapshotService.sendError(
                to: peer.bytes, requestID: requestID, code: .storageUnavailable,
                "board \(board) cannot be served here now: this hub cannot reach the board store (or renew its lease); ask again, or another hub", owner: nil)
            return
        }
        let packed = packedSnapshotRequests.remove(SnapshotRequestKey(peer: peer, requestID: requestID)) != nil
        let (delivered, bytes) = snapshotService.send(
            state.snapshot(), digest: digest, requestID: requestID, to: peer.bytes, board: board,
            samplesPerChunk: configuration.snapshotSamplesPerChunk, packedSamples: packed)
        snapshotReaders.sent(to: peer, bytes: bytes, now: clock.now)
        if !delivered {
            if notReading.count >= 4096 { notReading = notReading.filter { clock.now - $0.value < Self.notReadingPenalty } }
            notReading[peer] = clock.now
        }
    }

    private func send(_ publication: Publication) {
        do {
            try publish.send(multipart: [publication.topic, publication.bytes], dontWait: true)
        } catch {
            logger.warning("publish failed", metadata: ["board": "\(publication.board)", "error": "\(error)"])
        }
    }

    /// The store's reports, in order: failures and moves before the commit
    /// that acknowledges; then what the commit lets out is published (a
    /// batch of a board whose commit failed never is: its subscribers resync).
    private func storeReported(_ reports: [BoardStoreReport]) {
        for report in reports {
            switch report {
            case .failed(let board, let reason):
                held.broken.insert(board)
                handle(.journalFailed(board: board, reason: reason))
            case .moved(let board, let owner):
                held.broken.insert(board)
                handle(.boardMoved(board: board, owner: owner))
            case .restored(let board):
                held.broken.remove(board)
                handle(.journalRestored(board: board))
            case .committed(let ticket):
                send(held.release(through: ticket))
                handle(.journalProgress(writtenThrough: ticket, syncedThrough: ticket))
            case .adopted(let board):
                held.broken.remove(board.name)
                handle(.boardAdopted(board))
            case .membership(let hubs):
                handle(.membershipChanged(hubs))
            case .absent(let board):
                handle(.boardAbsent(board: board))
            }
        }
    }

    /// Replies gathered for one multiplexed connection: its routing id, then channel and reply parts.
    private var channelReplies: [[UInt8]] = []

    /// Sends the gathered channel replies as one message.
    private func flushChannelReplies() {
        guard channelReplies.count > 1 else { return }
        defer { channelReplies.removeAll(keepingCapacity: true) }
        do {
            _ = try ingest.send(multipart: channelReplies, dontWait: true)
        } catch {
            logger.debug("replies not delivered", metadata: ["error": "\(error)"])
        }
    }

    private func send(_ reply: HubReply, to peer: PeerID) {
        do {
            if let channel = peer.channel {
                // A multiplexed connection: the channel part first.
                try ingest.send(multipart: [peer.bytes, ChannelPart.encode(channel), reply.encoded], dontWait: true)
                return
            }
            try ingest.send(multipart: [peer.bytes, reply.encoded], dontWait: true)
        } catch {
            // EHOSTUNREACH: the agent left; it will hear the news when it reconnects.
            logger.debug("reply not delivered", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Receiving

    private func drainIngest() throws(ZMQError) {
        var received = 0
        while received < configuration.maxMessagesPerTurn {
            guard try ingest.receive(into: routing, dontWait: true) else { return }
            guard routing.hasMore, try ingest.receive(into: payload, dontWait: true) else {
                continue  // a ROUTER always prefixes the routing id; a lone frame is not from a DEALER
            }
            received += 1
            if !payload.hasMore {
                // A connection that carries one session.
                guard let peer = self.peer(routing.bytes, user: payload) else { continue }
                receiveAgentMessage(payload, from: peer)
            } else {
                received += try receiveMultiplexed(from: routing.bytes)
            }
        }
        ingestWaiting = true
    }

    /// A multiplexed connection's message (docs/protocol.md, "Multiplexed
    /// connections"): pairs of parts, a channel (4 bytes, big-endian) and the
    /// agent message for that channel's session; `payload` holds the first
    /// channel part. Returns how many agent messages it carried.
    private func receiveMultiplexed(from routingID: [UInt8]) throws(ZMQError) -> Int {
        var carried = 0
        while true {
            let channel: UInt32? =
                payload.withUnsafeBytes(ChannelPart.decode)
            guard try ingest.receive(into: channelMessage, dontWait: true) else { return carried }  // parts arrive together
            guard let connection = self.peer(routingID, user: channelMessage) else {
                try skipRemainingParts(of: channelMessage)
                return carried
            }
            guard let channel else {
                handle(
                    .undecodable(
                        from: Peer(id: PeerID(routingID, channel: 0), principal: connection.principal),
                        .malformed("a multiplexed message is pairs of parts: a channel of 4 bytes (big-endian), then an agent message")))
                try skipRemainingParts(of: channelMessage)
                return carried
            }
            carried += 1
            receiveAgentMessage(channelMessage, from: Peer(id: PeerID(routingID, channel: channel), principal: connection.principal))
            guard channelMessage.hasMore else { return carried }
            guard try ingest.receive(into: payload, dontWait: true) else { return carried }
            guard payload.hasMore else {
                handle(
                    .undecodable(
                        from: Peer(id: PeerID(routingID, channel: 0), principal: connection.principal),
                        .malformed("a multiplexed message has an even number of parts: its last channel part has no agent message")))
                return carried
            }
        }
    }

    private func skipRemainingParts(of message: ZMQMessage) throws(ZMQError) {
        while message.hasMore {
            guard try ingest.receive(into: message, dontWait: true) else { return }
        }
    }

    /// Decodes one agent message from `peer` and hands it to the core.
    private func receiveAgentMessage(_ message: ZMQMessage, from peer: Peer) {
        if message.count > configuration.maxMessageBytes {
            let tooLarge = WireError(.messageTooLarge, "\(message.count) bytes, the limit is \(configuration.maxMessageBytes)")
            // A numbered message still takes its number (read without decoding the body), so the next is not OUT_OF_ORDER.
            if let header = message.withUnsafeBytes(AgentMessageHeader.scan), header.sequence > 0,
                let body = header.body, AgentMessageHeader.numberedBodies.contains(body)
            {
                handle(.agentMessage(from: peer, .numbered(sequence: header.sequence, .invalid(tooLarge)), bytes: message.count))
            } else {
                handle(.undecodable(from: peer, tooLarge))
            }
        } else {
            switch message.withUnsafeBytes(AgentRequest.decode) {
            case .success(.hello(var hello)):
                hello.remoteAddress = message.peerAddress  // per-address quotas (a plain hub's users are connections)
                handle(.agentMessage(from: peer, .hello(hello), bytes: message.count))
            case .success(let request): handle(.agentMessage(from: peer, request, bytes: message.count))
            case .failure(let error): handle(.undecodable(from: peer, error))
            }
        }
    }

    /// The peer a message came from. Authenticated, its principal is the
    /// user ZAP gave the connection (nil when there is none: not accepted);
    /// otherwise the routing id's namespace.
    private func peer(_ routingID: [UInt8], user message: ZMQMessage) -> Peer? {
        guard authenticated else {
            if let known = peers[routingID] { return known }
            if peers.count >= 65_536 { peers.removeAll(keepingCapacity: true) }  // a cache: bounded against id floods
            let peer = Peer(routingID: routingID)
            peers[routingID] = peer
            return peer
        }
        // A routing id may be reused by another connection (of another user) later: check the user each time.
        if let known = peers[routingID], message.property("User-Id", equals: known.principal.rawValue) { return known }
        guard let user = message.userID, !user.isEmpty else { return nil }
        if peers.count >= 65_536 { peers.removeAll(keepingCapacity: true) }
        let peer = Peer(id: PeerID(routingID), principal: UserNamespace(user))
        peers[routingID] = peer
        return peer
    }

    /// XPUB hands up subscribe (1) and unsubscribe (0) messages.
    private func drainSubscriptions() throws(ZMQError) {
        for _ in 0..<configuration.maxMessagesPerTurn {
            guard try publish.receive(into: payload, dontWait: true) else { return }
            let event = payload.bytes
            guard let kind = event.first else { continue }
            let topic = Array(event.dropFirst())
            let user = authenticated ? payload.userID.map { UserNamespace($0) } : nil
            handle(kind == 1 ? .subscribed(topic: topic, by: user) : .unsubscribed(topic: topic, by: user))
        }
    }

    /// Connections whose last snapshot found their queue full (they do not
    /// read), with when: their requests are refused without encoding a board
    /// for `notReadingPenalty` (the queue is what bounds memory; this bounds the work).
    private var notReading: [PeerID: ContinuousClock.Instant] = [:]
    private lazy var snapshotReaders = SnapshotReaders(limits: configuration.unreadSnapshots, logger: logger)
    private static let notReadingPenalty: Duration = .seconds(10)

    /// Snapshot requests that asked for packed samples (wire format v2), until
    /// answered: the format is the transport's concern, not the core's.
    private var packedSnapshotRequests: Set<SnapshotRequestKey> = []
    private struct SnapshotRequestKey: Hashable {
        let peer: PeerID
        let requestID: UInt64
    }

    private func drainSnapshotRequests() throws(ZMQError) {
        for _ in 0..<configuration.maxMessagesPerTurn {
            guard let (peer, user, decoded, descriptor, address) = try snapshotService.next() else { return }
            // Snapshot memory is bounded per owner and in all: not while its earlier snapshots lie unread.
            guard snapshotReaders.admit(PeerID(peer), descriptor: descriptor, user: authenticated ? user : nil, address: address) else {
                let requestID = (try? decoded.get())?.requestID ?? 0
                snapshotService.sendError(
                    to: peer, requestID: requestID, code: .rateLimited, "your earlier snapshots are still unread: read them, or ask again later")
                continue
            }
            if let since = notReading[PeerID(peer)] {
                if clock.now - since < Self.notReadingPenalty {
                    snapshotService.sendError(
                        to: peer, requestID: 0, code: .rateLimited, "your previous snapshot was not read: no snapshot for 10 s")
                    continue
                }
                notReading[PeerID(peer)] = nil
            }
            switch decoded {
            case .success(let request) where request.listBoards:
                handle(
                    .boardListRequested(
                        by: PeerID(peer), user: authenticated ? user.map { UserNamespace($0) } : nil, prefix: request.board,
                        after: request.after, limit: Int(request.limit), requestID: request.requestID,
                        onBehalf: OnBehalf(actAs: request.actAs, token: request.token)))
            case .success(let request):
                if request.packedSamples {
                    // Bounded: requests refused or never answered would otherwise pile up (forgetting one only costs v1).
                    if packedSnapshotRequests.count >= 4096 { packedSnapshotRequests.removeAll() }
                    packedSnapshotRequests.insert(SnapshotRequestKey(peer: PeerID(peer), requestID: request.requestID))
                }
                handle(
                    .snapshotRequested(
                        by: PeerID(peer), user: authenticated ? user.map { UserNamespace($0) } : nil, board: request.board,
                        requestID: request.requestID, onBehalf: OnBehalf(actAs: request.actAs, token: request.token)))
            case .failure:
                snapshotService.sendError(to: peer, requestID: 0, code: .malformed, "not a SnapshotRequest")
            }
        }
    }
}
