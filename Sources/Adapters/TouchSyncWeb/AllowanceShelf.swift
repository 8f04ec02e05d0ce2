import Synchronization
import TouchSyncGatewayCore

/// Where a closed tab's message allowance waits for the next connection from
/// its address: a tab that reconnects carries on with what it had left
/// instead of a fresh burst (reconnecting each time it was limited would
/// otherwise multiply its allowance). Bounded: past 4,096 addresses the
/// entries older than a minute go (a bucket idle that long is full again anyway).
final class AllowanceShelf: Sendable {
    private let kept = Mutex<[String: (allowance: TabAllowance, at: ContinuousClock.Instant)]>([:])

    /// The allowance the last connection from `address` left, if any (taken off the shelf).
    func take(for address: String) -> TabAllowance? {
        kept.withLock { $0.removeValue(forKey: address)?.allowance }
    }

    /// A connection from `address` closed with `allowance` left.
    func keep(_ allowance: TabAllowance, for address: String, now: ContinuousClock.Instant) {
        kept.withLock { kept in
            if kept.count >= 4096 { kept = kept.filter { now - $0.value.at < .seconds(60) } }
            if kept.count < 4096 { kept[address] = (allowance, now) }
        }
    }
}
