import TouchSyncCore

/// Splits a snapshot into chunks that each stay under a sample budget, and
/// puts chunks back together, checking that they belong to one snapshot.
public enum SnapshotCodec {
    /// Default budget per chunk: about 64k samples, a few hundred KiB encoded.
    public static let defaultSamplesPerChunk = 65_536

    public static func chunks(
        of snapshot: BoardSnapshot, board: String, digest: BoardDigest,
        samplesPerChunk: Int = defaultSamplesPerChunk
    ) -> [Touchsync_V1_SnapshotChunk] {
        var groups: [[Touchsync_V1_StrokeRecord]] = [[]]
        var budget = samplesPerChunk
        for stroke in snapshot.activeStrokes + snapshot.acceptedStrokes {
            let size = stroke.samples.count + stroke.predicted.count
            if size > budget && !groups[groups.count - 1].isEmpty {
                groups.append([])
                budget = samplesPerChunk
            }
            groups[groups.count - 1].append(record(stroke))
            budget -= size
        }
        return groups.enumerated().map { index, strokes in
            var chunk = Touchsync_V1_SnapshotChunk()
            chunk.board = board
            chunk.sequence = snapshot.sequence
            chunk.index = UInt32(index)
            chunk.count = UInt32(groups.count)
            chunk.nextStrokeID = snapshot.nextStrokeID.rawValue
            chunk.nextAcceptPosition = snapshot.nextAcceptPosition
            chunk.strokes = strokes
            chunk.digest = digest.rawValue
            return chunk
        }
    }

    static func record(_ stroke: Stroke) -> Touchsync_V1_StrokeRecord {
        var record = Touchsync_V1_StrokeRecord()
        record.strokeID = stroke.id.rawValue
        record.owner = stroke.owner.rawValue
        record.touchID = stroke.touch
        record.style = stroke.style.proto
        if !stroke.samples.isEmpty || !stroke.predicted.isEmpty {
            record.samples = SampleRunCodec.encode(stroke.samples, predicted: stroke.predicted)
        }
        record.acceptedPosition = stroke.acceptedPosition ?? 0
        return record
    }

    /// Reassembles the chunks of one snapshot, given in order.
    public static func assemble(_ chunks: [Touchsync_V1_SnapshotChunk]) throws(WireError) -> (
        snapshot: BoardSnapshot, digest: BoardDigest
    ) {
        guard let first = chunks.first else { throw .malformed("a snapshot with no chunk") }
        guard chunks.count == Int(first.count) else {
            throw .malformed("snapshot has \(chunks.count) chunks, announced \(first.count)")
        }
        var active: [Stroke] = []
        var accepted: [Stroke] = []
        for (index, chunk) in chunks.enumerated() {
            guard chunk.index == UInt32(index), chunk.count == first.count, chunk.sequence == first.sequence,
                chunk.board == first.board, chunk.digest == first.digest,
                chunk.nextStrokeID == first.nextStrokeID, chunk.nextAcceptPosition == first.nextAcceptPosition
            else {
                throw .malformed("snapshot chunk \(index) does not belong with chunk 0")
            }
            for record in chunk.strokes {
                let (samples, predicted) = try SampleRunCodec.decode(record.samples)
                let stroke = Stroke(
                    id: StrokeID(record.strokeID), owner: UserNamespace(record.owner), touch: record.touchID,
                    style: StrokeStyle(record.style), samples: samples, predicted: predicted,
                    acceptedPosition: record.acceptedPosition == 0 ? nil : record.acceptedPosition)
                if stroke.isActive {
                    guard accepted.isEmpty else { throw .malformed("an active stroke after accepted strokes") }
                    active.append(stroke)
                } else {
                    accepted.append(stroke)
                }
            }
        }
        let snapshot = BoardSnapshot(
            sequence: first.sequence, nextStrokeID: StrokeID(first.nextStrokeID),
            nextAcceptPosition: first.nextAcceptPosition, activeStrokes: active, acceptedStrokes: accepted)
        return (snapshot, BoardDigest(rawValue: first.digest))
    }
}
