import CoreMetrics
import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncClientCore
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire
import ZeroMQ

/// What a relay follows upstream and where it serves downstream.
public struct RelayConfiguration: Sendable {
    /// The upstream hub's (or relay's) publish and snapshot endpoints.
    public var upstreamPublish = "tcp://127.0.0.1:5571"
    public var upstreamSnapshot = "tcp://127.0.0.1:5572"
    /// Other hubs of the same board store (publish, snapshot): the relay
    /// subscribes to every hub, so a board is heard from whichever holds it,
    /// also after it moves, and asks them in turn for snapshots (a WRONG_HUB
    /// sends the request to the next). Default none.
    public var otherUpstreams: [(publish: String, snapshot: String)] = []
    /// Where subscribers connect (XPUB) and ask for snapshots (ROUTER).
    /// Defaults `tcp://127.0.0.1:5591` and `5592`.
    public var publishEndpoint = "tcp://127.0.0.1:5591"
    public var snapshotEndpoint = "tcp://127.0.0.1:5592"
    /// The boards followed: names, or prefixes ending in `*` (`team-*`;
    /// `*` for every board). An authenticated hub accepts only whole board
    /// names (its subscriptions are exact), so list them there. Default `*`.
    public var boards: [String] = ["*"]
    /// The relay's keys as a client of an authenticated upstream. Default nil.
    public var upstreamCurve: CurveClientKeys? = nil
    /// Ask upstream again when a snapshot has not fully arrived by then. Default 2 s.
    public var snapshotTimeout: Duration = .seconds(2)
    /// Serve downstream as an authenticated hub does: CURVE with this key,
    /// only users of the access list, each getting only the boards it may
    /// watch. Default nil: plain text. (It runs a ZAP handler in the relay's
    /// context: give such a relay a context of its own, the default.)
    public var security: HubSecurity? = nil

    public init() {}
}

/// A fan-out tier in the Clone pattern: subscribes upstream, keeps a replica
/// of every board it follows, forwards the upstream messages downstream
/// byte for byte (same sequence numbers, same heartbeats), and answers
/// snapshot requests from its replicas. A subscriber cannot tell it from the
/// hub (same digests), and relays chain. Gaps upstream make it resync its
/// replica from upstream; a downstream subscriber sees the same gap and
/// resyncs from the relay, which answers once its replica is whole again.
/// One thread owns its four sockets and every replica.
public final class BoardRelay: Sendable {
    public let configuration: RelayConfiguration
    private let logger: Logger
    private let context: ZMQContext
    private let mailbox: Mailbox<StopCommand>
    private let thread = SocketThread(name: "touchsync-relay")
    private let counters = RelayCounters()
    private let authentication = Mutex<AuthenticationService?>(nil)

    public init(configuration: RelayConfiguration, logger: Logger, context: ZMQContext? = nil) throws {
        self.configuration = configuration
        self.logger = logger
        self.context = try context ?? ZMQContext()
        mailbox = try Mailbox()
    }

    /// Binds the downstream endpoints, connects upstream, and starts; returns where it serves.
    public func start() async throws -> (publish: String, snapshot: String) {
        let (configuration, logger, context, mailbox, counters) = (configuration, logger, context, mailbox, counters)
        let service = try await AuthenticationService.start(
            configuration.security, context: context, logger: logger, metricsFactory: MetricsSystem.factory)
        authentication.withLock { $0 = service }
        let granted = service?.access
        return try await thread.start {
            let loop = try RelayLoop(
                configuration: configuration, logger: logger, context: context, mailbox: mailbox, counters: counters, access: granted)
            return (loop.endpoints, loop.run)
        }
    }

    public func stop() async {
        mailbox.post(.stop)
        await thread.finished()
        await authentication.withLock({ $0.take() })?.stop()
    }

    /// What it has done so far.
    public var status: RelayStatus { counters.value.withLock { $0 } }
}

