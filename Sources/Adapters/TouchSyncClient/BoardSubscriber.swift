import TouchSyncWaiting
import TouchSyncAccess
import Logging
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TouchSyncClientCore
import TouchSyncCore
import TouchSyncWire
import ZeroMQ

/// How a subscriber reaches its hub.
public struct SubscriberConfiguration: Sendable {
    /// The hub's publish endpoint. Default `tcp://127.0.0.1:5571`.
    public var publishEndpoint = "tcp://127.0.0.1:5571"
    /// The hub's snapshot endpoint. Default `tcp://127.0.0.1:5572`.
    public var snapshotEndpoint = "tcp://127.0.0.1:5572"
    public var board: String
    /// The diff stream's wire format (docs/protocol.md). Default v1. With
    /// v2, a subscriber that hears nothing on the v2 topic for the silence
    /// time-out (a hub or relay that does not publish v2) follows v1, and
    /// its snapshots ask for accepted strokes packed ("Packed snapshots").
    public var wireFormat: WireFormat = .v1
    /// Whether the replica keeps predicted tails. Default true. False (v2
    /// only) follows the board's stream without predictions (docs/protocol.md,
    /// "Streams without predictions"): fewer bytes, for subscribers that do
    /// not draw predictions (recorders, archives, measurements). A fall-back
    /// to v1 brings them back.
    public var predictions = true
    /// Ask again when a snapshot has not fully arrived by then. Default 2 s.
    public var snapshotTimeout: Duration = .seconds(2)
    /// Report the hub silent after this long without a batch or heartbeat. Default 3 s.
    public var silenceTimeout: Duration = .seconds(3)
    /// Messages queued for this subscriber before libzmq drops them (the
    /// subscriber then notices the gap and resyncs). Default 100,000.
    public var receiveHighWaterMark: Int32 = 100_000
    /// The kernel's receive buffer in bytes. Default 0: the OS default.
    public var receiveBufferBytes: Int32 = 0
    /// Called on the subscriber's thread right after each batch is applied
    /// (for measurements: keep it short, it delays the next batch).
    public var onApplied: (@Sendable (DiffBatch) -> Void)? = nil
    /// Called on the subscriber's thread when a snapshot has been loaded (the
    /// first one and every resync), with the board it gave, before the batches
    /// queued meanwhile are applied (each then goes to `onApplied`). With
    /// `onApplied` it lets a fan-out keep an exact copy of the replica.
    public var onSynced: (@Sendable (BoardState) -> Void)? = nil
    /// CURVE keys for an authenticated hub. Default nil: plain text.
    public var curve: CurveClientKeys? = nil
    /// Whether `events` carries anything. Default true; a user that does not
    /// read them (a fan-out working from `onApplied`) sets false, or up to
    /// 10,000 unread events, batches with their samples, stay in memory.
    public var reportsEvents = true

    /// The hubs the board is followed over: `publishEndpoint` and
    /// `snapshotEndpoint` may each list several hubs, comma-separated, in
    /// the same order (issue 39): when the hub followed falls silent or stops
    /// answering, the next is asked, and a WRONG_HUB naming the board's hub
    /// goes there (`ReplicaSync.hubs`). One pair keeps its hub, as before.
    public var hubs: [ReplicaSync.Hub] {
        let publishes = publishEndpoint.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let snapshots = snapshotEndpoint.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        return zip(publishes, snapshots).map { ReplicaSync.Hub(publish: $0, snapshot: $1) }
    }

    public init(
        board: String, publishEndpoint: String = "tcp://127.0.0.1:5571",
        snapshotEndpoint: String = "tcp://127.0.0.1:5572"
    ) {
        self.board = board
        self.publishEndpoint = publishEndpoint
        self.snapshotEndpoint = snapshotEndpoint
    }
}

