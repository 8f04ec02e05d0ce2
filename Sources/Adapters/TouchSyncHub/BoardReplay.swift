import CoreMetrics
import TouchSyncAccess
import Logging
import Synchronization
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncWaiting
import TouchSyncWire
import ZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a recorded board is republished. Defaults are documented per property.
public struct ReplayConfiguration: Sendable {
    /// Subscribers connect here (XPUB). Default `tcp://127.0.0.1:5581`, next
    /// to a hub's 5571 so both can run on one machine.
    public var publishEndpoint = "tcp://127.0.0.1:5581"
    /// Snapshot requests (ROUTER). Default `tcp://127.0.0.1:5582`.
    public var snapshotEndpoint = "tcp://127.0.0.1:5582"
    /// Time scale: 2 replays twice as fast. nil: as fast as possible. Default 1.
    public var speed: Double? = 1
    /// Start this far into the recording (from the oldest checkpoint kept). Default 0.
    public var from: Duration = .zero
    /// Stop this far into the recording. Default nil: at its end.
    public var to: Duration? = nil
    /// Wait for the first subscriber before starting the clock. Default true.
    public var waitForSubscriber = true
    /// A heartbeat (sequence and digest) this often, as a hub sends. Default 1 s.
    public var heartbeatInterval: Duration = .seconds(1)
    /// Batches published per turn at `speed` nil, between which requests are served. Default 256.
    public var burst = 256
    /// CURVE and an access list, as a hub's: only users who may watch the
    /// board get its batches and snapshots. Default nil: plain text.
    public var security: HubSecurity? = nil

    public init() {}
}

/// What a replay did.
public struct ReplayResult: Sendable {
    public var batches: Int
    public var samples: Int
    /// The board's sequence and digest after the last batch replayed.
    public var sequence: UInt64
    public var digest: BoardDigest
    /// The recording's span replayed, and the wall time it took.
    public var recordedSeconds: Double
    public var wallSeconds: Double
    /// How late each batch went out against its scaled recorded time, in µs
    /// (p50, p99, max; never negative: a batch is never sent early).
    public var latenessP50: Int64
    public var latenessP99: Int64
    public var latenessMax: Int64
    public var earliest: Int64
}

/// A recorded board republished with its original timing (scaled), on a
/// publish and a snapshot endpoint that speak exactly the hub's protocol: any
/// spectator or `BoardSubscriber` attaches to it as to a live board.
/// One thread owns both sockets and the board.
public final class BoardReplay: Sendable {
    public let configuration: ReplayConfiguration
    public let board: String
    private let history: LoadedHistory
    private let logger: Logger
    private let context: ZMQContext
    private let mailbox: Mailbox<StopCommand>
    private let thread = SocketThread(name: "touchsync-replay")
    /// The replay's result: nil when it was stopped before the end.
    private let outcome = Completion<ReplayResult?>()
    private let progressState = Mutex<(published: Int, sequence: UInt64)>((0, 0))
    private let clockStartedState = Atomic<Bool>(false)
    private let authentication = Mutex<AuthenticationService?>(nil)

    /// - Parameter history: the board from the checkpoint at or before `configuration.from` (see `BoardHistory.load`).
    public init(
        board: String, history: LoadedHistory, configuration: ReplayConfiguration, logger: Logger, context: ZMQContext? = nil
    ) throws {
        self.board = board
        self.history = history
        self.configuration = configuration
        self.logger = logger
        self.context = try context ?? ZMQContext()
        mailbox = try Mailbox()
    }

    /// Binds both endpoints and starts; returns where it listens (publish, snapshot).
    public func start() async throws -> (publish: String, snapshot: String) {
        let (board, history, configuration, logger, context, mailbox) = (board, history, configuration, logger, context, mailbox)
        let service = try await AuthenticationService.start(
            configuration.security, context: context, logger: logger, metricsFactory: MetricsSystem.factory)
        authentication.withLock { $0 = service }
        let granted = service?.access
        return try await withCheckedThrowingContinuation { continuation in
            thread.start { [self] in
                let loop: ReplayLoop
                do {
                    loop = try ReplayLoop(
                        board: board, history: history, configuration: configuration, logger: logger, context: context,
                        mailbox: mailbox, access: granted)
                } catch {
                    continuation.resume(throwing: error)
                    self.finish(nil)  // nobody waits for a replay that never started
                    return
                }
                continuation.resume(returning: loop.endpoints)
                loop.run(
                    clockStarted: { self.clockStartedState.store(true, ordering: .relaxed) },
                    progress: { published, sequence in self.progressState.withLock { $0 = (published, sequence) } },
                    finished: { result in self.finish(result) })
                self.finish(nil)
            }
        }
    }

