import TouchSyncCore

/// The hub's hot path: an `AgentMessage` whose body is a `TouchFrame`, read
/// in one pass from the received bytes straight into the model (no
/// intermediate protobuf structs; arrays only per touch change, none per
/// sample).
///
/// It reads the canonical encoding (each field at most once, repeated
/// scalars packed, no unknown fields) and gives up, returning nil, on
/// anything else: another body, an unusual but valid encoding, or an error.
/// The caller then decodes with SwiftProtobuf, which accepts every valid
/// encoding and words the error; so both paths agree on every input
/// (tested on random and mutated messages).
public enum AgentFrameDecoder {
    public static func decode(_ bytes: UnsafeRawBufferPointer) -> TouchFrame? {
        try? read(bytes)
    }

    /// AgentMessage: 1 sequence, 3 frame; any other body gives up.
    private static func read(_ bytes: UnsafeRawBufferPointer) throws -> TouchFrame {
        var scanner = ProtoScanner(bytes)
        var sequence: UInt64?
        var frame: Range<Int>?
        while !scanner.isAtEnd {
            switch try required(scanner.nextTag()) {
            case (1, ProtoScanner.varint): try once(&sequence, scanner.readVarint())
            case (3, ProtoScanner.lengthDelimited): try once(&frame, scanner.readLengthDelimited())
            default: throw GiveUp()
            }
        }
        return try readFrame(bytes, required(frame), sequence: sequence ?? 0)
    }

    /// TouchFrame: 1 changes, 2 alive, 3 event_time, 4 packed_changes (v2; before the changes).
    private static func readFrame(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>, sequence: UInt64) throws
        -> TouchFrame
    {
        // First pass: the time reference (event_time, encoded after the
        // changes) and the alive set; the changes are counted and skipped.
        var scanner = ProtoScanner(bytes, region)
        var eventTime: UInt64?
        var aliveSet: Range<Int>?
        var packed: Range<Int>?
        var changeCount = 0
        while !scanner.isAtEnd {
            switch try required(scanner.nextTag()) {
            case (1, ProtoScanner.lengthDelimited):
                _ = try required(scanner.readLengthDelimited())
                changeCount += 1
            case (2, ProtoScanner.lengthDelimited): try once(&aliveSet, scanner.readLengthDelimited())
            case (3, ProtoScanner.varint): try once(&eventTime, scanner.readVarint())
            case (4, ProtoScanner.lengthDelimited): try once(&packed, scanner.readLengthDelimited())
            default: throw GiveUp()
            }
        }
        let reference = eventTime.map(zigZagDecoded) ?? 0
        var changes: [TouchChange] = []
        // An empty packed_changes is no changes (proto3 writes no empty bytes; SwiftProtobuf reads it so).
        if let packed, !packed.isEmpty { changes = try PackedChanges.decode(bytes, packed, timeReference: reference) }
        changes.reserveCapacity(changes.count + changeCount)
        scanner = ProtoScanner(bytes, region)
        while !scanner.isAtEnd {
            // Well formed: the first pass read every field.
            let (field, wireType) = try required(scanner.nextTag())
            if wireType == ProtoScanner.varint {
                _ = scanner.readVarint()
            } else if let body = scanner.readLengthDelimited(), field == 1 {
                changes.append(try readChange(bytes, body, timeReference: reference))
            }
        }
        return TouchFrame(sequence: sequence, changes: changes, aliveTouches: try aliveSet.map { try readAliveSet(bytes, $0) })
    }

    /// AliveSet: 1 touch_ids, packed.
    private static func readAliveSet(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) throws(GiveUp) -> [TouchID] {
        var scanner = ProtoScanner(bytes, region)
        var packed: PackedVarints?
        while !scanner.isAtEnd {
            guard try required(scanner.nextTag()) == (1, ProtoScanner.lengthDelimited) else { throw GiveUp() }
            try once(&packed, PackedVarints(bytes, required(scanner.readLengthDelimited())))
        }
        guard var packed else { return [] }
        var ids: [TouchID] = []
        ids.reserveCapacity(packed.count)
        while packed.hasMore { ids.append(packed.next()) }
        return ids
    }

