import Foundation
import TouchSyncCore

/// Splits a snapshot into chunks that each stay under a sample budget, and
/// puts chunks back together, checking that they belong to one snapshot.
public enum SnapshotCodec {
    /// Default budget per chunk: about 64k samples, a few hundred KiB encoded.
    public static let defaultSamplesPerChunk = 65_536

    /// The strokes of each chunk: every stroke in order (active, then
    /// accepted), a new chunk when the next stroke would pass the budget.
    static func groups(of snapshot: BoardSnapshot, samplesPerChunk: Int) -> [ArraySlice<Stroke>] {
        let strokes = snapshot.activeStrokes + snapshot.acceptedStrokes
        var groups: [ArraySlice<Stroke>] = []
        var start = 0
        var budget = samplesPerChunk
        for (index, stroke) in strokes.enumerated() {
            let size = stroke.samples.count + stroke.predicted.count
            if size > budget && index > start {
                groups.append(strokes[start..<index])
                start = index
                budget = samplesPerChunk
            }
            budget -= size
        }
        groups.append(strokes[start...])
        return groups
    }

    /// `packedSamples`: accepted strokes carry `packed_samples` (wire format v2) instead of `samples`.
    public static func chunks(
        of snapshot: BoardSnapshot, board: String, digest: BoardDigest,
        samplesPerChunk: Int = defaultSamplesPerChunk, packedSamples: Bool = false
    ) -> [Touchsync_V1_SnapshotChunk] {
        let groups = groups(of: snapshot, samplesPerChunk: samplesPerChunk).map { $0.map { record($0, packedSamples: packedSamples) } }
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

    /// The replies that carry `chunks(of:board:digest:samplesPerChunk:)`
    /// to request `requestID`, each an encoded `SnapshotReply`, written in
    /// one pass from the strokes: byte for byte what SwiftProtobuf writes
    /// for those chunks (tested), at a fraction of its cost (a late joiner
    /// of a large board waits for it).
    public static func encodedReplies(
        of snapshot: BoardSnapshot, board: String, digest: BoardDigest, requestID: UInt64,
        samplesPerChunk: Int = defaultSamplesPerChunk, packedSamples: Bool = false
    ) -> [[UInt8]] {
        var replies: [[UInt8]] = []
        encodeReplies(
            of: snapshot, board: board, digest: digest, requestID: requestID, samplesPerChunk: samplesPerChunk,
            packedSamples: packedSamples
        ) {
            replies.append($0)
            return true
        }
        return replies
    }

    /// The same replies one at a time, each handed to `deliver` as soon as
    /// it is written (so a subscriber reads a chunk while the next is
    /// written); `deliver` returns false to stop.
    public static func encodeReplies(
        of snapshot: BoardSnapshot, board: String, digest: BoardDigest, requestID: UInt64,
        samplesPerChunk: Int = defaultSamplesPerChunk, packedSamples: Bool = false, deliver: ([UInt8]) -> Bool
    ) {
        let groups = groups(of: snapshot, samplesPerChunk: samplesPerChunk)
        var columns = SampleColumnWriter(capacity: 1024)
        for (index, strokes) in groups.enumerated() {
            var out = ProtoWriter(capacity: 64 + strokes.reduce(0) { $0 + 8 * ($1.samples.count + $1.predicted.count) + 48 })
            out.lengthDelimited(1) { chunk in  // SnapshotReply.chunk
                chunk.stringField(1, board)
                chunk.uint64Field(2, snapshot.sequence)
                chunk.uint64Field(3, UInt64(index))
                chunk.uint64Field(4, UInt64(groups.count))
                chunk.uint64Field(5, snapshot.nextStrokeID.rawValue)
                chunk.uint64Field(6, snapshot.nextAcceptPosition)
                for stroke in strokes {
                    chunk.lengthDelimited(7) { record in  // StrokeRecord
                        record.uint64Field(1, stroke.id.rawValue)
                        record.stringField(2, stroke.owner.rawValue)
                        record.uint64Field(3, stroke.touch)
                        record.lengthDelimited(4) { style in
                            style.fixed32Field(1, stroke.style.rgba)
                            style.uint64Field(2, UInt64(stroke.style.width))
                        }
                        let packed = packedSamples && stroke.acceptedPosition != nil && !stroke.samples.isEmpty
                        if !packed && (!stroke.samples.isEmpty || !stroke.predicted.isEmpty) {
                            columns.reset()
                            columns.startSegment(after: nil, nil, timeReference: 0)
                            stroke.samples.forEach { columns.append($0) }
                            for sample in stroke.predicted { columns.append(sample) }
                            record.lengthDelimited(5) { columns.write(to: &$0, predictedCount: UInt32(stroke.predicted.count)) }
                        }
                        record.uint64Field(7, stroke.acceptedPosition ?? 0)
                        if packed {
                            // The stored bytes as they are: no sample is decoded.
                            record.tag(8, ProtoScanner.lengthDelimited)
                            if stroke.samples.isPacked {
                                record.varint(UInt64(stroke.samples.transferByteCount))  // exact for a packed stroke
                                stroke.samples.writeTransfer(into: &record.bytes)
                            } else {
                                var transfer: [UInt8] = []
                                stroke.samples.writeTransfer(into: &transfer)
                                record.varint(UInt64(transfer.count))
                                record.bytes.append(contentsOf: transfer)
                            }
                        }
                    }
                }
                chunk.fixed64Field(8, digest.rawValue)
            }
            out.uint64Field(3, requestID)
            guard deliver(out.bytes) else { return }
        }
    }

    static func record(_ stroke: Stroke, packedSamples: Bool) -> Touchsync_V1_StrokeRecord {
        var record = Touchsync_V1_StrokeRecord()
        record.strokeID = stroke.id.rawValue
        record.owner = stroke.owner.rawValue
        record.touchID = stroke.touch
        record.style = stroke.style.proto
        if packedSamples && stroke.acceptedPosition != nil && !stroke.samples.isEmpty {
            var transfer: [UInt8] = []
            stroke.samples.writeTransfer(into: &transfer)
            record.packedSamples = Data(transfer)
        } else if !stroke.samples.isEmpty || !stroke.predicted.isEmpty {
            record.samples = SampleRunCodec.encode(Array(stroke.samples), predicted: stroke.predicted)
        }
        record.acceptedPosition = stroke.acceptedPosition ?? 0
        return record
    }

    /// Reassembles the chunks of one snapshot, given in order.
    public static func assemble(_ chunks: [Touchsync_V1_SnapshotChunk]) throws(WireError) -> (
        snapshot: BoardSnapshot, digest: BoardDigest
    ) {
        var contents: [SnapshotChunkContents] = []
        contents.reserveCapacity(chunks.count)
        for chunk in chunks { contents.append(try SnapshotChunkContents(chunk)) }
        return try assemble(contents)
    }

    /// Reassembles decoded chunks of one snapshot, given in order, checking
    /// that they belong together.
    public static func assemble(_ chunks: [SnapshotChunkContents]) throws(WireError) -> (
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
            for stroke in chunk.strokes {
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

extension SnapshotCodec {
    /// An accepted stroke's `packed_samples`, checked; MALFORMED when they are not exactly one packed stroke.
    static func transferredSamples(_ bytes: UnsafeRawBufferPointer) throws(WireError) -> StrokeSamples {
        do {
            return try StrokeSamples(transfer: bytes)
        } catch {
            throw .malformed(error.reason)
        }
    }

    static func transferredSamples(_ data: Data) throws(WireError) -> StrokeSamples {
        let result = data.withUnsafeBytes { bytes in Result { () throws(WireError) in try transferredSamples(bytes) } }
        return try result.get()
    }
}

/// One chunk of a snapshot, its strokes decoded into the model.
public struct SnapshotChunkContents: Sendable, Equatable {
    public var board: String
    public var sequence: UInt64
    public var index: UInt32
    public var count: UInt32
    public var nextStrokeID: UInt64
    public var nextAcceptPosition: UInt64
    public var digest: UInt64
    public var strokes: [Stroke]

    public init(_ chunk: Touchsync_V1_SnapshotChunk) throws(WireError) {
        board = chunk.board
        sequence = chunk.sequence
        index = chunk.index
        count = chunk.count
        nextStrokeID = chunk.nextStrokeID
        nextAcceptPosition = chunk.nextAcceptPosition
        digest = chunk.digest
        strokes = []
        strokes.reserveCapacity(chunk.strokes.count)
        for record in chunk.strokes {
            let accepted = record.acceptedPosition == 0 ? nil : record.acceptedPosition
            if !record.packedSamples.isEmpty {
                guard accepted != nil, record.samples.x.isEmpty, record.samples.predictedCount == 0 else {
                    throw .malformed("packed samples on an active stroke, or beside samples")
                }
                let samples = try SnapshotCodec.transferredSamples(record.packedSamples)
                strokes.append(
                    Stroke(
                        id: StrokeID(record.strokeID), owner: UserNamespace(record.owner), touch: record.touchID,
                        style: StrokeStyle(record.style), samples: samples, acceptedPosition: accepted))
                continue
            }
            let (samples, predicted) = try SampleRunCodec.decode(record.samples)
            strokes.append(
                Stroke(
                    id: StrokeID(record.strokeID), owner: UserNamespace(record.owner), touch: record.touchID,
                    style: StrokeStyle(record.style), samples: samples, predicted: predicted,
                    acceptedPosition: accepted))
        }
    }

    init(
        board: String, sequence: UInt64, index: UInt32, count: UInt32, nextStrokeID: UInt64, nextAcceptPosition: UInt64,
        digest: UInt64, strokes: [Stroke]
    ) {
        self.board = board
        self.sequence = sequence
        self.index = index
        self.count = count
        self.nextStrokeID = nextStrokeID
        self.nextAcceptPosition = nextAcceptPosition
        self.digest = digest
        self.strokes = strokes
    }
}
