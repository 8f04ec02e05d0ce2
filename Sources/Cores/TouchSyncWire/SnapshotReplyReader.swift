import TouchSyncCore

/// A late joiner's hot path: a received `SnapshotReply` carrying a chunk,
/// read in one pass into the model's strokes. Like the other one-pass
/// readers it takes only the canonical encoding and returns nil for
/// anything else (an error reply, other encodings, invalid input): decode
/// those with SwiftProtobuf.
public enum SnapshotReplyReader {
    public static func read(_ bytes: UnsafeRawBufferPointer) -> (requestID: UInt64, chunk: SnapshotChunkContents)? {
        try? readReply(bytes)
    }

    /// SnapshotReply: 1 chunk, 3 request_id (2, an error, gives up).
    private static func readReply(_ bytes: UnsafeRawBufferPointer) throws(GiveUp) -> (
        requestID: UInt64, chunk: SnapshotChunkContents
    ) {
        var scanner = ProtoScanner(bytes)
        var chunk: SnapshotChunkContents?, requestID: UInt64?
        while !scanner.isAtEnd {
            switch try required(scanner.nextTag()) {
            case (1, ProtoScanner.lengthDelimited): try once(&chunk, readChunk(bytes, required(scanner.readLengthDelimited())))
            case (3, ProtoScanner.varint): try once(&requestID, scanner.readVarint())
            default: throw GiveUp()
            }
        }
        return (requestID ?? 0, try required(chunk))
    }

    /// SnapshotChunk: 1 board, 2 to 6 numbers, 7 strokes, 8 digest.
    private static func readChunk(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) throws(GiveUp) -> SnapshotChunkContents {
        var scanner = ProtoScanner(bytes, region)
        var board: String?, digest: UInt64?
        var sequence: UInt64?, index: UInt64?, count: UInt64?, nextStrokeID: UInt64?, nextAcceptPosition: UInt64?
        var strokes: [Stroke] = []
        while !scanner.isAtEnd {
            switch try required(scanner.nextTag()) {
            case (1, ProtoScanner.lengthDelimited): try once(&board, scanner.readString())
            case (2, ProtoScanner.varint): try once(&sequence, scanner.readVarint())
            case (3, ProtoScanner.varint): try once(&index, scanner.readVarint())
            case (4, ProtoScanner.varint): try once(&count, scanner.readVarint())
            case (5, ProtoScanner.varint): try once(&nextStrokeID, scanner.readVarint())
            case (6, ProtoScanner.varint): try once(&nextAcceptPosition, scanner.readVarint())
            case (7, ProtoScanner.lengthDelimited): strokes.append(try readStroke(bytes, required(scanner.readLengthDelimited())))
            case (8, 1): try once(&digest, scanner.readFixed64())
            default: throw GiveUp()
            }
        }
        return SnapshotChunkContents(
            board: board ?? "", sequence: sequence ?? 0, index: UInt32(truncatingIfNeeded: index ?? 0),
            count: UInt32(truncatingIfNeeded: count ?? 0), nextStrokeID: nextStrokeID ?? 0,
            nextAcceptPosition: nextAcceptPosition ?? 0, digest: digest ?? 0, strokes: strokes)
    }

    /// StrokeRecord: 1 stroke_id, 2 owner, 3 touch_id, 4 style, 5 samples, 7 accepted_position, 8 packed_samples.
    private static func readStroke(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) throws(GiveUp) -> Stroke {
        var scanner = ProtoScanner(bytes, region)
        var id: UInt64?, owner: String?, touch: UInt64?, style: StrokeStyle?, run: PackedSampleColumns?, position: UInt64?
        var transferred: Range<Int>?
        while !scanner.isAtEnd {
            switch try required(scanner.nextTag()) {
            case (1, ProtoScanner.varint): try once(&id, scanner.readVarint())
            case (2, ProtoScanner.lengthDelimited): try once(&owner, scanner.readString())
            case (3, ProtoScanner.varint): try once(&touch, scanner.readVarint())
            case (4, ProtoScanner.lengthDelimited): try once(&style, ProtoScanner.style(in: bytes, required(scanner.readLengthDelimited())))
            case (5, ProtoScanner.lengthDelimited): try once(&run, PackedSampleColumns(bytes, required(scanner.readLengthDelimited())))
            case (7, ProtoScanner.varint): try once(&position, scanner.readVarint())
            case (8, ProtoScanner.lengthDelimited): try once(&transferred, scanner.readLengthDelimited())
            default: throw GiveUp()
            }
        }
        let accepted = position ?? 0
        if let transferred, !transferred.isEmpty {
            // Packed (wire format v2): kept as received, after one checking pass.
            guard accepted != 0, run == nil,
                let samples = try? SnapshotCodec.transferredSamples(UnsafeRawBufferPointer(rebasing: bytes[transferred]))
            else { throw GiveUp() }
            return Stroke(
                id: StrokeID(id ?? 0), owner: UserNamespace(owner ?? ""), touch: touch ?? 0,
                style: style ?? StrokeStyle(rgba: 0, width: 0), samples: samples, acceptedPosition: accepted)
        }
        var samples: [Sample] = [], predicted: [Sample] = []
        if let run {
            guard let decoded = try? SampleRunCodec.decode(run, timeReference: 0) else { throw GiveUp() }
            (samples, predicted) = decoded
        }
        return Stroke(
            id: StrokeID(id ?? 0), owner: UserNamespace(owner ?? ""), touch: touch ?? 0,
            style: style ?? StrokeStyle(rgba: 0, width: 0), samples: samples, predicted: predicted,
            acceptedPosition: accepted == 0 ? nil : accepted)
    }
}
