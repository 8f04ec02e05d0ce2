import Synchronization

/// Tasks waiting for a condition that another thread makes true: each waits
/// on a continuation, and `signal()` (called where the condition may have
/// changed) wakes them to check it again; a timer bounds the wait. No
/// polling with sleeps; continuations are resumed outside the lock.
public final class ConditionWaiters: Sendable {
    private let state = Mutex<(next: UInt64, waiting: [(id: UInt64, continuation: CheckedContinuation<Void, Never>)])>((0, []))

    public init() {}

    /// Wakes every waiter to check its condition again.
    public func signal() {
        let woken = state.withLock { state in
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        for waiter in woken { waiter.continuation.resume() }
    }

    /// The first non-nil value of `condition`, checked now and after each
    /// signal; nil if `timeout` passes first (or the task is cancelled).
    public func wait<Value: Sendable>(timeout: Duration, until condition: @escaping @Sendable () -> Value?) async -> Value? {
        if let value = condition() { return value }
        let deadline = ContinuousClock.now + timeout
        return await withTaskGroup(of: Value?.self) { group in
            group.addTask { [self] in
                while !Task.isCancelled {
                    if let value = condition() { return value }
                    if let value = await sleepUntilSignalled(recheck: condition) { return value }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(until: deadline)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            if let first { return first }
            // The waiting task may have taken a value just as the time-out came: it is not dropped.
            while let next = await group.next() { if let next { return next } }
            return condition()
        }
    }

    /// Waits for the next signal (or cancellation); returns at once, with
    /// its value, if `recheck` holds after registering. The value is
    /// returned, not checked for again: a condition may take what it finds
    /// (a test tab's next message), and a second call would miss it.
    private func sleepUntilSignalled<Value>(recheck: @Sendable () -> Value?) async -> Value? {
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        var found: Value? = nil
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                state.withLock { $0.waiting.append((id, continuation)) }
                // A signal between the caller's check and the line above would be missed: check again.
                found = recheck()
                // So would a cancellation: its handler, run before the line above, found nothing to resume.
                if found != nil || Task.isCancelled { resume(id) }
            }
        } onCancel: {
            resume(id)
        }
        return found
    }

    private func resume(_ id: UInt64) {
        let mine = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiting.remove(at: index).continuation
        }
        mine?.resume()
    }
}
