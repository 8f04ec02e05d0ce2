import SwiftProtobuf

/// Bytes to and from protobuf messages, with decoding errors made typed.
public enum WireCodec {
    /// Decodes in place (e.g. straight out of a received `zmq_msg_t`), no copy.
    public static func decode<M: SwiftProtobuf.Message>(_ type: M.Type, from bytes: UnsafeRawBufferPointer)
        throws(WireError) -> M
    {
        do {
            return try M(serializedBytes: RawSpan(_unsafeBytes: bytes))
        } catch {
            throw .malformed("not a valid \(M.protoMessageName) (\(bytes.count) bytes): \(error)")
        }
    }

    public static func decode<M: SwiftProtobuf.Message>(_ type: M.Type, from bytes: [UInt8]) throws(WireError) -> M {
        let result = bytes.withUnsafeBytes { buffer in Result { () throws(WireError) in try decode(type, from: buffer) } }
        return try result.get()
    }

    public static func encode(_ message: some SwiftProtobuf.Message) -> [UInt8] {
        do {
            return try message.serializedBytes()
        } catch {
            // Binary encoding fails only for proto2 required fields or unregistered Any types;
            // the TouchSync protocol (proto3, no Any) has neither.
            preconditionFailure("encoding \(type(of: message)) failed: \(error)")
        }
    }

    /// `bytes` (an encoded message) as length-delimited field `field` of an
    /// enclosing message: protobuf lets a message be built by concatenating
    /// its fields, so an already encoded batch is wrapped, not encoded again.
    public static func field(_ field: UInt32, wrapping bytes: [UInt8], into out: inout [UInt8]) {
        appendVarint(UInt64(field) << 3 | 2, to: &out)
        appendVarint(UInt64(bytes.count), to: &out)
        out.append(contentsOf: bytes)
    }

    public static func field(_ field: UInt32, wrapping bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 12)
        self.field(field, wrapping: bytes, into: &out)
        return out
    }

    /// `HubReply{ack: Ack{through}}`, written directly (a hub sends about one
    /// a frame), byte for byte as SwiftProtobuf writes it.
    public static func ackReply(through: UInt64) -> [UInt8] {
        var out = ProtoWriter(capacity: 13)
        out.lengthDelimited(2) { $0.uint64Field(1, through) }  // HubReply.ack, Ack.through (nothing when 0)
        return out.bytes
    }

    static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            out.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
    }
}
