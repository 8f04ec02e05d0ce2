import CZeroMQ

/// Waits on several sockets at once (`zmq_poll`), the heart of a
/// single-threaded event loop. Owned by the thread that owns the sockets.
public struct ZMQPoller {
    private var items: [zmq_pollitem_t] = []
    // Holds the sockets so their handles stay valid while polled.
    private var sockets: [ZMQSocket] = []

    public init() {}

    /// Adds a socket to watch for incoming messages; returns its index.
    @discardableResult
    public mutating func add(_ socket: ZMQSocket, readable: Bool = true, writable: Bool = false) throws(ZMQError)
        -> Int
    {
        let handle = try socket.open("ZMQPoller.add")
        var events: Int16 = 0
        if readable { events |= Int16(ZMQ_POLLIN) }
        if writable { events |= Int16(ZMQ_POLLOUT) }
        items.append(zmq_pollitem_t(socket: handle, fd: 0, events: events, revents: 0))
        sockets.append(socket)
        return items.count - 1
    }

    /// Adds a file descriptor (a pipe, an eventfd, a `Mailbox`) to watch for readability.
    @discardableResult
    public mutating func add(fileDescriptor: Int32) -> Int {
        items.append(zmq_pollitem_t(socket: nil, fd: fileDescriptor, events: Int16(ZMQ_POLLIN), revents: 0))
        return items.count - 1
    }

    public var count: Int { items.count }

    /// Waits up to `timeoutMilliseconds` (-1: forever) and returns how many
    /// sockets are ready; then ask `isReadable(_:)` for each.
    @discardableResult
    public mutating func poll(timeoutMilliseconds: Int) throws(ZMQError) -> Int {
        let count = Int32(items.count)
        return Int(try items.withUnsafeMutableBufferPointer { buffer throws(ZMQError) in
            try zmqCall("ZMQPoller.poll") { zmq_poll(buffer.baseAddress, count, timeoutMilliseconds) }
        })
    }

    public func isReadable(_ index: Int) -> Bool { items[index].revents & Int16(ZMQ_POLLIN) != 0 }
    public func isWritable(_ index: Int) -> Bool { items[index].revents & Int16(ZMQ_POLLOUT) != 0 }
}

extension ZMQPoller {
    /// The `poll` time-out that wakes a loop at `deadline`: 0 once it has
    /// passed, otherwise whole milliseconds plus one, so the loop never wakes
    /// just before its deadline and spins.
    public static func timeout(until deadline: ContinuousClock.Instant, now: ContinuousClock.Instant = .now) -> Int {
        let wait = deadline - now
        guard wait > .zero else { return 0 }
        let (seconds, attoseconds) = wait.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000) + 1
    }
}