/// What a subscriber did.
public enum SubscriberEvent: Sendable, Equatable {
    /// A snapshot was loaded: the replica is at `sequence`.
    case synced(sequence: UInt64, digest: BoardDigest, chunks: Int)
    /// A batch was applied to the replica.
    case applied(DiffBatch)
    /// The replica was found behind or wrong; a new snapshot is on its way.
    case resyncing(reason: String)
    /// The hub's heartbeat; `agrees` tells whether our digest matched at that sequence.
    case heartbeat(sequence: UInt64, agrees: Bool)
    /// Nothing from the hub for `silenceTimeout`.
    case silent
    /// The subscriber could not start or stopped on an error (a bad endpoint,
    /// a terminated context): the event stream ends after this.
    case failed(reason: String)
}

/// Where a subscriber stands.
public struct SubscriberStatus: Sendable, Equatable {
    public var live = false
    public var sequence: UInt64 = 0
    public var resyncs = 0
    /// Why the replica last asked for a snapshot again (nil: it never had to).
    public var lastResyncReason: String? = nil
    public var batchesApplied = 0
    public var activeStrokes = 0
    public var acceptedStrokes = 0
    /// Touches down: one active stroke each.
    public var liveTouches: Int { activeStrokes }
    /// Bytes of published messages received (topics included).
    public var bytesReceived = 0
    /// Heartbeats received while live (each carries the hub's sequence and digest).
    public var heartbeats = 0
    /// Heartbeats at the replica's own sequence whose digest matched it: the
    /// replica was exactly the hub's board when the hub sent them.
    public var agreeingHeartbeats = 0
    /// `stallReading` commands that have begun (tests wait for the stall to start).
    public var stalls = 0
    /// Why the subscriber stopped on its own (nil while it runs or after `stop()`).
    public var failure: String? = nil
    /// Users the hub has not heard from lately (as of the last heartbeat):
    /// their touches stay down, stalled, until they return or are abandoned.
    public var silentUsers: [String] = []
}

/// A live replica of one board: subscribes first, then loads a snapshot,
/// then applies only the batches after it (the ZeroMQ Guide's Clone
/// pattern). A gap in sequence numbers, a heartbeat ahead of the replica
/// (batches lost) or behind it (the hub restarted without some of them), or
/// a digest that disagrees triggers a resync. Its own thread does all socket
/// work; every method here is safe from any thread or task.
public final class BoardSubscriber: Sendable {
    public let configuration: SubscriberConfiguration
    /// Snapshots, applied batches, resyncs and heartbeats (the newest 10,000 are kept if not read).
    public let events: AsyncStream<SubscriberEvent>
    private let eventSink: AsyncStream<SubscriberEvent>.Continuation
    private let mailbox: Mailbox<SubscriberCommand>
    private let thread = SocketThread(name: "touchsync-subscriber")
    private let context: ZMQContext
    private let logger: Logger
    private let shared = SubscriberShared()

