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
        host: HubRequestHost? = nil, onBehalf: (actAs: String, token: String)? = nil, logger: Logger
    ) async throws -> RecordedHistory {
        var request = Touchsync_V1_HistoryRequest()
        if let onBehalf { (request.actAs, request.token) = onBehalf }
        request.board = board
        request.requestID = host?.newRequestID() ?? UInt64.random(in: 1...UInt64.max)
        let id = request.requestID
        let replies = Mutex<[Touchsync_V1_HistoryReply]>([])
        let handle: @Sendable (ZMQMessage) throws -> Bool = { message in
            let reply = try message.withUnsafeBytes { bytes in try WireCodec.decode(Touchsync_V1_HistoryReply.self, from: bytes) }
            guard reply.requestID == id else { return false }
            if case .error(let error) = reply.body {
                throw HistoryError.refused(code: ErrorCode(error.code), message: error.message)
            }
            replies.withLock { $0.append(reply) }
            if case .end = reply.body { return true }
            return false
        }
        do {
            if let host {
                // On the host's thread (a gateway's replay views).
                try await host.exchange(id: id, idField: 1, WireCodec.encode(request), endpoint: endpoint, curve: curve, timeout: timeout, reply: handle)
            } else {
                try await HubRequest.exchange(
                    WireCodec.encode(request), endpoint: endpoint, context: try context ?? ZMQContext(), timeout: timeout, curve: curve,
                    threadName: "touchsync-history-client", reply: handle)
            }
        } catch HubRequestFailure.refused(let code, let message) {
            throw HistoryError.refused(code: code, message: message)
        } catch HubRequestFailure.timedOut {
            throw HistoryError.timedOut(endpoint: endpoint)
        }
        return try assemble(replies.withLock { $0 }, board: board)
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
