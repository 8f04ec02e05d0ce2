import CZeroMQ

/// A libzmq context: the I/O threads and the `inproc://` namespace.
///
/// libzmq documents the context as thread-safe, so one context is shared by
/// every socket of a process. It is terminated when the last reference goes,
/// which is after every socket made from it has been closed (each socket holds
/// its context), so termination never hangs on a socket left open.
public final class ZMQContext: Sendable {
    // A raw pointer is not Sendable; the context it points to is thread-safe
    // by libzmq's contract, and this class never mutates the pointer.
    nonisolated(unsafe) let handle: UnsafeMutableRawPointer

    /// Creates a context with `ioThreads` background I/O threads (libzmq's
    /// default is 1) and room for `maxSockets` sockets (libzmq's default is
    /// 1,023; a process that opens more gets `EMFILE` from `zmq_socket`).
    public init(ioThreads: Int32 = 1, maxSockets: Int32? = nil) throws(ZMQError) {
        handle = try zmqCall("ZMQContext.init") { zmq_ctx_new() }
        do {
            if ioThreads != 1 {
                try zmqCall("ZMQContext.init") { zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) }
            }
            if let maxSockets {
                try zmqCall("ZMQContext.init") { zmq_ctx_set(handle, ZMQ_MAX_SOCKETS, maxSockets) }
            }
        } catch {
            zmq_ctx_term(handle)
            throw error
        }
    }

    /// How many sockets this context allows at once.
    public var maxSockets: Int32 { zmq_ctx_get(handle, ZMQ_MAX_SOCKETS) }

    /// Makes every blocking call on this context's sockets fail with `ETERM`,
    /// so their owning threads wake up, close their sockets and finish.
    public func shutdown() {
        zmq_ctx_shutdown(handle)
    }

    deinit {
        // zmq_ctx_term waits for sockets to close; none is left by now (see above).
        while zmq_ctx_term(handle) == -1 && czmq_errno() == EINTR {}
    }

    /// The libzmq version this process runs against.
    public static var libraryVersion: (major: Int32, minor: Int32, patch: Int32) {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return (major, minor, patch)
    }
}
