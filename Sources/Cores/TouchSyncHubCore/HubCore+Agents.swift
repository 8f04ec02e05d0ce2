import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

// HubCore, agents' messages: numbered requests applied in order, hellos, refusals and acknowledgements.
extension HubCore {
    // MARK: Agents

    mutating func handle(
        _ request: AgentRequest, bytes: Int, from peer: Peer, now: Moment, into actions: inout [HubAction]
    ) {
        // One lookup in, one write back: the session changes as a local value.
        guard var session = sessions[peer.principal], session.peer == peer.id else {
            if sessions.admitStranger(peer.id, now: now) {
                let sequence: UInt64
                switch request {
                case .numbered(let number, _), .empty(let number): sequence = number
                case .heartbeat, .hello, .goodbye: sequence = 0
                }
                refuse(peer.id, HubRefusal(.notWelcomed, "say hello first", sequence: sequence), into: &actions)
            }
            return
        }
        if case .goodbye = request {
            end(peer.principal, why: "it said goodbye")
            return
        }
        let appliedBefore = session.numbering.appliedThrough
        let styleBefore = session.style
        defer {
            if journal != nil && (session.numbering.appliedThrough != appliedBefore || session.style != styleBefore) {
                // Journaled with the board's next batch, before it is acknowledged: one without diffs when the message changed no stroke.
                let slot = session.boardSlot
                if !channels[slot].needsBatch { publisher.markDirty(slot) }
                channels[slot].progressPending[session.principal] = AgentProgress(
                    principal: session.principal, appliedThrough: session.numbering.appliedThrough, style: session.style,
                    sessionID: session.sessionID)
            }
            sessions[peer.principal] = session
        }
        if session.isSilent { channels[session.boardSlot].silentUsers.remove(session.principal) }
        session.heard(at: now)
        let overMessages = !session.bucket.take(now: now)
        if overMessages || !takeBytes(bytes, of: &session, now: now) {
            var sequence: UInt64 = 0
            if case .numbered(let number, _) = request {
                sequence = number
                // Refused, but handled: the agent must not resend it.
                if session.numbering.skip(number) { sessions.requestAck(&session) }
            }
            refuse(
                peer.id,
                overMessages
                    ? HubRefusal(.rateLimited, "more than \(configuration.limits.maxMessagesPerSecond) messages per second", sequence: sequence)
                    : HubRefusal(.byteRateLimited, "more than \(configuration.limits.maxBytesPerSecond) message bytes per second", sequence: sequence),
                into: &actions)
            return
        }
        switch request {
        case .hello, .goodbye:
            preconditionFailure("handled above")
        case .heartbeat:
            sessions.requestAck(&session)
        case .empty(let sequence):
            refuse(peer.id, HubRefusal(.malformed, "an agent message with no body", sequence: sequence), into: &actions)
        case .numbered(0, _):
            // Numbers start at 1: 0 is no number, so this takes none.
            refuse(peer.id, HubRefusal(.malformed, "a numbered message (frame, style, clear, undo, redo, erase) needs sequence 1 or more", sequence: 0), into: &actions)
        case .numbered(let sequence, let body):
            do {
                switch try session.numbering.admit(sequence) {
                case .duplicate:
                    counters.duplicates += 1  // resent after a reconnect: already applied
                    sessions.requestAck(&session)
                case .next:
                    sessions.requestAck(&session)
                    apply(body, sequence: sequence, to: &session, now: now, into: &actions)
                }
            } catch {
                guard case .gap(let expected, let received, let report) = error, report else { return }
                refuse(peer.id, HubRefusal(.outOfOrder, "expected message \(expected), received \(received)", sequence: received), into: &actions)
                sessions.requestAck(&session)
            }
        }
    }

