import TouchSyncAccessModel
import TouchSyncCore

/// The hub's memory of one agent: who it is (its principal), which
/// connection speaks for it, which board it draws on, how far its numbered
/// messages are handled, and whether it is being heard.
///
/// A peer with no session has not said hello (the core answers it
/// NOT_WELCOMED); a session leaves the table when it says goodbye, its peer
/// is gone, a new session of the same user replaces it, or it is forgotten
/// after the retention. In between it moves `.live` → `.silent` (not heard
/// for the liveness time-out: touches kept) → `.abandoned` (not heard for
/// the abandon time-out: touches cancelled), and back to `.live` whenever it
/// is heard, only through the methods below.
struct AgentSession {
    /// What never changes, behind one reference: the core copies a session
    /// out of its table and back for every message, and each field with
    /// storage of its own (names, ids) was a retain and a release.
    private let identity: Identity
    var principal: UserNamespace { identity.principal }
    private(set) var peer: PeerID
    /// The agent session's id (from its hello): numbering belongs to it.
    var sessionID: [UInt8] { identity.sessionID }
    var board: String { identity.board }
    /// The board's slot in the core's `channels`.
    let boardSlot: Int
    var numbering: MessageNumbering
    /// The highest number acknowledged to the agent (what the hub promised
    /// durable): a welcome says this, never more.
    var acknowledged: UInt64
    var style = StrokeStyle.default
    private(set) var presence: Presence
    var ackPending = false
    var bucket: TokenBucket
    /// Samples per second (frames pay for each sample they carry).
    var sampleBucket: TokenBucket
    /// Message bytes per second.
    var byteBucket: TokenBucket
    /// What the user may do on its board (`.admin` on a hub without authentication).
    var role: Role = .admin
    /// For a gateway acting for an invited user: who asked, for whom, with
    /// which token (an access-list reload checks all three again).
    var delegation: Delegation? {
        get { delegated?.delegation }
        set { delegated = newValue.map(Delegated.init) }
    }
    /// The invited user a gateway's tab acts for (nil: the session is its own user).
    var invitedUser: String? { delegated?.invitedUser }
    /// The delegation behind one reference, as the identity (its four names were four retains a copy).
    private var delegated: Delegated? = nil
    /// When the agent was last told STORAGE_UNAVAILABLE (told at most once a second).
    var storageWarnedAt: Moment? = nil

    enum Presence: Equatable {
        /// Heard within the liveness time-out.
        case live(lastHeard: Moment)
        /// Not heard for the liveness time-out: its touches stay down, stalled.
        case silent(lastHeard: Moment)
        /// Not heard for the abandon time-out: its touches were cancelled.
        case abandoned(lastHeard: Moment)

        var lastHeard: Moment {
            switch self {
            case .live(let at), .silent(let at), .abandoned(let at): at
            }
        }
    }

    enum TransitionError: Error, Equatable {
        /// The time-out for the transition has not passed since the session was last heard.
        case tooSoon
        /// The session is not in the state the transition starts from.
        case wrongState
    }

    private final class Identity: Sendable {
        let principal: UserNamespace
        let sessionID: [UInt8]
        let board: String
        init(principal: UserNamespace, sessionID: [UInt8], board: String) {
            self.principal = principal
            self.sessionID = sessionID
            self.board = board
        }
    }

    private final class Delegated: Sendable {
        let delegation: Delegation
        /// Derived once, not per message: whose sample and byte allowances the session draws on.
        let invitedUser: String?
        init(_ delegation: Delegation) {
            self.delegation = delegation
            invitedUser = delegation.user.isEmpty ? nil : delegation.user
        }
    }

    init(
        principal: UserNamespace, peer: PeerID, sessionID: [UInt8], board: String, boardSlot: Int, appliedThrough: UInt64,
        now: Moment, messagesPerSecond: Int, samplesPerSecond: Int, bytesPerSecond: Int
    ) {
        identity = Identity(principal: principal, sessionID: sessionID, board: board)
        self.peer = peer
        self.boardSlot = boardSlot
        numbering = MessageNumbering(appliedThrough: appliedThrough)
        acknowledged = appliedThrough
        presence = .live(lastHeard: now)
        bucket = TokenBucket(rate: messagesPerSecond, now: now)
        sampleBucket = TokenBucket(rate: samplesPerSecond, now: now)
        byteBucket = TokenBucket(rate: bytesPerSecond, now: now)
    }

    var isAbandoned: Bool {
        if case .abandoned = presence { true } else { false }
    }

    /// A message arrived: the session is live again.
    mutating func heard(at now: Moment) {
        presence = .live(lastHeard: now)
    }

    /// The same session said hello again (a reconnect, possibly on a new connection).
    mutating func resumed(by peer: PeerID, at now: Moment) {
        self.peer = peer
        presence = .live(lastHeard: now)
    }

    var isSilent: Bool {
        if case .silent = presence { true } else { false }
    }

    /// When silence next changes this session (silent, then abandoned; nil: nothing more).
    func nextDeadline(liveness: Duration, abandon: Duration) -> Moment? {
        switch presence {
        case .live(let lastHeard): lastHeard + liveness
        case .silent(let lastHeard): lastHeard + abandon
        case .abandoned: nil
        }
    }

    /// Live → silent, once the liveness time-out has passed since it was last heard.
    mutating func fallSilent(at now: Moment, timeout: Duration) throws(TransitionError) {
        guard case .live(let lastHeard) = presence else { throw .wrongState }
        guard now - lastHeard >= timeout else { throw .tooSoon }
        presence = .silent(lastHeard: lastHeard)
    }

    /// Silent → abandoned, once the abandon time-out has passed since it was last heard.
    mutating func abandon(at now: Moment, timeout: Duration) throws(TransitionError) {
        guard case .silent(let lastHeard) = presence else { throw .wrongState }
        guard now - lastHeard >= timeout else { throw .tooSoon }
        presence = .abandoned(lastHeard: lastHeard)
    }

    /// The namespace of a connection known only by its routing id: the id as
    /// text when it is printable (letters, digits, '-', '.', '_', ':'), in hex
    /// otherwise (libzmq's own ids start with a zero byte).
    static func namespace(of routingID: [UInt8]) -> UserNamespace {
        let printable = !routingID.isEmpty && routingID.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x3A
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
    private var updated: Moment

    init(rate: Int, now: Moment) {
        self.rate = Double(rate)
        capacity = Double(rate) * 2
        tokens = capacity
        updated = now
    }

    /// Takes `count` tokens if the bucket holds them (nothing otherwise).
    mutating func take(_ count: Int = 1, now: Moment) -> Bool {
        tokens = min(capacity, tokens + now.seconds(since: updated) * rate)
        updated = now
        guard tokens >= Double(count) else { return false }
        tokens -= Double(count)
        return true
    }
}