    public init(configuration: SubscriberConfiguration, context: ZMQContext? = nil, logger: Logger) throws {
        self.configuration = configuration
        self.context = try context ?? ZMQContext()
        self.logger = logger
        mailbox = try Mailbox()
        (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        if !configuration.reportsEvents { eventSink.finish() }  // yields are then dropped at once
    }

    public func start() {
        let (configuration, context, mailbox, events, shared, logger) =
            (configuration, context, mailbox, eventSink, shared, logger)
        thread.start {
            do {
                try SubscriberLoop(
                    configuration: configuration, context: context, mailbox: mailbox, events: events, shared: shared,
                    logger: logger
                ).run()
            } catch {
                // Nobody may wait forever on a subscriber that is gone: answer
                // every pending request, say why, end the event stream.
                logger.error("subscriber stopped", metadata: ["error": "\(error)"])
                for case .inspect(let reply) in mailbox.close() { reply(nil) }
                shared.status.withLock { $0.failure = "\(error)" }
                shared.waiters.signal()
                events.yield(.failed(reason: "\(error)"))
                events.finish()
            }
        }
    }

    public func stop() async {
        mailbox.post(.stop)
        await thread.finished()
        eventSink.finish()
    }

    public var status: SubscriberStatus { shared.status.withLock { $0 } }

    /// A copy of the replica (taken on the subscriber's thread between two batches).
    /// Nil before the first snapshot, while resyncing, and after `stop`.
    public func replica() async -> BoardState? {
        let copy = Completion<BoardState?>()
        if !mailbox.post(.inspect { copy.complete($0) }) { return nil }
        // Answered at the loop's next turn (or nil as it closes): also a cancelled task tidying up gets it.
        return await copy.join()
    }

    /// Waits until the replica is live at `sequence` or later; false on time-out.
    public func waitUntil(sequence: UInt64, timeout: Duration = .seconds(5)) async -> Bool {
        await shared.waiters.wait(timeout: timeout) { [shared] in
            let status = shared.status.withLock { $0 }
            if status.live && status.sequence >= sequence { return true }
            return status.failure != nil ? false : nil
        } ?? false
    }

    /// Stops reading for `duration` or until `resumeReading()`, whichever
    /// comes first, as a stalled consumer would: messages pile up, past the
    /// high-water mark libzmq drops them, and the subscriber must notice and
    /// resync. For fault-injection tests.
    package func stallReading(for duration: Duration) {
        while shared.resume.wait(timeout: .now()) == .success {}  // an earlier resume ends no later stall
        mailbox.post(.stall(duration))
    }

    /// Ends a stall begun by `stallReading(for:)` early.
    package func resumeReading() {
        shared.resume.signal()
    }
}

final class SubscriberShared: Sendable {
    let status = Mutex(SubscriberStatus())
    /// Callers waiting for the replica to reach a sequence (woken when the status changes).
    let waiters = ConditionWaiters()
    /// Signalled by `resumeReading()`: ends a stall early.
    let resume = DispatchSemaphore(value: 0)
}

enum SubscriberCommand: Sendable {
    case stop
    case inspect(@Sendable (BoardState?) -> Void)
    case stall(Duration)
}

/// The subscriber's thread: owns the SUB and the snapshot DEALER, and
/// drives a `ReplicaSync` (the rules) with what they receive.
final class SubscriberLoop {
    private let configuration: SubscriberConfiguration
    private let mailbox: Mailbox<SubscriberCommand>
    private let events: AsyncStream<SubscriberEvent>.Continuation
    private let shared: SubscriberShared
    private let logger: Logger
    private let subscriber: ZMQSocket
    private let snapshots: ZMQSocket
    private var topic: [UInt8]
    /// Whether anything arrived on `topic` (a v2 topic nobody publishes on falls back to v1).
    private var heardOnTopic = false
    private let clock = ContinuousClock()
    private var sync: ReplicaSync
    private let part = ZMQMessage()
    private let monitor: ZMQHandshakeMonitor?
    private var handshakeFailures = 0
    /// Why the hub will never serve us (a refused key, FORBIDDEN): the loop ends with it.
    private var fatal: String? = nil
    /// Where the sockets are connected: the configured hub until a WRONG_HUB names another.
    private var endpoints: (publish: String, snapshot: String) = ("", "")

