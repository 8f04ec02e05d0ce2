/// A point on the hub's monotonic clock, as nanoseconds since an epoch (the
/// instant the core was started with: the core reads no clock): the core's
/// own time type. `ContinuousClock.Instant` is not frozen
/// (its layout is known only at run time), so every struct that holds one
/// (a session, its rate buckets, the durability state, the core itself) is
/// copied, compared and tested for nil through the runtime's value
/// witnesses; in the hub's thread that was about a tenth of its time
/// (docs/performance.md). The core's API takes and gives
/// `ContinuousClock.Instant`; inside, time is a `Moment`.
package struct Moment: Comparable, Hashable, Sendable, CustomStringConvertible {
    package var nanoseconds: Int64

    package init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    package init(_ instant: ContinuousClock.Instant, since epoch: ContinuousClock.Instant) {
        nanoseconds = TouchSyncHubCore.nanoseconds(instant - epoch)
    }

    package func instant(since epoch: ContinuousClock.Instant) -> ContinuousClock.Instant { epoch + .nanoseconds(nanoseconds) }

    package static func < (a: Moment, b: Moment) -> Bool { a.nanoseconds < b.nanoseconds }

    package static func - (a: Moment, b: Moment) -> Duration { .nanoseconds(a.nanoseconds &- b.nanoseconds) }

    package static func + (a: Moment, duration: Duration) -> Moment {
        let (sum, overflow) = a.nanoseconds.addingReportingOverflow(TouchSyncHubCore.nanoseconds(duration))
        return Moment(nanoseconds: overflow ? (sum < 0 ? .max : .min) : sum)
    }

    package static func - (a: Moment, duration: Duration) -> Moment { a + (.zero - duration) }

    package static func += (a: inout Moment, duration: Duration) { a = a + duration }

    /// Seconds from `earlier` to this moment, as a `Double` (rate buckets).
    package func seconds(since earlier: Moment) -> Double { Double(nanoseconds &- earlier.nanoseconds) * 1e-9 }

    package var description: String { "\(nanoseconds) ns" }
}

// Duration conversions shared by the core and its adapters.

/// A duration in whole nanoseconds, clamped to Int64 (a configured time-out
/// of centuries must not trap).
package func nanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return seconds < 0 ? .min : .max }
    let (sum, overflowed) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
    return overflowed ? (scaled < 0 ? .min : .max) : sum
}

package func microseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
}

package func milliseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1000 + attoseconds / 1_000_000_000_000_000
}
