import TouchSyncCore

/// The hub's memory of one agent connection: who it is, which board it draws
/// on, and how far its numbered messages have been applied.
struct AgentSession {
    let routingID: [UInt8]
    let user: UserNamespace
    var board: String
    /// The board's slot in the hub loop's `channels`.
    var boardSlot: Int
    /// The highest numbered message applied (or refused with an error).
    var lastApplied: UInt64
    var style = StrokeStyle.default
    var lastHeard: ContinuousClock.Instant
    /// Set once silence has cancelled its touches, so it happens once per silence.
    var silenced = false
    var ackPending = false
    /// An out-of-order error was sent and no progress has been made since.
    var gapReported = false
    var bucket: TokenBucket

    /// The namespace of a connection: its routing id, as text when it is
    /// printable, in hex otherwise (libzmq's own ids start with a zero byte).
    static func namespace(of routingID: [UInt8]) -> UserNamespace {
        let printable = !routingID.isEmpty && routingID.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == 0x2D || byte == 0x2E || byte == 0x5F
        }
        if printable { return UserNamespace(String(decoding: routingID, as: UTF8.self)) }
        let hex = routingID.map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }
        return UserNamespace("0x" + hex.joined())
    }
}

/// Allows `rate` events per second with bursts of `capacity`.
struct TokenBucket {
    let rate: Double
    let capacity: Double
    private var tokens: Double
    private var updated: ContinuousClock.Instant

    init(rate: Int, now: ContinuousClock.Instant) {
        self.rate = Double(rate)
        capacity = Double(rate) * 2
        tokens = capacity
        updated = now
    }

    mutating func take(now: ContinuousClock.Instant) -> Bool {
        let elapsed = now - updated
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        tokens = min(capacity, tokens + seconds * rate)
        updated = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
