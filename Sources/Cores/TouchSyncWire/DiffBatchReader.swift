import TouchSyncCore

/// The replica's hot path: an encoded `DiffBatch` read in one pass against
/// the replica it continues, straight into the model's diffs.
///
/// Like `AgentFrameDecoder` it reads the canonical encoding (the hub's) and
/// gives up, returning nil, on anything else: unusual but valid encodings,
/// errors, batches that do not follow the replica, restored strokes (rare:
/// a redo). Callers then decode with SwiftProtobuf, which has the final
/// word and words the error.
public enum DiffBatchReader {
    public static func decode(_ bytes: UnsafeRawBufferPointer, against state: BoardState) -> (board: String, batch: DiffBatch)? {
        try? read(bytes, against: state)
    }

    private static func read(_ bytes: UnsafeRawBufferPointer, against state: BoardState) throws -> (
        board: String, batch: DiffBatch
    ) {
        // First pass: the header (time_reference is encoded after the diffs).
        var scanner = ProtoScanner(bytes)
        var board: String?, sequence: UInt64?, hubTime: Int64?, timeReference: Int64?
        var diffCount = 0
        while !scanner.isAtEnd {
            guard let (field, wireType) = scanner.nextTag() else { throw GiveUp() }
            switch (field, wireType) {
            case (1, ProtoScanner.lengthDelimited): try once(&board, scanner.readString())
            case (2, ProtoScanner.varint): try once(&sequence, scanner.readVarint())
            case (3, ProtoScanner.varint): try once(&hubTime, scanner.readVarint().map(zigZagDecoded))
            case (4, ProtoScanner.lengthDelimited):
                _ = try required(scanner.readLengthDelimited())
                diffCount += 1
            case (5, ProtoScanner.varint): try once(&timeReference, scanner.readVarint().map(zigZagDecoded))
            default:
                throw GiveUp()
            }
        }
        // Only the next batch decodes against this replica.
        guard (sequence ?? 0) == state.sequence &+ 1 else { throw GiveUp() }
        var chains = StrokeChains(diffs: diffCount)
        var diffs: [StrokeDiff] = []
        diffs.reserveCapacity(diffCount)
        scanner = ProtoScanner(bytes)
        while !scanner.isAtEnd {
            guard let (field, wireType) = scanner.nextTag() else { throw GiveUp() }
            guard field == 4 else {
                // The header, read above.
                if wireType == ProtoScanner.varint { _ = scanner.readVarint() } else { _ = scanner.readLengthDelimited() }
                continue
            }
            guard let region = scanner.readLengthDelimited() else { throw GiveUp() }
            try readDiff(bytes, region, timeReference: timeReference ?? 0, state: state, chains: &chains, into: &diffs)
        }
        return (board ?? "", DiffBatch(sequence: sequence ?? 0, hubTime: hubTime ?? 0, diffs: diffs))
    }

