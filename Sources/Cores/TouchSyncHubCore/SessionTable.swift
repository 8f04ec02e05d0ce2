import TouchSyncAccessModel
import TouchSyncCore

/// The hub's agent sessions, one per user namespace: which connection
/// speaks for each (and for whom a delegated connection acts), resuming a
/// session on a new connection, liveness, the queue of sessions owed an
/// acknowledgement, and the rate buckets of peers that have not said hello.
/// It knows boards only by slot and name; what a session's end or silence
/// does to its board is the core's.
struct SessionTable {
    private var sessions: [UserNamespace: AgentSession] = [:]
    /// Sessions owed an acknowledgement, each once (`AgentSession.ackPending`).
    private(set) var ackQueue: [UserNamespace] = []
    /// Connections acting for a delegated namespace (a gateway's browser tabs).
    private var delegations: [PeerID: Delegation] = [:]
    /// Rate buckets of peers that have not said hello (so garbage floods are bounded too).
    private var strangers: [PeerID: TokenBucket] = [:]
    private let strangerRate: Int
    /// When a session may next fall silent or be abandoned (may be early: a
    /// session heard since; the check then looks again at the next real deadline).
    private(set) var livenessDue: Moment? = nil

    init(strangerRate: Int) { self.strangerRate = strangerRate }

    var count: Int { sessions.count }

    /// Every session, in no particular order.
    var all: Dictionary<UserNamespace, AgentSession>.Values { sessions.values }

    subscript(principal: UserNamespace) -> AgentSession? {
        get { sessions[principal] }
        _modify { yield &sessions[principal] }
    }

    // MARK: Connections

    /// The peer's session speaks through this connection.
    func isCurrent(_ peer: Peer) -> Bool { sessions[peer.principal]?.peer == peer.id }

    /// The principal whose session speaks through `connection` (nil: none).
    func principal(connectedAs connection: PeerID) -> UserNamespace? {
        sessions.first { $0.value.peer == connection }?.key
    }

    /// The peer as its messages act: a delegated connection acts in the
    /// namespace its hello was granted, as long as the same principal sends.
    func acting(_ peer: Peer) -> Peer {
        guard let delegation = delegations[peer.id], delegation.gateway == peer.principal else { return peer }
        return Peer(id: peer.id, principal: delegation.namespace)
    }

    /// What the connection acts as from now on (nil: as itself).
    mutating func delegate(_ connection: PeerID, _ delegation: Delegation?) { delegations[connection] = delegation }

    mutating func connectionClosed(_ connection: PeerID) { delegations[connection] = nil }

    // MARK: Multiplexed connections

    /// Whether a session speaks through a channel of `connection` (its channel 0).
    func hasChannels(on connection: PeerID) -> Bool {
        sessions.values.contains { $0.peer.bytes == connection.bytes && $0.peer.channel != nil }
    }

    /// The sessions speaking through channels of `connection`.
    func principals(onConnection connection: PeerID) -> [UserNamespace] {
        sessions.values.filter { $0.peer.bytes == connection.bytes && $0.peer.channel != nil }.map(\.principal)
    }

    /// The connection's heartbeat: every session on its channels is heard
    /// (those that were silent are returned: their boards list them no more).
    mutating func heardConnection(_ connection: PeerID, at now: Moment) -> [UserNamespace] {
        var revived: [UserNamespace] = []
        for principal in principals(onConnection: connection) {
            if sessions[principal]!.isSilent { revived.append(principal) }
            sessions[principal]!.heard(at: now)
        }
        return revived
    }

    /// A peer without a session takes a token from its own bucket: false past the rate.
    mutating func admitStranger(_ peer: PeerID, now: Moment) -> Bool {
        if strangers[peer] == nil { strangers[peer] = TokenBucket(rate: strangerRate, now: now) }
        return strangers[peer]!.take(now: now)
    }

    /// Housekeeping: strangers' buckets start again (their count stays bounded).
    mutating func forgetStrangers() { strangers.removeAll(keepingCapacity: true) }

    // MARK: Opening and ending

    enum Resumption {
        /// Not this session (another session id or board, or none): the core opens a new one.
        case notKnown
        /// The same session on a new connection; `wasSilent`: its board lists it as silent no more.
        case resumed(wasSilent: Bool)
        case refused(HubRefusal)
    }

    /// A hello of a session the table holds: resumed on `peer` when the
    /// agent asks to resume no further than what was applied.
    mutating func resume(
        _ principal: UserNamespace, sessionID: [UInt8], board: String, resumeAfter: UInt64, on peer: PeerID, role: Role,
        delegation: Delegation?, now: Moment
    ) -> Resumption {
        guard let existing = sessions[principal], existing.sessionID == sessionID, existing.board == board else { return .notKnown }
        guard resumeAfter <= existing.numbering.appliedThrough else {
            return .refused(
                HubRefusal(
                    .cannotResume,
                    "resume_after \(resumeAfter) is beyond the \(existing.numbering.appliedThrough) message(s) this hub applied for this session"))
        }
        sessions[principal]!.resumed(by: peer, at: now)
        sessions[principal]!.role = role
        sessions[principal]!.delegation = delegation
        return .resumed(wasSilent: existing.isSilent)
    }

