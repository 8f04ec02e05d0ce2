import CZeroMQ
import Glibc

/// Socket options, each with the libzmq name it sets. Only what the hub and
/// its clients need is typed here; `setOption(_:_:)` reaches any other.
extension ZMQSocket {
    // MARK: Raw access

    public func setOption(_ option: Int32, _ value: Int32) throws(ZMQError) {
        let socket = try open("setOption(\(option))")
        var value = value
        try zmqCall("setOption(\(option))") { zmq_setsockopt(socket, option, &value, MemoryLayout<Int32>.size) }
    }

    public func setOption(_ option: Int32, _ value: Int64) throws(ZMQError) {
        let socket = try open("setOption(\(option))")
        var value = value
        try zmqCall("setOption(\(option))") { zmq_setsockopt(socket, option, &value, MemoryLayout<Int64>.size) }
    }

    public func setOption(_ option: Int32, bytes: [UInt8]) throws(ZMQError) {
        let socket = try open("setOption(\(option))")
        try zmqCall("setOption(\(option))") {
            bytes.withUnsafeBytes { zmq_setsockopt(socket, option, $0.baseAddress, $0.count) }
        }
    }

    public func int32Option(_ option: Int32) throws(ZMQError) -> Int32 {
        let socket = try open("getOption(\(option))")
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        try zmqCall("getOption(\(option))") { zmq_getsockopt(socket, option, &value, &size) }
        return value
    }

    public func int64Option(_ option: Int32) throws(ZMQError) -> Int64 {
        let socket = try open("getOption(\(option))")
        var value: Int64 = 0
        var size = MemoryLayout<Int64>.size
        try zmqCall("getOption(\(option))") { zmq_getsockopt(socket, option, &value, &size) }
        return value
    }

    public func bytesOption(_ option: Int32, capacity: Int = 256) throws(ZMQError) -> [UInt8] {
        let socket = try open("getOption(\(option))")
        var buffer = [UInt8](repeating: 0, count: capacity)
        var size = capacity
        try zmqCall("getOption(\(option))") {
            buffer.withUnsafeMutableBytes { zmq_getsockopt(socket, option, $0.baseAddress, &size) }
        }
        return Array(buffer.prefix(size))
    }

