import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncCore
import TouchSyncWire
import ZeroMQ

/// Why a one-off request to a hub's ROUTER endpoint (history, board list)
/// got no answer.
public enum HubRequestFailure: Error, Sendable, Equatable {
    /// The hub answered with an error, or refused the handshake (code nil).
    case refused(code: ErrorCode?, message: String)
    case timedOut
}

/// One request on a DEALER of its own thread, replies read until `reply`
/// says the answer is complete. A refused CURVE handshake is reported at
/// once (it never brings a reply).
enum HubRequest {
    static func exchange(
        _ request: [UInt8], endpoint: String, context: ZMQContext, timeout: Duration, curve: CurveClientKeys?, threadName: String,
        reply: @escaping @Sendable (ZMQMessage) throws -> Bool
    ) async throws {
        let thread = SocketThread(name: threadName)
        let _: Void = try await withCheckedThrowingContinuation { continuation in
            thread.start {
                continuation.resume(
                    with: Result {
                        try run(request, endpoint: endpoint, context: context, timeout: timeout, curve: curve, reply: reply)
                    })
            }
        }
        await thread.finished()
    }

    private static func run(
        _ request: [UInt8], endpoint: String, context: ZMQContext, timeout: Duration, curve: CurveClientKeys?,
        reply: (ZMQMessage) throws -> Bool
    ) throws {
        let socket = try ZMQSocket(context, type: .dealer)
        defer { socket.close() }
        if let curve {
            try socket.setCurveServerKey(curve.serverPublicKey)
            try socket.setCurvePublicKey(curve.client.publicKey)
            try socket.setCurveSecretKey(curve.client.secretKey)
        }
        let monitor = try? ZMQHandshakeMonitor(socket, context: context)
        defer { monitor?.close() }
        try socket.connect(endpoint)
        try socket.send(request)
        let deadline = ContinuousClock.now + timeout
        let message = ZMQMessage()
        while true {
            let milliseconds = ZMQPoller.timeout(until: deadline)
            guard milliseconds > 0 else { throw HubRequestFailure.timedOut }
            for event in monitor?.events() ?? [] {
                switch event {
                case .refused: throw HubRequestFailure.refused(code: nil, message: "the hub refused this key: ask its operator to allow it")
                case .protocolError:
                    throw HubRequestFailure.refused(
                        code: nil,
                        message: curve == nil ? "the hub requires CURVE: pass --key and --hub-key" : "the hub does not speak CURVE")
                case .failed where curve == nil:
                    throw HubRequestFailure.refused(
                        code: nil, message: "the hub refuses the handshake: it probably requires CURVE (pass --key and --hub-key)")
                case .succeeded, .failed: break
                }
            }
            // Wake up now and then to read the monitor: a refused handshake never brings a reply.
            try socket.setReceiveTimeout(milliseconds: Int32(clamping: min(milliseconds, 250)))
            guard try socket.receive(into: message) else { continue }
            if try reply(message) { return }
        }
    }
}

/// Asks a hub which boards it serves (its snapshot endpoint): those whose
/// names start with `prefix` that the caller may watch, in name order, a
/// page of at most `limit` after `after` (see `more`).
public enum BoardDirectory {
    public struct Page: Sendable {
        public var boards: [Touchsync_V1_BoardSummary]
        /// More boards follow the last one: ask again with `after` its name.
        public var more: Bool
    }

