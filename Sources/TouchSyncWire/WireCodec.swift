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
}
