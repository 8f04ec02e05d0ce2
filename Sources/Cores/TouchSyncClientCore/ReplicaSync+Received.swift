import TouchSyncCore
import TouchSyncWire

/// The one way a follower reads what its hub sends (issue 41: the
/// subscriber, the gateway's board host and the relay each had a copy of
/// this, and the copies had drifted). The transport hands over the bytes it
/// received and carries out the actions; the reading, the hot path and
/// every rule stay here.
extension ReplicaSync {
    /// A published message's body (the part after the topic), as received.
    /// A batch for the live replica is read in one pass from the bytes (the
    /// hot path); anything else is decoded; bytes that are no protocol
    /// message mean the stream cannot be trusted (a resync).
    public mutating func received(published body: UnsafeRawBufferPointer, now: ContinuousClock.Instant) -> [Action] {
        if isLive, let (sequence, batch) = PublishedBatch.find(in: body) {
            return liveBatch(sequence: sequence, now: now) { state throws(DiffStreamError) in
                try state.apply(encodedBatch: batch).batch
            } ?? []
        }
        guard let message = try? WireCodec.decode(Touchsync_V1_PublishMessage.self, from: body) else {
            heard(now: now)
            return malformed(now: now)
        }
        switch message.body {
        case .batch(let batch): return self.batch(batch, now: now)
        case .heartbeat(let heartbeat): return self.heartbeat(heartbeat, now: now)
        case nil:
            heard(now: now)
            return []
        }
    }

    /// A snapshot reply, read as far as the request it answers: a transport
    /// that numbers requests itself (the relay asks for many boards on one
    /// connection) looks at `requestID` before handing it to the board's sync.
    public struct SnapshotReply: Sendable {
        public enum Body: Sendable {
            case chunk(SnapshotChunkContents)
            /// A chunk that could not be decoded (why).
            case unusableChunk(String)
            case refused(code: ErrorCode?, message: String, owner: Touchsync_V1_HubAddress?)
            /// Not an answer to a snapshot request (a board list).
            case other
        }
        public var requestID: UInt64
        public var body: Body

        /// Whether this is the last chunk of its snapshot, or a refusal: nothing more comes for the request.
        public var endsRequest: Bool {
            switch body {
            case .chunk(let chunk): chunk.index + 1 >= chunk.count
            case .unusableChunk, .refused: true
            case .other: false
            }
        }

        /// Reads a received reply: a chunk in one pass into the model (the
        /// hot path), anything else through SwiftProtobuf. Nil for bytes that
        /// are no `SnapshotReply` (ignored: the request's time-out asks again).
        public static func read(_ bytes: UnsafeRawBufferPointer) -> SnapshotReply? {
            if let (requestID, chunk) = SnapshotReplyReader.read(bytes) { return SnapshotReply(requestID: requestID, body: .chunk(chunk)) }
            guard let reply = try? WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: bytes) else { return nil }
            switch reply.body {
            case .chunk(let chunk):
                do { return SnapshotReply(requestID: reply.requestID, body: .chunk(try SnapshotChunkContents(chunk))) } catch {
                    return SnapshotReply(requestID: reply.requestID, body: .unusableChunk("\(error)"))
                }
            case .error(let error):
                return SnapshotReply(
                    requestID: reply.requestID,
                    body: .refused(code: ErrorCode(error.code), message: error.message, owner: error.hasOwner ? error.owner : nil))
            case .boards, nil:
                return SnapshotReply(requestID: reply.requestID, body: .other)
            }
        }
    }

    /// A snapshot reply for this board; `requestID` replaces the reply's own
    /// when the transport numbered the request itself.
    public mutating func received(_ reply: SnapshotReply, requestID: UInt64? = nil, now: ContinuousClock.Instant) -> [Action] {
        let request = requestID ?? reply.requestID
        switch reply.body {
        case .chunk(let chunk): return self.chunk(chunk, for: request, now: now)
        case .unusableChunk(let reason):
            guard case .syncing(request, _, _, _) = phase else { return [] }  // a reply to a request given up on
            return unusableSnapshot(reason, now: now)
        case .refused(let code, let message, let owner): return snapshotRefused(request, code: code, message: message, owner: owner, now: now)
        case .other: return []
        }
    }

    /// A snapshot reply's bytes, as received on the board's own connection.
    public mutating func received(snapshotReply bytes: UnsafeRawBufferPointer, now: ContinuousClock.Instant) -> [Action] {
        guard let reply = SnapshotReply.read(bytes) else { return [] }
        return received(reply, now: now)
    }

    /// The bytes of `requestSnapshot(requestID)` for this board (a transport
    /// that numbers requests itself passes its own number); `packedSamples`
    /// asks for accepted strokes packed (wire format v2's subscribers).
    public func snapshotRequest(_ requestID: UInt64, packedSamples: Bool = false) -> [UInt8] {
        var message = Touchsync_V1_SnapshotRequest()
        message.board = board
        message.requestID = requestID
        message.packedSamples = packedSamples
        return WireCodec.encode(message)
    }

    /// When `tick` has something to do next: the snapshot's time-out (or
    /// the retry of a request refused RATE_LIMITED) while syncing, and the
    /// silence time-out until silence was reported. A transport waits for it
    /// instead of polling.
    public var nextDeadline: ContinuousClock.Instant? {
        var next: ContinuousClock.Instant? = reportedSilence ? nil : lastHeard + silenceTimeout
        if case .syncing(_, _, _, let deadline) = phase {
            let due = retryRefusedAt.map { min($0, deadline) } ?? deadline
            next = min(next ?? due, due)
        }
        return next
    }
}
