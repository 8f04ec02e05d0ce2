import CoreMetrics
import Foundation
import Logging
import Synchronization
import TestSupport
import Testing
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncSimulation
import TouchSyncWire
import ZeroMQ

/// Quiet by default; TOUCHSYNC_TEST_LOG=debug shows the hub's logs.
func testLogger(_ label: String) -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = ProcessInfoLevel.level
    return logger
}

enum ProcessInfoLevel {
    static let level: Logger.Level = {
        if let value = getenv("TOUCHSYNC_TEST_LOG"), let level = Logger.Level(rawValue: String(cString: value)) {
            return level
        }
        return .critical
    }()
}

/// A hub on free loopback ports, with a shared context for its clients.
struct TestHub {
    let hub: TouchSyncHub
    let endpoints: HubEndpoints
    let context: ZMQContext

    static func start(
        _ configure: (inout HubConfiguration) -> Void = { _ in }, metrics: (any MetricsFactory)? = nil, logger: Logger? = nil
    ) async throws -> TestHub {
        var configuration = HubConfiguration.loopbackEphemeral()
        configuration.timing.heartbeatInterval = .milliseconds(200)
        configure(&configuration)
        let context = try ZMQContext()
        let hub = try TouchSyncHub(
            configuration: configuration, logger: logger ?? testLogger("hub"), metricsFactory: metrics, context: context)
        let endpoints = try await hub.start()
        return TestHub(hub: hub, endpoints: endpoints, context: context)
    }

    func agent(board: String, identity: String? = nil, endpoint: String? = nil, configure: (inout AgentConfiguration) -> Void = { _ in })
        throws -> TouchAgent
    {
        var configuration = AgentConfiguration(board: board, hubEndpoint: endpoint ?? endpoints.ingest)
        configuration.identity = identity
        configuration.heartbeatInterval = .milliseconds(100)
        configuration.hubTimeout = .milliseconds(600)
        configuration.reconnectDelay = .milliseconds(20) ... .milliseconds(200)
        configure(&configuration)
        let agent = try TouchAgent(configuration: configuration, context: context, logger: testLogger("agent"))
        agent.start()
        return agent
    }

    func subscriber(board: String, configure: (inout SubscriberConfiguration) -> Void = { _ in }) throws -> BoardSubscriber {
        var configuration = SubscriberConfiguration(
            board: board, publishEndpoint: endpoints.publish, snapshotEndpoint: endpoints.snapshot)
        configuration.snapshotTimeout = .milliseconds(500)
        configure(&configuration)
        let subscriber = try BoardSubscriber(configuration: configuration, context: context, logger: testLogger("subscriber"))
        subscriber.start()
        return subscriber
    }

    /// The hub's board, waiting until it exists.
    func board(_ name: String) async throws -> BoardState {
        for _ in 0..<400 {
            if let state = await hub.boardState(name) { return state }
            try await Task.sleep(for: .milliseconds(5))
        }
        throw TestFailure("board \(name) never appeared on the hub")
    }
}


/// A raw DEALER speaking the protocol by hand, to send what no well-behaved agent would.
final class RawAgent {
    let socket: ZMQSocket

    init(_ test: TestHub, identity: String) throws {
        socket = try ZMQSocket(test.context, type: .dealer)
        try socket.setRoutingID(Array(identity.utf8))
        try socket.connect(test.endpoints.ingest)
    }

    func send(_ message: Touchsync_V1_AgentMessage) throws { try socket.send(WireCodec.encode(message)) }
    func send(bytes: [UInt8]) throws { try socket.send(bytes) }

    func hello(board: String, version: UInt32 = 1, session: String = "raw-session", resumeAfter: UInt64 = 0) throws {
        var hello = Touchsync_V1_Hello()
        hello.protocolVersion = version
        hello.board = board
        hello.sessionID = Data(session.utf8)
        hello.resumeAfter = resumeAfter
        var message = Touchsync_V1_AgentMessage()
        message.hello = hello
        try send(message)
    }

    func frame(_ sequence: UInt64, _ changes: [TouchChange], alive: [TouchID]? = nil) throws {
        var message = Touchsync_V1_AgentMessage()
        message.sequence = sequence
        message.frame = TouchFrame(changes: changes, aliveTouches: alive).proto
        try send(message)
    }

    /// The next reply, or nil after `timeout` (waited for on a thread of its own, not the cooperative pool's).
    func reply(timeoutMilliseconds: Int = 3000) async throws -> Touchsync_V1_HubReply? {
        let socket = socket
        guard let parts = try await offThePool({ try socket.receiveBytes(timeoutMilliseconds: timeoutMilliseconds) }) else { return nil }
        return try WireCodec.decode(Touchsync_V1_HubReply.self, from: parts[0])
    }

