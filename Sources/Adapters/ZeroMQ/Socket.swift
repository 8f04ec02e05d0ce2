import CZeroMQ

/// The socket patterns TouchSync uses.
public enum ZMQSocketType: Sendable, CaseIterable {
    case pub, sub, xpub, xsub, router, dealer, push, pull, pair, rep, stream

    var rawValue: Int32 {
        switch self {
        case .pub: ZMQ_PUB
        case .sub: ZMQ_SUB
        case .xpub: ZMQ_XPUB
        case .xsub: ZMQ_XSUB
        case .router: ZMQ_ROUTER
        case .dealer: ZMQ_DEALER
        case .push: ZMQ_PUSH
        case .pull: ZMQ_PULL
        case .pair: ZMQ_PAIR
        case .rep: ZMQ_REP
        case .stream: ZMQ_STREAM
        }
    }
}

/// A libzmq socket.
///
/// libzmq sockets are not thread-safe, so this type is deliberately not
/// `Sendable`: create it on the thread that will use it and keep it there.
/// `LINGER` starts at 0, so closing never waits for unsent messages, and
/// the socket is closed on deinit if `close()` was not called.
public final class ZMQSocket {
    public let type: ZMQSocketType
    // Keeps the context alive until this socket is closed (see ZMQContext).
    private let context: ZMQContext
    @usableFromInline var handle: UnsafeMutableRawPointer?

    public init(_ context: ZMQContext, type: ZMQSocketType) throws(ZMQError) {
        self.context = context
        self.type = type
        handle = try zmqCall("ZMQSocket.init") { zmq_socket(context.handle, type.rawValue) }
        try setOption(ZMQ_LINGER, Int32(0))
    }

    deinit { close() }

    /// Closes the socket; later calls throw `ENOTSOCK`. Safe to call twice.
    public func close() {
        if let handle {
            zmq_close(handle)
            self.handle = nil
        }
    }

    public var isClosed: Bool { handle == nil }

    @usableFromInline func open(_ function: String) throws(ZMQError) -> UnsafeMutableRawPointer {
        guard let handle else { throw ZMQError(code: ENOTSOCK, function: function) }
        return handle
    }

    // MARK: Endpoints

    /// Binds to an endpoint such as `tcp://127.0.0.1:5555`, `tcp://127.0.0.1:*`
    /// (any free port: read `lastEndpoint`), `ipc:///tmp/x` or `inproc://name`.
    public func bind(_ endpoint: String) throws(ZMQError) {
        let socket = try open("bind(\(endpoint))")
        try zmqCall("bind(\(endpoint))") { zmq_bind(socket, endpoint) }
    }

    public func connect(_ endpoint: String) throws(ZMQError) {
        let socket = try open("connect(\(endpoint))")
        try zmqCall("connect(\(endpoint))") { zmq_connect(socket, endpoint) }
    }

    /// Publishes this socket's `events` (ZMQ_EVENT_* bits) on a PAIR socket at `endpoint` (inproc).
    public func startMonitor(endpoint: String, events: Int32) throws(ZMQError) {
        let socket = try open("zmq_socket_monitor")
        try zmqCall("zmq_socket_monitor(\(endpoint))") { zmq_socket_monitor(socket, endpoint, events) }
    }

    public func unbind(_ endpoint: String) throws(ZMQError) {
        let socket = try open("unbind(\(endpoint))")
        try zmqCall("unbind(\(endpoint))") { zmq_unbind(socket, endpoint) }
    }

    public func disconnect(_ endpoint: String) throws(ZMQError) {
        let socket = try open("disconnect(\(endpoint))")
        try zmqCall("disconnect(\(endpoint))") { zmq_disconnect(socket, endpoint) }
    }

    /// The endpoint last bound or connected, with the port filled in after `:*`.
    public var lastEndpoint: String {
        get throws(ZMQError) { try stringOption(ZMQ_LAST_ENDPOINT) }
    }

    // MARK: Sending