    /// Applies a numbered message that is next in its session's order.
    mutating func apply(
        _ body: NumberedRequest, sequence: UInt64, to session: inout AgentSession, now: Moment,
        into actions: inout [HubAction]
    ) {
        // The role may have shrunk since the hello (an access list reload).
        // (Erasing others' strokes needs admin too: checked with the strokes' owners.)
        let needed: Role = if case .clear(.board) = body { .admin } else { .draw }
        guard session.role >= needed else {
            refuse(
                session.peer,
                HubRefusal(
                    .forbidden, "\(session.principal) may \(session.role == .watch ? "only watch" : "not clear") board \(session.board)",
                    sequence: sequence),
                into: &actions)
            return
        }
        switch body {
        case .frame(let frame):
            let (user, style) = (session.principal, session.style)
            var samples = 0
            for index in frame.changes.indices { samples += frame.changes[index].samples.count }  // no copy of each change
            guard takeSamples(samples, of: &session, now: now) else {
                refuse(
                    session.peer,
                    HubRefusal(.rateLimited, "more than \(configuration.limits.maxSamplesPerSecond) samples per second: frame refused", sequence: sequence),
                    into: &actions)
                return
            }
            // A new stroke needs room in the user's quota over all boards (a stroke under way may finish):
            // accepted strokes everywhere, and the user's strokes in progress here (a user draws on one board at a time).
            if frame.changes.contains(where: { $0.phase == .began }),
                !ledger.with({ $0.quotas.mayBeginStroke(user, inProgress: channels[session.boardSlot].state.activeSamples(of: user)) })
            {
                refuse(
                    session.peer,
                    HubRefusal(
                        .boardFull,
                        "\(user) stores its maximum of \(configuration.limits.maxSamplesPerUser) samples over this hub's boards: clear or erase some to draw more",
                        sequence: sequence),
                    into: &actions)
                return
            }
            do {
                // Only an ended touch moves samples into accepted strokes.
                let ends = frame.changes.contains { $0.phase == .ended }
                try change(session.boardSlot, accepted: ends ? .of(user) : .unchanged) { (channel: inout BoardChannel) throws(TouchInputError) in
                    try channel.reduce(frame, from: user, style: style)
                }
            } catch {
                refuse(session.peer, HubRefusal(error.code, error.description, sequence: sequence), into: &actions)
                return
            }
            counters.frames += 1
            counters.samples += samples
        case .style(let style):
            guard style.width > 0 && style.width <= 1000 * UInt32(Sample.unitsPerPoint) else {
                refuse(session.peer, HubRefusal(.invalidValue, "stroke width must be above 0 and at most 1000 points", sequence: sequence), into: &actions)
                return
            }
            session.style = style
        case .clear(let scope):
            let user = session.principal
            change(session.boardSlot, accepted: scope == .own ? .of(user) : .anyone) { $0.clear(scope, by: user) }
        case .undo:
            // An edit's undo or redo may put back or take away anyone's strokes it named: count them all.
            let user = session.principal
            change(session.boardSlot, accepted: .anyone) { $0.undo(by: user) }
        case .redo:
            let user = session.principal
            change(session.boardSlot, accepted: .anyone) { $0.redo(by: user) }
        case .erase(let ids):
            let (user, anyOwner) = (session.principal, session.role >= .admin)
            do {
                try change(session.boardSlot, accepted: anyOwner ? .anyone : .of(user)) { (channel: inout BoardChannel) throws(TouchInputError) in
                    try channel.erase(ids, by: user, anyOwner: anyOwner)
                }
            } catch {
                refuse(session.peer, HubRefusal(error.code, error.description, sequence: sequence), into: &actions)
            }
        case .edit(let edit):
            let (user, anyOwner) = (session.principal, session.role >= .admin)
            if case .duplicate = edit.change,
                !ledger.with({ $0.quotas.mayBeginStroke(user, inProgress: channels[session.boardSlot].state.activeSamples(of: user)) })
            {
                refuse(
                    session.peer,
                    HubRefusal(
                        .boardFull,
                        "\(user) stores its maximum of \(configuration.limits.maxSamplesPerUser) samples over this hub's boards: clear or erase some to copy more",
                        sequence: sequence),
                    into: &actions)
                return
            }
            do {
                try change(session.boardSlot, accepted: anyOwner ? .anyone : .of(user)) { (channel: inout BoardChannel) throws(TouchInputError) in
                    try channel.edit(edit, by: user, anyOwner: anyOwner)
                }
            } catch {
                refuse(session.peer, HubRefusal(error.code, error.description, sequence: sequence), into: &actions)
            }
        case .invalid(let error):
            refuse(session.peer, HubRefusal(error.code, error.reason, sequence: sequence), into: &actions)
        }
    }

