/// The channel part of a multiplexed connection (docs/protocol.md,
/// "Multiplexed connections"): 4 bytes, an unsigned integer, big-endian,
/// before each agent message and each reply. The hub and the client write
/// and read it with these.
public enum ChannelPart {
    public static func encode(_ channel: UInt32) -> [UInt8] {
        withUnsafeBytes(of: channel.bigEndian) { Array($0) }
    }

    /// The channel a part names, or nil when it is not 4 bytes.
    public static func decode(_ bytes: UnsafeRawBufferPointer) -> UInt32? {
        bytes.count == 4 ? UInt32(bigEndian: bytes.loadUnaligned(as: UInt32.self)) : nil
    }
}