    func stringOption(_ option: Int32) throws(ZMQError) -> String {
        var bytes = try bytesOption(option)
        if let end = bytes.firstIndex(of: 0) { bytes.removeSubrange(end...) }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: Queues and limits

    /// `ZMQ_SNDHWM`: messages queued per peer before send blocks or drops (libzmq default 1000).
    public func setSendHighWaterMark(_ messages: Int32) throws(ZMQError) { try setOption(ZMQ_SNDHWM, messages) }
    public var sendHighWaterMark: Int32 { get throws(ZMQError) { try int32Option(ZMQ_SNDHWM) } }
    /// `ZMQ_RCVHWM`: messages queued per peer on receive (libzmq default 1000).
    public func setReceiveHighWaterMark(_ messages: Int32) throws(ZMQError) { try setOption(ZMQ_RCVHWM, messages) }
    /// `ZMQ_LINGER` in milliseconds; this binding sets 0 on every new socket.
    public func setLinger(milliseconds: Int32) throws(ZMQError) { try setOption(ZMQ_LINGER, milliseconds) }
    public var linger: Int32 { get throws(ZMQError) { try int32Option(ZMQ_LINGER) } }
    /// `ZMQ_MAXMSGSIZE`: a peer that sends a larger message is disconnected (-1: no limit).
    public func setMaxMessageSize(_ bytes: Int64) throws(ZMQError) { try setOption(ZMQ_MAXMSGSIZE, bytes) }
    public var maxMessageSize: Int64 { get throws(ZMQError) { try int64Option(ZMQ_MAXMSGSIZE) } }
    /// `ZMQ_RCVTIMEO` and `ZMQ_SNDTIMEO` in milliseconds (-1: block forever).
    public func setReceiveTimeout(milliseconds: Int32) throws(ZMQError) { try setOption(ZMQ_RCVTIMEO, milliseconds) }
    public func setSendTimeout(milliseconds: Int32) throws(ZMQError) { try setOption(ZMQ_SNDTIMEO, milliseconds) }
    /// `ZMQ_SNDBUF` and `ZMQ_RCVBUF`: the kernel's socket buffer sizes in bytes (0: the OS default).
    public func setSendBuffer(bytes: Int32) throws(ZMQError) { try setOption(ZMQ_SNDBUF, bytes) }
    public func setReceiveBuffer(bytes: Int32) throws(ZMQError) { try setOption(ZMQ_RCVBUF, bytes) }
    /// `ZMQ_IMMEDIATE`: queue only to peers whose connection is complete.
    public func setImmediate(_ on: Bool) throws(ZMQError) { try setOption(ZMQ_IMMEDIATE, Int32(on ? 1 : 0)) }

    // MARK: Routing

    /// `ZMQ_ROUTER_MANDATORY`: sending to an unknown routing id fails with
    /// `EHOSTUNREACH` instead of being dropped silently.
    public func setRouterMandatory(_ on: Bool) throws(ZMQError) { try setOption(ZMQ_ROUTER_MANDATORY, Int32(on ? 1 : 0)) }
    /// `ZMQ_ROUTER_HANDOVER`: a new connection with a routing id already in use
    /// takes it over (a reconnecting peer whose old connection is not yet gone).
    public func setRouterHandover(_ on: Bool) throws(ZMQError) { try setOption(ZMQ_ROUTER_HANDOVER, Int32(on ? 1 : 0)) }
    /// `ZMQ_ROUTING_ID` (was `ZMQ_IDENTITY`): this socket's id as its ROUTER peer sees it; set before connect.
    public func setRoutingID(_ id: [UInt8]) throws(ZMQError) { try setOption(ZMQ_ROUTING_ID, bytes: id) }
    public var routingID: [UInt8] { get throws(ZMQError) { try bytesOption(ZMQ_ROUTING_ID) } }

    // MARK: Publish and subscribe

    /// `ZMQ_SUBSCRIBE`: receive messages whose first part starts with `prefix` ("" for all).
    public func subscribe(_ prefix: [UInt8]) throws(ZMQError) { try setOption(ZMQ_SUBSCRIBE, bytes: prefix) }
    public func subscribe(_ prefix: String = "") throws(ZMQError) { try subscribe(Array(prefix.utf8)) }
    public func unsubscribe(_ prefix: [UInt8]) throws(ZMQError) { try setOption(ZMQ_UNSUBSCRIBE, bytes: prefix) }
    public func unsubscribe(_ prefix: String) throws(ZMQError) { try unsubscribe(Array(prefix.utf8)) }
    /// `ZMQ_XPUB_VERBOSE`: pass every subscribe message up, not only the first per topic.
    public func setXPubVerbose(_ on: Bool) throws(ZMQError) { try setOption(ZMQ_XPUB_VERBOSE, Int32(on ? 1 : 0)) }

    // MARK: Heartbeats (ZMTP 3.1)

    /// `ZMQ_HEARTBEAT_IVL`: send a PING every interval (0: off).
    public func setHeartbeatInterval(milliseconds: Int32) throws(ZMQError) { try setOption(ZMQ_HEARTBEAT_IVL, milliseconds) }
    /// `ZMQ_HEARTBEAT_TIMEOUT`: drop the connection when no traffic arrives for this long after a PING.
    public func setHeartbeatTimeout(milliseconds: Int32) throws(ZMQError) { try setOption(ZMQ_HEARTBEAT_TIMEOUT, milliseconds) }
    /// `ZMQ_HEARTBEAT_TTL`: how long the remote peer waits for traffic before dropping us.
    public func setHeartbeatTTL(milliseconds: Int32) throws(ZMQError) { try setOption(ZMQ_HEARTBEAT_TTL, milliseconds) }

    // MARK: Security

    /// `ZMQ_CURVE_SERVER`: this socket is the CURVE server (needs `setCurveSecretKey`).
    public func setCurveServer(_ on: Bool) throws(ZMQError) { try setOption(ZMQ_CURVE_SERVER, Int32(on ? 1 : 0)) }
    /// `ZMQ_CURVE_PUBLICKEY`, as 40 Z85 characters.
    public func setCurvePublicKey(_ z85: String) throws(ZMQError) { try setOption(ZMQ_CURVE_PUBLICKEY, bytes: Array(z85.utf8)) }
    /// `ZMQ_CURVE_SECRETKEY`, as 40 Z85 characters.
    public func setCurveSecretKey(_ z85: String) throws(ZMQError) { try setOption(ZMQ_CURVE_SECRETKEY, bytes: Array(z85.utf8)) }
    /// `ZMQ_CURVE_SERVERKEY`: the server's public key, on a CURVE client.
    public func setCurveServerKey(_ z85: String) throws(ZMQError) { try setOption(ZMQ_CURVE_SERVERKEY, bytes: Array(z85.utf8)) }
    /// `ZMQ_ZAP_DOMAIN`: the domain passed to the ZAP authentication handler.
    public func setZAPDomain(_ domain: String) throws(ZMQError) { try setOption(ZMQ_ZAP_DOMAIN, bytes: Array(domain.utf8)) }
    public var mechanism: Int32 { get throws(ZMQError) { try int32Option(ZMQ_MECHANISM) } }
    /// `ZMQ_HANDSHAKE_IVL`: a connection whose ZMTP (and CURVE) handshake takes longer is dropped.
    public func setHandshakeInterval(milliseconds: Int32) throws(ZMQError) { try setOption(ZMQ_HANDSHAKE_IVL, milliseconds) }
    /// `ZMQ_XPUB_MANUAL`: subscriptions take effect only when the owner calls
    /// `subscribe`/`unsubscribe` after receiving them (for the pipe of the last
    /// message received), so the owner decides who gets which topic.
    public func setXPubManual(_ on: Bool) throws(ZMQError) { try setOption(ZMQ_XPUB_MANUAL, Int32(on ? 1 : 0)) }
}

/// CURVE key pairs (needs a libzmq built with libsodium, as Debian's is).
public enum ZMQCurve {
    public struct KeyPair: Sendable, Equatable {
        /// Z85 text, 40 characters each.
        public let publicKey: String
        public let secretKey: String
    }