    mutating func handleHello(
        _ hello: AgentHello, from authenticated: Peer, now: Moment, into actions: inout [HubAction]
    ) {
        let acting = sessions.acting(authenticated)
        guard sessions.isCurrent(acting) || sessions.admitStranger(acting.id, now: now) else { return }
        let admitted: Admission.Admitted
        switch Admission.admit(
            hello, from: authenticated, acting: acting, access: access, routing: routing, heldHere: channels.slot(of: hello.board) != nil)
        {
        case .success(let granted): admitted = granted
        case .failure(let refusal):
            refuse(acting.id, refusal, into: &actions)
            return
        }
        let (peer, role, delegation) = (admitted.peer, admitted.role, admitted.delegation)
        if access != nil || peer.id.channel != nil { sessions.delegate(peer.id, delegation) }
        let slot: Int
        if let existing = channels.slot(of: hello.board) {
            slot = existing
        } else {
            guard boardCount < configuration.limits.maxBoards else {
                refuse(peer.id, HubRefusal(.unknownBoard, "this hub holds its maximum of \(configuration.limits.maxBoards) boards\(threadShare)"), into: &actions)
                return
            }
            // A gateway's tab counts as its invited user (every tab has a namespace of its own:
            // one invitee created 400 boards in 54 s); on a plain hub a user is a connection,
            // so its address is counted too.
            let creator = delegation.flatMap { $0.user.isEmpty ? nil : UserNamespace($0.user) } ?? peer.principal
            let address = access == nil ? hello.remoteAddress : nil
            if let refusal = ledger.with({ $0.quotas.createBoard(by: creator, from: address, now: now) }) {
                refuse(peer.id, refusal, into: &actions)
                return
            }
            if configuration.storeCommits {
                // The store may hold the board (or another hub its lease): wait for the claim.
                switch storeWaits.park(StoreWaits.ParkedHello(peer: authenticated, hello: hello, bytes: 0)) {
                case .parked(let askStore):
                    if askStore { actions.append(.claimBoard(hello.board)) }
                case .full:
                    refuse(peer.id, HubRefusal(.storageUnavailable, "board \(hello.board) is still being loaded from the board store: try again"), into: &actions)
                }
                return
            }
            slot = channels.insert(BoardChannel(name: hello.board, limits: configuration.limits.boardLimits), emptySince: now)
            updateWireFormats(slot: slot, now: now, into: &actions)
            counters.boards = boardCount
            observer?.observe(.boardCreated(board: hello.board))
        }
        let principal = peer.principal
        // A channel given to another session (a gateway reuses a closed tab's channel):
        // the session it carried before has lost its connection.
        if peer.id.channel != nil, let previous = sessions.principal(connectedAs: peer.id), previous != principal {
            end(previous, why: "its channel now carries another session")
        }
        let resumeAfter = hello.resumeAfter
        switch sessions.resume(
            principal, sessionID: hello.sessionID, board: hello.board, resumeAfter: resumeAfter, on: peer.id, role: role,
            delegation: delegation, now: now)
        {
        case .refused(let refusal):
            refuse(peer.id, refusal, into: &actions)
            return
        case .resumed(let wasSilent):
            // The same session again (a reconnect): it resends everything after what we acknowledged.
            if wasSilent { channels[slot].silentUsers.remove(principal) }
            sessions.expectHeard(by: now + configuration.timing.livenessTimeout)
        case .notKnown:
            // A new session, or one the hub knows only from its journal (after a restart).
            let recorded = channels[slot].recoveredProgress[principal].flatMap { $0.sessionID == hello.sessionID ? $0 : nil }
            let appliedThrough = recorded?.appliedThrough ?? 0
            guard resumeAfter <= appliedThrough else {
                refuse(
                    peer.id,
                    HubRefusal(
                        .cannotResume,
                        recorded == nil
                            ? "this hub does not know this session (it restarted without it, or forgot it): start a new session, numbered from 1"
                            : "resume_after \(resumeAfter) is beyond the \(appliedThrough) message(s) this hub recorded for this session"),
                    into: &actions)
                return
            }
            guard sessions.makeRoom(for: principal, limit: configuration.limits.maxSessions) else {
                refuse(
                    peer.id,
                    HubRefusal(
                        .rateLimited, "this hub holds its maximum of \(configuration.limits.maxSessions) agent sessions\(threadShare): try again later"),
                    into: &actions)
                return
            }
            // The user's previous session ends: its touches are cancelled now.
            if sessions[principal] != nil { end(principal, why: "a new session of the same user started") }
            if channels[slot].recoveredProgress.removeValue(forKey: principal) != nil && recorded == nil {
                change(slot, accepted: .unchanged) { _ = $0.cancelTouches(of: principal) }  // the session before the restart does not come back
            }
            var session = AgentSession(
                principal: principal, peer: peer.id, sessionID: hello.sessionID, board: hello.board, boardSlot: slot,
                appliedThrough: appliedThrough, now: now, messagesPerSecond: configuration.limits.maxMessagesPerSecond,
                samplesPerSecond: configuration.limits.maxSamplesPerSecond, bytesPerSecond: configuration.limits.maxBytesPerSecond)
            if let recorded { session.style = recorded.style }
            session.role = role
            session.delegation = delegation
            sessions.open(session, liveness: configuration.timing.livenessTimeout, now: now)
            counters.agents = sessions.count
            observer?.observe(.agentJoined(user: principal, board: hello.board, client: hello.clientName, resumed: recorded != nil))
        }
        let welcome = AgentWelcome(
            board: hello.board, user: principal, appliedThrough: sessions[principal]!.acknowledged,
            heartbeatIntervalMilliseconds: UInt32(milliseconds(configuration.timing.heartbeatInterval)),
            livenessTimeoutMilliseconds: UInt32(milliseconds(configuration.timing.livenessTimeout)),
            maxLiveTouches: UInt32(configuration.limits.boardLimits.maxLiveTouchesPerUser),
            maxMessageBytes: UInt32(configuration.limits.maxMessageBytes), protocolVersion: hello.protocolVersion)
        actions.append(.reply(to: peer.id, .welcome(welcome)))
    }

