import Foundation

/// Runs `body` on a thread of its own and returns what it returns: for a
/// blocking call (a socket's receive with a time-out, a wait for a quiet
/// spell) that must not hold one of the cooperative pool's threads. The pool
/// has one thread per core, and a run of hundreds of tests in parallel on
/// two cores stalled for tens of seconds while such calls held them.
/// `body` may use what the caller owns (a socket): the caller is suspended
/// until it returns.
public func offThePool<Value>(_ body: @escaping () throws -> Value) async throws -> Value {
    nonisolated(unsafe) let body = body
    let outcome: Result<UnsafeTransfer<Value>, any Error> = await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(returning: Result { UnsafeTransfer(try body()) })
        }
    }
    return try outcome.get().value
}

/// A value handed back from `offThePool`'s thread to its suspended caller.
public struct UnsafeTransfer<Value>: @unchecked Sendable {
    public let value: Value
    public init(_ value: Value) { self.value = value }
}
