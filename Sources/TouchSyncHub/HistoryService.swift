import TouchSyncAccess
import Logging
import TouchSyncCore
import TouchSyncJournal
import TouchSyncWire
import ZeroMQ

/// Serves boards' recorded histories from the journal on the hub's history
/// endpoint (a ROUTER), on a thread of its own so that reading files never
/// stalls the hub loop. It only reads: the journal is safe to read while the
/// hub appends (a record still being written reads as a torn tail and is
/// simply not sent yet).
final class HistoryService {
    private let dataDirectory: String
    private let socket: ZMQSocket
    private let mailbox: Mailbox<StopCommand>
    private let logger: Logger
    let endpoint: String
    private let receiver: RequestReceiver
    /// Recorded batches per reply message (a reply stays well under a megabyte).
    static let batchesPerReply = 64

    /// With `access`, the socket is a CURVE server and each request is authorised (watch or more on its board).
    private let access: AccessControl?

    init(
        dataDirectory: String, endpoint: String, context: ZMQContext, mailbox: Mailbox<StopCommand>, logger: Logger,
        access: AccessControl? = nil
    ) throws {
        self.access = access
        self.dataDirectory = dataDirectory
        self.mailbox = mailbox
        self.logger = logger
        socket = try ZMQSocket(context, type: .router)
        try socket.setRouterMandatory(true)
        try socket.setSendHighWaterMark(0)  // a history is sent whole; its size is bounded by the board's
        try socket.setMaxMessageSize(64 << 10)
        if let access { try AccessControl.makeCurveServer(socket, security: access.security) }
        try socket.bind(endpoint)
        self.endpoint = try socket.lastEndpoint
        receiver = RequestReceiver(socket: socket)
    }

    func run() {
        defer {
            socket.close()
            _ = mailbox.close()
        }
        do {
            var loop = try PollLoop(mailbox: mailbox, sockets: [socket])
            try loop.run(
                deadline: { nil }, commands: { _ in .stop }, readable: { _ in try drain() }, turnEnded: {})
        } catch let error as ZMQError where error.isTerminated {
            return
        } catch {
            logger.error("history service stopped", metadata: ["error": "\(error)"])
        }
    }

    /// History requests one requester (its user, else its connection) may
    /// make per window: a history is sent whole (a subscriber asks once when
    /// it starts), so each served request can queue a whole journal for a
    /// peer that never reads (1,000 of them took 1 GB).
    static let maxRequestsPerWindow = 3
    static let requestWindow: Duration = .seconds(10)
    private var window: (start: ContinuousClock.Instant, counts: [[UInt8]: Int])? = nil

    /// Counts a request of `requester` in the current window; false past the allowance.
    private func admit(_ requester: [UInt8], now: ContinuousClock.Instant) -> Bool {
        guard let current = window, now - current.start < Self.requestWindow else {
            window = (now, [requester: 1])
            return true
        }
        let count = (current.counts[requester] ?? 0) + 1
        window!.counts[requester] = count
        return count <= Self.maxRequestsPerWindow
    }

    private func drain() throws(ZMQError) {
        while let (peer, user, decoded) = try receiver.next(Touchsync_V1_HistoryRequest.self) {
            guard case .success(let request) = decoded else {
                sendError(to: peer, requestID: 0, code: .malformed, "not a HistoryRequest")
                continue
            }
            guard admit(user.map { Array($0.utf8) } ?? peer, now: .now) else {
                sendError(
                    to: peer, requestID: request.requestID, code: .rateLimited,
                    "more than \(Self.maxRequestsPerWindow) history requests in \(Self.requestWindow.components.seconds) s")
                continue
            }
            if let why = access?.refusal(for: user, board: request.board) {
                sendError(to: peer, requestID: request.requestID, code: .forbidden, why)
                continue
            }
            serve(request, to: peer)
        }
    }

    private func serve(_ request: Touchsync_V1_HistoryRequest, to peer: [UInt8]) {
        guard isValidBoardName(request.board) else {
            sendError(to: peer, requestID: request.requestID, code: .unknownBoard, boardNameRule)
            return
        }
        let history: LoadedHistory
        do {
            history = try BoardHistory.open(dataDirectory: dataDirectory, board: request.board).load()
        } catch {
            // A board nobody has drawn on yet has no journal: it is empty, at sequence 0.
            if case .invalid = error {
                sendEmpty(to: peer, request: request)
            } else {
                sendError(to: peer, requestID: request.requestID, code: .internalError, "\(error)")
            }
            return
        }
        if let damage = history.damage.first(where: \.isCorruption) {
            logger.error("history request hit journal damage", metadata: ["damage": "\(damage)"])
            sendError(to: peer, requestID: request.requestID, code: .internalError, "the journal is damaged: \(damage)")
            return
        }
        var replies: [Touchsync_V1_HistoryReply] = []
        for chunk in SnapshotCodec.chunks(of: history.start.snapshot(), board: request.board, digest: history.start.digest) {
            var reply = Touchsync_V1_HistoryReply()
            reply.checkpoint = chunk
            replies.append(reply)
        }
        var start = 0
        while start < history.batches.count {
            var reply = Touchsync_V1_HistoryReply()
            var batches = Touchsync_V1_HistoryBatches()
            batches.batches = history.batches[start..<min(start + Self.batchesPerReply, history.batches.count)].map(\.proto)
            reply.batches = batches
            replies.append(reply)
            start += Self.batchesPerReply
        }
        var end = Touchsync_V1_HistoryEnd()
        end.sequence = history.endState.sequence
        end.digest = history.endState.digest.rawValue
        var last = Touchsync_V1_HistoryReply()
        last.end = end
        replies.append(last)
        for var reply in replies {
            reply.requestID = request.requestID
            do {
                try socket.send(multipart: [peer, WireCodec.encode(reply)], dontWait: true)
            } catch {
                logger.debug("history not delivered", metadata: ["error": "\(error)"])
                return
            }
        }
    }

    private func sendEmpty(to peer: [UInt8], request: Touchsync_V1_HistoryRequest) {
        let empty = BoardState()
        for chunk in SnapshotCodec.chunks(of: empty.snapshot(), board: request.board, digest: empty.digest) {
            var reply = Touchsync_V1_HistoryReply()
            reply.checkpoint = chunk
            reply.requestID = request.requestID
            _ = try? socket.send(multipart: [peer, WireCodec.encode(reply)], dontWait: true)
        }
        var reply = Touchsync_V1_HistoryReply()
        var end = Touchsync_V1_HistoryEnd()
        end.digest = empty.digest.rawValue
        reply.end = end
        reply.requestID = request.requestID
        _ = try? socket.send(multipart: [peer, WireCodec.encode(reply)], dontWait: true)
    }

    private func sendError(to peer: [UInt8], requestID: UInt64, code: ErrorCode, _ text: String) {
        var error = Touchsync_V1_SnapshotReply.Error()
        error.code = code.proto
        error.message = text
        var reply = Touchsync_V1_HistoryReply()
        reply.error = error
        reply.requestID = requestID
        _ = try? socket.send(multipart: [peer, WireCodec.encode(reply)], dontWait: true)
    }
}