final class RelayCounters: Sendable {
    let value = Mutex(RelayStatus())
}

public struct RelayStatus: Sendable {
    /// Upstream messages forwarded downstream.
    public var forwarded = 0
    /// Snapshots served downstream, and resyncs of its own replicas from upstream.
    public var snapshotsServed = 0
    public var resyncs = 0
    /// Boards followed, and how many of their replicas are whole (live).
    public var boards = 0
    public var liveBoards = 0
}

final class RelayLoop {
    private let configuration: RelayConfiguration
    private let logger: Logger
    private let mailbox: Mailbox<StopCommand>
    private let counters: RelayCounters
    /// Downstream authentication (nil: plain text).
    private let access: AccessControl?
    private let upstream: ZMQSocket
    private let upstreamSnapshots: ZMQSocket
    private let publish: ZMQSocket
    private let snapshotService: SnapshotService
    /// Each followed board's replica and its sync rules (`ReplicaSync`, the subscriber's).
    private var replicas: [String: ReplicaSync] = [:]
    /// Downstream snapshot requests waiting for a replica to be whole.
    private var waiting: [String: [(peer: [UInt8], requestID: UInt64)]] = [:]
    /// Subscribers' unread snapshots (a relay serves snapshots as the hub does).
    private lazy var snapshotReaders = SnapshotReaders(logger: logger)
    /// Upstream snapshot requests (one DEALER for every board): by the id sent, the board and its sync's own id.
    private var requests: [UInt64: (board: String, local: UInt64)] = [:]
    private var nextRequest: UInt64 = 1
    private let clock = ContinuousClock()
    private let topic = ZMQMessage()
    private let body = ZMQMessage()
    let endpoints: (publish: String, snapshot: String)

    init(
        configuration: RelayConfiguration, logger: Logger, context: ZMQContext, mailbox: Mailbox<StopCommand>,
        counters: RelayCounters, access: AccessControl? = nil
    ) throws {
        self.access = access
        self.configuration = configuration
        self.logger = logger
        self.mailbox = mailbox
        self.counters = counters
        upstream = try ZMQSocket(context, type: .sub)
        upstreamSnapshots = try ZMQSocket(context, type: .dealer)
        publish = try ZMQSocket(context, type: .xpub)
        let snapshots = try ZMQSocket(context, type: .router)
        for socket in [upstream, upstreamSnapshots] {
            try socket.setLinger(milliseconds: 0)
            if let curve = configuration.upstreamCurve {
                try socket.setCurveServerKey(curve.serverPublicKey)
                try socket.setCurvePublicKey(curve.client.publicKey)
                try socket.setCurveSecretKey(curve.client.secretKey)
            }
        }
        try upstream.setReceiveHighWaterMark(100_000)
        try access?.serve(publish: publish, snapshots: snapshots)
        try publish.setXPubVerbose(true)
        try publish.setSendHighWaterMark(10_000)
        try publish.bind(configuration.publishEndpoint)
        try snapshots.setRouterMandatory(true)
        try snapshots.setMaxMessageSize(64 << 10)
        try snapshots.bind(configuration.snapshotEndpoint)
        snapshotService = SnapshotService(socket: snapshots, logger: logger)
        endpoints = (try publish.lastEndpoint, try snapshots.lastEndpoint)
        try upstream.connect(configuration.upstreamPublish)
        try upstreamSnapshots.connect(configuration.upstreamSnapshot)
        for other in configuration.otherUpstreams {
            try upstream.connect(other.publish)
            try upstreamSnapshots.connect(other.snapshot)
        }
        for pattern in configuration.boards {
            if pattern.hasSuffix("*") {
                try upstream.subscribe(Array(pattern.dropLast().utf8))
            } else {
                try upstream.subscribe(publishTopic(board: pattern))
                follow(pattern)
            }
        }
    }

