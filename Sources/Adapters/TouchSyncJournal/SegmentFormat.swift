import TouchSyncHubCore
import TouchSyncWire

/// Segment files: an 8-byte magic, then records of
/// `u32 LE length | u32 LE CRC-32C | payload` (see proto/touchsync/v1/journal.proto).
enum SegmentFormat {
    static let magic: [UInt8] = Array("TSJRNL01".utf8)
    static let recordHeaderBytes = 8
    /// Larger lengths are damage, not records (a checkpoint of a board at the
    /// hub's limits is far below this).
    static let maxRecordBytes = 1 << 30
    static let fileExtension = ".tsj"

    /// The segment holding batches after `sequence` (its checkpoint's).
    static func fileName(firstSequence sequence: UInt64) -> String {
        let digits = String(sequence)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + fileExtension
    }

    static func sequence(ofFileName name: String) -> UInt64? {
        guard name.hasSuffix(fileExtension) else { return nil }
        return UInt64(name.dropLast(fileExtension.count))
    }

    /// A record whose payload `write` appends, framed in the same buffer (no copy of the payload).
    static func frame(capacity: Int, writing write: (inout ProtoWriter) -> Void) -> [UInt8] {
        var out = ProtoWriter(prefix: recordHeaderBytes, capacity: capacity)
        write(&out)
        let length = UInt32(out.bytes.count - recordHeaderBytes)
        let checksum = out.bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[recordHeaderBytes...])) }
        for index in 0..<4 {
            out.bytes[index] = UInt8(truncatingIfNeeded: length >> UInt32(8 * index))
            out.bytes[4 + index] = UInt8(truncatingIfNeeded: checksum >> UInt32(8 * index))
        }
        return out.bytes
    }

    static func frame(_ payload: [UInt8]) -> [UInt8] {
        frame(capacity: payload.count) { $0.bytes.append(contentsOf: payload) }
    }

    private static func readUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        var value: UInt32 = 0
        for index in 0..<4 { value |= UInt32(bytes[offset + index]) << UInt32(8 * index) }
        return value
    }

    /// Reads a segment's bytes: the payload of each good record, and where
    /// the good part ends and why.
    static func scan(_ bytes: [UInt8]) -> SegmentScan {
        guard bytes.count >= magic.count, Array(bytes[0..<magic.count]) == magic else {
            // A file cut before its magic was complete is a torn creation.
            let torn = bytes.count < magic.count && magic.starts(with: bytes)
            return SegmentScan(
                records: [], goodLength: 0,
                damage: torn
                    ? .tornTail(offset: 0, bytes: bytes.count)
                    : .corrupt(offset: 0, bytes: bytes.count, reason: "not a TouchSync journal segment (bad magic)"))
        }
        var records: [(offset: Int, payload: Range<Int>)] = []
        var offset = magic.count
        while offset < bytes.count {
            let remaining = bytes.count - offset
            guard remaining >= recordHeaderBytes else {
                return SegmentScan(records: records, goodLength: offset, damage: .tornTail(offset: offset, bytes: remaining))
            }
            let length = Int(readUInt32(bytes, at: offset))
            let stored = readUInt32(bytes, at: offset + 4)
            if length == 0 {
                // Zeros where a record should start: space the file system
                // extended but the crash never filled (torn), unless data follows.
                let torn = bytes[offset...].allSatisfy { $0 == 0 }
                return SegmentScan(
                    records: records, goodLength: offset,
                    damage: torn
                        ? .tornTail(offset: offset, bytes: remaining)
                        : .corrupt(offset: offset, bytes: remaining, reason: "a record of length 0"))
            }
            guard length <= maxRecordBytes else {
                return SegmentScan(
                    records: records, goodLength: offset,
                    damage: .corrupt(offset: offset, bytes: remaining, reason: "a record length of \(length) bytes"))
            }
            let end = offset + recordHeaderBytes + length
            guard end <= bytes.count else {
                // The length runs past the end of the file: the last write was cut short.
                return SegmentScan(records: records, goodLength: offset, damage: .tornTail(offset: offset, bytes: remaining))
            }
            let payload = (offset + recordHeaderBytes)..<end
            let actual = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[payload])) }
            guard actual == stored else {
                // A bad checksum on the very last record is a write cut short
                // inside the payload; anywhere else, bytes changed after writing.
                let damage: SegmentDamage =
                    end == bytes.count
                    ? .tornTail(offset: offset, bytes: remaining)
                    : .corrupt(offset: offset, bytes: remaining, reason: "checksum mismatch in the record at byte \(offset)")
                return SegmentScan(records: records, goodLength: offset, damage: damage)
            }
            records.append((offset, payload))
            offset = end
        }
        return SegmentScan(records: records, goodLength: offset, damage: nil)
    }
}

/// What `SegmentFormat.scan` found.
struct SegmentScan {
    var records: [(offset: Int, payload: Range<Int>)]
    /// Bytes from the start up to the end of the last good record.
    var goodLength: Int
    var damage: SegmentDamage?
}

