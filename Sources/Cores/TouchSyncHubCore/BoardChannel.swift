import TouchSyncCore
import TouchSyncWire

/// One board as the hub publishes it: its state, the diffs reduced since the
/// last batch (folded), and the encoder that continues every stroke's delta
/// chain. Pure: the hub's transport does the I/O.
package struct BoardChannel: Sendable {
    package let name: String
    /// The publish topic of each stream (`PublishStream` order): the board name and the stream's byte.
    package let topics: [[UInt8]]
    /// The v1 publish topic: the board name and a zero byte.
    package var topic: [UInt8] { topics[0] }
    package private(set) var state: BoardState
    private var coalescer = DiffCoalescer()
    /// Each stream's encoder (`PublishStream` order) while it is published:
    /// v1 while the journal, a v1 subscriber or the absence of other
    /// subscribers needs it, the others while their topic has subscribers
    /// (the hub core decides; a stream nobody reads costs nothing).
    private var encoders: [DiffStreamEncoder?]
    /// One operation's diffs; empty between operations (the coalescer drains it).
    private var scratch: [StrokeDiff] = []
    /// What each user can redo (the hub's memory, not the board's).
    private var history = UndoHistory()
    /// The digests at one sequence (they walk every sample); the one without
    /// predictions only while that stream is published.
    private var digestCache: (sequence: UInt64, digest: BoardDigest, withoutPredictions: BoardDigest?)? = nil

    /// Agents' progress (applied through, style) to journal with the next batch, by principal.
    var progressPending: [UserNamespace: AgentProgress] = [:]
    /// Agents' progress as the journal had it at start-up, for their next hello.
    var recoveredProgress: [UserNamespace: AgentProgress] = [:]
    /// Users whose agents are silent (touches kept, stalled): listed in heartbeats.
    var silentUsers: Set<UserNamespace> = []
    /// Hub time of the last batch sealed in this run (0: none yet), for board lists.
    package private(set) var lastChangeHubTime: Int64 = 0

    package init(name: String, limits: BoardLimits = BoardLimits()) {
        self.name = name
        topics = PublishStream.allCases.map { $0.topic(board: name) }
        state = BoardState(limits: limits)
        encoders = [DiffStreamEncoder(board: name), nil, nil]
    }

    /// A board recovered from the journal: it carries on from `state`.
    package init(name: String, recovered state: BoardState) {
        self.name = name
        topics = PublishStream.allCases.map { $0.topic(board: name) }
        self.state = state
        encoders = [DiffStreamEncoder(board: name, continuing: state), nil, nil]
    }

    /// The publish topic of `stream`.
    package func topic(_ stream: PublishStream) -> [UInt8] { topics[Int(stream.rawValue)] }

    /// Applies a recorded batch (a replay): the state moves on exactly as the
    /// live board's did; nothing is pending afterwards.
    package mutating func applyRecorded(_ batch: Touchsync_V1_DiffBatch) throws(DiffStreamError) {
        precondition(!hasPending, "a replayed board reduces nothing of its own")
        try state.apply(batch)
    }

    /// Whether diffs wait to be published.
    package var hasPending: Bool { !coalescer.isEmpty }

    /// Whether the next batch is owed: diffs wait, or agents' progress does
    /// (a durable hub journals a message that changed no stroke, a refused
    /// frame or a style, as a batch without diffs before acknowledging it).
    var needsBatch: Bool { hasPending || !progressPending.isEmpty }

    package mutating func reduce(_ frame: TouchFrame, from user: UserNamespace, style: StrokeStyle) throws(TouchInputError) {
        defer { coalescer.add(draining: &scratch) }
        try state.reduce(frame, from: user, style: style, into: &scratch)
        history.note(scratch, on: state)
    }

    package mutating func clear(_ scope: ClearScope, by user: UserNamespace) {
        state.clear(scope, by: user, into: &scratch)
        history.note(scratch, on: state)
        coalescer.add(draining: &scratch)
    }

    package mutating func undo(by user: UserNamespace) {
        history.undo(by: user, on: &state, into: &scratch)
        coalescer.add(draining: &scratch)
    }

    package mutating func redo(by user: UserNamespace) {
        history.redo(by: user, on: &state, into: &scratch)
        coalescer.add(draining: &scratch)
    }

    package mutating func erase(_ ids: [StrokeID], by user: UserNamespace, anyOwner: Bool) throws(TouchInputError) {
        defer { coalescer.add(draining: &scratch) }
        try state.erase(ids, by: user, anyOwner: anyOwner, into: &scratch)
    }

    package mutating func edit(_ edit: StrokeEdit, by user: UserNamespace, anyOwner: Bool) throws(TouchInputError) {
        defer { coalescer.add(draining: &scratch) }
        try history.edit(edit, by: user, anyOwner: anyOwner, on: &state, into: &scratch)
    }

    /// Cancels a user's live touches; returns how many.
    @discardableResult
    package mutating func cancelTouches(of user: UserNamespace) -> Int {
        state.cancelTouches(of: user, into: &scratch)
        let cancelled = scratch.count
        coalescer.add(draining: &scratch)
        return cancelled
    }

    /// Whether batches are encoded for `stream` (v1 is, by default).
    package func publishes(_ stream: PublishStream) -> Bool { encoders[Int(stream.rawValue)] != nil }
    package var publishesV1: Bool { publishes(.v1) }

    /// Encodes every later batch for `stream` too, continuing the published
    /// state: call when nothing is pending (after `sealBatch`).
    package mutating func start(_ stream: PublishStream) {
        precondition(!hasPending, "a stream starts from the published state")
        if encoders[Int(stream.rawValue)] == nil {
            encoders[Int(stream.rawValue)] = DiffStreamEncoder(board: name, stream: stream, continuing: state)
        }
    }

    /// Stops encoding `stream` (its encoder's chains would go stale: `start` makes a new one).
    package mutating func stop(_ stream: PublishStream) {
        encoders[Int(stream.rawValue)] = nil
    }

    /// A sealed batch: its sequence and its encoded `DiffBatch` for each stream being published.
    package struct SealedBatch {
        package let sequence: UInt64
        /// Nil for a stream not published (three properties, not an array: no allocation per batch).
        var v1: [UInt8]? = nil, v2: [UInt8]? = nil, v2WithoutPredictions: [UInt8]? = nil
        package subscript(stream: PublishStream) -> [UInt8]? {
            switch stream {
            case .v1: v1
            case .v2: v2
            case .v2WithoutPredictions: v2WithoutPredictions
            }
        }
    }

    /// Seals what is pending into the next batch, encoded for each stream
    /// being published; nil when nothing is owed (no diffs, no progress).
    package mutating func sealBatch(hubTime: Int64) -> SealedBatch? {
        guard needsBatch else { return nil }
        let diffs = coalescer.take()
        let batch = state.sealBatch(diffs, hubTime: hubTime)
        if !diffs.isEmpty { lastChangeHubTime = hubTime }
        var sealed = SealedBatch(sequence: batch.sequence)
        if encoders[0] != nil { sealed.v1 = encoders[0]!.encodedBytes(batch) }
        if encoders[1] != nil { sealed.v2 = encoders[1]!.encodedBytes(batch) }
        if encoders[2] != nil { sealed.v2WithoutPredictions = encoders[2]!.encodedBytes(batch) }
        return sealed
    }

    /// The board's digest at its current sequence.
    package mutating func digest() -> BoardDigest { digests(withoutPredictions: false).digest }

    /// The digest of the board without its predicted tails.
    package mutating func digestWithoutPredictions() -> BoardDigest { digests(withoutPredictions: true).withoutPredictions! }

    /// Both digests in one pass while the stream without predictions is
    /// published (its heartbeats carry both), else the one; cached per sequence.
    private mutating func digests(withoutPredictions wanted: Bool) -> (digest: BoardDigest, withoutPredictions: BoardDigest?) {
        let both = wanted || publishes(.v2WithoutPredictions)
        if let cached = digestCache, cached.sequence == state.sequence, !hasPending, !both || cached.withoutPredictions != nil {
            return (cached.digest, cached.withoutPredictions)
        }
        let digests: (digest: BoardDigest, withoutPredictions: BoardDigest?) = both ? state.digests : (state.digest, nil)
        if !hasPending { digestCache = (state.sequence, digests.digest, digests.withoutPredictions) }
        return digests
    }

    package mutating func heartbeat(hubTime: Int64) -> Touchsync_V1_BoardHeartbeat {
        var heartbeat = Touchsync_V1_BoardHeartbeat()
        heartbeat.board = name
        heartbeat.sequence = state.sequence
        heartbeat.hubTime = hubTime
        heartbeat.digest = digest().rawValue
        heartbeat.silentUsers = silentUsers.map(\.rawValue).sorted()
        return heartbeat
    }

    /// The snapshot at the current sequence; call after `sealBatch` so that
    /// the state holds nothing unpublished.
    package mutating func snapshot() -> (snapshot: BoardSnapshot, digest: BoardDigest) {
        precondition(!hasPending, "a snapshot must not include unpublished diffs")
        return (state.snapshot(), digest())
    }
}
