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
    /// A chunk of a snapshot, encoded (`SnapshotEncoderThread`), to send.
    case snapshotChunk(EncodedSnapshotChunk)
}

/// The hub's ZeroMQ adapter and single writer: one thread runs `run()`, owns
/// the three sockets and the `HubCore`; nothing else touches them. It
/// receives and decodes, hands each message to the core as an event and
/// carries out the actions the core returns; every rule lives in the core.
/// The journal runs on a thread of its own (`JournalThread`): the loop hands
/// it appends and never waits on the disk; batches are published once the
/// journal reports them written (synced, under `--fsync batch`). Snapshots
/// are encoded on a thread of their own (`SnapshotEncoderThread`) and sent
/// from here.
final class HubLoop {
    let configuration: HubConfiguration
    let logger: Logger
    /// Welcomes and refusals are logged (debug level): decided once, not per reply on the hot path.
    let logsReplies: Bool
    var core: HubCore
    var metrics: HubMetricsExporter
    let journal: JournalThread?
    /// With a board store, batches are published only once committed.
    let store: BoardStoreWriter?
    /// Publications waiting for the journal or the store to have their batches.
    var held = HeldPublications()
    let mailbox: Mailbox<HubLoopCommand>
    let ingest: ZMQSocket
    let publish: ZMQSocket
    let subscriberConnections: ZMQAcceptedConnections?
    let snapshotService: SnapshotService
    let endpoints: HubEndpoints

    /// Peers by routing id: the principal is derived once per connection, not per message.
    var peers: [[UInt8]: Peer] = [:]
    /// Reused for every turn and receive: no allocation per message.
    var actions: [HubAction] = []
    let routing = ZMQMessage()
    let payload = ZMQMessage()
    /// A multiplexed connection's agent messages (`payload` holds their channel parts).
    let channelMessage = ZMQMessage()
    let clock = ContinuousClock()
    /// CURVE + ZAP: principals are authenticated users.
    let authenticated: Bool
    /// A board thread of a hub with several (`HubFront`): its sockets are
    /// inproc pairs to the front, and each request carries a `FrontOrigin`.
    let behindFront: Bool
    /// The origin of the agent message being read (behind a front).
    var frontOrigin: FrontOrigin? = nil
    /// The front's mailbox (behind a front): it owns the subscriber connections.
    let front: Mailbox<FrontCommand>?
    /// The last ingest drain stopped at the per-turn limit with messages left.
    var ingestWaiting = false

    /// Connections whose last snapshot found their queue full (they do not
    /// read), with when: their requests are refused without encoding a board
    /// for `notReadingPenalty` (the queue is what bounds memory; this bounds the work).
    var notReading: [PeerID: ContinuousClock.Instant] = [:]
    /// Requesters' unread snapshot bytes: this hub's, shared by its board threads when it has several.
    let snapshotReaders: SnapshotReaderTable
    static let notReadingPenalty: Duration = .seconds(10)

    /// Encodes snapshots off this thread (started by `run`).
    var snapshotEncoder: SnapshotEncoderThread? = nil
    /// Snapshots being encoded, until their last chunk is sent.
    var snapshotsEncoding: [SnapshotJobKey: SnapshotProgress] = [:]
    struct SnapshotProgress {
        /// Its connection and owner (nil: not watched), charged chunk by chunk.
        let requester: SnapshotReaders.Requester?
        var chunks = 0
        /// The requester stopped reading, or its owner has too much unread: the rest is dropped.
        var abandoned = false
    }
    /// Snapshots encoded at once, at most: further requests are refused
    /// RATE_LIMITED (each waiting job holds its board's state of that moment).
    static let maxSnapshotsEncoding = 64

    /// Snapshot requests that asked for packed samples (wire format v2), until
    /// answered: the format is the transport's concern, not the core's.
    var packedSnapshotRequests: Set<SnapshotRequestKey> = []
    struct SnapshotRequestKey: Hashable {
        let peer: PeerID
        let requestID: UInt64
    }

