import ZeroMQ

/// What a hub with several board threads (`HubFront`) tells a board thread
/// about the connection a request came from, which the thread cannot read
/// from a message that crossed an inproc socket: the user CURVE and ZAP
/// authenticated (an authenticated hub), its remote address (the
/// per-address allowances of a plain hub) and its socket's descriptor (how
/// much of its snapshots lie unread). One part between the routing id and
/// the request: 4 bytes of descriptor, big-endian (-1: none), 2 bytes of
/// the user's length, big-endian (0: none), the user in UTF-8, then the
/// address in UTF-8 (possibly empty). Internal to one process, never on a wire.
struct FrontOrigin: Equatable {
    var descriptor: Int32?
    var user: String?
    var address: String?

    init(descriptor: Int32?, user: String? = nil, address: String?) {
        self.descriptor = descriptor
        self.user = user
        self.address = address
    }

    /// The origin of a message received from a public socket (its user only when `authenticated`).
    init(of message: ZMQMessage, authenticated: Bool) {
        self.init(descriptor: message.sourceDescriptor, user: authenticated ? message.userID : nil, address: message.peerAddress)
    }

    var encoded: [UInt8] {
        var bytes = withUnsafeBytes(of: (descriptor ?? -1).bigEndian) { Array($0) }
        let user = Array((user ?? "").utf8.prefix(Int(UInt16.max)))
        bytes += withUnsafeBytes(of: UInt16(user.count).bigEndian) { Array($0) }
        bytes += user
        if let address { bytes.append(contentsOf: address.utf8) }
        return bytes
    }

    /// Nil when the part is not an origin.
    init?(decoding bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 6 else { return nil }
        let descriptor = Int32(bigEndian: bytes.loadUnaligned(as: Int32.self))
        self.descriptor = descriptor >= 0 ? descriptor : nil
        let userBytes = Int(UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt16.self)))
        guard bytes.count >= 6 + userBytes else { return nil }
        user = userBytes > 0 ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[6..<(6 + userBytes)]), as: UTF8.self) : nil
        address = bytes.count > 6 + userBytes ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[(6 + userBytes)...]), as: UTF8.self) : nil
    }
}
