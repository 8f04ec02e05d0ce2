import Synchronization

/// Work posted from any thread to one consuming task (a writer's queue of
/// batches, claims and renewals): `Contents` under a `Mutex`, the consumer
/// asleep on one continuation until a post makes `take` find something. The
/// continuation is resumed outside the lock; a cancelled consumer returns nil.
public final class WorkQueue<Contents: Sendable>: Sendable {
    private struct State {
        var contents: Contents
        var waiter: CheckedContinuation<Void, Never>? = nil
    }
    private let state: Mutex<State>

    public init(_ contents: Contents) { state = Mutex(State(contents: contents)) }

    /// Changes the contents and wakes the consumer to look again.
    public func post(_ change: (inout Contents) -> Void) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            change(&state.contents)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The consumer's side: `take` runs under the lock, now and after each
    /// post, and its first non-nil result is returned; nil when the task is
    /// cancelled. One consumer at a time.
    public func next<Taken>(_ take: (inout Contents) -> Taken?) async -> Taken? {
        while !Task.isCancelled {
            var taken: Taken? = nil
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready = state.withLock { state -> Bool in
                        if let found = take(&state.contents) {
                            taken = found
                            return true
                        }
                        if Task.isCancelled { return true }  // cancelled before it slept: the handler found nobody
                        state.waiter = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            } onCancel: {
                state.withLock { state -> CheckedContinuation<Void, Never>? in
                    defer { state.waiter = nil }
                    return state.waiter
                }?.resume()
            }
            if let taken { return taken }
        }
        return nil
    }
}