    /// - Parameters:
    ///   - host: send it from `host`'s thread (nil: a thread of its own).
    ///   - onBehalf: a gateway asking for one of its users (docs/protocol.md, "Requests on behalf of a user").
    public static func list(
        endpoint: String, prefix: String = "", after: String = "", limit: Int = 0, context: ZMQContext? = nil,
        timeout: Duration = .seconds(5), curve: CurveClientKeys? = nil, host: HubRequestHost? = nil,
        onBehalf: (actAs: String, token: String)? = nil
    ) async throws -> Page {
        var request = Touchsync_V1_SnapshotRequest()
        if let onBehalf { (request.actAs, request.token) = onBehalf }
        request.listBoards = true
        request.board = prefix
        request.after = after
        request.limit = UInt32(clamping: limit)
        request.requestID = host?.newRequestID() ?? UInt64.random(in: 1...UInt64.max)
        let answer = Mutex<Page?>(nil)
        try await exchange(
            request, endpoint: endpoint, context: context, timeout: timeout, curve: curve, host: host, threadName: "touchsync-board-list"
        ) {
            body in
            switch body {
            case .boards(let list):
                answer.withLock { $0 = Page(boards: list.boards, more: list.more) }
                return true
            case .chunk, .error, nil:
                throw HubRequestFailure.refused(code: nil, message: "the server answered a board list with a snapshot: it predates board lists")
            }
        }
        guard let page = answer.withLock({ $0 }) else { throw HubRequestFailure.timedOut }
        return page
    }
}

extension BoardDirectory {
    /// Sends `request` on the snapshot socket and hands `body` each reply to
    /// it (an error reply is thrown) until `body` says the answer is complete.
    private static func exchange(
        _ request: Touchsync_V1_SnapshotRequest, endpoint: String, context: ZMQContext?, timeout: Duration, curve: CurveClientKeys?,
        host: HubRequestHost?, threadName: String, _ body: @escaping @Sendable (Touchsync_V1_SnapshotReply.OneOf_Body?) throws -> Bool
    ) async throws {
        let id = request.requestID
        let reply: @Sendable (ZMQMessage) throws -> Bool = { message in
            let reply = try message.withUnsafeBytes { try WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: $0) }
            guard reply.requestID == id else { return false }
            if case .error(let error) = reply.body { throw HubRequestFailure.refused(code: ErrorCode(error.code), message: error.message) }
            return try body(reply.body)
        }
        if let host {
            try await host.exchange(id: id, idField: 3, WireCodec.encode(request), endpoint: endpoint, curve: curve, timeout: timeout, reply: reply)
            return
        }
        try await HubRequest.exchange(
            WireCodec.encode(request), endpoint: endpoint, context: try context ?? ZMQContext(), timeout: timeout, curve: curve,
            threadName: threadName, reply: reply)
    }

    /// One snapshot of `board` (a thumbnail, a status): the board as the hub
    /// published it, checked against the hub's digest. For a replica kept
    /// live, use `BoardSubscriber`.
    public static func snapshot(
        of board: String, endpoint: String, context: ZMQContext? = nil, timeout: Duration = .seconds(5), curve: CurveClientKeys? = nil,
        host: HubRequestHost? = nil, onBehalf: (actAs: String, token: String)? = nil
    ) async throws -> BoardState {
        var request = Touchsync_V1_SnapshotRequest()
        if let onBehalf { (request.actAs, request.token) = onBehalf }
        request.board = board
        request.requestID = host?.newRequestID() ?? UInt64.random(in: 1...UInt64.max)
        let chunks = Mutex<[Touchsync_V1_SnapshotChunk]>([])
        try await exchange(
            request, endpoint: endpoint, context: context, timeout: timeout, curve: curve, host: host, threadName: "touchsync-snapshot-once"
        ) {
            body in
            guard case .chunk(let chunk) = body else { return false }
            return chunks.withLock { chunks in
                // Each index once, as ReplicaSync counts them.
                if !chunks.contains(where: { $0.index == chunk.index }) { chunks.append(chunk) }
                return chunks.count == Int(chunk.count)
            }
        }
        let (snapshot, digest) = try SnapshotCodec.assemble(chunks.withLock { $0.sorted { $0.index < $1.index } })
        let state = try BoardState(snapshot: snapshot)
        guard state.digest == digest else { throw HubRequestFailure.refused(code: nil, message: "the snapshot loads to a different digest") }
        return state
    }
}
