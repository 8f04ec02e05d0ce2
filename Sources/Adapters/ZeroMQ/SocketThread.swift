import CZeroMQ
import Foundation
import Synchronization
import TouchSyncWaiting

/// A dedicated thread for a loop that blocks in `zmq_poll` and owns its
/// sockets from creation to close, and a way to await its end from Swift
/// concurrency.
public final class SocketThread: Sendable {
    private let name: String
    private let completion = Completion<Void>()
    private let threadID = Atomic<Int32>(0)

    /// The kernel's id of the thread (its /proc/self/task entry) once it runs; nil before.
    public var systemThreadID: Int32? {
        let id = threadID.load(ordering: .acquiring)
        return id == 0 ? nil : id
    }

    public init(name: String) { self.name = name }

    /// Runs `body` on a new thread.
    public func start(_ body: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            // The OS-level name (15 bytes at most) that top -H, perf, gdb and /proc show.
            czmq_name_current_thread(String(self.name.utf8.prefix(15))!)
            self.threadID.store(czmq_current_thread_id(), ordering: .releasing)
            body()
            self.completion.complete(())
        }
        thread.name = name
        thread.start()
    }

    /// Starts a thread that builds its owner (sockets are created on the
    /// thread that will use them), hands back `ready` once the owner is
    /// built, or the error that stopped it, and then runs it there.
    public func start<Ready: Sendable>(
        building body: @escaping @Sendable () throws -> (ready: Ready, run: () -> Void)
    ) async throws -> Ready {
        try await withCheckedThrowingContinuation { continuation in
            start {
                let built: (ready: Ready, run: () -> Void)
                do {
                    built = try body()
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                continuation.resume(returning: built.ready)
                built.run()
            }
        }
    }

    /// Returns once the thread's body has returned. Not cut short by the
    /// task's cancellation: a caller waits here after telling the thread to
    /// stop, and returning before it has would leave its sockets open.
    public func finished() async {
        await completion.join()
    }

    /// Returns when the thread has finished, or at once when the calling task is cancelled.
    public func finishedUnlessCancelled() async {
        _ = await completion.wait()
    }
}
