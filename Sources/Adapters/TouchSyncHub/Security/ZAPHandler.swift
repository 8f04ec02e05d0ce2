import CoreMetrics
import Logging
import TouchSyncAccess
import TouchSyncHubCore
import ZeroMQ

/// ZeroMQ's authentication protocol (ZAP, RFC 27) for the hub's context:
/// libzmq asks this handler about every CURVE handshake on every hub socket,
/// and it answers with the user the access list gives the client's public
/// key, as the connection's `User-Id`; unknown keys are refused (400), so
/// the client never gets a working connection. Runs on its own thread with
/// a REP socket on `inproc://zeromq.zap.01`.
final class ZAPHandler {
    static let endpoint = "inproc://zeromq.zap.01"
    private let socket: ZMQSocket
    private let access: AccessControl
    private let mailbox: Mailbox<StopCommand>
    private let logger: Logger
    /// When each address was last logged as refused: a scanner gets one line per minute, not one per attempt.
    private var lastLogged: [String: ContinuousClock.Instant] = [:]
    static let logInterval: Duration = .seconds(60)

    /// Binds the handler's endpoint (before any CURVE socket of the context binds).
    init(context: ZMQContext, access: AccessControl, mailbox: Mailbox<StopCommand>, logger: Logger) throws {
        socket = try ZMQSocket(context, type: .rep)
        try socket.setLinger(milliseconds: 0)
        try socket.bind(Self.endpoint)
        self.access = access
        self.mailbox = mailbox
        self.logger = logger
    }

    func run() {
        defer {
            socket.close()
            _ = mailbox.close()
        }
        do {
            var loop = try PollLoop(mailbox: mailbox, sockets: [socket])
            try loop.run(
                deadline: { nil }, commands: { _ in .stop },
                readable: { _ in
                    while let request = try socket.receiveMultipart(timeoutMilliseconds: 0) { answer(request) }
                }, turnEnded: {})
        } catch {
            if !((error as? ZMQError)?.isTerminated ?? false) {
                logger.critical("authentication handler failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Request: version, request id, domain, address, routing id, mechanism, credentials.
    private func answer(_ request: [ZMQMessage]) {
        guard request.count >= 6 else { return }
        let requestID = request[1].bytes
        let address = request[3].string
        let mechanism = request[5].string
        var user: String? = nil
        var why = "the hub accepts only CURVE connections"
        if mechanism == "CURVE", request.count >= 7 {
            if let key = request[6].withUnsafeBytes({ ZMQCurve.z85($0) }) {
                user = access.current.user(withKey: key)
                why = "unknown key \(key)"
            }
        }
        let reply: [[UInt8]]
        if let user {
            access.accepted.increment()
            reply = [Array("1.0".utf8), requestID, Array("200".utf8), Array("OK".utf8), Array(user.utf8), []]
        } else {
            access.refused.increment()
            let now = ContinuousClock.now
            if lastLogged[address].map({ now - $0 >= Self.logInterval }) ?? true {
                if lastLogged.count > 10_000 { lastLogged.removeAll() }
                lastLogged[address] = now
                logger.warning("connection refused", metadata: ["address": "\(address)", "why": "\(why)"])
            }
            reply = [Array("1.0".utf8), requestID, Array("400".utf8), Array("key not allowed".utf8), [], []]
        }
        _ = try? socket.send(multipart: reply)
    }
}

/// The access list and its ZAP handler thread, started before any CURVE
/// socket of `context` binds and stopped after they close.
final class AuthenticationService: Sendable {
    let access: AccessControl
    private let mailbox: Mailbox<StopCommand>
    private let thread: SocketThread

    private init(access: AccessControl, mailbox: Mailbox<StopCommand>, thread: SocketThread) {
        self.access = access
        self.mailbox = mailbox
        self.thread = thread
    }

    /// The service when `security` is given (nil: a plain-text publisher, nothing to start).
    static func start(
        _ security: HubSecurity?, context: ZMQContext, logger: Logger, metricsFactory: any MetricsFactory
    ) async throws -> AuthenticationService? {
        guard let security else { return nil }
        return try await start(security: security, context: context, logger: logger, metricsFactory: metricsFactory)
    }

    static func start(
        security: HubSecurity, context: ZMQContext, logger: Logger, metricsFactory: any MetricsFactory
    ) async throws -> AuthenticationService {
        let access = try AccessControl(security: security, metricsFactory: metricsFactory)
        let mailbox = try Mailbox<StopCommand>()
        let thread = SocketThread(name: "touchsync-zap")
        try await thread.start {
            let handler = try ZAPHandler(context: context, access: access, mailbox: mailbox, logger: logger)
            return ((), handler.run)
        }
        return AuthenticationService(access: access, mailbox: mailbox, thread: thread)
    }

    func stop() async {
        mailbox.post(.stop)
        await thread.finished()
    }
}