    /// Sends one part. Returns false only when `dontWait` is set and the
    /// message could not be queued now (high-water mark reached, or a ROUTER
    /// without `ROUTER_MANDATORY`… see libzmq), never silently otherwise.
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, more: Bool = false, dontWait: Bool = false) throws(ZMQError)
        -> Bool
    {
        let socket = try open("send")
        let flags = (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
        do {
            try zmqCall("send") { zmq_send(socket, bytes.baseAddress, bytes.count, flags) }
            return true
        } catch where error.isWouldBlock && dontWait {
            return false
        }
    }

    @discardableResult
    public func send(_ bytes: [UInt8], more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        // `withUnsafeBytes` is rethrows, not typed: carry the typed error out in a Result.
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(ZMQError) in try send(buffer, more: more, dontWait: dontWait) }
        }
        return try result.get()
    }

    @discardableResult
    public func send(_ text: String, more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        try send(Array(text.utf8), more: more, dontWait: dontWait)
    }

    /// Sends `message`'s content without copying it (libzmq takes it over;
    /// `message` is empty afterwards, ready to receive into again).
    /// Returns false, with `message` unchanged, as `send(_:more:dontWait:)` does.
    @discardableResult
    public func send(_ message: ZMQMessage, more: Bool = false, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let socket = try open("send")
        let flags = (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
        do {
            try zmqCall("send") { zmq_msg_send(message.raw, socket, flags) }
            return true
        } catch where error.isWouldBlock && dontWait {
            return false
        }
    }

    /// Sends all parts as one multipart message (delivered all or nothing).
    @discardableResult
    public func send(multipart parts: [[UInt8]], dontWait: Bool = false) throws(ZMQError) -> Bool {
        precondition(!parts.isEmpty, "a message has at least one part")
        for (index, part) in parts.enumerated() {
            let queued = try send(part, more: index < parts.count - 1, dontWait: dontWait)
            // Only the first part can be refused: later parts of an accepted message always queue.
            if !queued { return false }
        }
        return true
    }

    // MARK: Receiving

    /// Receives one part into `message`, replacing what it held, however large
    /// it is. Returns false when `dontWait` is set and nothing is waiting, or
    /// when the socket's `RCVTIMEO` ran out.
    @inlinable
    public func receive(into message: ZMQMessage, dontWait: Bool = false) throws(ZMQError) -> Bool {
        let socket = try open("receive")
        do {
            try zmqCall("receive") { zmq_msg_recv(message.raw, socket, dontWait ? ZMQ_DONTWAIT : 0) }
            return true
        } catch where error.isWouldBlock {
            return false
        }
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever, 0: not at all) for a
    /// multipart message and returns all its parts, or nil on time-out.
    public func receiveMultipart(timeoutMilliseconds: Int = -1) throws(ZMQError) -> [ZMQMessage]? {
        if timeoutMilliseconds >= 0 {
            guard try waitReadable(timeoutMilliseconds: timeoutMilliseconds) else { return nil }
        }
        var parts: [ZMQMessage] = []
        repeat {
            let part = ZMQMessage()
            // Once the first part is here, libzmq guarantees the rest are too.
            guard try receive(into: part, dontWait: timeoutMilliseconds >= 0) else {
                return parts.isEmpty ? nil : parts
            }
            parts.append(part)
        } while parts[parts.count - 1].hasMore
        return parts
    }

    /// Receives a multipart message as byte arrays (copies; for tests and tools).
    public func receiveBytes(timeoutMilliseconds: Int = -1) throws(ZMQError) -> [[UInt8]]? {
        try receiveMultipart(timeoutMilliseconds: timeoutMilliseconds)?.map(\.bytes)
    }

    /// Whether a message can be received within the time-out.
    public func waitReadable(timeoutMilliseconds: Int) throws(ZMQError) -> Bool {
        let socket = try open("waitReadable")
        var item = zmq_pollitem_t(socket: socket, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)
        let ready = try zmqCall("waitReadable") { zmq_poll(&item, 1, timeoutMilliseconds) }
        return ready > 0
    }
}