    /// Channel 0 of a multiplexed connection speaks for the connection: a
    /// heartbeat keeps every channel's session live (a gateway keeps its idle
    /// tabs' presence, not the hub) and is answered with an ack through 0; a
    /// goodbye ends every channel's session (the gateway is stopping).
    mutating func handleConnectionMessage(_ request: AgentRequest, from peer: Peer, now: Moment, into actions: inout [HubAction]) {
        switch request {
        case .heartbeat:
            guard sessions.hasChannels(on: peer.id) || sessions.admitStranger(peer.id, now: now) else { return }
            for principal in sessions.heardConnection(peer.id, at: now) {
                if let slot = sessions[principal]?.boardSlot { channels[slot].silentUsers.remove(principal) }
            }
            actions.append(.reply(to: peer.id, .ack(through: 0)))
        case .goodbye:
            for principal in sessions.principals(onConnection: peer.id) { end(principal, why: "its multiplexed connection said goodbye") }
        case .hello, .numbered, .empty:
            guard sessions.hasChannels(on: peer.id) || sessions.admitStranger(peer.id, now: now) else { return }
            refuse(
                peer.id,
                HubRefusal(.malformed, "channel 0 of a multiplexed connection carries heartbeats and goodbyes only: sessions use channels 1 and up"),
                into: &actions)
        }
    }

