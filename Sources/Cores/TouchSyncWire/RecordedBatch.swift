import TouchSyncCore

/// One published batch as recorded (journal, history endpoint), still
/// encoded: replaying it decodes it against the board it continues, since
/// its samples are deltas from the strokes' stored samples. The wire type
/// stays inside the package; the public API speaks model types.
public struct RecordedBatch: Sendable {
    package let proto: Touchsync_V1_DiffBatch

    package init(_ proto: Touchsync_V1_DiffBatch) { self.proto = proto }

    /// The board's sequence after this batch.
    public var sequence: UInt64 { proto.sequence }
    /// When the hub published it (µs since the Unix epoch).
    public var hubTime: Int64 { proto.hubTime }
    /// Real samples the batch appends (predicted ones not counted).
    public var sampleCount: Int {
        proto.diffs.reduce(0) { total, diff in
            guard case .appends(let appends) = diff.kind else { return total }
            return total + appends.count.reduce(0) { $0 + Int($1) }
        }
    }
}

extension BoardState {
    /// Applies a recorded batch: it must be the next one (see `apply(_:)` on encoded batches).
    @discardableResult
    public mutating func apply(_ recorded: RecordedBatch) throws(DiffStreamError) -> DiffBatch {
        try apply(recorded.proto)
    }
}
