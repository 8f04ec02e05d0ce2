import CZeroMQ

/// A libzmq call that failed: the errno it set and libzmq's own text for it.
public struct ZMQError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The errno value (`EAGAIN`, `ETERM`, `EHOSTUNREACH`, …).
    public let code: Int32
    /// The binding function that made the failing call, for the log line.
    public let function: String

    public init(code: Int32, function: String) {
        self.code = code
        self.function = function
    }

    /// libzmq's description of `code` (`zmq_strerror`).
    public var message: String { String(cString: zmq_strerror(code)) }

    public var description: String { "\(function): \(message) (errno \(code))" }

    /// The context was terminated or shut down: the owner should close the socket.
    public var isTerminated: Bool { code == ETERM }
    /// A non-blocking call found nothing to do.
    public var isWouldBlock: Bool { code == EAGAIN }
    /// A ROUTER with `ROUTER_MANDATORY` has no connection with that routing id (any more).
    public var isHostUnreachable: Bool { code == EHOSTUNREACH }
}

/// The one way this module calls into libzmq: a `-1` result becomes a thrown
/// `ZMQError` carrying errno, and an interrupted call (`EINTR`) is retried.
@inlinable @discardableResult
func zmqCall(_ function: String = #function, _ body: () -> Int32) throws(ZMQError) -> Int32 {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = czmq_errno()
        if code == EINTR { continue }
        throw ZMQError(code: code, function: function)
    }
}

/// Like `zmqCall` for the calls that return a pointer (`NULL` on failure).
@inlinable
func zmqCall(_ function: String = #function, _ body: () -> UnsafeMutableRawPointer?) throws(ZMQError)
    -> UnsafeMutableRawPointer
{
    while true {
        if let result = body() { return result }
        let code = czmq_errno()
        if code == EINTR { continue }
        throw ZMQError(code: code, function: function)
    }
}
