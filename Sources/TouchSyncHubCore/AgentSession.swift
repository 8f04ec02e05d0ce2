import TouchSyncCore

/// The hub's memory of one agent: who it is (its principal), which
/// connection speaks for it, which board it draws on, how far its numbered
/// messages are handled, and whether it is being heard.
///
/// A peer with no session has not said hello (the core answers it
/// NOT_WELCOMED); a session leaves the table when it is forgotten, replaced
/// or its peer is gone. In between it moves between `.live` and `.silent`
/// only through the methods below.
struct AgentSession {
    let principal: UserNamespace
    private(set) var peer: PeerID
    /// The session id of the agent process (from its hello; may be empty).
    private(set) var sessionID: [UInt8]
    let board: String
    /// The board's slot in the core's `channels`.
    let boardSlot: Int
    var numbering: MessageNumbering
    var style = StrokeStyle.default
    private(set) var presence: Presence
    var ackPending = false
    var bucket: TokenBucket

    enum Presence: Equatable {
        /// Heard within the liveness time-out.
        case live(lastHeard: ContinuousClock.Instant)
        /// Silent past the liveness time-out: its live touches were cancelled.
        case silent(lastHeard: ContinuousClock.Instant)

        var lastHeard: ContinuousClock.Instant {
            switch self {
            case .live(let at), .silent(let at): at
            }
        }
    }

    enum TransitionError: Error, Equatable {
        /// `fallSilent` on a session that is already silent, or heard since `deadline`.
        case notSilent
        case alreadySilent
    }

    init(
        principal: UserNamespace, peer: PeerID, sessionID: [UInt8], board: String, boardSlot: Int, appliedThrough: UInt64,
        now: ContinuousClock.Instant, messagesPerSecond: Int
    ) {
        self.principal = principal
        self.peer = peer
        self.sessionID = sessionID
        self.board = board
        self.boardSlot = boardSlot
        numbering = MessageNumbering(appliedThrough: appliedThrough)
        presence = .live(lastHeard: now)
        bucket = TokenBucket(rate: messagesPerSecond, now: now)
    }

    /// A message arrived from `peer`: the session is live again.
    mutating func heard(at now: ContinuousClock.Instant) {
        presence = .live(lastHeard: now)
    }

    /// The same agent said hello again (a reconnect, possibly on a new connection).
    mutating func resumed(by peer: PeerID, sessionID: [UInt8], at now: ContinuousClock.Instant) {
        self.peer = peer
        self.sessionID = sessionID
        presence = .live(lastHeard: now)
    }

    /// When silence turns this session silent (nil: it already is).
    func silenceDeadline(timeout: Duration) -> ContinuousClock.Instant? {
        guard case .live(let lastHeard) = presence else { return nil }
        return lastHeard + timeout
    }

    /// Live → silent, once the liveness time-out has passed since it was last heard.
    mutating func fallSilent(at now: ContinuousClock.Instant, timeout: Duration) throws(TransitionError) {
        switch presence {
        case .silent: throw .alreadySilent
        case .live(let lastHeard):
            guard now - lastHeard >= timeout else { throw .notSilent }
            presence = .silent(lastHeard: lastHeard)
        }
    }

    /// The namespace of a connection known only by its routing id: the id as
    /// text when it is printable, in hex otherwise (libzmq's own ids start
    /// with a zero byte).
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

extension Peer {
    /// A peer whose principal is derived from its routing id, as the
    /// unauthenticated ZeroMQ transport does (the routing id is a claim).
    public init(routingID: [UInt8]) {
        self.init(id: PeerID(routingID), principal: AgentSession.namespace(of: routingID))
    }
}

/// How far an agent's numbered messages are handled, and what the next one must be.
struct MessageNumbering: Equatable {
    /// The highest numbered message handled (applied, or refused with an error).
    private(set) var appliedThrough: UInt64
    /// An out-of-order error was sent and nothing has been applied since.
    private var gapReported = false

    init(appliedThrough: UInt64) { self.appliedThrough = appliedThrough }

    enum Verdict: Equatable {
        /// The next message: it is now handled; apply it.
        case next
        /// Already handled (a resend after a reconnect): acknowledge again, apply nothing.
        case duplicate
    }

    enum OutOfOrder: Error, Equatable {
        /// Messages are missing before `received`; `report` is true the first
        /// time since the last progress (the agent is told once, then resends).
        case gap(expected: UInt64, received: UInt64, report: Bool)
    }

    mutating func admit(_ sequence: UInt64) throws(OutOfOrder) -> Verdict {
        if sequence <= appliedThrough { return .duplicate }
        guard sequence == appliedThrough + 1 else {
            let report = !gapReported
            gapReported = true
            throw .gap(expected: appliedThrough + 1, received: sequence, report: report)
        }
        appliedThrough = sequence
        gapReported = false
        return .next
    }

    /// A message refused before ordering (rate limited) still takes its place
    /// when it is the next one, so the agent does not resend it.
    mutating func skip(_ sequence: UInt64) -> Bool {
        guard sequence == appliedThrough + 1 else { return false }
        appliedThrough = sequence
        gapReported = false
        return true
    }

    /// Raises the mark to what the journal recorded before a restart.
    mutating func recover(through recorded: UInt64) {
        appliedThrough = max(appliedThrough, recorded)
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
