import Logging
import SwiftProtobuf
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire
import ZeroMQ

/// A ROUTER serving one-frame protobuf requests from DEALERs (snapshots,
/// histories): reads the next request, whole, with the peer to answer.
struct RequestReceiver {
    let socket: ZMQSocket
    /// Requests come from a hub's front (`HubFront`), each with a `FrontOrigin` part after the routing id.
    let behindFront: Bool
    private let routing = ZMQMessage()
    private let payload = ZMQMessage()

    init(socket: ZMQSocket, behindFront: Bool = false) {
        self.socket = socket
        self.behindFront = behindFront
    }

    /// The next waiting request (nil: none), decoded, or why it is not one,
    /// with the peer to answer and its authenticated user (CURVE + ZAP; nil without).
    func next<Request: SwiftProtobuf.Message>(_ type: Request.Type) throws(ZMQError)
        -> (peer: [UInt8], user: String?, request: Result<Request, WireError>)?
    {
        try nextWithConnection(type).map { ($0.peer, $0.user, $0.request) }
    }

    /// The same, with the connection's descriptor and remote address (what bounds a peer's unread snapshots).
    func nextWithConnection<Request: SwiftProtobuf.Message>(_ type: Request.Type) throws(ZMQError)
        -> (peer: [UInt8], user: String?, request: Result<Request, WireError>, descriptor: Int32?, address: String?)?
    {
        while try socket.receive(into: routing, dontWait: true) {
            var origin: FrontOrigin? = nil
            if behindFront {
                guard routing.hasMore, try socket.receive(into: payload, dontWait: true) else { continue }
                origin = payload.withUnsafeBytes(FrontOrigin.init(decoding:))
            }
            guard routing.hasMore, try socket.receive(into: payload, dontWait: true) else { continue }
            while payload.hasMore { _ = try socket.receive(into: payload, dontWait: true) }
            let decoded = payload.withUnsafeBytes { bytes in
                Result { () throws(WireError) in try WireCodec.decode(type, from: bytes) }
            }
            if behindFront { return (routing.bytes, origin?.user, decoded, origin?.descriptor, origin?.address) }
            return (routing.bytes, payload.userID, decoded, payload.sourceDescriptor, payload.peerAddress)
        }
        return nil
    }
}

/// The snapshot side of the Clone pattern, shared by the hub and replays:
/// read requests from a ROUTER, answer each with the chunks of a board.
struct SnapshotService {
    let socket: ZMQSocket
    let logger: Logger
    private let receiver: RequestReceiver

    init(socket: ZMQSocket, logger: Logger, behindFront: Bool = false) {
        self.socket = socket
        self.logger = logger
        receiver = RequestReceiver(socket: socket, behindFront: behindFront)
    }

    /// Handles up to `limit` waiting requests: `snapshot` gives a board's
    /// snapshot and digest (nil: refuse with `unknownBoard`); `refused` counts errors.
    /// `forbidden` says why the (authenticated) user may not have a board (nil: it may).
    /// `boards` lists what this server serves, for a board list request.
    func drain(
        limit: Int, snapshot: (Touchsync_V1_SnapshotRequest) -> (snapshot: BoardSnapshot, digest: BoardDigest)?,
        forbidden: (_ user: String?, _ board: String) -> String? = { _, _ in nil },
        boards: () -> [BoardSummary] = { [] },
        refused: (ErrorCode) -> Void = { _ in }
    ) throws(ZMQError) {
        for _ in 0..<limit {
            guard let (peer, user, decoded) = try receiver.next(Touchsync_V1_SnapshotRequest.self) else { return }
            guard case .success(let request) = decoded else {
                refused(.malformed)
                sendError(to: peer, requestID: 0, code: .malformed, "not a SnapshotRequest")
                continue
            }
            if request.listBoards {
                let listed = boards().filter { $0.board.hasPrefix(request.board) && forbidden(user, $0.board) == nil }
                sendBoardList(to: peer, requestID: request.requestID, boards: listed, more: false)
                continue
            }
            guard isValidBoardName(request.board) else {
                refused(.unknownBoard)
                sendError(
                    to: peer, requestID: request.requestID, code: .unknownBoard,
                    boardNameRule)
                continue
            }
            if let why = forbidden(user, request.board) {
                refused(.forbidden)
                sendError(to: peer, requestID: request.requestID, code: .forbidden, why)
                continue
            }
            guard let (state, digest) = snapshot(request) else {
                refused(.unknownBoard)
                sendError(to: peer, requestID: request.requestID, code: .unknownBoard, "no board \"\(request.board)\" here")
                continue
            }
            send(state, digest: digest, requestID: request.requestID, to: peer, board: request.board)
        }
    }

