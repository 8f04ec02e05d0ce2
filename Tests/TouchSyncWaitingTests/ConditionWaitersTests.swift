import Foundation
import Synchronization
import Testing
import TouchSyncWaiting

/// Waiting without polling: a waiter wakes on the signal that makes its
/// condition true (from another thread): its time-out here is an hour, so
/// only the signal can end it within the test's time limit; it gives up at
/// a short time-out; a cancelled waiter returns (again, only that can end it).
@Suite("Condition waiters", .timeLimit(.minutes(3)))
struct ConditionWaitersTests {
    @Test func aSignalWakesTheWaiterAndTimeOutsBoundIt() async throws {
        let waiters = ConditionWaiters()
        let value = Mutex(0)
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: 0.2)
            value.withLock { $0 = 7 }
            waiters.signal()
        }
        let seen = await waiters.wait(timeout: .seconds(3600)) { value.withLock { $0 == 7 ? $0 : nil } }
        #expect(seen == 7)
        // A condition that never holds: nil at the time-out.
        let never = await waiters.wait(timeout: .milliseconds(100)) { Optional<Int>.none }
        #expect(never == nil)
        // Cancelled: returns nil without waiting for the time-out.
        let task = Task { await waiters.wait(timeout: .seconds(3600)) { Optional<Int>.none } }
        try await Task.sleep(for: .milliseconds(50))
        task.cancel()
        let cancelled = await task.value
        #expect(cancelled == nil)
    }

    /// A condition that takes what it finds (as a test tab takes its next
    /// message) holds once: when that is at the re-check made after the
    /// waiter registers, its value is the one returned. It was checked for
    /// again and lost: the waiter slept to its time-out with the message
    /// already taken (a gateway test waited 20 s for a RATE_LIMITED it had).
    @Test func aValueFoundAtTheRecheckIsNotLost() async throws {
        let waiters = ConditionWaiters()
        let calls = Mutex(0)
        // nil at the first two checks (before the wait, and the waiting task's
        // first); the value at the third (the re-check), taken; nil after.
        let seen = await waiters.wait(timeout: .seconds(10)) { () -> Int? in
            calls.withLock { calls in
                calls += 1
                return calls == 3 ? 42 : nil
            }
        }
        #expect(seen == 42)
        #expect(calls.withLock { $0 } == 3)
    }

    /// The waiting task cancelled (by the time-out) after it last looked at
    /// its cancellation and before it registered: the cancellation found no
    /// continuation to resume, the registered one was never resumed, and the
    /// wait never returned. A gateway stopping with 2,000 tabs whose hub had
    /// gone hung that way, at one of its tabs' two-second flushes. Here the
    /// condition cancels the waiting task at that very point; a wait that
    /// hangs fails by the suite's time limit.
    @Test func aWaiterCancelledJustBeforeItRegistersStillReturns() async throws {
        let waiters = ConditionWaiters()
        let calls = Mutex(0)
        let seen = await waiters.wait(timeout: .milliseconds(200)) { () -> Int? in
            let call = calls.withLock { calls in
                calls += 1
                return calls
            }
            // The first check is before the wait; the second, the waiting task's own, then cancels it.
            if call == 2 { withUnsafeCurrentTask { $0?.cancel() } }
            return nil
        }
        #expect(seen == nil)
        #expect(calls.withLock { $0 } >= 3, "it looked again after registering")
    }
}
