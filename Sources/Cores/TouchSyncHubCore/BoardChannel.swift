import TouchSyncCore
import TouchSyncWire

/// One board as the hub publishes it: its state, the diffs reduced since the
/// last batch (folded), and the encoder that continues every stroke's delta
/// chain. Pure: the hub's transport does the I/O.
package struct BoardChannel: Sendable {
    package let name: String
    /// The publish topic: the board name and a zero byte.
    package let topic: [UInt8]
    /// The wire format v2 topic: the board name and a one byte.
    package let topicV2: [UInt8]
    package private(set) var state: BoardState
    private var coalescer = DiffCoalescer()
    /// The v1 stream's encoder: while the journal, a v1 subscriber or the
    /// absence of v2 subscribers needs it (the hub core decides).
    private var encoder: DiffStreamEncoder?
    /// The v2 stream's encoder, while anyone subscribes to the v2 topic
    /// (a board nobody watches in v2 pays nothing for it).
    private var encoderV2: DiffStreamEncoder? = nil
    private var scratch: [StrokeDiff] = []
    /// What each user can redo (the hub's memory, not the board's).
    private var history = UndoHistory()
    private var digestCache: (sequence: UInt64, digest: BoardDigest)? = nil

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
        topic = publishTopic(board: name)
        topicV2 = WireFormat.v2.topic(board: name)
        state = BoardState(limits: limits)
        encoder = DiffStreamEncoder(board: name)
    }

    /// A board recovered from the journal: it carries on from `state`.
    package init(name: String, recovered state: BoardState) {
        self.name = name
        topic = publishTopic(board: name)
        topicV2 = WireFormat.v2.topic(board: name)
        self.state = state
        encoder = DiffStreamEncoder(board: name, continuing: state)
    }

    /// Applies a recorded batch (a replay): the state moves on exactly as the
    /// live board's did; nothing is pending afterwards.
    package mutating func applyRecorded(_ batch: Touchsync_V1_DiffBatch) throws(DiffStreamError) {
        precondition(!hasPending, "a replayed board reduces nothing of its own")
        try state.apply(batch)
    }

    /// Whether diffs wait to be published.
    package var hasPending: Bool { !coalescer.isEmpty }

    package mutating func reduce(_ frame: TouchFrame, from user: UserNamespace, style: StrokeStyle) throws(TouchInputError) {
        scratch.removeAll(keepingCapacity: true)
        defer { coalescer.add(contentsOf: scratch) }
        try state.reduce(frame, from: user, style: style, into: &scratch)
        history.note(scratch, on: state)
    }

    package mutating func clear(_ scope: ClearScope, by user: UserNamespace) {
        scratch.removeAll(keepingCapacity: true)
        state.clear(scope, by: user, into: &scratch)
        history.note(scratch, on: state)
        coalescer.add(contentsOf: scratch)
    }

    package mutating func undo(by user: UserNamespace) {
        scratch.removeAll(keepingCapacity: true)
        history.undo(by: user, on: &state, into: &scratch)
        coalescer.add(contentsOf: scratch)
    }

    package mutating func redo(by user: UserNamespace) {
        scratch.removeAll(keepingCapacity: true)
        history.redo(by: user, on: &state, into: &scratch)
        coalescer.add(contentsOf: scratch)
    }

    package mutating func erase(_ ids: [StrokeID], by user: UserNamespace, anyOwner: Bool) throws(TouchInputError) {
        scratch.removeAll(keepingCapacity: true)
        defer { coalescer.add(contentsOf: scratch) }
        try state.erase(ids, by: user, anyOwner: anyOwner, into: &scratch)
    }

    /// Cancels a user's live touches; returns how many.
    @discardableResult
    package mutating func cancelTouches(of user: UserNamespace) -> Int {
        scratch.removeAll(keepingCapacity: true)
        state.cancelTouches(of: user, into: &scratch)
        coalescer.add(contentsOf: scratch)
        return scratch.count
    }

    /// Whether batches are encoded in wire format v1 (the default) and v2.
    package var publishesV1: Bool { encoder != nil }
    package var publishesV2: Bool { encoderV2 != nil }

    /// Encodes every later batch in `format` too, continuing the published
    /// state: call when nothing is pending (after `sealBatch`).
    package mutating func start(_ format: WireFormat) {
        precondition(!hasPending, "a stream starts from the published state")
        switch format {
        case .v1: if encoder == nil { encoder = DiffStreamEncoder(board: name, continuing: state) }
        case .v2: if encoderV2 == nil { encoderV2 = DiffStreamEncoder(board: name, format: .v2, continuing: state) }
        }
    }

    /// Stops encoding `format` (its encoder's chains would go stale: `start` makes a new one).
    package mutating func stop(_ format: WireFormat) {
        switch format {
        case .v1: encoder = nil
        case .v2: encoderV2 = nil
        }
    }

    /// Seals what is pending into the next batch: its sequence and its
    /// encoded `DiffBatch` in each format being published; nil when nothing
    /// is pending.
    package mutating func sealBatch(hubTime: Int64) -> (sequence: UInt64, encoded: [UInt8]?, encodedV2: [UInt8]?)? {
        guard hasPending else { return nil }
        let batch = state.sealBatch(coalescer.take(), hubTime: hubTime)
        lastChangeHubTime = hubTime
        return (batch.sequence, encoder?.encodedBytes(batch), encoderV2?.encodedBytes(batch))
    }

    /// The board's digest at its current sequence (cached per sequence: it walks every sample).
    package mutating func digest() -> BoardDigest {
        if let cached = digestCache, cached.sequence == state.sequence, !hasPending { return cached.digest }
        let digest = state.digest
        if !hasPending { digestCache = (state.sequence, digest) }
        return digest
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