    /// Room for one more session under `limit`: the longest-abandoned one is
    /// forgotten when the table is full (its touches are long cancelled).
    /// False: full of sessions that are not abandoned.
    mutating func makeRoom(for principal: UserNamespace, limit: Int) -> Bool {
        guard sessions[principal] == nil && sessions.count >= limit else { return true }
        guard let oldest = sessions.filter({ $0.value.isAbandoned }).min(by: { $0.value.presence.lastHeard < $1.value.presence.lastHeard })?.key
        else { return false }
        sessions[oldest] = nil
        return true
    }

    /// A new session (the core ended any previous one of the user first).
    mutating func open(_ session: AgentSession, liveness: Duration, now: Moment) {
        sessions[session.principal] = session
        expectHeard(by: now + liveness)
    }

    /// A session was heard from (a hello): it may fall silent from `deadline` on.
    mutating func expectHeard(by deadline: Moment) { livenessDue = min(livenessDue ?? deadline, deadline) }

    /// Ends a session (its ack request, if queued, is skipped when acknowledging).
    mutating func remove(_ principal: UserNamespace) -> AgentSession? { sessions.removeValue(forKey: principal) }

    /// Ends every session on the board in `slot` (it moved to another hub).
    mutating func removeAll(onSlot slot: Int) -> [AgentSession] {
        let leaving = sessions.values.filter { $0.boardSlot == slot }
        for session in leaving { sessions[session.principal] = nil }
        ackQueue.removeAll { sessions[$0] == nil }
        return leaving
    }

    /// Forgets sessions not heard for `retention` (their duplicate detection with them).
    mutating func forgetOld(now: Moment, retention: Duration) -> [AgentSession] {
        let forgotten = sessions.values.filter { now - $0.presence.lastHeard > retention }
        for session in forgotten { sessions[session.principal] = nil }
        return forgotten
    }

    // MARK: Liveness

    enum LivenessChange: Equatable {
        /// Not heard for the liveness time-out: its touches stay down.
        case silent(UserNamespace, slot: Int)
        /// Not heard for the abandon time-out: its touches are to be cancelled.
        case abandoned(UserNamespace, slot: Int)
    }

    /// Moves sessions on as their silence grows, and finds the next such moment.
    mutating func checkLiveness(now: Moment, liveness: Duration, abandon: Duration) -> [LivenessChange] {
        guard let due = livenessDue, now >= due else { return [] }
        var changes: [LivenessChange] = []
        var next: Moment? = nil
        for principal in sessions.keys {
            guard let deadline = sessions[principal]!.nextDeadline(liveness: liveness, abandon: abandon) else { continue }
            guard now >= deadline else {
                next = min(next ?? deadline, deadline)
                continue
            }
            let slot = sessions[principal]!.boardSlot
            if (try? sessions[principal]!.fallSilent(at: now, timeout: liveness)) != nil {
                changes.append(.silent(principal, slot: slot))
                // Abandoned later, unless heard again first.
                let abandonAt = sessions[principal]!.presence.lastHeard + abandon
                next = min(next ?? abandonAt, abandonAt)
            } else if (try? sessions[principal]!.abandon(at: now, timeout: abandon)) != nil {
                changes.append(.abandoned(principal, slot: slot))
            }
        }
        livenessDue = next
        return changes
    }

    // MARK: Acknowledgements

    /// Queues the session for an acknowledgement (once).
    mutating func requestAck(_ session: inout AgentSession) {
        guard !session.ackPending else { return }
        session.ackPending = true
        ackQueue.append(session.principal)
    }

    /// Queues every session on `board` not queued yet (its storage failed, or works again).
    mutating func requestAcks(onBoard board: String) {
        for principal in sessions.keys where sessions[principal]!.board == board && !sessions[principal]!.ackPending {
            sessions[principal]!.ackPending = true
            ackQueue.append(principal)
        }
    }

    /// Acknowledges every queued session through what it has applied.
    mutating func acknowledge(into actions: inout [HubAction]) {
        for principal in ackQueue {
            // One hash per acknowledgement, and no copy of the session (a dozen references to retain).
            guard let index = sessions.index(forKey: principal), sessions.values[index].ackPending else { continue }
            let through = sessions.values[index].numbering.appliedThrough
            sessions.values[index].ackPending = false
            sessions.values[index].acknowledged = through
            actions.append(.reply(to: sessions.values[index].peer, .ack(through: through)))
        }
        ackQueue.removeAll(keepingCapacity: true)
    }

    /// Takes out of the queue the sessions `withhold` picks (they are not
    /// acknowledged: their board's storage failed), in queue order.
    mutating func withholdAcks(where withhold: (AgentSession) -> Bool) -> [AgentSession] {
        var withheld: [AgentSession] = []
        ackQueue.removeAll { principal in
            guard let session = sessions[principal], session.ackPending, withhold(session) else { return false }
            sessions[principal]!.ackPending = false
            withheld.append(session)
            return true
        }
        return withheld
    }
}
