import TouchSyncAccess
import CoreMetrics
import Logging
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import ZeroMQ

/// What a hub starts from: its journal opened and recovered (when it
/// journals) or the boards the board store gave it, and a `HubCore`
/// holding them.
struct HubStartup {
    /// The recovered journal, on its own thread (nil: no journal).
    let journal: JournalThread?
    let core: HubCore
    let summaries: [RecoveredBoardSummary]

    /// - Parameters:
    ///   - stored: the boards loaded from the board store (nil: the hub uses its journal, if any).
    ///   - boardThread: one board thread of several, with the data folder's lock its hub took:
    ///     its journal recovers and writes only the boards of `index`; `ledger`, the per-user
    ///     quotas and allowances every thread of the hub counts in.
    init(
        configuration: HubConfiguration, stored: [RecoveredBoard]?, access: AccessList?, logger: Logger,
        metricsFactory: any MetricsFactory, boardThread: (threads: BoardThreads, index: Int, lock: FolderLock?, ledger: HubLedger)? = nil,
        journalReport: @escaping @Sendable ([HubEvent]) -> Void
    ) throws {
        let clock = ContinuousClock()
        var recovered: [RecoveredBoard] = stored ?? []
        var summaries: [RecoveredBoardSummary] = []
        let journalConfiguration = stored == nil ? configuration.journal : nil
        if let journalConfiguration {
            let jobs = try Mailbox<JournalThread.Job>()
            let journal: Journal
            if let (threads, index, lock, _) = boardThread {
                journal = try Journal(
                    configuration: journalConfiguration, logger: logger, sharedLock: lock, holds: { threads.thread(of: $0) == index })
            } else {
                journal = try Journal(configuration: journalConfiguration, logger: logger)
            }
            let started = clock.now
            recovered = try journal.recover(limits: configuration.limits.boardLimits)
            for board in recovered {
                summaries.append(
                    RecoveredBoardSummary(
                        board: board.name, sequence: board.state.sequence, digest: board.state.digest,
                        samples: board.state.storedSampleCount, damage: board.damage))
                logger.info(
                    "board recovered",
                    metadata: [
                        "board": "\(board.name)", "sequence": "\(board.state.sequence)", "records": "\(board.recordsApplied)",
                        "damage": "\(board.damage.count)", "milliseconds": "\(microseconds(clock.now - started) / 1000)",
                    ])
            }
            self.journal = JournalThread(
                journal: journal, jobs: jobs, logger: logger, metricsFactory: metricsFactory, report: journalReport)
        } else {
            journal = nil
            summaries = recovered.map {
                RecoveredBoardSummary(
                    board: $0.name, sequence: $0.state.sequence, digest: $0.state.digest, samples: $0.state.storedSampleCount,
                    damage: $0.damage)
            }
        }
        core = HubCore(
            configuration: configuration, recovered: recovered, now: clock.now, wallClockMicroseconds: wallClockMicroseconds(),
            observer: LoggingHubObserver(logger: logger), access: access, ledger: boardThread?.ledger)
        self.summaries = summaries
    }
}

/// The hub's three sockets, bound. Bound before the journal is opened, so a
/// hub that cannot listen leaves nothing behind (not even its data folder).
struct HubSockets {
    let ingest: ZMQSocket
    let publish: ZMQSocket
    let snapshots: ZMQSocket
    let endpoints: HubEndpoints
    /// Authenticated hubs: the subscriber connections, so a revocation can end them.
    let subscriberConnections: ZMQAcceptedConnections?
    /// A board thread's inproc pairs to the hub's front (`HubFront`), not public sockets.
    let behindFront: Bool

    /// A board thread's sockets: inproc pairs connected to the front's
    /// (bound first); `endpoints` are the hub's public ones.
    init(boardThread thread: Int, hubID: String, endpoints: HubEndpoints, context: ZMQContext) throws(ZMQError) {
        let inproc = HubFront.endpoints(hubID: hubID, thread: thread)
        var opened: [ZMQSocket] = []
        do {
            for endpoint in [inproc.ingest, inproc.publish, inproc.snapshots] {
                let socket = try ZMQSocket(context, type: .pair)
                opened.append(socket)
                try socket.setSendHighWaterMark(0)
                try socket.setReceiveHighWaterMark(0)
                try socket.connect(endpoint)
            }
        } catch {
            opened.forEach { $0.close() }
            throw error
        }
        ingest = opened[0]
        publish = opened[1]
        snapshots = opened[2]
        self.endpoints = endpoints
        subscriberConnections = nil
        behindFront = true
    }

    init(configuration: HubConfiguration, context: ZMQContext) throws {
        let ingest = try ZMQSocket(context, type: .router)
        let publish = try ZMQSocket(context, type: .xpub)
        let snapshots = try ZMQSocket(context, type: .router)
        var connections: ZMQAcceptedConnections? = nil
        do {
            try ingest.setRouterMandatory(true)
            if let security = configuration.security {
                // Authenticated, the user comes from the handshake and routing ids
                // are random per connection: a duplicate id is an impostor, never
                // allowed to take over another connection's replies.
                try AccessControl.makeCurveServer(ingest, security: security)
                try AccessControl.serve(publish: publish, snapshots: snapshots, security: security)
            } else {
                // A reconnecting agent keeps its routing id, and with it its namespace.
                try ingest.setRouterHandover(true)
            }
            try ingest.setMaxMessageSize(configuration.limits.hardMessageLimit)
            try ingest.setReceiveHighWaterMark(configuration.sockets.ingestHighWaterMark)
            try ingest.setSendHighWaterMark(configuration.sockets.ingestHighWaterMark)
            try ingest.bind(configuration.ingestEndpoint)

            if configuration.security != nil { connections = try ZMQAcceptedConnections(publish, context: context) }
            try publish.setXPubVerbose(true)
            try publish.setSendHighWaterMark(configuration.sockets.publishHighWaterMark)
            if configuration.sockets.publishSendBufferBytes > 0 { try publish.setSendBuffer(bytes: configuration.sockets.publishSendBufferBytes) }
            try publish.bind(configuration.publishEndpoint)

            try snapshots.setRouterMandatory(true)
            try snapshots.setSendHighWaterMark(configuration.sockets.snapshotHighWaterMark)
            try snapshots.setMaxMessageSize(64 << 10)
            try snapshots.bind(configuration.snapshotEndpoint)

            endpoints = HubEndpoints(
                ingest: try ingest.lastEndpoint, publish: try publish.lastEndpoint, snapshot: try snapshots.lastEndpoint)
        } catch {
            connections?.close()
            ingest.close()
            publish.close()
            snapshots.close()
            throw error
        }
        subscriberConnections = connections
        behindFront = false
        self.ingest = ingest
        self.publish = publish
        self.snapshots = snapshots
    }

    func close() {
        subscriberConnections?.close()
        ingest.close()
        publish.close()
        snapshots.close()
    }
}