    /// The refusal for a board the cluster gives to another hub, or the
    /// store moved to one (nil: ours).
    func wrongHub(for board: String) -> HubRefusal? {
        routing.wrongHub(for: board, heldHere: channels.slot(of: board) != nil)
    }

    mutating func refuse(_ peer: PeerID, _ refusal: HubRefusal, into actions: inout [HubAction]) {
        counters.refused(refusal.code)
        observer?.observe(.refused(refusal))
        actions.append(.reply(to: peer, .error(refusal)))
    }

    /// Whether what is applied may be acknowledged now, but for the ack
    /// interval: an ack promises the frame is as durable as the fsync policy
    /// says, every applied diff journaled (no board waiting to publish) and synced.
    var acksWaitOnlyForTheInterval: Bool {
        guard let journal else { return true }
        return publisher.dirtyBoards.isEmpty && journal.isDurable
    }

    mutating func sendAcks(now: Moment, force: Bool, into actions: inout [HubAction]) {
        if let journal, !journal.failedBoards.isEmpty { warnStorageUnavailable(now: now, into: &actions) }
        guard acksWaitOnlyForTheInterval else { return }
        guard !sessions.ackQueue.isEmpty, force || now >= nextAck else { return }
        nextAck = now + configuration.timing.ackInterval
        sessions.acknowledge(into: &actions)
    }

    // MARK: Per-user rates

    /// A session's bytes and samples count against the invited user a
    /// gateway's tab acts for, when it does (one invitee's 16 tabs would
    /// otherwise have 16 allowances), else against the session.
    mutating func takeBytes(_ bytes: Int, of session: inout AgentSession, now: Moment) -> Bool {
        guard let user = session.invitedUser else { return session.byteBucket.take(bytes, now: now) }
        return ledger.with { ledger in
            var rates = ledger.invitedUserRates(of: user, now: now)
            defer { ledger.invitedUserRates[user] = rates }
            return rates.bytes.take(bytes, now: now)
        }
    }

    mutating func takeSamples(_ samples: Int, of session: inout AgentSession, now: Moment) -> Bool {
        guard let user = session.invitedUser else { return session.sampleBucket.take(samples, now: now) }
        return ledger.with { ledger in
            var rates = ledger.invitedUserRates(of: user, now: now)
            defer { ledger.invitedUserRates[user] = rates }
            return rates.samples.take(samples, now: now)
        }
    }
}

extension HubCore {
    /// An agent's message: on channel 0 about the connection, a hello, or a session's request.
    mutating func agentMessage(_ request: AgentRequest, bytes: Int, from peer: Peer, now: Moment, into actions: inout [HubAction]) {
        counters.messages += 1
        if peer.id.channel == 0 {
            handleConnectionMessage(request, from: peer, now: now, into: &actions)
        } else if case .hello(let hello) = request {
            handleHello(hello, from: peer, now: now, into: &actions)
        } else {
            handle(request, bytes: bytes, from: sessions.acting(peer), now: now, into: &actions)
        }
    }

    /// Bytes that are no agent message: refused to a known peer, or a stranger within its allowance.
    mutating func undecodable(_ error: WireError, from authenticated: Peer, now: Moment, into actions: inout [HubAction]) {
        counters.messages += 1
        let peer = sessions.acting(authenticated)
        if sessions.isCurrent(peer) || sessions.admitStranger(peer.id, now: now) {
            refuse(peer.id, HubRefusal(error.code, error.reason), into: &actions)
        }
    }

    /// The transport saw the connection close: its session ends.
    mutating func peerGone(_ id: PeerID) {
        if let principal = sessions.principal(connectedAs: id) {
            end(principal, why: "its connection closed")
        }
        sessions.connectionClosed(id)
    }
}

extension HubCore {
    /// How a limit split between board threads reads in a refusal: the
    /// number is this board's thread's share (empty with one thread).
    var threadShare: String {
        configuration.boardThreads > 1 ? " on this board's thread (its share: the hub has \(configuration.boardThreads) board threads)" : ""
    }
}
