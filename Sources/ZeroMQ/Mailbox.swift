import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Commands into a thread that owns sockets and sleeps in `zmq_poll`.
///
/// libzmq sockets must not be shared between threads, so other threads never
/// touch them: they `post` a command here, and the owning thread, which polls
/// `fileDescriptor` next to its sockets, wakes up and `drain`s. The queue is
/// a `Mutex`; the wake-up is one byte in a non-blocking pipe.
public final class Mailbox<Command: Sendable>: Sendable {
    private let queue = Mutex<[Command]>([])
    /// Poll this for readability; `drain` empties it.
    public let fileDescriptor: Int32
    private let writeEnd: Int32

    public init() throws(ZMQError) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw ZMQError(code: errno, function: "Mailbox.init(pipe)") }
        for end in ends {
            let flags = fcntl(end, F_GETFL)
            _ = fcntl(end, F_SETFL, flags | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        fileDescriptor = ends[0]
        writeEnd = ends[1]
    }

    deinit {
        close(fileDescriptor)
        close(writeEnd)
    }

    /// Queues `command` and wakes the owning thread. Never blocks: a full pipe
    /// already means a wake-up is pending.
    public func post(_ command: Command) {
        queue.withLock { $0.append(command) }
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Takes every queued command, oldest first (on the owning thread).
    public func drain() -> [Command] {
        var sink = [UInt8](repeating: 0, count: 64)
        while read(fileDescriptor, &sink, sink.count) > 0 {}
        return queue.withLock { commands in
            defer { commands.removeAll(keepingCapacity: true) }
            return commands
        }
    }
}