    public static func generateKeyPair() throws(ZMQError) -> KeyPair {
        var publicKey = [CChar](repeating: 0, count: 41)
        var secretKey = [CChar](repeating: 0, count: 41)
        try zmqCall("ZMQCurve.generateKeyPair") { zmq_curve_keypair(&publicKey, &secretKey) }
        return KeyPair(publicKey: string(publicKey), secretKey: string(secretKey))
    }

    /// The Z85 text of a 32-byte binary key (as a ZAP request carries it).
    public static func z85(_ key: UnsafeRawBufferPointer) -> String? {
        guard key.count == 32, let base = key.baseAddress else { return nil }
        var text = [CChar](repeating: 0, count: 41)
        guard zmq_z85_encode(&text, base.assumingMemoryBound(to: UInt8.self), 32) != nil else { return nil }
        return string(text)
    }

    /// The public key of a Z85 secret key.
    public static func publicKey(ofSecret secret: String) throws(ZMQError) -> String {
        var publicKey = [CChar](repeating: 0, count: 41)
        try zmqCall("ZMQCurve.publicKey") { zmq_curve_public(&publicKey, secret) }
        return string(publicKey)
    }

    /// Whether this libzmq supports CURVE (built with libsodium).
    public static var isAvailable: Bool { zmq_has("curve") == 1 }