    /// The next waiting request (nil: none), decoded, or why it is not one, with its connection.
    func next() throws(ZMQError) -> (
        peer: [UInt8], user: String?, request: Result<Touchsync_V1_SnapshotRequest, WireError>, descriptor: Int32?, address: String?
    )? {
        try receiver.nextWithConnection(Touchsync_V1_SnapshotRequest.self)
    }

    /// Sends `snapshot` in chunks, each written in one pass and sent as soon
    /// as it is written (`SnapshotCodec.encodeReplies`): the subscriber
    /// reads one chunk while the hub writes the next.
    /// Returns false when the peer's queue is full (it is not reading) and
    /// the rest of the snapshot was dropped, and the bytes queued.
    @discardableResult
    func send(
        _ snapshot: BoardSnapshot, digest: BoardDigest, requestID: UInt64, to peer: [UInt8], board: String,
        samplesPerChunk: Int = SnapshotCodec.defaultSamplesPerChunk, packedSamples: Bool = false
    ) -> (delivered: Bool, bytes: Int) {
        var delivered = true
        var bytes = 0
        SnapshotCodec.encodeReplies(
            of: snapshot, board: board, digest: digest, requestID: requestID, samplesPerChunk: samplesPerChunk,
            packedSamples: packedSamples
        ) { reply in
            guard sendChunk(reply, to: peer) else {
                delivered = false
                return false
            }
            bytes += reply.count
            return true
        }
        return (delivered, bytes)
    }

    /// Sends one encoded chunk of a snapshot reply; false when the peer's
    /// queue is full (it is not reading) or it is gone.
    func sendChunk(_ reply: [UInt8], to peer: [UInt8]) -> Bool {
        do {
            guard try socket.send(multipart: [peer, reply], dontWait: true) else {
                logger.warning("snapshot abandoned: the subscriber is not reading")
                return false
            }
            return true
        } catch {
            logger.debug("snapshot not delivered", metadata: ["error": "\(error)"])
            return false
        }
    }

    /// Answers a board list request.
    func sendBoardList(to peer: [UInt8], requestID: UInt64, boards: [BoardSummary], more: Bool) {
        var list = Touchsync_V1_BoardList()
        list.boards = boards.map { board in
            var summary = Touchsync_V1_BoardSummary()
            summary.board = board.board
            summary.sequence = board.sequence
            summary.acceptedStrokes = UInt32(clamping: board.acceptedStrokes)
            summary.activeStrokes = UInt32(clamping: board.activeStrokes)
            summary.agents = UInt32(clamping: board.agents)
            summary.lastChangeTime = board.lastChangeTime
            return summary
        }
        list.more = more
        var reply = Touchsync_V1_SnapshotReply()
        reply.boards = list
        reply.requestID = requestID
        _ = try? socket.send(multipart: [peer, WireCodec.encode(reply)], dontWait: true)
    }

    func sendError(to peer: [UInt8], requestID: UInt64, code: ErrorCode, _ text: String, owner: Touchsync_V1_HubAddress? = nil) {
        var error = Touchsync_V1_SnapshotReply.Error()
        error.code = code.proto
        error.message = text
        if let owner { error.owner = owner }
        var reply = Touchsync_V1_SnapshotReply()
        reply.error = error
        reply.requestID = requestID
        _ = try? socket.send(multipart: [peer, WireCodec.encode(reply)], dontWait: true)
    }
}
