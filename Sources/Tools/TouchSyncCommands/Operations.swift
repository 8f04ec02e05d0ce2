import ArgumentParser
import Foundation
import Logging
import Prometheus
import TouchSyncAccess
import TouchSyncClient
import TouchSyncWire
import ZeroMQ

/// `hub --metrics HOST:PORT`: the hub's metrics as Prometheus text over
/// plain HTTP (`GET /metrics`), served by a ZeroMQ STREAM socket (raw TCP)
/// on its own thread and context, outside any CURVE setup: one response per
/// request needs no HTTP framework. Bounded against idle and slow clients:
/// at most `maxConnections` at once (a new one closes the one waiting
/// longest), and a connection that has not sent its request within
/// `requestTimeout` is closed, so idle connections cannot take the
/// descriptors agents need, nor keep a scraper out.
final class MetricsEndpoint: Sendable {
    /// Where it listens (`tcp://HOST:PORT`, the port filled in).
    let endpoint: String
    private let mailbox: Mailbox<StopCommand>
    private let thread: SocketThread
    private let context: ZMQContext
    static let maxConnections = 32
    static let requestTimeout: Duration = .seconds(5)

    /// Binds `address` (HOST:PORT) now, so a bad address fails the start.
    init(registry: PrometheusCollectorRegistry, address: String) async throws {
        let mailbox = try Mailbox<StopCommand>()
        let context = try ZMQContext()
        let thread = SocketThread(name: "touchsync-metrics")
        endpoint = try await thread.start {
            let socket = try ZMQSocket(context, type: .stream)
            try socket.setLinger(milliseconds: 0)
            try socket.bind("tcp://" + address)
            return (try socket.lastEndpoint, { Self.serve(socket, registry: registry, mailbox: mailbox) })
        }
        self.mailbox = mailbox
        self.thread = thread
        self.context = context
    }

    func stop() async {
        mailbox.post(.stop)
        await thread.finished()
        context.shutdown()
    }

    /// The response to one request's first bytes: `/metrics` for GET, else 404 or 405.
    static func response(to request: String, registry: PrometheusCollectorRegistry) -> [UInt8] {
        let line = request.prefix { $0 != "\r" && $0 != "\n" }.split(separator: " ")
        let (status, body): (String, [UInt8])
        if line.first != "GET" {
            (status, body) = ("405 Method Not Allowed", Array("only GET /metrics here\n".utf8))
        } else if line.count < 2 || !(line[1] == "/metrics" || line[1].hasPrefix("/metrics?")) {
            (status, body) = ("404 Not Found", Array("GET /metrics\n".utf8))
        } else {
            (status, body) = ("200 OK", registry.emitToBuffer())
        }
        let head =
            "HTTP/1.1 \(status)\r\nContent-Type: text/plain; version=0.0.4\r\n"
            + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    private static func serve(_ socket: ZMQSocket, registry: PrometheusCollectorRegistry, mailbox: Mailbox<StopCommand>) {
        defer { socket.close() }
        let part = ZMQMessage()
        // Open connections by id, with when each connected.
        var open: [[UInt8]: ContinuousClock.Instant] = [:]
        // Closed here: their disconnect notice is not a new connection (ids are never reused).
        var closed = Set<[UInt8]>()
        func close(_ id: [UInt8]) throws {
            open[id] = nil
            if closed.count > 4096 { closed.removeAll() }  // a lost notice at worst reads as a connection, timed out soon
            closed.insert(id)
            _ = try socket.send(multipart: [id, []], dontWait: true)  // an empty frame closes the connection
        }
        do {
            var loop = try PollLoop(mailbox: mailbox, sockets: [socket])
            try loop.run(
                deadline: { open.values.min().map { $0 + requestTimeout } },
                commands: { _ in .stop },
                readable: { _ in
                    // A STREAM socket delivers [connection id][bytes]; empty bytes mean a connect or a disconnect.
                    while try socket.receive(into: part, dontWait: true) {
                        let id = part.bytes
                        guard part.hasMore, try socket.receive(into: part, dontWait: true) else { continue }
                        if part.count == 0 {
                            if closed.remove(id) == nil && open.removeValue(forKey: id) == nil {  // a new connection
                                // Full: the longest-waiting one goes (a scraper sends its request at once; idlers wait).
                                if open.count >= maxConnections, let oldest = open.min(by: { $0.value < $1.value })?.key { try close(oldest) }
                                open[id] = .now
                            }
                            continue
                        }
                        guard open[id] != nil else { continue }  // closed already (over the cap, or timed out)
                        _ = try socket.send(multipart: [id, response(to: part.string, registry: registry)], dontWait: true)
                        try close(id)
                    }
                },
                turnEnded: {
                    let now = ContinuousClock.now
                    for (id, since) in open where now - since >= requestTimeout { try close(id) }
                })
        } catch {
            // The socket failed or its context ended: nothing more to serve.
        }
    }
}

/// `touchsync health`: is a hub serving? Asks its snapshot endpoint for a
/// board (one that is never created: a probe costs the hub nothing) and
/// expects an answer within the time-out. For HEALTHCHECKs and scripts.
struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Check that a hub answers (exit 0) or not (exit 1).",
        discussion: """
            Sends a snapshot request to the hub's --snapshot endpoint and waits for \
            the answer, which the hub's own loop gives: a hub that answers is \
            listening and turning. With an authenticated hub, pass --key and \
            --hub-key of a user who may watch the probe board (--board).
            """)

    @OptionGroup var hub: SubscriberAddressOptions
    @Option(help: "The board the probe asks for (nothing is created).") var board = "touchsync-health"
    @Option(parsing: .unconditional, help: "Seconds to wait for the answer.") var timeout = 3.0

    func validate() throws {
        try validateBoard(board)
        try hub.requireOneHub("health")
        guard timeout > 0 && timeout <= 300 else { throw ValidationError("--timeout must be above 0 and at most 300 seconds") }
    }

    func run() async throws {
        let hub = try self.hub.resolved(board: board)
        let curve = try hub.keys.curve()
        let started = ContinuousClock.now
        let answer = try await HealthProbe.ask(
            snapshot: hub.snapshot, board: board, curve: curve, timeout: Duration(secondsValue: timeout))
        let elapsed = Double((ContinuousClock.now - started).components.attoseconds) / 1e15
            + Double((ContinuousClock.now - started).components.seconds) * 1000
        switch answer {
        case .answered(let sequence):
            emit(String(format: "healthy: the hub at %@ answered in %.1f ms (board %@ at batch %llu)", hub.snapshot, elapsed, board, sequence))
        case .refused(let why):
            emit("healthy, but it refused the probe: \(why)")
        case .silent:
            throw CommandFailure("unhealthy: no answer from \(hub.snapshot) within \(timeout) s")
        case .cannotConnect(let why):
            throw CommandFailure("unhealthy: \(why)")
        }
    }
}

