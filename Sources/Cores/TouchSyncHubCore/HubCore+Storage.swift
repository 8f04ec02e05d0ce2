import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

// HubCore, storage: journal failures and retries, boards the board store moved, adopted or could not load.
extension HubCore {
    /// A board's journal failed: its agents are not acknowledged until it is
    /// restored (retried every `journalRetryInterval`); they are told why.
    mutating func journalFailed(board: String, reason: String, now: Moment, into actions: inout [HubAction]) {
        guard journal != nil else { return }
        switch journal!.failed(board, reason: reason, now: now) {
        case .first:
            counters.journalFailures += 1
            observer?.observe(.journalFailed(board: board, reason: reason, retryInterval: configuration.timing.journalRetryInterval))
        case .again(let logIt):
            if logIt {
                observer?.observe(.journalStillFailing(board: board, reason: reason))
            }
        }
        // Its agents still waiting hear it now.
        sessions.requestAcks(onBoard: board)
        warnStorageUnavailable(now: now, into: &actions)
    }

    /// The agents in the ack queue whose board's journal failed are told so
    /// (at most once a second each) instead of acknowledged, and keep their frames.
    mutating func warnStorageUnavailable(now: Moment, into actions: inout [HubAction]) {
        guard let failed = journal?.failedBoards, !failed.isEmpty else { return }
        for session in sessions.withholdAcks(where: { failed[$0.board] != nil }) {
            if let warned = session.storageWarnedAt, now - warned < .seconds(1) { continue }
            sessions[session.principal]!.storageWarnedAt = now
            let reason = failed[session.board]!.reason
            refuse(
                session.peer,
                HubRefusal(
                    .storageUnavailable,
                    "the hub cannot make board \(session.board)'s frames durable (its journal failed: \(reason); retried every \(configuration.timing.journalRetryInterval)): nothing after message \(session.acknowledged) is acknowledged; keep them",
                    sequence: session.numbering.appliedThrough),
                into: &actions)
        }
    }

    /// Failed boards due a retry: their pending diffs published (journaled
    /// as progress), then a restart from the board as published.
    mutating func retryFailedJournals(now: Moment, into actions: inout [HubAction]) {
        guard journal != nil else { return }
        for board in journal!.retriesDue(now: now) {
            guard let slot = channels.slot(of: board) else { continue }
            publishPending(slot: slot, now: now, into: &actions)
            actions.append(.restartJournal(board: board, state: channels[slot].state, hubTime: hubTime(at: now)))
        }
    }

    /// Another hub holds `board`'s lease now: its agents are refused with
    /// WRONG_HUB and their sessions ended (what the store did not commit was
    /// never acknowledged: they keep it), and the board is forgotten here.
    mutating func boardMoved(_ board: String, to owner: String, into actions: inout [HubAction]) {
        guard routing.movedBoards[board] == nil else { return }
        routing.movedBoards[board] = owner
        journal?.forget(board)
        if let refusal = wrongHub(for: board) {  // always: the board is known moved now
            for parked in storeWaits.takeHellos(for: board) { refuse(parked.peer.id, refusal, into: &actions) }
            for parked in storeWaits.takeSnapshots(for: board) {
                actions.append(.refuseSnapshot(to: parked.peer, requestID: parked.requestID, refusal))
            }
        }
        observer?.observe(.boardMoved(board: board, owner: owner))
        guard let refusal = wrongHub(for: board), let slot = channels.slot(of: board) else { return }
        for session in sessions.removeAll(onSlot: slot) { refuse(session.peer, refusal, into: &actions) }
        let held = channels[slot].state.acceptedSamplesByOwner
        ledger.with { ledger in for (user, count) in held { ledger.quotas.count(-count, of: user) } }
        channels.remove(slot)
        publisher.forget(slot)
        recoveredUsers.removeAll { $0.slot == slot }
        counters.agents = sessions.count
        counters.boards = boardCount
    }

    /// The store gave this hub the board: it is served from here on, and the
    /// hellos that waited for it are handled now.
    mutating func adopt(_ board: RecoveredBoard, now: Moment, into actions: inout [HubAction]) {
        routing.movedBoards[board.name] = nil
        if channels.slot(of: board.name) == nil {
            install(board, emptySince: board.state.sequence == 0 ? now : nil)
            if !board.state.touches.isEmpty { recoveredUntil = now + configuration.timing.abandonTimeout }
            counters.boards = boardCount
            observer?.observe(.boardAdopted(board: board.name, sequence: board.state.sequence))
        }
        answerWaitingSnapshots(of: board.name, now: now, into: &actions)
        for parked in storeWaits.takeHellos(for: board.name) { handle(.agentMessage(from: parked.peer, .hello(parked.hello), bytes: parked.bytes), at: now, into: &actions) }
    }

    /// Snapshot requests that waited for the board's look-up: the board as
    /// held now, or the empty board when the store has none (and no hello
    /// made it since).
    mutating func answerWaitingSnapshots(of board: String, now: Moment, into actions: inout [HubAction]) {
        for parked in storeWaits.takeSnapshots(for: board) { sendSnapshot(of: board, to: parked.peer, requestID: parked.requestID, now: now, into: &actions) }
    }

    /// A board from storage (the journal at start, the store at any time)
    /// in a slot of its own, with its agents' progress, its owners' stored
    /// samples and its users with touches down; returns the slot.
    @discardableResult
    mutating func install(_ board: RecoveredBoard, emptySince: Moment? = nil) -> Int {
        var state = board.state
        state.limits = configuration.limits.boardLimits  // this run's limits, not the defaults the reader used
        var channel = BoardChannel(name: board.name, recovered: state)
        for agent in board.agents { channel.recoveredProgress[agent.principal] = agent }
        let slot = channels.insert(channel, emptySince: emptySince)
        var none: [HubAction] = []  // nothing is pending in a board just installed
        updateWireFormats(slot: slot, now: origin, into: &none)
        let held = state.acceptedSamplesByOwner
        ledger.with { ledger in for (user, count) in held { ledger.quotas.count(count, of: user) } }
        for (user, touches) in state.touches where !touches.isEmpty { recoveredUsers.append((slot, user)) }
        return slot
    }

    /// A claim that failed (the store unreachable): its hellos are told to try again.
    mutating func claimFailed(_ board: String, reason: String, into actions: inout [HubAction]) {
        let refusal = HubRefusal(.storageUnavailable, "board \(board) could not be loaded from the board store (\(reason)): try again")
        for parked in storeWaits.takeSnapshots(for: board) {
            actions.append(.refuseSnapshot(to: parked.peer, requestID: parked.requestID, refusal))
        }
        for parked in storeWaits.takeHellos(for: board) { refuse(parked.peer.id, refusal, into: &actions) }
    }
}

extension HubCore {
    /// The journal or the store could not keep a board's batches (or could not claim it).
    mutating func storageFailed(_ board: String, reason: String, now: Moment, into actions: inout [HubAction]) {
        if storeWaits.isWaiting(for: board) && channels.slot(of: board) == nil {
            claimFailed(board, reason: reason, into: &actions)
            return
        }
        journalFailed(board: board, reason: reason, now: now, into: &actions)
    }

    /// A failed board's restart is durable: its agents waited, everything they sent is in it.
    mutating func storageRestored(_ board: String, now: Moment, into actions: inout [HubAction]) {
        guard journal?.restored(board) == true else { return }
        observer?.observe(.journalRestored(board: board))
        sessions.requestAcks(onBoard: board)
        sendAcks(now: now, force: true, into: &actions)
    }
}
