import TouchSyncAccess
import Logging
import Synchronization
import TouchSyncCore
import TouchSyncWire
import ZeroMQ

/// A board's recorded history as a hub's history endpoint served it.
public struct RecordedHistory: Sendable {
    /// The board at the oldest checkpoint the hub keeps (empty at sequence 0 unless compacted).
    public var start: BoardState
    /// Every recorded batch after it, in order, with its hub time.
    public var batches: [RecordedBatch]
    /// The board after the last batch (checked against the hub's digest).
    public var end: BoardState
}

public enum HistoryError: Error, Sendable, CustomStringConvertible {
    case refused(code: ErrorCode?, message: String)
    case timedOut(endpoint: String)
    case inconsistent(String)

    public var description: String {
        switch self {
        case .refused(let code, let message): "the hub refused the history request (\(code.map { "\($0)" } ?? "?")): \(message)"
        case .timedOut(let endpoint): "no history from \(endpoint) in time: is the hub running, and does it journal?"
        case .inconsistent(let why): "the history does not hold together: \(why)"
        }
    }
}

/// Asks a hub for a board's recorded history (its `history` endpoint, served
/// when it journals): the oldest checkpoint kept, then every batch. For
/// "replay then follow": subscribe first, fetch the history, show it, then
/// apply the live batches queued meanwhile whose sequence is above its end.
public enum HistoryClient {
    public static func fetch(
        board: String, endpoint: String, context: ZMQContext? = nil, timeout: Duration = .seconds(10), curve: CurveClientKeys? = nil,
        logger: Logger
    ) async throws -> RecordedHistory {
        let context = try context ?? ZMQContext()
        let thread = SocketThread(name: "touchsync-history-client")
        let replies: [Touchsync_V1_HistoryReply] = try await withCheckedThrowingContinuation { continuation in
            thread.start {
                continuation.resume(
                    with: Result { try receive(board: board, endpoint: endpoint, context: context, timeout: timeout, curve: curve) })
            }
        }
        await thread.finished()
        return try assemble(replies, board: board)
    }

    /// On its own thread: one DEALER, one request, replies until the end marker.
    private static func receive(board: String, endpoint: String, context: ZMQContext, timeout: Duration, curve: CurveClientKeys?) throws
        -> [Touchsync_V1_HistoryReply]
    {
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
        var request = Touchsync_V1_HistoryRequest()
        request.board = board
        request.requestID = UInt64.random(in: 1...UInt64.max)
        try socket.send(WireCodec.encode(request))
        let deadline = ContinuousClock.now + timeout
        var replies: [Touchsync_V1_HistoryReply] = []
        let message = ZMQMessage()
        while true {
            let milliseconds = ZMQPoller.timeout(until: deadline)
            guard milliseconds > 0 else { throw HistoryError.timedOut(endpoint: endpoint) }
            for event in monitor?.events() ?? [] {
                switch event {
                case .refused: throw HistoryError.refused(code: nil, message: "the hub refused this key: ask its operator to allow it")
                case .protocolError:
                    throw HistoryError.refused(
                        code: nil,
                        message: curve == nil ? "the hub requires CURVE: pass --key and --hub-key" : "the hub does not speak CURVE")
                case .failed where curve == nil:
                    throw HistoryError.refused(code: nil, message: "the hub refuses the handshake: it probably requires CURVE (pass --key and --hub-key)")
                case .succeeded, .failed: break
                }
            }
            // Wake up now and then to read the monitor: a refused handshake never brings a reply.
            try socket.setReceiveTimeout(milliseconds: Int32(clamping: min(milliseconds, 250)))
            guard try socket.receive(into: message) else { continue }
            let reply = try message.withUnsafeBytes { bytes in
                try WireCodec.decode(Touchsync_V1_HistoryReply.self, from: bytes)
            }
            guard reply.requestID == request.requestID else { continue }
            if case .error(let error) = reply.body {
                throw HistoryError.refused(code: ErrorCode(error.code), message: error.message)
            }
            replies.append(reply)
            if case .end = reply.body { return replies }
        }
    }

    static func assemble(_ replies: [Touchsync_V1_HistoryReply], board: String) throws -> RecordedHistory {
        var chunks: [Touchsync_V1_SnapshotChunk] = []
        var batches: [RecordedBatch] = []
        var endDigest: UInt64? = nil
        for reply in replies {
            switch reply.body {
            case .checkpoint(let chunk): chunks.append(chunk)
            case .batches(let more): batches += more.batches.map(RecordedBatch.init)
            case .end(let end): endDigest = end.digest
            case .error, nil: break
            }
        }
        let (snapshot, digest) = try SnapshotCodec.assemble(chunks)
        let start = try BoardState(snapshot: snapshot)
        guard start.digest == digest else { throw HistoryError.inconsistent("the checkpoint loads to a different digest") }
        var end = start
        for batch in batches {
            do {
                try end.apply(batch)
            } catch {
                throw HistoryError.inconsistent("batch \(batch.sequence) does not apply: \(error)")
            }
        }
        guard end.digest.rawValue == endDigest else {
            throw HistoryError.inconsistent("the board after every batch has a different digest than the hub's")
        }
        return RecordedHistory(start: start, batches: batches, end: end)
    }
}