    /// One `Diff`: exactly one kind.
    private static func readDiff(
        _ bytes: UnsafeRawBufferPointer, _ region: Range<Int>, timeReference: Int64, state: BoardState,
        chains: inout StrokeChains, into diffs: inout [StrokeDiff]
    ) throws {
        var scanner = ProtoScanner(bytes, region)
        guard let (kind, wireType) = scanner.nextTag(), wireType == ProtoScanner.lengthDelimited,
            let body = scanner.readLengthDelimited(), scanner.isAtEnd
        else { throw GiveUp() }
        switch kind {
        case 1:  // StrokeBegan
            var fields = ProtoScanner(bytes, body)
            var id: UInt64?, owner: String?, touch: UInt64?, style: StrokeStyle?
            while !fields.isAtEnd {
                guard let (field, wireType) = fields.nextTag() else { throw GiveUp() }
                switch (field, wireType) {
                case (1, ProtoScanner.varint): try once(&id, fields.readVarint())
                case (2, ProtoScanner.lengthDelimited): try once(&owner, fields.readString())
                case (3, ProtoScanner.varint): try once(&touch, fields.readVarint())
                case (4, ProtoScanner.lengthDelimited):
                    try once(&style, ProtoScanner.style(in: bytes, required(fields.readLengthDelimited())))
                default: throw GiveUp()
                }
            }
            let strokeID = StrokeID(id ?? 0)
            chains.began(strokeID)
            diffs.append(
                .began(strokeID, owner: UserNamespace(owner ?? ""), touch: touch ?? 0, style: style ?? StrokeStyle(rgba: 0, width: 0)))
        case 8:  // StrokeAppends
            var fields = ProtoScanner(bytes, body)
            var columns: (PackedVarints?, PackedVarints?, PackedVarints?, PackedVarints?) = (nil, nil, nil, nil)
            var samples: PackedSampleColumns?
            while !fields.isAtEnd {
                guard let (field, wireType) = fields.nextTag(), wireType == ProtoScanner.lengthDelimited,
                    let fieldRegion = fields.readLengthDelimited()
                else { throw GiveUp() }
                switch field {
                case 1: try once(&columns.0, PackedVarints(bytes, fieldRegion))
                case 2: try once(&columns.1, PackedVarints(bytes, fieldRegion))
                case 3: try once(&columns.2, PackedVarints(bytes, fieldRegion))
                case 4: try once(&columns.3, PackedVarints(bytes, fieldRegion))
                case 5: try once(&samples, PackedSampleColumns(bytes, fieldRegion))
                default: throw GiveUp()
                }
            }
            // An absent run is an empty one (proto3), as SwiftProtobuf reads it.
            guard let run = samples ?? PackedSampleColumns(bytes, 0..<0), run.predictedCount == 0 else { throw GiveUp() }
            var reader = try SampleColumnReader(columns: run)
            var segments = PackedSegmentColumns(
                ids: columns.0 ?? .empty, offsets: columns.1 ?? .empty, counts: columns.2 ?? .empty,
                predicted: columns.3 ?? .empty)
            try DiffStreamDecoder.decodeSegments(
                &segments, reader: &reader, timeReference: timeReference, state: state, chains: &chains, into: &diffs)
        case 11:  // packed_appends (wire format v2)
            do {
                try PackedAppendsReader.decode(bytes, body, timeReference: timeReference, state: state, chains: &chains, into: &diffs)
            } catch {
                throw GiveUp()
            }
        case 12:  // packed_amended (wire format v2)
            do {
                diffs.append(try PackedAmendment.decode(bytes, body, state: state, decoded: diffs))
            } catch {
                throw GiveUp()
            }
        case 4:  // SampleAmended
            var fields = ProtoScanner(bytes, body)
            var id: UInt64?, offset: UInt64?, sample: PackedSampleColumns?
            while !fields.isAtEnd {
                guard let (field, wireType) = fields.nextTag() else { throw GiveUp() }
                switch (field, wireType) {
                case (1, ProtoScanner.varint): try once(&id, fields.readVarint())
                case (2, ProtoScanner.varint): try once(&offset, fields.readVarint())
                case (3, ProtoScanner.lengthDelimited):
                    try once(&sample, PackedSampleColumns(bytes, required(fields.readLengthDelimited())))
                default: throw GiveUp()
                }
            }
            guard let run = sample ?? PackedSampleColumns(bytes, 0..<0) else { throw GiveUp() }
            let samples = try SampleRunCodec.decodeSamples(run, timeReference: 0)
            diffs.append(try DiffStreamDecoder.amendedDiff(id ?? 0, UInt32(truncatingIfNeeded: offset ?? 0), samples))
        case 5:  // StrokeAccepted
            let (id, position) = try readIDs(bytes, body)
            chains.ended(StrokeID(id))
            diffs.append(.accepted(StrokeID(id), position: position))
        case 6:  // StrokeCancelled
            let (id, extra) = try readIDs(bytes, body)
            guard extra == 0 else { throw GiveUp() }
            chains.ended(StrokeID(id))
            diffs.append(.cancelled(StrokeID(id)))
        case 7:  // Cleared
            var fields = ProtoScanner(bytes, body)
            var owner = ""
            if !fields.isAtEnd {
                guard let (field, wireType) = fields.nextTag(), field == 1, wireType == ProtoScanner.lengthDelimited,
                    let value = fields.readString(), fields.isAtEnd
                else { throw GiveUp() }
                owner = value
            }
            diffs.append(.cleared(owner: owner.isEmpty ? nil : UserNamespace(owner)))
        case 9:  // StrokeRemoved
            let (id, extra) = try readIDs(bytes, body)
            guard extra == 0 else { throw GiveUp() }
            diffs.append(.removed(StrokeID(id)))
        default:  // StrokeRestored (a redo: rare) and anything unknown
            throw GiveUp()
        }
    }

    /// A message of varint fields 1 and 2 (each at most once).
    private static func readIDs(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) throws -> (UInt64, UInt64) {
        var scanner = ProtoScanner(bytes, region)
        var first: UInt64?, second: UInt64?
        while !scanner.isAtEnd {
            guard let (field, wireType) = scanner.nextTag(), wireType == ProtoScanner.varint else { throw GiveUp() }
            switch field {
            case 1: try once(&first, scanner.readVarint())
            case 2: try once(&second, scanner.readVarint())
            default: throw GiveUp()
            }
        }
        return (first ?? 0, second ?? 0)
    }
}

/// A `StrokeAppends`' packed per-segment columns.
struct PackedSegmentColumns: SegmentColumns {
    var ids: PackedVarints, offsets: PackedVarints, counts: PackedVarints, predicted: PackedVarints

    var lengths: (ids: Int, offsets: Int, counts: Int, predicted: Int) {
        (ids.count, offsets.count, counts.count, predicted.count)
    }

    mutating func next() -> (idDelta: Int64, offset: UInt32, count: UInt32, predicted: UInt32) {
        (ids.nextSInt64(), UInt32(truncatingIfNeeded: offsets.next()), UInt32(truncatingIfNeeded: counts.next()),
         UInt32(truncatingIfNeeded: predicted.next()))
    }
}

/// The batch inside a received `PublishMessage`, without decoding it.
public enum PublishedBatch {
    /// The encoded `DiffBatch` and its sequence when `bytes` is a
    /// `PublishMessage` holding a batch and nothing else (as the hub writes
    /// them); nil for heartbeats and anything unusual (decode those with
    /// SwiftProtobuf).
    public static func find(in bytes: UnsafeRawBufferPointer) -> (sequence: UInt64, batch: UnsafeRawBufferPointer)? {
        var scanner = ProtoScanner(bytes)
        guard let (field, wireType) = scanner.nextTag(), field == 1, wireType == ProtoScanner.lengthDelimited,
            let region = scanner.readLengthDelimited(), scanner.isAtEnd
        else { return nil }
        // The sequence (field 2), at the latest after the board name.
        var header = ProtoScanner(bytes, region)
        var sequence: UInt64 = 0
        while !header.isAtEnd {
            guard let (field, wireType) = header.nextTag() else { return nil }
            if field == 2 && wireType == ProtoScanner.varint {
                guard let value = header.readVarint() else { return nil }
                sequence = value
                break
            }
            guard field == 1, wireType == ProtoScanner.lengthDelimited, header.readLengthDelimited() != nil else { return nil }
        }
        return (sequence, UnsafeRawBufferPointer(rebasing: bytes[region]))
    }
}
