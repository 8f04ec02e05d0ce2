import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

// HubCore, timers: liveness, busy notices, access-list reloads, forgetting idle boards and old sessions.
extension HubCore {
    // MARK: Timers

    mutating func runTimers(now: Moment, into actions: inout [HubAction]) {
        // Behind, silence proves nothing: the agent's messages may be queued
        // for us. Liveness (and the wait for users after a restart) resumes
        // once the queue is drained.
        if let behindSince {
            if now - behindSince >= configuration.timing.busyAfter,
                lastBusyNotice.map({ now - $0 >= configuration.timing.busyNoticeInterval }) ?? true
            {
                noticeBusy(behindFor: now - behindSince, into: &actions)
                lastBusyNotice = now
            }
        } else {
            checkLiveness(now: now)
            if let until = recoveredUntil, now >= until { cancelUnreturnedUsers() }
        }
        retryFailedJournals(now: now, into: &actions)
        if now >= nextReclaim {
            forgetIdleEmptyBoards(now: now)
            nextReclaim = now + min(configuration.timing.idleEmptyBoardTimeout, .seconds(10))
        }
        if now >= nextHousekeeping {
            forgetOldSessions(now: now)
            sessions.forgetStrangers()
            nextHousekeeping = now + housekeepingInterval
        }
        for slot in publisher.owedHeartbeatsDue(now: now) {
            publishHeartbeat(slot: slot, now: now, into: &actions)
        }
        if publisher.periodicHeartbeatDue(now: now) {
            for slot in channels.heldSlots { publishHeartbeat(slot: slot, now: now, into: &actions) }
        }
    }

    /// A reloaded access list applies to sessions at once: a user no longer
    /// listed for its board is ended (touches cancelled; its connection
    /// stays, and a new hello is refused); one now only watching keeps its
    /// session, has its touches cancelled, and gets FORBIDDEN for frames.
    mutating func accessChanged(_ list: AccessList, into actions: inout [HubAction]) {
        access = list
        // Subscribers who lost a board they watch: their streams end (XPUB cannot drop one peer's subscription later).
        let revoked = watchedBoards.filter { user, watched in
            watched.contains { watched in
                switch watched {
                case .board(let name): list.role(of: user.rawValue, on: name) == nil
                case .prefix(let prefix): !list.mayWatchEvery(startingWith: prefix, user: user.rawValue)
                }
            }
        }.keys
        if !revoked.isEmpty {
            for user in revoked { watchedBoards[user] = nil }
            observer?.observe(.watchersLostBoards(users: revoked.map(\.rawValue).sorted()))
            actions.append(.disconnectSubscribers(users: revoked.map(\.rawValue).sorted()))
        }
        for session in sessions.all {
            let principal = session.principal
            let granted: Role?
            if let delegation = session.delegation {
                // Still a gateway for this namespace, and the invitation not revoked or replaced.
                let prefix = list.delegatedPrefix(for: delegation.gateway.rawValue, token: delegation.token)
                granted = prefix?.user == delegation.user && principal.rawValue.hasPrefix(prefix?.prefix ?? "\u{0}")
                    ? list.role(of: delegation.user, through: delegation.gateway.rawValue, on: session.board) : nil
            } else {
                granted = list.role(of: principal.rawValue, on: session.board)
            }
            guard let role = granted else {
                end(principal, why: "the access list no longer grants it this board")
                continue
            }
            sessions[principal]!.role = role
            if role < .draw && session.role >= .draw {
                let cancelled = change(session.boardSlot, accepted: .unchanged) { $0.cancelTouches(of: principal) }
                observer?.observe(.agentOnlyWatches(user: principal, board: session.board, touches: cancelled))
            }
        }
        observer?.observe(.accessApplied(users: list.users.count))
    }

    /// Tells every agent still present that the hub is behind, so acks that
    /// lag are not taken for a lost connection (reconnecting would only add
    /// resends to the queue). The hint grows with the backlog's age.
    mutating func noticeBusy(behindFor behind: Duration, into actions: inout [HubAction]) {
        let behindMilliseconds = milliseconds(behind)
        counters.behindSeconds = Double(behindMilliseconds) / 1000
        let hint = min(max(behind * 2, .seconds(1)), configuration.timing.abandonTimeout)
        observer?.observe(.behind(milliseconds: behindMilliseconds))
        for session in sessions.all where !session.isAbandoned {
            counters.refused(.busy)
            let refusal = HubRefusal(
                .busy, "the hub is behind (\(behindMilliseconds) ms): your messages are queued, not lost; keep waiting",
                sequence: session.numbering.appliedThrough, retryAfterMilliseconds: UInt32(milliseconds(hint)))
            actions.append(.reply(to: session.peer, .error(refusal)))
        }
    }