    init(
        configuration: SubscriberConfiguration, context: ZMQContext, mailbox: Mailbox<SubscriberCommand>,
        events: AsyncStream<SubscriberEvent>.Continuation, shared: SubscriberShared, logger: Logger
    ) throws(ZMQError) {
        self.configuration = configuration
        self.mailbox = mailbox
        self.events = events
        self.shared = shared
        self.logger = logger
        topic = PublishStream(configuration.wireFormat, predictions: configuration.predictions).topic(board: configuration.board)
        subscriber = try ZMQSocket(context, type: .sub)
        snapshots = try ZMQSocket(context, type: .dealer)
        for socket in [subscriber, snapshots] {
            if let curve = configuration.curve {
                try socket.setCurveServerKey(curve.serverPublicKey)
                try socket.setCurvePublicKey(curve.client.publicKey)
                try socket.setCurveSecretKey(curve.client.secretKey)
            }
            try socket.setHandshakeInterval(milliseconds: 5000)
        }
        // The snapshot connection's handshake tells whether the hub takes us at all.
        monitor = try? ZMQHandshakeMonitor(snapshots, context: context)
        try subscriber.setReceiveHighWaterMark(configuration.receiveHighWaterMark)
        if configuration.receiveBufferBytes > 0 { try subscriber.setReceiveBuffer(bytes: configuration.receiveBufferBytes) }
        let hubs = configuration.hubs
        let home = hubs.first ?? ReplicaSync.Hub(publish: configuration.publishEndpoint, snapshot: configuration.snapshotEndpoint)
        try subscriber.connect(home.publish)
        try subscriber.subscribe(topic)
        try snapshots.connect(home.snapshot)
        endpoints = (home.publish, home.snapshot)
        let (sync, first) = ReplicaSync.start(
            board: configuration.board, predictions: topic.last == PublishStream.v1.rawValue || configuration.predictions,
            snapshotTimeout: configuration.snapshotTimeout, silenceTimeout: configuration.silenceTimeout, hubs: hubs,
            now: clock.now)
        self.sync = sync
        perform(first)
    }

