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
        var scanner = ProtoScanner(bytes)
        var sequence: UInt64 = 0
        var body: UInt32? = nil
        while !scanner.isAtEnd {
            guard let (field, wireType) = scanner.nextTag() else { return nil }
            switch wireType {
            case ProtoScanner.varint:
                guard let value = scanner.readVarint() else { return nil }
                if field == 1 { sequence = value }
            case ProtoScanner.lengthDelimited:
                guard scanner.readLengthDelimited() != nil else { return nil }
                if (2...10).contains(field) { body = field }
            case 1:
                guard scanner.readFixed64() != nil else { return nil }
            case 5:
                guard scanner.readFixed32() != nil else { return nil }
            default:
                return nil
            }
        }
        return (sequence, body)
    }
}

/// One top-level varint field of an encoded message, read without decoding
/// the rest (length-delimited fields are skipped): how a client matches a
/// `SnapshotReply` (field 3) or a `HistoryReply` (field 1) to its request.
public enum ProtoField {
    /// The last value of varint field `field`, or nil (absent, or the bytes do not scan as protobuf).
    public static func varint(_ field: UInt32, in bytes: UnsafeRawBufferPointer) -> UInt64? {
        var scanner = ProtoScanner(bytes)
        var found: UInt64? = nil
        while !scanner.isAtEnd {
            guard let (number, wireType) = scanner.nextTag() else { return nil }
            switch wireType {
            case ProtoScanner.varint:
                guard let value = scanner.readVarint() else { return nil }
                if number == field { found = value }
            case ProtoScanner.lengthDelimited:
                guard scanner.readLengthDelimited() != nil else { return nil }
            case 1:
                guard scanner.readFixed64() != nil else { return nil }
            case 5:
                guard scanner.readFixed32() != nil else { return nil }
            default:
                return nil
            }
        }
        return found
    }
}