    /// Batches published so far, and the sequence reached.
    public var progress: (published: Int, sequence: UInt64) { progressState.withLock { $0 } }

    /// Whether the replay's clock runs: at once with `waitForSubscriber` false,
    /// else from the first subscription to the board.
    public var clockStarted: Bool { clockStartedState.load(ordering: .relaxed) }

    /// Batches to publish in all (from `from` to `to`).
    public var total: Int { ReplayLoop.window(history, configuration).count }

    private func finish(_ result: ReplayResult?) { outcome.complete(result) }

    /// Waits until the last batch is out (nil if stopped before, or if the waiting task is cancelled).
    public func finished() async -> ReplayResult? {
        await outcome.wait() ?? nil
    }

    /// Stops serving and closes both sockets.
    public func stop() async {
        mailbox.post(.stop)
        await thread.finished()
        await authentication.withLock({ $0.take() })?.stop()
    }
}

final class ReplayLoop {
    private let board: String
    private let history: LoadedHistory
    private let configuration: ReplayConfiguration
    private let logger: Logger
    private let mailbox: Mailbox<StopCommand>
    private let publish: ZMQSocket
    private let snapshots: ZMQSocket
    private let snapshotService: SnapshotService
    private var channel: BoardChannel
    private let clock = ContinuousClock()
    private let event = ZMQMessage()
    private var subscribed = false
    private let access: AccessControl?
    let endpoints: (publish: String, snapshot: String)

    init(
        board: String, history: LoadedHistory, configuration: ReplayConfiguration, logger: Logger, context: ZMQContext,
        mailbox: Mailbox<StopCommand>, access: AccessControl? = nil
    ) throws {
        self.access = access
        self.board = board
        self.history = history
        self.configuration = configuration
        self.logger = logger
        self.mailbox = mailbox
        publish = try ZMQSocket(context, type: .xpub)
        snapshots = try ZMQSocket(context, type: .router)
        try access?.serve(publish: publish, snapshots: snapshots)
        try publish.setXPubVerbose(true)
        try publish.setSendHighWaterMark(100_000)
        try publish.bind(configuration.publishEndpoint)
        try snapshots.setRouterMandatory(true)
        try snapshots.setMaxMessageSize(64 << 10)
        try snapshots.bind(configuration.snapshotEndpoint)
        snapshotService = SnapshotService(socket: snapshots, logger: logger)
        endpoints = (try publish.lastEndpoint, try snapshots.lastEndpoint)
        // The board at `from`: the checkpoint plus the batches before it.
        channel = BoardChannel(name: board, recovered: history.start)
        let skipped = Self.window(history, configuration).lowerBound
        for batch in history.batches[..<skipped] { try channel.applyRecorded(batch.proto) }
    }

    /// The batches between `from` and `to`, as indices into `history.batches`.
    static func window(_ history: LoadedHistory, _ configuration: ReplayConfiguration) -> Range<Int> {
        let from = history.firstTime + microseconds(configuration.from)
        let to = configuration.to.map { history.firstTime + microseconds($0) } ?? Int64.max
        let first = history.batches.firstIndex { $0.hubTime >= from } ?? history.batches.count
        let end = history.batches.firstIndex { $0.hubTime > to } ?? history.batches.count
        return first..<max(first, end)
    }