    func run() throws {
        defer {
            subscriber.close()
            snapshots.close()
            monitor?.close()
            for case .inspect(let reply) in mailbox.close() { reply(nil) }
        }
        var poller = ZMQPoller()
        let subscriberIndex = try poller.add(subscriber)
        let snapshotIndex = try poller.add(snapshots)
        let mailboxIndex = poller.add(fileDescriptor: mailbox.fileDescriptor)
        if let monitor { _ = try poller.add(monitor.socket) }
        while true {
            do {
                // Woken by the sockets, the mailbox, the handshake monitor, or the sync's own deadline.
                try poller.poll(timeoutMilliseconds: sync.nextDeadline.map { ZMQPoller.timeout(until: $0) } ?? -1)
            } catch {
                if error.isTerminated { return }
                throw error
            }
            if poller.isReadable(mailboxIndex) {
                for command in mailbox.drain() {
                    switch command {
                    case .stop: return
                    case .inspect(let reply): reply(sync.replica)
                    case .stall(let duration):
                        // Deliberately not reading: the point of the command.
                        shared.status.withLock { $0.stalls += 1 }
                        let (seconds, attoseconds) = duration.components
                        _ = shared.resume.wait(timeout: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)))
                    }
                }
            }
            if poller.isReadable(snapshotIndex) { try drainSnapshotReplies() }
            if poller.isReadable(subscriberIndex) { try drainPublished() }
            perform(sync.tick(now: clock.now))
            checkHandshakes()
            if let fatal { throw SubscriberFailure(reason: fatal) }
        }
    }

    /// Carries out what the rules decided.
    private func perform(_ actions: [ReplicaSync.Action]) {
        for action in actions {
            switch action {
            case .requestSnapshot(let requestID):
                _ = try? snapshots.send(sync.snapshotRequest(requestID, packedSamples: configuration.wireFormat == .v2), dontWait: true)
            case .resyncing(let reason):
                logger.info("resyncing", metadata: ["board": "\(configuration.board)", "reason": "\(reason)"])
                events.yield(.resyncing(reason: reason))
                shared.status.withLock {
                    $0.live = false
                    $0.resyncs += 1
                    $0.lastResyncReason = reason
                }
            case .synced(let state, let digest, let chunks):
                events.yield(.synced(sequence: state.sequence, digest: digest, chunks: chunks))
                configuration.onSynced?(state)
                publishStatus(state)
            case .applied(let batch):
                configuration.onApplied?(batch)
                shared.status.withLock { $0.batchesApplied += 1 }
                if let state = sync.replica { publishStatus(state) }
                events.yield(.applied(batch))
            case .heartbeat(let sequence, let agrees, let silentUsers):
                shared.status.withLock { status in
                    status.heartbeats += 1
                    status.silentUsers = silentUsers
                    if agrees == true { status.agreeingHeartbeats += 1 }
                }
                if let agrees { events.yield(.heartbeat(sequence: sequence, agrees: agrees)) }
            case .silent:
                events.yield(.silent)
                if !heardOnTopic && topic.last != PublishStream.v1.rawValue {
                    // Nothing at all on the v2 topic: a hub or relay that publishes v1 only.
                    logger.notice(
                        "nothing published in wire format v2: following the board in v1",
                        metadata: ["board": "\(configuration.board)"])
                    let v1 = WireFormat.v1.topic(board: configuration.board)
                    do {
                        try subscriber.subscribe(v1)
                        try? subscriber.unsubscribe(topic)
                        topic = v1
                        sync.predictions = true  // v1 carries them; the next snapshot keeps them
                    } catch {
                        fatal = "cannot subscribe to \(configuration.board) in v1: \(error)"
                    }
                }
            case .failed(let reason):
                fatal = reason
            case .redirect(let publish, let snapshot, let hub):
                logger.notice(
                    "another hub serves the board: following it",
                    metadata: ["board": "\(configuration.board)", "hub": "\(hub)", "publish": "\(publish)", "snapshot": "\(snapshot)"])
                do {
                    try? subscriber.disconnect(endpoints.publish)
                    try? snapshots.disconnect(endpoints.snapshot)
                    try subscriber.connect(publish)
                    try snapshots.connect(snapshot)
                    endpoints = (publish, snapshot)
                } catch {
                    fatal = "cannot follow the board to hub \(hub) (\(publish), \(snapshot)): \(error)"
                }
            }
        }
    }

    // MARK: Received

    private func drainSnapshotReplies() throws(ZMQError) {
        while try snapshots.receive(into: part, dontWait: true) {
            if let reply = part.withUnsafeBytes({ ReplicaSync.SnapshotReply.read($0) }) {
                if case .refused(_, let message, _) = reply.body {
                    logger.warning("snapshot refused", metadata: ["board": "\(configuration.board)", "error": "\(message)"])
                }
                perform(sync.received(reply, now: clock.now))
            }
        }
    }

    private func drainPublished() throws(ZMQError) {
        while try subscriber.receive(into: part, dontWait: true) {
            guard part.hasMore else { continue }  // a topic without a body
            guard try subscriber.receive(into: part, dontWait: true) else { return }
            heardOnTopic = true
            let size = part.count + topic.count
            shared.status.withLock { $0.bytesReceived += size }
            let now = clock.now
            perform(part.withUnsafeBytes { sync.received(published: $0, now: now) })
        }
    }

    private func publishStatus(_ state: BoardState) {
        shared.status.withLock { status in
            status.live = true
            status.sequence = state.sequence
            status.activeStrokes = state.liveTouchCount
            status.acceptedStrokes = state.acceptedStrokes.count
        }
        shared.waiters.signal()
    }

    private func checkHandshakes() {
        guard let monitor else { return }
        for event in monitor.events() {
            switch event {
            case .succeeded:
                handshakeFailures = 0
            case .refused(let code):
                fatal = "the hub refused this key (authentication status \(code)): ask its operator to allow it (touchsync keys allow)"
            case .protocolError:
                fatal =
                    configuration.curve == nil
                    ? "the hub requires CURVE: pass --key and --hub-key"
                    : "the hub does not speak CURVE (a plain-text hub?): drop --key and --hub-key, or check the endpoint"
            case .failed:
                handshakeFailures += 1
                if handshakeFailures >= 2 {
                    fatal =
                        configuration.curve == nil
                        ? "the hub refuses the handshake: it probably requires CURVE (pass --key and --hub-key)"
                        : "the CURVE handshake with the hub fails: is --hub-key the hub's public key?"
                }
            }
        }
    }
}

/// Why a subscriber stopped for good.
struct SubscriberFailure: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}
