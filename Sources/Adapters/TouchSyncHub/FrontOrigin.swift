import ZeroMQ

/// What a hub with several board threads (`HubFront`) tells a board thread
/// about the connection a request came from, which the thread cannot read
/// from a message that crossed an inproc socket: its remote address (the
/// per-address allowances of a plain hub) and its socket's descriptor (how
/// much of its snapshots lie unread). One part between the routing id and
/// the request: 4 bytes of descriptor, big-endian (-1: none), then the
/// address in UTF-8 (possibly empty). Internal to one process, never on a wire.
struct FrontOrigin: Equatable {
    var descriptor: Int32?
    var address: String?

    init(descriptor: Int32?, address: String?) {
        self.descriptor = descriptor
        self.address = address
    }

    /// The origin of a message received from a public socket.
    init(of message: ZMQMessage) {
        self.init(descriptor: message.sourceDescriptor, address: message.peerAddress)
    }

    var encoded: [UInt8] {
        var bytes = withUnsafeBytes(of: (descriptor ?? -1).bigEndian) { Array($0) }
        if let address { bytes.append(contentsOf: address.utf8) }
        return bytes
    }

    /// Nil when the part is not an origin (shorter than its descriptor).
    init?(decoding bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 4 else { return nil }
        let descriptor = Int32(bigEndian: bytes.loadUnaligned(as: Int32.self))
        self.descriptor = descriptor >= 0 ? descriptor : nil
        address = bytes.count > 4 ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[4...]), as: UTF8.self) : nil
    }
}
