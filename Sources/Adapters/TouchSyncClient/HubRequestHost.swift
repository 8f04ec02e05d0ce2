import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncWire
import ZeroMQ

/// Requests to hubs' ROUTER endpoints (board lists, snapshots, histories)
/// over long-lived connections: one thread, one DEALER per endpoint kept
/// open, replies matched to requests by their `request_id` (field 1 of
/// every `SnapshotReply` and `HistoryReply`). A gateway serving many page
/// requests opens no thread and no connection per request. Each request is
/// bounded by its time-out; a refused CURVE handshake fails the requests
/// waiting on that connection at once.
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
            let curve: Bool
            var failures = 0
        }
        var lines: [String: Line] = [:]
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
                for line in lines.values {
                    line.monitor?.close()
                    line.socket.close()
                }
            }
            while true {
                var poller = ZMQPoller()
                let mailboxIndex = poller.add(fileDescriptor: mailbox.fileDescriptor)
                let endpoints = Array(lines.keys)
                for endpoint in endpoints { try? poller.add(lines[endpoint]!.socket) }
                // Wake for the earliest deadline, and now and then while a handshake may fail.
                var deadline = pending.values.map(\.deadline).min()
                if !pending.isEmpty { deadline = min(deadline ?? .now, .now + .milliseconds(250)) }
                let timeout = deadline.map { ZMQPoller.timeout(until: $0) } ?? -1
                do { _ = try poller.poll(timeoutMilliseconds: timeout) } catch { return }
                if poller.isReadable(mailboxIndex) {
                    for command in mailbox.drain() {
                        switch command {
                        case .stop: return
                        case .cancel(let id): pending.removeValue(forKey: id)?.done(.failure(CancellationError()))
                        case .send(let request): send(request)
                        }
                    }
                }
                for (offset, endpoint) in endpoints.enumerated() where poller.isReadable(offset + 1) { receive(on: endpoint) }
                checkHandshakes()
                let now = ContinuousClock.now
                for request in pending.values where request.deadline <= now {
                    pending[request.id] = nil
                    request.done(.failure(HubRequestFailure.timedOut))
                }
            }
        }

        private func send(_ request: Request) {
            do {
                let key = request.endpoint + (request.curve.map { "|" + $0.serverPublicKey } ?? "")
                if lines[key] == nil {
                    let socket = try ZMQSocket(context, type: .dealer)
                    if let curve = request.curve {
                        try socket.setCurveServerKey(curve.serverPublicKey)
                        try socket.setCurvePublicKey(curve.client.publicKey)
                        try socket.setCurveSecretKey(curve.client.secretKey)
                    }
                    let monitor = try? ZMQHandshakeMonitor(socket, context: context)
                    try socket.connect(request.endpoint)
                    lines[key] = Line(socket: socket, monitor: monitor, curve: request.curve != nil)
                }
                pending[request.id] = request
                _ = try lines[key]!.socket.send(request.bytes, dontWait: true)
            } catch {
                pending[request.id] = nil
                request.done(.failure(HubRequestFailure.refused(code: nil, message: "cannot reach \(request.endpoint): \(error)")))
            }
        }

        private func receive(on key: String) {
            guard let socket = lines[key]?.socket else { return }
            while (try? socket.receive(into: message, dontWait: true)) == true {
                // Each pending request's id field: two kinds of reply, so at most two reads.
                var matched: Request? = nil
                for field in Set(pending.values.map(\.idField)) {
                    if let id = message.withUnsafeBytes({ ProtoField.varint(field, in: $0) }), let request = pending[id], request.idField == field {
                        matched = request
                        break
                    }
                }
                guard let request = matched else { continue }
                let id = request.id
                do {
                    if try request.reply(message) {
                        pending[id] = nil
                        request.done(.success(()))
                    }
                } catch {
                    pending[id] = nil
                    request.done(.failure(error))
                }
            }
        }

        /// A refused key (or plain text to a CURVE hub) never brings a reply: the requests on that line fail at once.
        private func checkHandshakes() {
            for (key, line) in lines {
                guard let monitor = line.monitor else { continue }
                var failures = line.failures
                for event in monitor.events() {
                    guard let problem = AgentConnection.handshakeProblem(event, curve: line.curve, failures: &failures) else { continue }
                    let endpoint = key.split(separator: "|").first.map(String.init) ?? key
                    for request in pending.values where request.endpoint == endpoint {
                        pending[request.id] = nil
                        request.done(.failure(HubRequestFailure.refused(code: nil, message: problem)))
                    }
                }
                lines[key]?.failures = failures
            }
        }

    }
}
