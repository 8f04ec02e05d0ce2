/// A token bucket on a time given as an argument: `rate` tokens a second,
/// at most `burst` saved up. The gateway's per-tab allowances (every
/// message, resyncs, renames) are buckets; the hub's rate limits are the same
/// shape, so a tab hears the same `RATE_LIMITED`.
public struct TokenBucket: Sendable, Equatable {
    public typealias Instant = ContinuousClock.Instant

    public let rate: Double
    public let burst: Double
    public private(set) var tokens: Double
    private var updated: Instant

    /// A full bucket at `now`.
    public init(rate: Double, burst: Double, now: Instant) {
        precondition(rate > 0 && burst >= 1, "a bucket needs a positive rate and room for one token")
        self.rate = rate
        self.burst = burst
        tokens = burst
        updated = now
    }

    /// Takes one token if there is one.
    public mutating func take(now: Instant) -> Bool {
        refill(now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// When the next whole token is there (`now` when one is).
    public mutating func nextToken(now: Instant) -> Instant {
        refill(now: now)
        guard tokens < 1 else { return now }
        return now + .seconds((1 - tokens) / rate)
    }

    private mutating func refill(now: Instant) {
        guard now > updated else { return }
        let elapsed = now - updated
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        tokens = min(burst, tokens + seconds * rate)
        updated = now
    }
}

/// What a tab may send the gateway, per WebSocket: every message counts
/// (touches, cursors, pings, names, resyncs, malformed ones too), and
/// resyncs, which each cost a whole board, have a bucket of their own. An
/// honest page stays far below both (docs/security.md, "Limits and quotas").
public struct TabAllowance: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Messages a second, sustained. Default 1,000 (five fingers at 120 Hz, a cursor at 60 Hz and pings take under 700).
        public var messagesPerSecond = 1_000.0
        /// Messages saved up for a burst. Default 2,000 (two seconds).
        public var messageBurst = 2_000.0
        /// Resync requests a second. Default 1, with 3 at once.
        public var resyncsPerSecond = 1.0
        public var resyncBurst = 3.0
        public init() {}
    }

    private var messages: TokenBucket
    private var resyncs: TokenBucket

    public init(_ limits: Limits, now: ContinuousClock.Instant) {
        messages = TokenBucket(rate: limits.messagesPerSecond, burst: limits.messageBurst, now: now)
        resyncs = TokenBucket(rate: limits.resyncsPerSecond, burst: limits.resyncBurst, now: now)
    }

    /// A message arrived: true if it is within the allowance.
    public mutating func message(now: ContinuousClock.Instant) -> Bool { messages.take(now: now) }

    /// A resync arrived (after `message`): true if it is within its own allowance.
    public mutating func resync(now: ContinuousClock.Instant) -> Bool { resyncs.take(now: now) }

    /// When the message allowance has room again (reading can pause until then).
    public mutating func nextMessage(now: ContinuousClock.Instant) -> ContinuousClock.Instant { messages.nextToken(now: now) }
}