    /// TouchChange: 1 touch_id, 2 phase, 3 samples, 5 amendments.
    private static func readChange(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>, timeReference: Int64) throws
        -> TouchChange
    {
        var scanner = ProtoScanner(bytes, region)
        var touch: UInt64?, phaseValue: UInt64?
        var samples: Range<Int>?, amendments: Range<Int>?
        while !scanner.isAtEnd {
            switch try required(scanner.nextTag()) {
            case (1, ProtoScanner.varint): try once(&touch, scanner.readVarint())
            case (2, ProtoScanner.varint): try once(&phaseValue, scanner.readVarint())
            case (3, ProtoScanner.lengthDelimited): try once(&samples, scanner.readLengthDelimited())
            case (5, ProtoScanner.lengthDelimited): try once(&amendments, scanner.readLengthDelimited())
            default: throw GiveUp()
            }
        }
        // An enum reads as the low 32 bits (proto3); 0 or unknown is not a phase.
        guard let phaseValue,
            let proto = Touchsync_V1_TouchPhase(rawValue: Int(Int32(truncatingIfNeeded: phaseValue))),
            let phase = try? TouchPhase(proto)
        else { throw GiveUp() }
        var change = TouchChange(touch: touch ?? 0, phase: phase)
        if let samples {
            let columns = try required(PackedSampleColumns(bytes, samples))
            (change.samples, change.predicted) = try SampleRunCodec.decode(columns, timeReference: timeReference)
        }
        if let amendments {
            let columns = try required(PackedSampleColumns(bytes, amendments))
            change.amendments = try SampleRunCodec.decodeSamples(columns, timeReference: timeReference)
        }
        return change
    }
}

/// A `SampleRun`'s packed fields in the received bytes.
struct PackedSampleColumns: SampleColumns {
    private var x: PackedVarints, y: PackedVarints, time: PackedVarints
    private var flagRuns: PackedVarints, force: PackedVarints
    private var azimuth: PackedVarints, altitude: PackedVarints
    private var estimations: PackedVarints
    let timeBase: Int64
    let predictedCount: UInt32
    private let bytes: UnsafeRawBufferPointer
    private let coalesced: Range<Int>

    /// nil when the run is not in the canonical encoding (or not valid protobuf).
    init?(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) {
        var scanner = ProtoScanner(bytes, region)
        // Fields 1, 2, 4 to 9 (packed columns) by number; 3, 10 and 11 apart.
        var packed = (PackedVarints.empty, PackedVarints.empty, PackedVarints.empty, PackedVarints.empty,
                      PackedVarints.empty, PackedVarints.empty, PackedVarints.empty, PackedVarints.empty)
        var timeBase: Int64 = 0, predictedCount: UInt32 = 0, coalesced = 0..<0
        var seen: UInt16 = 0
        while !scanner.isAtEnd {
            guard let (field, wireType) = scanner.nextTag(), (1...11).contains(field) else { return nil }
            let bit: UInt16 = 1 << UInt16(field)
            guard seen & bit == 0 else { return nil }
            seen |= bit
            switch (field, wireType) {
            case (3, ProtoScanner.varint):
                guard let raw = scanner.readVarint() else { return nil }
                timeBase = zigZagDecoded(raw)
            case (10, ProtoScanner.varint):
                guard let raw = scanner.readVarint() else { return nil }
                predictedCount = UInt32(truncatingIfNeeded: raw)
            case (11, ProtoScanner.lengthDelimited):
                guard let body = scanner.readLengthDelimited() else { return nil }
                coalesced = body
            case (_, ProtoScanner.lengthDelimited) where field != 3 && field != 10:
                guard let body = scanner.readLengthDelimited(), let column = PackedVarints(bytes, body) else { return nil }
                switch field {
                case 1: packed.0 = column
                case 2: packed.1 = column
                case 4: packed.2 = column
                case 5: packed.3 = column
                case 6: packed.4 = column
                case 7: packed.5 = column
                case 8: packed.6 = column
                default: packed.7 = column
                }
            default:
                return nil
            }
        }
        (x, y, time, flagRuns, force, azimuth, altitude, estimations) = packed
        self.timeBase = timeBase
        self.predictedCount = predictedCount
        self.bytes = bytes
        self.coalesced = coalesced
    }

    var xCount: Int { x.count }
    var yCount: Int { y.count }
    var timeCount: Int { time.count }
    var estimationCount: Int { estimations.count }
    var coalescedCount: Int { coalesced.count }
    func coalescedByte(_ index: Int) -> UInt8 { bytes[coalesced.lowerBound + index] }

    @inline(__always)
    mutating func nextSample() -> (x: Int32, y: Int32, time: Int64, estimation: UInt32) {
        let x = self.x.nextSInt32(), y = self.y.nextSInt32(), time = self.time.nextSInt64()
        guard estimations.hasMore else { return (x, y, time, 0) }
        return (x, y, time, UInt32(truncatingIfNeeded: estimations.next()))
    }

    mutating func nextFlagRun() -> UInt32? {
        flagRuns.hasMore ? UInt32(truncatingIfNeeded: flagRuns.next()) : nil
    }

    mutating func nextForce() -> Int32? {
        force.hasMore ? force.nextSInt32() : nil
    }

    mutating func nextAngles() -> (azimuth: Int32, altitude: Int32)? {
        guard azimuth.hasMore, altitude.hasMore else { return nil }
        return (azimuth.nextSInt32(), altitude.nextSInt32())
    }

    var flagRunsLeft: Bool { flagRuns.hasMore }
    var forcesLeft: Bool { force.hasMore }
    var anglesLeft: Bool { azimuth.hasMore || altitude.hasMore }
}
