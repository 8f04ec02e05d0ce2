import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncWire
import ZeroMQ

/// Requests to hubs' ROUTER endpoints (board lists, snapshots, histories)
/// on one thread: a gateway serving many page requests starts no thread per
/// request. Each request has a DEALER of its own, closed with its answer:
/// the hub allows each connection a few snapshots a second, and one
/// connection for every page would put all of a gateway's users under one
/// allowance (an index of ten boards would lose half its thumbnails) until
/// the hub can account for them one by one. Each request is bounded by its
/// time-out; a refused CURVE handshake fails it at once.
public final class HubRequestHost: Sendable {
    /// One request: its bytes, where, until when, and what to do with each reply.
    struct Request: Sendable {
        let id: UInt64
        /// The reply's field that carries the request id (3 in `SnapshotReply`, 1 in `HistoryReply`).
        let idField: UInt32
        let endpoint: String
        let curve: CurveClientKeys?
        let bytes: [UInt8]
        let deadline: ContinuousClock.Instant
        /// Each reply carrying this request's id: true when the answer is complete.
        let reply: @Sendable (ZMQMessage) throws -> Bool
        let done: @Sendable (Result<Void, any Error>) -> Void
    }

    enum Command: Sendable {
        case send(Request)
        case cancel(id: UInt64)
        case stop
    }

    private let mailbox: Mailbox<Command>
    private let thread = SocketThread(name: "touchsync-hub-requests")
    private let context: ZMQContext
    private let logger: Logger
    private let nextID = Atomic<UInt64>(UInt64.random(in: 1...(UInt64.max >> 2)))

    public init(context: ZMQContext, logger: Logger) throws {
        mailbox = try Mailbox()
        self.context = context
        self.logger = logger
    }

    public func start() {
        let (mailbox, context, logger) = (mailbox, context, logger)
        thread.start { Loop(mailbox: mailbox, context: context, logger: logger).run() }
    }

    /// Stops the thread; requests still waiting fail with `timedOut`.
    public func stop() async {
        _ = mailbox.post(.stop)
        await thread.finished()
    }

    /// A request id not used by this host before.
    public func newRequestID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).newValue }

    /// Sends `request` (whose `request_id` is `id`) to `endpoint` and hands
    /// `reply` each reply with that id until it says the answer is complete.
    /// Throws `HubRequestFailure` (refused, timed out) or what `reply` throws.
    public func exchange(
        id: UInt64, idField: UInt32, _ request: [UInt8], endpoint: String, curve: CurveClientKeys?, timeout: Duration,
        reply: @escaping @Sendable (ZMQMessage) throws -> Bool
    ) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let request = Request(
                    id: id, idField: idField, endpoint: endpoint, curve: curve, bytes: request, deadline: .now + timeout, reply: reply,
                    done: { continuation.resume(with: $0) })
                if !mailbox.post(.send(request)) { continuation.resume(throwing: HubRequestFailure.timedOut) }
            }
        } onCancel: {
            _ = mailbox.post(.cancel(id: id))
        }
    }

    /// The host's thread: owns every DEALER.
    private final class Loop {
        let mailbox: Mailbox<Command>
        let context: ZMQContext
        let logger: Logger
        struct Line {
            let socket: ZMQSocket
            let monitor: ZMQHandshakeMonitor?
            var failures = 0
        }
        /// Each waiting request's connection, by request id.
        var lines: [UInt64: Line] = [:]
        var pending: [UInt64: Request] = [:]
        let message = ZMQMessage()

        init(mailbox: Mailbox<Command>, context: ZMQContext, logger: Logger) {
            self.mailbox = mailbox
            self.context = context
            self.logger = logger
        }

        func run() {
            defer {
                for request in pending.values { request.done(.failure(HubRequestFailure.timedOut)) }
                for case .send(let request) in mailbox.close() { request.done(.failure(HubRequestFailure.timedOut)) }
                for id in Array(lines.keys) { closeLine(id) }
            }
            while true {
                var poller = ZMQPoller()
                let mailboxIndex = poller.add(fileDescriptor: mailbox.fileDescriptor)
                let ids = Array(lines.keys)
                for id in ids { try? poller.add(lines[id]!.socket) }
                // Wake for the earliest deadline, and now and then while a handshake may fail.
                var deadline = pending.values.map(\.deadline).min()
                if !pending.isEmpty { deadline = min(deadline ?? .now, .now + .milliseconds(250)) }
                let timeout = deadline.map { ZMQPoller.timeout(until: $0) } ?? -1
                do { _ = try poller.poll(timeoutMilliseconds: timeout) } catch { return }
                if poller.isReadable(mailboxIndex) {
                    for command in mailbox.drain() {
                        switch command {
                        case .stop: return
                        case .cancel(let id): finish(id, .failure(CancellationError()))
                        case .send(let request): send(request)
                        }
                    }
                }
                for (offset, id) in ids.enumerated() where poller.isReadable(offset + 1) { receive(id) }
                checkHandshakes()
                let now = ContinuousClock.now
                for request in pending.values where request.deadline <= now { finish(request.id, .failure(HubRequestFailure.timedOut)) }
            }
        }

        /// Answers request `id` and closes its connection.
        private func finish(_ id: UInt64, _ result: Result<Void, any Error>) {
            closeLine(id)
            pending.removeValue(forKey: id)?.done(result)
        }

        private func closeLine(_ id: UInt64) {
            guard let line = lines.removeValue(forKey: id) else { return }
            line.monitor?.close()
            line.socket.close()
        }

        private func send(_ request: Request) {
            do {
                let socket = try ZMQSocket(context, type: .dealer)
                if let curve = request.curve {
                    try socket.setCurveServerKey(curve.serverPublicKey)
                    try socket.setCurvePublicKey(curve.client.publicKey)
                    try socket.setCurveSecretKey(curve.client.secretKey)
                }
                let monitor = try? ZMQHandshakeMonitor(socket, context: context)
                lines[request.id] = Line(socket: socket, monitor: monitor)
                pending[request.id] = request
                try socket.connect(request.endpoint)
                _ = try socket.send(request.bytes, dontWait: true)
            } catch {
                finish(request.id, .failure(HubRequestFailure.refused(code: nil, message: "cannot reach \(request.endpoint): \(error)")))
            }
        }

        private func receive(_ id: UInt64) {
            guard let socket = lines[id]?.socket, let request = pending[id] else { return }
            while lines[id] != nil, (try? socket.receive(into: message, dontWait: true)) == true {
                // Only this request's replies come on its connection; the id is checked anyway.
                guard message.withUnsafeBytes({ ProtoField.varint(request.idField, in: $0) }) == id else { continue }
                do {
                    if try request.reply(message) { finish(id, .success(())) }
                } catch {
                    finish(id, .failure(error))
                }
            }
        }

        /// A refused key (or plain text to a CURVE hub) never brings a reply: the request fails at once.
        private func checkHandshakes() {
            for id in Array(lines.keys) {
                guard let line = lines[id], let monitor = line.monitor, let request = pending[id] else { continue }
                var failures = line.failures
                for event in monitor.events() {
                    guard let problem = AgentConnection.handshakeProblem(event, curve: request.curve != nil, failures: &failures) else { continue }
                    finish(id, .failure(HubRequestFailure.refused(code: nil, message: problem)))
                    break
                }
                lines[id]?.failures = failures
            }
        }
    }
}