    private static func string(_ z85: [CChar]) -> String {
        String(decoding: z85.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// What a socket monitor reports about a connection's handshake
/// (`zmq_socket_monitor`): how a client learns that a server refused it,
/// instead of waiting forever.
public enum ZMQHandshakeEvent: Sendable, Equatable {
    case succeeded
    /// The peer's authentication refused us (ZAP status `code`, e.g. 400).
    case refused(code: Int32)
    /// The peers do not speak the same security mechanism (say, plain text to CURVE), or broke the protocol.
    case protocolError(code: Int32)
    /// The handshake failed with no detail (e.g. a wrong server key: the server cannot decrypt and drops us).
    case failed(errno: Int32)
}

/// Reads handshake events of one socket from its monitor (a PAIR socket on
/// an inproc endpoint). Belongs to the thread that owns the socket.
public final class ZMQHandshakeMonitor {
    public let socket: ZMQSocket
    private let message = ZMQMessage()

    /// Starts monitoring `monitored` (call before it connects).
    public init(_ monitored: ZMQSocket, context: ZMQContext) throws(ZMQError) {
        let endpoint = "inproc://touchsync-monitor-\(UInt64.random(in: 0...UInt64.max))"
        let events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
            | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
        try monitored.startMonitor(endpoint: endpoint, events: events)
        socket = try ZMQSocket(context, type: .pair)
        try socket.setLinger(milliseconds: 0)
        try socket.connect(endpoint)
    }

    /// The events that arrived since the last call (never waits).
    public func events() -> [ZMQHandshakeEvent] {
        var found: [ZMQHandshakeEvent] = []
        while (try? socket.receive(into: message, dontWait: true)) == true {
            // Frame 1: u16 event, u32 value (native order); frame 2: the endpoint.
            let header = message.bytes
            let more = message.hasMore
            while more, (try? socket.receive(into: message, dontWait: true)) == true, message.hasMore {}
            guard header.count >= 6 else { continue }
            let event = Int32(header[0]) | Int32(header[1]) << 8
            let value = Int32(bitPattern: UInt32(header[2]) | UInt32(header[3]) << 8 | UInt32(header[4]) << 16 | UInt32(header[5]) << 24)
            switch event {
            case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: found.append(.succeeded)
            case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: found.append(.refused(code: value))
            case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL: found.append(.protocolError(code: value))
            case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL: found.append(.failed(errno: value))
            default: break
            }
        }
        return found
    }

    public func close() { socket.close() }
}

/// The TCP connections a listening socket accepted and still holds, from its
/// monitor (`ZMQ_EVENT_ACCEPTED` gives the descriptor, `DISCONNECTED` and
/// `CLOSED` take it away). libzmq has no call to drop one peer; shutting
/// down the descriptor makes its I/O thread see the end of the connection,
/// drop the pipe (and an XPUB's subscriptions with it), and the peer connect
/// again through the handshake (and ZAP). Belongs to the thread that owns the socket.
public final class ZMQAcceptedConnections {
    private let monitor: ZMQSocket
    private let message = ZMQMessage()
    private var descriptors: Set<Int32> = []

    /// Starts monitoring `monitored` (call before it binds).
    public init(_ monitored: ZMQSocket, context: ZMQContext) throws(ZMQError) {
        let endpoint = "inproc://touchsync-accepted-\(UInt64.random(in: 0...UInt64.max))"
        try monitored.startMonitor(endpoint: endpoint, events: ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CLOSED)
        monitor = try ZMQSocket(context, type: .pair)
        try monitor.setLinger(milliseconds: 0)
        // Never lose an event to the high-water mark: a stale set would miss a connection.
        try monitor.setReceiveHighWaterMark(0)
        try monitor.connect(endpoint)
    }

    /// Reads the events that arrived since the last call (never waits).
    public func update() {
        while (try? monitor.receive(into: message, dontWait: true)) == true {
            // Frame 1: u16 event, u32 value (native order); frame 2: the endpoint.
            let header = message.bytes
            while message.hasMore, (try? monitor.receive(into: message, dontWait: true)) == true {}
            guard header.count >= 6 else { continue }
            let event = Int32(header[0]) | Int32(header[1]) << 8
            let descriptor = Int32(bitPattern: UInt32(header[2]) | UInt32(header[3]) << 8 | UInt32(header[4]) << 16 | UInt32(header[5]) << 24)
            switch event {
            case ZMQ_EVENT_ACCEPTED: descriptors.insert(descriptor)
            case ZMQ_EVENT_DISCONNECTED, ZMQ_EVENT_CLOSED: descriptors.remove(descriptor)
            default: break
            }
        }
    }

    /// The connections held now.
    public var count: Int { descriptors.count }

    /// Ends every connection held now whose local port is `localPort` (nil:
    /// every local-socket one, for an `ipc://` endpoint); a descriptor the
    /// events have not yet said was closed, and that the process reused for
    /// something else, is left alone. Returns how many.
    @discardableResult
    public func shutDownAll(localPort: UInt16?) -> Int {
        update()
        var ended = 0
        for descriptor in descriptors {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
            }
            guard named == 0 else { continue }
            let port: UInt16?
            switch Int32(address.ss_family) {
            case AF_INET: port = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) } }
            case AF_INET6: port = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) } }
            case AF_UNIX: port = nil
            default: continue
            }
            guard port == localPort else { continue }
            if shutdown(descriptor, Int32(SHUT_RDWR)) == 0 { ended += 1 }
        }
        return ended
    }

    public func close() { monitor.close() }
}
