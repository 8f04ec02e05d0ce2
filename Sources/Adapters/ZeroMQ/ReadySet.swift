import CZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// Waits on many sockets at a cost that does not grow with their number:
/// an epoll set over each socket's `ZMQ_FD` (and plain descriptors such as a
/// `Mailbox`'s), each with a caller's token. `zmq_poll` reads two options of
/// every socket on every wake-up; a thread holding thousands of mostly quiet
/// connections spent its time there (or, sweeping them, in `zmq_msg_recv`).
///
/// `ZMQ_FD` only says "look at this socket": after a wake-up the owner
/// receives until `EAGAIN`, and after sending on a socket it must also try
/// to receive from it, because a send can consume the signal of a message
/// that had arrived (libzmq's documented rule). Owned by one thread.
public final class ZMQReadySet {
    private let epoll: Int32
    private var tokens = [UInt64](repeating: 0, count: 256)

    public init() throws(ZMQError) {
        epoll = czmq_epoll_create()
        guard epoll >= 0 else { throw ZMQError(code: czmq_errno(), function: "epoll_create1") }
    }

    deinit { close(epoll) }

    /// The descriptor libzmq signals when `socket` may have something to read.
    public static func signalDescriptor(of socket: ZMQSocket) throws(ZMQError) -> Int32 {
        try socket.int32Option(ZMQ_FD)
    }

    /// Watches `descriptor` for readability, reporting `token` when it is.
    public func add(_ descriptor: Int32, token: UInt64) throws(ZMQError) {
        guard czmq_epoll_add(epoll, descriptor, token) == 0 else { throw ZMQError(code: czmq_errno(), function: "epoll_ctl(ADD)") }
    }

    /// Stops watching `descriptor` (nothing happens if it was not watched or is closed).
    public func remove(_ descriptor: Int32) {
        _ = czmq_epoll_remove(epoll, descriptor)
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever) and calls `ready` with
    /// each ready descriptor's token (up to 256 a call; the rest stay ready
    /// for the next). An interrupted wait returns without any.
    public func wait(timeoutMilliseconds: Int, _ ready: (UInt64) -> Void) throws(ZMQError) {
        let count = tokens.withUnsafeMutableBufferPointer { czmq_epoll_wait(epoll, $0.baseAddress, Int32(clamping: timeoutMilliseconds)) }
        if count < 0 {
            let code = czmq_errno()
            if code == EINTR { return }
            throw ZMQError(code: code, function: "epoll_wait")
        }
        for index in 0..<Int(count) { ready(tokens[index]) }
    }
}