    func run(clockStarted: () -> Void, progress: (Int, UInt64) -> Void, finished: (ReplayResult) -> Void) {
        defer {
            publish.close()
            snapshots.close()
            _ = mailbox.close()
        }
        let window = Self.window(history, configuration)
        let origin = history.firstTime + microseconds(configuration.from)
        var next = window.lowerBound
        var start: ContinuousClock.Instant? = configuration.waitForSubscriber ? nil : clock.now
        if start != nil { clockStarted() }
        var nextHeartbeat = clock.now
        var lateness: [Int64] = []
        lateness.reserveCapacity(window.count)
        var samples = 0
        var done = false
        do {
            var loop = try PollLoop(mailbox: mailbox, sockets: [publish, snapshots])
            try loop.run(
                deadline: {
                    guard let start, next < window.upperBound else { return nextHeartbeat }
                    return min(nextHeartbeat, due(history.batches[next], start: start, origin: origin))
                },
                commands: { _ in .stop },
                readable: { index in
                    if index == 0 { try drainSubscriptions() }
                    if index == 1 {
                        try snapshotService.drain(
                            limit: 64,
                            snapshot: { request in request.board == board ? channel.snapshot() : nil },
                            forbidden: { user, requested in access?.refusal(for: user, board: requested) },
                            boards: {
                                let state = channel.state
                                return [
                                    BoardSummary(
                                        board: board, sequence: state.sequence, acceptedStrokes: state.acceptedStrokes.count,
                                        activeStrokes: state.touches.values.reduce(0) { $0 + $1.count }, agents: 0, lastChangeTime: 0)
                                ]
                            })
                    }
                },
                turnEnded: {
                    if start == nil && subscribed {
                        start = clock.now
                        clockStarted()
                    }
                    if let start {
                        var sent = 0
                        while next < window.upperBound, sent < configuration.burst || configuration.speed != nil {
                            let batch = history.batches[next]
                            let dueAt = due(batch, start: start, origin: origin)
                            let now = clock.now
                            guard now >= dueAt else { break }
                            lateness.append(microseconds(now - dueAt))
                            try channel.applyRecorded(batch.proto)
                            try publish.send(multipart: [channel.topic, WireCodec.field(1, wrapping: WireCodec.encode(batch.proto))])
                            samples += batch.sampleCount
                            next += 1
                            sent += 1
                        }
                        if sent > 0 { progress(next - window.lowerBound, channel.state.sequence) }
                        if next == window.upperBound && !done {
                            done = true
                            finished(result(lateness: lateness, samples: samples, start: start, origin: origin, window: window))
                            logger.info("replay finished", metadata: ["board": "\(board)", "sequence": "\(channel.state.sequence)"])
                        }
                    }
                    if clock.now >= nextHeartbeat {
                        sendHeartbeat()
                        nextHeartbeat = clock.now + configuration.heartbeatInterval
                    }
                })
        } catch let error as ZMQError where error.isTerminated {
            return
        } catch {
            logger.error("replay stopped", metadata: ["board": "\(board)", "error": "\(error)"])
        }
    }

    private func sendHeartbeat() {
        var message = Touchsync_V1_PublishMessage()
        message.heartbeat = channel.heartbeat(hubTime: wallClockMicroseconds())
        _ = try? publish.send(multipart: [channel.topic, WireCodec.encode(message)], dontWait: true)
    }

    private func due(_ batch: RecordedBatch, start: ContinuousClock.Instant, origin: Int64) -> ContinuousClock.Instant {
        guard let speed = configuration.speed else { return start }
        return start + .microseconds(Int64(Double(batch.hubTime - origin) / speed))
    }

    private func drainSubscriptions() throws(ZMQError) {
        while try publish.receive(into: event, dontWait: true) {
            if let access, try access.admit(event, on: publish) == nil { continue }
            let bytes = event.bytes
            if bytes.first == 1 && Array(bytes.dropFirst()) == channel.topic {
                subscribed = true
                sendHeartbeat()  // tell the newcomer where the board stands, as a hub does
            }
        }
    }

    private func result(
        lateness: [Int64], samples: Int, start: ContinuousClock.Instant, origin: Int64, window: Range<Int>
    ) -> ReplayResult {
        let sorted = lateness.sorted()
        func percentile(_ p: Double) -> Int64 { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        let recorded = window.isEmpty ? 0 : Double(history.batches[window.upperBound - 1].hubTime - origin) / 1e6
        return ReplayResult(
            batches: window.count, samples: samples, sequence: channel.state.sequence, digest: channel.digest(),
            recordedSeconds: recorded, wallSeconds: Double(microseconds(clock.now - start)) / 1e6,
            latenessP50: percentile(0.5), latenessP99: percentile(0.99), latenessMax: sorted.last ?? 0,
            earliest: sorted.first ?? 0)
    }
}