enum HealthProbe {
    enum Answer: Sendable {
        case answered(sequence: UInt64)
        /// The hub answered with an error (it is serving).
        case refused(String)
        case silent
        case cannotConnect(String)
    }

    static func ask(snapshot endpoint: String, board: String, curve: CurveClientKeys?, timeout: Duration) async throws -> Answer {
        let thread = SocketThread(name: "touchsync-health")
        let answer = try await thread.start(building: { () throws -> (ready: Answer, run: () -> Void) in
            (try probe(endpoint: endpoint, board: board, curve: curve, timeout: timeout), {})
        })
        await thread.finished()
        return answer
    }

    private static func probe(endpoint: String, board: String, curve: CurveClientKeys?, timeout: Duration) throws -> Answer {
        let context = try ZMQContext()
        defer { context.shutdown() }
        let socket = try ZMQSocket(context, type: .dealer)
        defer { socket.close() }
        try socket.setLinger(milliseconds: 0)
        if let curve {
            try socket.setCurveServerKey(curve.serverPublicKey)
            try socket.setCurvePublicKey(curve.client.publicKey)
            try socket.setCurveSecretKey(curve.client.secretKey)
        }
        let monitor = try ZMQHandshakeMonitor(socket, context: context)
        defer { monitor.close() }
        try socket.connect(endpoint)
        var request = Touchsync_V1_SnapshotRequest()
        request.board = board
        request.requestID = UInt64.random(in: 1...UInt64.max)
        _ = try socket.send(WireCodec.encode(request), dontWait: true)
        let deadline = ContinuousClock.now + timeout
        let message = ZMQMessage()
        while ContinuousClock.now < deadline {
            for event in monitor.events() {
                switch event {
                case .refused: return .cannotConnect("the hub refused this key")
                case .protocolError, .failed:
                    return .cannotConnect(curve == nil ? "the hub refuses the handshake: it probably requires CURVE (pass --key and --hub-key)" : "the CURVE handshake fails: is --hub-key the hub's public key?")
                case .succeeded: break
                }
            }
            guard try socket.waitReadable(timeoutMilliseconds: 50), try socket.receive(into: message, dontWait: true) else { continue }
            guard let reply = try? message.withUnsafeBytes({ try WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: $0) }),
                reply.requestID == request.requestID
            else { continue }
            switch reply.body {
            case .chunk(let chunk): return .answered(sequence: chunk.sequence)
            case .error(let error): return .refused("\(error.code): \(error.message)")
            case .boards, nil: return .answered(sequence: 0)
            }
        }
        return .silent
    }
}