    /// Replies until one is an error (acks and welcomes are skipped).
    func nextError(timeoutMilliseconds: Int = 3000) async throws -> Touchsync_V1_Error? {
        while let reply = try await reply(timeoutMilliseconds: timeoutMilliseconds) {
            if case .error(let error) = reply.body { return error }
        }
        return nil
    }

    func nextWelcome() async throws -> Touchsync_V1_Welcome? {
        while let reply = try await reply() {
            if case .welcome(let welcome) = reply.body { return welcome }
        }
        return nil
    }
}

func point(_ x: Double, _ y: Double, _ t: Double) -> TouchPoint { TouchPoint(x: x, y: y, timestamp: t) }

func sample(_ x: Int32, _ y: Int32, t: Int64) -> Sample { Sample(x: x, y: y, time: t) }

/// Whether something accepts TCP connections on 127.0.0.1:`port`, seen as
/// a client sees it: a connect that succeeds (closed at once) or is refused.
func isListening(port: UInt16) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    return withLoopbackAddress(port: port) { connect(descriptor, $0, $1) == 0 }
}

/// Loopback endpoints for a server a test restarts on the same ports (see `freeLoopbackPorts`).
func restartableEndpoints(_ count: Int) -> [String] { freeLoopbackPorts(count).map { "tcp://127.0.0.1:\($0)" } }

/// Starts a server again on the ports of one just stopped in this process:
/// libzmq closes a listening socket on its I/O thread after `zmq_close`
/// returns, so for a moment the port is still taken (a new process would
/// not see this). Retries the whole start while the bind says so, up to
/// `limit` (20 s: in a loaded full suite 5 s once ran out).
func startAgain<Server>(limit: Duration = .seconds(20), _ start: () async throws -> Server) async throws -> Server {
    let deadline = ContinuousClock.now + limit
    while true {
        do {
            return try await start()
        } catch where "\(error)".contains("Address already in use") && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// Keeps what a logger logged, each record with the instant it was made:
/// what a hub observed, timed on its own thread, however late this test's
/// tasks run on a busy machine (a run of hundreds of tests in parallel can
/// keep the cooperative pool from them for many seconds).
final class LogRecorder: Sendable {
    struct Record: Sendable, CustomStringConvertible {
        let at: ContinuousClock.Instant
        let message: String
        let metadata: [String: String]
        var description: String { "\(message) \(metadata.sorted { $0.key < $1.key })" }
    }

    private let records = Mutex<[Record]>([])

    /// A logger that records everything from `level` up.
    func logger(_ label: String, level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: label) { _ in Handler(recorder: self) }
        logger.logLevel = level
        return logger
    }

    /// Every record so far, one a line (for a failing test's output).
    var text: String { records.withLock { $0.map(\.description).joined(separator: "\n") } }

    /// The records so far whose metadata has `value` at `key`.
    func records(where key: String, is value: String) -> [Record] {
        records.withLock { $0.filter { $0.metadata[key] == value } }
    }

    fileprivate func append(_ record: Record) { records.withLock { $0.append(record) } }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        var metadataProvider: Logger.MetadataProvider?

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            recorder.append(
                Record(at: .now, message: event.message.description, metadata: merged.mapValues { "\($0)" }))
        }
    }
}

/// Samples a value every `interval` on a thread of its own until stopped,
/// keeping each value that differs from the one before: a watch on another
/// thread's state that no test task must be awake for (a busy run of tests
/// can withhold the cooperative pool from one for seconds).
final class ThreadSampler<Value: Equatable & Sendable>: Sendable {
    private let state = Mutex<(values: [Value], stopped: Bool)>(([], false))
    private let done = DispatchSemaphore(value: 0)

    init(every interval: Duration, _ sample: @escaping @Sendable () -> Value) {
        let microseconds = useconds_t(interval / .microseconds(1))
        Thread.detachNewThread { [self] in
            while true {
                let value = sample()
                let stopped = self.state.withLock { state in
                    if state.values.last != value { state.values.append(value) }
                    return state.stopped
                }
                if stopped { break }
                usleep(microseconds)
            }
            self.done.signal()
        }
    }

    /// Stops sampling (after one last sample) and returns the values seen, in order.
    func stop() async -> [Value] {
        state.withLock { $0.stopped = true }
        try? await offThePool { [done] in done.wait() }
        return state.withLock { $0.values }
    }
}
