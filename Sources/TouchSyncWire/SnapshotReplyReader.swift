import TouchSyncCore

/// A late joiner's hot path: a received `SnapshotReply` carrying a chunk,
/// read in one pass into the model's strokes. Like the other one-pass
/// readers it takes only the canonical encoding and returns nil for
/// anything else (an error reply, other encodings, invalid input): decode
/// those with SwiftProtobuf.
public enum SnapshotReplyReader {
    public static func read(_ bytes: UnsafeRawBufferPointer) -> (requestID: UInt64, chunk: SnapshotChunkContents)? {
        var scanner = ProtoScanner(bytes)
        var chunk: SnapshotChunkContents?, requestID: UInt64?
        while !scanner.isAtEnd {
            guard let (field, wireType) = scanner.nextTag() else { return nil }
            switch (field, wireType) {
            case (1, ProtoScanner.lengthDelimited) where chunk == nil:
                guard let region = scanner.readLengthDelimited(), let contents = readChunk(bytes, region) else { return nil }
                chunk = contents
            case (3, ProtoScanner.varint) where requestID == nil:
                guard let value = scanner.readVarint() else { return nil }
                requestID = value
            default:
                return nil
            }
        }
        guard let chunk else { return nil }
        return (requestID ?? 0, chunk)
    }

    private static func readChunk(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) -> SnapshotChunkContents? {
        var scanner = ProtoScanner(bytes, region)
        var board: String?, digest: UInt64?
        var numbers: [UInt64?] = [nil, nil, nil, nil, nil]  // fields 2 to 6
        var strokes: [Stroke] = []
        while !scanner.isAtEnd {
            guard let (field, wireType) = scanner.nextTag() else { return nil }
            switch (field, wireType) {
            case (1, ProtoScanner.lengthDelimited) where board == nil:
                guard let value = scanner.readString() else { return nil }
                board = value
            case (2...6, ProtoScanner.varint) where numbers[Int(field) - 2] == nil:
                guard let value = scanner.readVarint() else { return nil }
                numbers[Int(field) - 2] = value
            case (7, ProtoScanner.lengthDelimited):
                guard let record = scanner.readLengthDelimited(), let stroke = readStroke(bytes, record) else { return nil }
                strokes.append(stroke)
            case (8, 1) where digest == nil:
                guard let value = scanner.readFixed64() else { return nil }
                digest = value
            default:
                return nil
            }
        }
        return SnapshotChunkContents(
            board: board ?? "", sequence: numbers[0] ?? 0, index: UInt32(truncatingIfNeeded: numbers[1] ?? 0),
            count: UInt32(truncatingIfNeeded: numbers[2] ?? 0), nextStrokeID: numbers[3] ?? 0,
            nextAcceptPosition: numbers[4] ?? 0, digest: digest ?? 0, strokes: strokes)
    }

    private static func readStroke(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) -> Stroke? {
        var scanner = ProtoScanner(bytes, region)
        var id: UInt64?, owner: String?, touch: UInt64?, style: StrokeStyle?, run: Range<Int>?, position: UInt64?
        while !scanner.isAtEnd {
            guard let (field, wireType) = scanner.nextTag() else { return nil }
            switch (field, wireType) {
            case (1, ProtoScanner.varint) where id == nil: id = scanner.readVarint()
            case (2, ProtoScanner.lengthDelimited) where owner == nil: owner = scanner.readString()
            case (3, ProtoScanner.varint) where touch == nil: touch = scanner.readVarint()
            case (4, ProtoScanner.lengthDelimited) where style == nil:
                style = scanner.readLengthDelimited().flatMap { ProtoScanner.style(in: bytes, $0) }
            case (5, ProtoScanner.lengthDelimited) where run == nil: run = scanner.readLengthDelimited()
            case (7, ProtoScanner.varint) where position == nil: position = scanner.readVarint()
            default: return nil
            }
            // Each field read above must have been readable.
            guard id != nil || field != 1, owner != nil || field != 2, touch != nil || field != 3, style != nil || field != 4,
                run != nil || field != 5, position != nil || field != 7
            else { return nil }
        }
        var samples: [Sample] = [], predicted: [Sample] = []
        if let run {
            guard let columns = PackedSampleColumns(bytes, run),
                let decoded = try? SampleRunCodec.decode(columns, timeReference: 0)
            else { return nil }
            (samples, predicted) = decoded
        }
        let accepted = position ?? 0
        return Stroke(
            id: StrokeID(id ?? 0), owner: UserNamespace(owner ?? ""), touch: touch ?? 0,
            style: style ?? StrokeStyle(rgba: 0, width: 0), samples: samples, predicted: predicted,
            acceptedPosition: accepted == 0 ? nil : accepted)
    }
}
