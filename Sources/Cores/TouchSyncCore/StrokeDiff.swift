/// One change to a board's visible state, as the hub publishes it. Applying
/// the same diffs in the same order yields the same board, bit for bit.
public enum StrokeDiff: Sendable, Equatable {
    /// A touch went down: a new active stroke, empty until samples are appended.
    case began(StrokeID, owner: UserNamespace, touch: TouchID, style: StrokeStyle)
    /// Samples appended to an active stroke; `offset` is the stroke's sample count
    /// before them, so a replica can prove it has not missed or repeated any.
    case appended(StrokeID, offset: Int, samples: [Sample])
    /// The stroke's predicted tail replaced (empty: no prediction).
    case predicted(StrokeID, samples: [Sample])
    /// Estimated values of the sample at `offset` replaced by their final ones.
    case amended(StrokeID, offset: Int, sample: Sample)
    /// The touch ended: the stroke moves to the accepted strokes at `position`
    /// (the board's acceptance counter; positions only grow).
    case accepted(StrokeID, position: UInt64)
    /// The touch was cancelled (by the agent, the alive set or a time-out): the stroke is retracted.
    case cancelled(StrokeID)
    /// Accepted strokes removed: one owner's, or all when `owner` is nil.
    case cleared(owner: UserNamespace?)
    /// One accepted stroke removed (undone or erased).
    case removed(StrokeID)
    /// An accepted stroke put back (redone), whole, at its original accept
    /// position in the order: the diff carries it, so a replica needs nothing
    /// of it (it may have joined after the stroke was removed).
    case restored(Stroke)
}

/// The diffs one hub step produced for a board, stamped with the board's
/// sequence number (consecutive, no gaps) and the hub's clock.
public struct DiffBatch: Sendable, Equatable {
    public var sequence: UInt64
    /// Microseconds since the Unix epoch, hub clock.
    public var hubTime: Int64
    public var diffs: [StrokeDiff]

    public init(sequence: UInt64, hubTime: Int64, diffs: [StrokeDiff]) {
        self.sequence = sequence
        self.hubTime = hubTime
        self.diffs = diffs
    }
}