    /// Moves sessions on as their silence grows: silent after the liveness
    /// time-out (touches kept, listed in heartbeats), abandoned after the
    /// abandon time-out (touches cancelled); finds the next such moment.
    mutating func checkLiveness(now: Moment) {
        for transition in sessions.checkLiveness(now: now, liveness: configuration.timing.livenessTimeout, abandon: configuration.timing.abandonTimeout) {
            switch transition {
            case .silent(let principal, let slot):
                channels[slot].silentUsers.insert(principal)
                observer?.observe(.agentSilent(user: principal, board: channels[slot].name))
            case .abandoned(let principal, let slot):
                channels[slot].silentUsers.remove(principal)
                let cancelled = change(slot, accepted: .unchanged) { $0.cancelTouches(of: principal) }
                observer?.observe(.agentAbandoned(user: principal, board: channels[slot].name, touches: cancelled))
            }
        }
    }

    /// Ends a session now (goodbye, connection closed, replaced): its live
    /// touches are cancelled and its numbering forgotten.
    mutating func end(_ principal: UserNamespace, why: String) {
        guard let session = sessions.remove(principal) else { return }
        channels[session.boardSlot].silentUsers.remove(principal)
        let cancelled = change(session.boardSlot, accepted: .unchanged) { $0.cancelTouches(of: principal) }
        observer?.observe(.agentEnded(user: principal, board: session.board, why: why, touches: cancelled))
        counters.agents = sessions.count
    }

    mutating func cancelUnreturnedUsers() {
        for (slot, user) in recoveredUsers where sessions[user]?.boardSlot != slot {
            let cancelled = change(slot, accepted: .unchanged) { $0.cancelTouches(of: user) }
            observer?.observe(.agentDidNotReturn(user: user, board: channels[slot].name, touches: cancelled))
        }
        recoveredUsers.removeAll()
        recoveredUntil = nil
    }

    /// Boards a hello created but nobody drew on (nothing published, nothing
    /// journaled), with no agent and no subscriber for the time-out, are
    /// forgotten: their slot is free again (hellos alone filled the table).
    mutating func forgetIdleEmptyBoards(now: Moment) {
        guard channels.mayForgetEmptyBoards else { return }
        let inUse = Set(sessions.all.map(\.boardSlot))
        let subscribed = subscriptions
        let idle = channels.idleEmptyBoards(now: now, timeout: configuration.timing.idleEmptyBoardTimeout) { slot, topics in
            inUse.contains(slot) || topics.contains { subscribed[$0] != nil }  // any stream
        }
        for slot in idle {
            observer?.observe(.boardForgotten(board: channels[slot].name))
            channels.remove(slot)
            publisher.forget(slot)
        }
        counters.boards = boardCount
    }

    /// Forgets sessions silent past the retention (their duplicate detection with them).
    mutating func forgetOldSessions(now: Moment) {
        let forgotten = sessions.forgetOld(now: now, retention: configuration.timing.sessionRetention)
        guard !forgotten.isEmpty else { return }
        for session in forgotten { channels[session.boardSlot].silentUsers.remove(session.principal) }
        counters.agents = sessions.count
    }
}

extension HubCore {
    /// The transport's turn ended (`inputWaiting`: it stopped with input still
    /// queued, so the hub is behind): publish, sync, acknowledge, run the timers.
    mutating func turnEnded(inputWaiting: Bool, now: Moment, into actions: inout [HubAction]) {
        if !inputWaiting {
            if behindSince != nil && lastBusyNotice != nil { counters.behindSeconds = 0 }
            behindSince = nil
        } else if behindSince == nil {
            behindSince = now
        }
        publishDirtyBoards(force: false, now: now, into: &actions)
        syncJournalIfDue(force: false, now: now, into: &actions)
        sendAcks(now: now, force: false, into: &actions)
        runTimers(now: now, into: &actions)
    }
}