    init(
        configuration: HubConfiguration, sockets: HubSockets, startup: HubStartup, store: BoardStoreWriter?,
        logger: Logger, metricsFactory: any MetricsFactory, mailbox: Mailbox<HubLoopCommand>, boardThread: Int? = nil,
        front: Mailbox<FrontCommand>? = nil, snapshotReaders: SnapshotReaderTable? = nil
    ) {
        self.front = front
        self.snapshotReaders =
            snapshotReaders ?? SnapshotReaderTable(SnapshotReaders(limits: configuration.limits.unreadSnapshots, logger: logger))
        self.configuration = configuration
        core = startup.core
        journal = startup.journal
        self.store = store
        self.logger = logger
        logsReplies = logger.logLevel <= .debug
        metrics = HubMetricsExporter(factory: metricsFactory, boardThread: boardThread)
        self.mailbox = mailbox
        ingest = sockets.ingest
        publish = sockets.publish
        subscriberConnections = sockets.subscriberConnections
        snapshotService = SnapshotService(socket: sockets.snapshots, logger: logger, behindFront: sockets.behindFront)
        behindFront = sockets.behindFront
        endpoints = sockets.endpoints
        authenticated = configuration.security != nil
    }

    /// Runs until `.stop` arrives or the context is terminated; closes the sockets.
    func run() {
        defer {
            ingest.close()
            subscriberConnections?.close()
            publish.close()
            snapshotEncoder?.stop()
            snapshotService.socket.close()
            _ = journal?.stop()  // when the loop failed: the journal still closes
            // Whoever still waits for an answer gets one: the hub is gone.
            for case .inspect(_, let reply) in mailbox.close() { reply(nil) }
        }
        logger.info(
            "hub listening",
            metadata: ["ingest": "\(endpoints.ingest)", "publish": "\(endpoints.publish)", "snapshot": "\(endpoints.snapshot)"])
        do {
            snapshotEncoder = try SnapshotEncoderThread { [mailbox] chunk in mailbox.post(.snapshotChunk(chunk)) }
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
                                    case .stop, .accessChanged, .store, .snapshotChunk: break
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
                        case .snapshotChunk(let chunk):
                            snapshotEncoded(chunk)
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
                    let now = clock.now
                    snapshotReaders.withLock { $0.sweepIfDue(now: now) }
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
    func handle(_ event: HubEvent) {
        actions.removeAll(keepingCapacity: true)
        core.handle(event, now: clock.now, into: &actions)
        if !actions.isEmpty { perform(actions) }
    }

    /// Welcomes and refusals, at debug level (acks are too many to log).
    private func logReply(_ reply: HubReply, to peer: PeerID) {
        switch reply {
        case .welcome(let welcome):
            logger.debug(
                "welcome", metadata: ["peer": "\(peer)", "user": "\(welcome.user.rawValue)", "board": "\(welcome.board)", "appliedThrough": "\(welcome.appliedThrough)"])
        case .error(let refusal):
            logger.debug("refusal", metadata: ["peer": "\(peer)", "code": "\(refusal.code)", "sequence": "\(refusal.sequence)", "why": "\(refusal.message)"])
        case .ack:
            break
        }
    }

    /// Carries out `actions` in order.
    func perform(_ actions: [HubAction]) {
        defer { flushChannelReplies() }
        for action in actions {
            if logsReplies, case .reply(let peer, let reply) = action { logReply(reply, to: peer) }
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
                // XPUB_MANUAL: applies to the pipe the subscription just came from (behind a front, the front did it).
                guard !behindFront else { continue }
                do { try publish.subscribe(topic) } catch { logger.warning("subscribe failed", metadata: ["error": "\(error)"]) }
            case .dropSubscription(let topic):
                guard !behindFront else { continue }
                try? publish.unsubscribe(topic)
            case .disconnectSubscribers(let users):
                if let front {
                    front.post(.disconnectSubscribers(users: users))
                    continue
                }
                guard let subscriberConnections else { continue }
                endSubscriberConnections(subscriberConnections, publishEndpoint: endpoints.publish, for: users, logger: logger)
            }
        }
    }

    func send(_ publication: Publication) {
        do {
            try publish.send(multipart: [publication.topic, publication.bytes], dontWait: true)
        } catch {
            logger.warning("publish failed", metadata: ["board": "\(publication.board)", "error": "\(error)"])
        }
    }

    /// Replies gathered for one multiplexed connection: its routing id, then channel and reply parts.
    var channelReplies: [[UInt8]] = []

    /// Sends the gathered channel replies as one message.
    func flushChannelReplies() {
        guard channelReplies.count > 1 else { return }
        defer { channelReplies.removeAll(keepingCapacity: true) }
        do {
            _ = try ingest.send(multipart: channelReplies, dontWait: true)
        } catch {
            logger.debug("replies not delivered", metadata: ["error": "\(error)"])
        }
    }

    func send(_ reply: HubReply, to peer: PeerID) {
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

}
