import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One ZeroMQ message part, held in a `zmq_msg_t` that libzmq sized for it:
/// a receive never truncates and never copies into a fixed buffer.
///
/// A `ZMQMessage` can be reused: `ZMQSocket.receive(into:)` releases what it
/// held and fills it again, so a receive loop allocates nothing per message.
/// Not thread-safe; it belongs to the thread that owns the socket.
public final class ZMQMessage {
    @usableFromInline let raw: UnsafeMutablePointer<zmq_msg_t>

    /// An empty message, ready to receive into.
    public init() {
        raw = .allocate(capacity: 1)
        zmq_msg_init(raw)
    }

    /// A message holding a copy of `bytes`, ready to send.
    public convenience init(_ bytes: UnsafeRawBufferPointer) throws(ZMQError) {
        self.init()
        try reset(copying: bytes)
    }

    deinit {
        zmq_msg_close(raw)
        raw.deallocate()
    }

    /// Releases the content and makes this message empty.
    public func reset() {
        zmq_msg_close(raw)
        zmq_msg_init(raw)
    }

    /// Replaces the content with a copy of `bytes`.
    public func reset(copying bytes: UnsafeRawBufferPointer) throws(ZMQError) {
        zmq_msg_close(raw)
        try zmqCall("ZMQMessage.reset") { zmq_msg_init_size(raw, bytes.count) }
        if let base = bytes.baseAddress, bytes.count > 0 {
            zmq_msg_data(raw).copyMemory(from: base, byteCount: bytes.count)
        }
    }

    /// Size in bytes.
    @inlinable public var count: Int { zmq_msg_size(raw) }

    /// Whether more parts of the same multipart message follow this one.
    public var hasMore: Bool { zmq_msg_more(raw) == 1 }

    /// Calls `body` with the bytes in place; the pointer is valid only inside `body`.
    @inlinable
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let count = zmq_msg_size(raw)
        guard count > 0, let base = zmq_msg_data(raw) else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// A copy of the bytes.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// The bytes as UTF-8 text (invalid sequences repaired).
    public var string: String { withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    /// A metadata property of a received message (`zmq_msg_gets`), or nil when
    /// the transport did not set it. libzmq defines `Socket-Type`, `Routing-Id`,
    /// `User-Id` (set by the ZAP handler, e.g. the authenticated CURVE key) and
    /// `Peer-Address` (the remote IP for tcp).
    public func property(_ name: String) -> String? {
        guard let value = zmq_msg_gets(raw, name) else { return nil }
        return String(cString: value)
    }

    /// The identity the authentication handler gave the peer (`User-Id`).
    public var userID: String? { property("User-Id") }

    /// Whether property `name` is exactly `value`, compared in place (no
    /// String made: the hub asks this of every authenticated message).
    public func property(_ name: String, equals value: String) -> Bool {
        guard let found = zmq_msg_gets(raw, name) else { return false }
        return value.withCString { strcmp($0, found) == 0 }
    }

    /// The peer's IP address, for tcp connections (`Peer-Address`).
    public var peerAddress: String? { property("Peer-Address") }

    /// The descriptor of the connection a received message came on (`ZMQ_SRCFD`), or nil.
    public var sourceDescriptor: Int32? {
        let descriptor = zmq_msg_get(raw, ZMQ_SRCFD)
        return descriptor >= 0 ? descriptor : nil
    }
}
