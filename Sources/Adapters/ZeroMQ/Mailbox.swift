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
    private let queue = Mutex<(commands: [Command], open: Bool)>(([], true))
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
        closeDescriptor(fileDescriptor)
        closeDescriptor(writeEnd)
    }

    /// Queues `command` and wakes the owning thread. Never blocks: a full pipe
    /// already means a wake-up is pending. Returns false, queueing nothing,
    /// once the owner has closed the mailbox (its thread is gone).
    @discardableResult
    public func post(_ command: Command) -> Bool {
        // Only the first command into an empty queue writes the wake-up byte:
        // `drain` empties the pipe before it takes the queue, so a command
        // added to a non-empty queue is always taken by a drain still to come.
        let (accepted, wake) = queue.withLock { queue in
            guard queue.open else { return (false, false) }
            queue.commands.append(command)
            return (true, queue.commands.count == 1)
        }
        if wake {
            var byte: UInt8 = 1
            _ = write(writeEnd, &byte, 1)
        }
        return accepted
    }

    /// Takes every queued command, oldest first (on the owning thread).
    public func drain() -> [Command] {
        clearSignal()
        return take()
    }

    /// Empties the pipe without taking the commands (the owner takes them
    /// later with `take`). Until then no post writes a wake-up byte: the
    /// queue is not empty, so the owner must take it at a time of its own.
    public func clearSignal() {
        // On the stack: a wake-up costs no allocation.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { sink in
            while read(fileDescriptor, sink.baseAddress, sink.count) > 0 {}
        }
    }

    /// Takes every queued command, oldest first, after `clearSignal` (on the owning thread).
    public func take() -> [Command] {
        queue.withLock { queue in
            defer { queue.commands.removeAll(keepingCapacity: true) }
            return queue.commands
        }
    }

    /// Refuses further commands and returns those still queued, so the owner
    /// can answer them before its thread ends (nobody waits forever).
    public func close() -> [Command] {
        queue.withLock { queue in
            queue.open = false
            defer { queue.commands.removeAll() }
            return queue.commands
        }
    }
}

/// `close(2)`, out of reach of `Mailbox.close()`'s name.
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}
