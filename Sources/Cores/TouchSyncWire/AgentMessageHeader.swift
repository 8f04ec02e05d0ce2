/// An `AgentMessage`'s number and body kind, read without decoding the body:
/// for a message the hub will not decode (over its size limit), so that a
/// numbered one still takes its number (docs/protocol.md, "Numbering").
public enum AgentMessageHeader {
    /// The body fields of numbered messages (agent.proto): frame, style,
    /// clear, undo, redo, erase.
    public static let numberedBodies: Set<UInt32> = [3, 4, 5, 8, 9, 10]

    /// `sequence` and the field number of the body (the last one, as
    /// protobuf's oneof keeps), or nil when the top level does not scan as
    /// protobuf. Length-delimited fields are skipped, not read.
    public static func scan(_ bytes: UnsafeRawBufferPointer) -> (sequence: UInt64, body: UInt32?)? {
        var sequence: UInt64 = 0
        var body: UInt32? = nil
        let scanned = ProtoField.walk(bytes) { field, wireType, varint in
            if field == 1, let varint { sequence = varint }
            if wireType == ProtoScanner.lengthDelimited && (2...10).contains(field) { body = field }
        }
        return scanned ? (sequence, body) : nil
    }
}

/// One top-level varint field of an encoded message, read without decoding
/// the rest (length-delimited fields are skipped): how a client matches a
/// `SnapshotReply` (field 3) or a `HistoryReply` (field 1) to its request.
public enum ProtoField {
    /// The last value of varint field `field`, or nil (absent, or the bytes do not scan as protobuf).
    public static func varint(_ field: UInt32, in bytes: UnsafeRawBufferPointer) -> UInt64? {
        var found: UInt64? = nil
        let scanned = walk(bytes) { number, _, varint in
            if number == field, let varint { found = varint }
        }
        return scanned ? found : nil
    }

    /// Visits each top-level field in order: its number, its wire type, and
    /// its value when it is a varint (nil for the others, which are skipped
    /// unread). False when the bytes do not scan as protobuf.
    static func walk(_ bytes: UnsafeRawBufferPointer, _ visit: (UInt32, UInt8, UInt64?) -> Void) -> Bool {
        var scanner = ProtoScanner(bytes)
        while !scanner.isAtEnd {
            guard let (number, wireType) = scanner.nextTag() else { return false }
            switch wireType {
            case ProtoScanner.varint:
                guard let value = scanner.readVarint() else { return false }
                visit(number, wireType, value)
            case ProtoScanner.lengthDelimited:
                guard scanner.readLengthDelimited() != nil else { return false }
                visit(number, wireType, nil)
            case 1:
                guard scanner.readFixed64() != nil else { return false }
                visit(number, wireType, nil)
            case 5:
                guard scanner.readFixed32() != nil else { return false }
                visit(number, wireType, nil)
            default:
                return false
            }
        }
        return true
    }
}
