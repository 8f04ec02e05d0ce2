import Synchronization

/// A value that arrives once (a thread's end, a replay's result, a start-up's
/// outcome) and that any number of tasks await. State under a `Mutex`;
/// continuations resumed outside it; a waiting task that is cancelled stops
/// waiting at once (`wait()` returns nil) and leaves nothing behind.
public final class Completion<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var nextWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Value?, Never>] = [:]
    }
    private let state = Mutex(State())

    public init() {}

    /// The value, once completed.
    public var value: Value? { state.withLock { $0.value } }

    /// Sets the value and wakes every waiter; only the first call counts.
    /// Returns whether this call completed it.
    @discardableResult
    public func complete(_ value: Value) -> Bool {
        let woken = state.withLock { state -> [CheckedContinuation<Value?, Never>]? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        guard let woken else { return false }
        for waiter in woken { waiter.resume(returning: value) }
        return true
    }

    /// The value once completed, also for a cancelled task: for what must
    /// end before the caller goes on (a thread told to stop, a start-up
    /// being undone), which ends soon whatever the caller's task does.
    public func join() async -> Value {
        await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
            let ready = state.withLock { state -> Value? in
                if let value = state.value { return value }
                state.nextWaiter += 1
                state.waiters[state.nextWaiter] = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }!
    }

    /// The value once completed; nil if the task is cancelled first.
    public func wait() async -> Value? {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                let ready = state.withLock { state -> Value?? in
                    if let value = state.value { return .some(value) }
                    if Task.isCancelled { return .some(nil) }  // cancelled before it waited: the handler found nobody
                    state.waiters[id] = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: nil)
        }
    }
}