    private func follows(_ board: String) -> Bool {
        configuration.boards.contains { pattern in
            pattern.hasSuffix("*") ? board.hasPrefix(pattern.dropLast()) : board == pattern
        }
    }

    func run() {
        defer {
            upstream.close()
            upstreamSnapshots.close()
            publish.close()
            snapshotService.socket.close()
        }
        do {
            var loop = try PollLoop(mailbox: mailbox, sockets: [upstream, upstreamSnapshots, publish, snapshotService.socket])
            try loop.run(
                deadline: { self.nextDeadline },
                commands: { _ in .stop },
                readable: { index in
                    switch index {
                    case 0: try self.drainUpstream()
                    case 1: try self.drainUpstreamSnapshots()
                    case 2: try self.drainSubscriptions()
                    default: try self.drainSnapshotRequests()
                    }
                },
                turnEnded: {
                    self.checkDeadlines()
                    self.snapshotReaders.sweepIfDue(now: .now)
                })
        } catch let error as ZMQError where error.isTerminated {
            return
        } catch {
            logger.error("relay stopped", metadata: ["error": "\(error)"])
        }
    }

    /// The earliest of the replicas' own deadlines (snapshot time-outs; a relay's silence time-out is an hour).
    private var nextDeadline: ContinuousClock.Instant? {
        var next: ContinuousClock.Instant? = nil
        for sync in replicas.values {
            if let deadline = sync.nextDeadline { next = min(next ?? deadline, deadline) }
        }
        return next
    }

    private func checkDeadlines() {
        let now = clock.now
        let due = replicas.compactMap { board, sync in sync.nextDeadline.map { $0 <= now ? board : nil } ?? nil }
        for board in due { change(board) { $0.tick(now: now) } }
    }

    // MARK: Upstream

    /// Starts following `board`: a replica, synced from an upstream snapshot.
    private func follow(_ board: String) {
        guard replicas[board] == nil else { return }
        let (sync, actions) = ReplicaSync.start(board: board, snapshotTimeout: configuration.snapshotTimeout, silenceTimeout: .seconds(3600), now: clock.now)
        replicas[board] = sync
        perform(actions, board: board)
    }

    /// Runs one of `board`'s sync rules and carries out what it decided.
    private func change(_ board: String, _ rule: (inout ReplicaSync) -> [ReplicaSync.Action]) {
        guard var sync = replicas.removeValue(forKey: board) else { return }  // uniquely referenced while it changes
        let actions = rule(&sync)
        replicas[board] = sync
        perform(actions, board: board)
    }

    private func perform(_ actions: [ReplicaSync.Action], board: String) {
        for action in actions {
            switch action {
            case .requestSnapshot(let local):
                let request = nextRequest
                nextRequest += 1
                requests = requests.filter { $0.value.board != board }  // earlier requests for the board are given up
                requests[request] = (board, local)
                guard let sync = replicas[board] else { continue }
                _ = try? upstreamSnapshots.send(sync.snapshotRequest(request), dontWait: true)
            case .resyncing(let reason):
                logger.info("relay resyncing", metadata: ["board": "\(board)", "reason": "\(reason)"])
                counters.value.withLock { $0.resyncs += 1 }
            case .failed(let reason):
                logger.warning("upstream refused a snapshot", metadata: ["board": "\(board)", "error": "\(reason)"])
            case .synced, .applied, .heartbeat, .silent, .redirect:
                break
            }
        }
        if replicas[board]?.isLive == true, let queued = waiting.removeValue(forKey: board) {
            for (peer, requestID) in queued { serveSnapshot(board, to: peer, requestID: requestID) }
        }
        updateCounts()
    }

    private func drainUpstream() throws(ZMQError) {
        while try upstream.receive(into: topic, dontWait: true) {
            guard topic.hasMore, try upstream.receive(into: body, dontWait: true) else { continue }
            while body.hasMore { _ = try upstream.receive(into: body, dontWait: true) }  // not ours: drop extra parts
            // Downstream gets exactly what upstream sent.
            let topicBytes = topic.bytes
            let bodyBytes = body.bytes
            _ = try? publish.send(multipart: [topicBytes, bodyBytes], dontWait: true)
            counters.value.withLock { $0.forwarded += 1 }
            guard topicBytes.last == 0, let board = String(validating: topicBytes.dropLast(), as: UTF8.self) else { continue }
            if replicas[board] == nil {
                guard follows(board) else { continue }
                follow(board)
            }
            let now = clock.now
            change(board) { sync in bodyBytes.withUnsafeBytes { sync.received(published: $0, now: now) } }
        }
    }

    private func drainUpstreamSnapshots() throws(ZMQError) {
        while try upstreamSnapshots.receive(into: body, dontWait: true) {
            guard let reply = body.withUnsafeBytes({ ReplicaSync.SnapshotReply.read($0) }), let (board, local) = requests[reply.requestID]
            else { continue }
            if reply.endsRequest { requests[reply.requestID] = nil }
            // A WRONG_HUB naming the owner asks again (`redirect`, then a request): with
            // several hubs (`otherUpstreams`) the DEALER takes it to the next one.
            let now = clock.now
            change(board) { $0.received(reply, requestID: local, now: now) }
        }
    }

    // MARK: Downstream

    /// Subscriptions downstream: a board not followed yet (and within the patterns) is followed now.
    private func drainSubscriptions() throws(ZMQError) {
        while try publish.receive(into: body, dontWait: true) {
            let bytes = body.bytes
            if let access, try access.admit(body, on: publish) == nil { continue }
            guard bytes.first == 1, bytes.last == 0, let board = String(validating: bytes.dropFirst().dropLast(), as: UTF8.self),
                replicas[board] == nil, follows(board)
            else { continue }
            follow(board)
        }
    }

    private func drainSnapshotRequests() throws(ZMQError) {
        for _ in 0..<256 {
            guard let (peer, user, decoded, descriptor, address) = try snapshotService.next() else { return }
            // As on the hub: snapshot memory bounded by what the subscribers read.
            guard snapshotReaders.admit(PeerID(peer), descriptor: descriptor, user: access == nil ? nil : user, address: address) else {
                snapshotService.sendError(
                    to: peer, requestID: (try? decoded.get())?.requestID ?? 0, code: .rateLimited,
                    "your earlier snapshots are still unread: read them, or ask again later")
                continue
            }
            guard case .success(let request) = decoded else {
                snapshotService.sendError(to: peer, requestID: 0, code: .malformed, "not a SnapshotRequest")
                continue
            }
            if let why = access?.refusal(for: user, board: request.board) {
                snapshotService.sendError(to: peer, requestID: request.requestID, code: .forbidden, why)
                continue
            }
            guard isValidBoardName(request.board), follows(request.board) else {
                snapshotService.sendError(
                    to: peer, requestID: request.requestID, code: .unknownBoard, "this relay does not follow board \(request.board)")
                continue
            }
            if replicas[request.board]?.isLive == true {
                serveSnapshot(request.board, to: peer, requestID: request.requestID)
            } else {
                follow(request.board)
                waiting[request.board, default: []].append((peer, request.requestID))
            }
        }
    }

    private func serveSnapshot(_ board: String, to peer: [UInt8], requestID: UInt64) {
        guard let state = replicas[board]?.replica else { return }
        let (_, bytes) = snapshotService.send(state.snapshot(), digest: state.digest, requestID: requestID, to: peer, board: board)
        if let requester = snapshotReaders.takeRequester(PeerID(peer)) { snapshotReaders.sent(to: requester, bytes: bytes, now: .now) }
        counters.value.withLock { $0.snapshotsServed += 1 }
    }

    private func updateCounts() {
        let live = replicas.values.filter(\.isLive).count
        counters.value.withLock {
            $0.boards = replicas.count
            $0.liveBoards = live
        }
    }
}
