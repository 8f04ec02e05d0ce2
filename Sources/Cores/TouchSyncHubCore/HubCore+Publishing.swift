import TouchSyncAccess
import TouchSyncCore
import TouchSyncWire

// HubCore, publishing: changing a board, sealing its batches (journaled first), heartbeats.
extension HubCore {
    // MARK: Publishing

    /// Changes a board, queueing it for publishing when it now has diffs
    /// pending and had none before (so each dirty board is queued once).
    /// Whose accepted samples a change can alter, for the per-user quota.
    enum Accepted {
        /// Nobody's (strokes in progress only: began, moved, cancelled): the hot path counts nothing.
        case unchanged
        /// This user's only (an ended stroke, an undo, a clear of one's own).
        case of(UserNamespace)
        /// Anyone's (a board clear, an admin's erase): every owner on the board is counted again.
        case anyone
    }

    @discardableResult
    mutating func change<Result, Failure: Error>(
        _ slot: Int, accepted: Accepted, _ body: (inout BoardChannel) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let wasPending = channels[slot].hasPending
        defer { if !wasPending && channels[slot].hasPending { publisher.markDirty(slot) } }
        switch accepted {
        case .unchanged:
            return try body(&channels[slot])
        case .of(let owner):
            let before = channels[slot].state.acceptedSamples(of: owner)
            defer { quotas.count(channels[slot].state.acceptedSamples(of: owner) - before, of: owner) }
            return try body(&channels[slot])
        case .anyone:
            let before = channels[slot].state.acceptedSamplesByOwner  // rare: clears and erases
            defer {
                let after = channels[slot].state.acceptedSamplesByOwner
                for user in Set(before.keys).union(after.keys) { quotas.count((after[user] ?? 0) - (before[user] ?? 0), of: user) }
            }
            return try body(&channels[slot])
        }
    }

    mutating func publishDirtyBoards(force: Bool, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        guard publisher.takeDue(force: force, now: now, into: &publishing) else { return }
        for slot in publishing { publishPending(slot: slot, now: now, into: &actions) }
    }

    /// Seals a board's pending diffs into its next batch: journaled first, then published.
    mutating func publishPending(slot: Int, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        let time = hubTime(at: now)
        guard let (sequence, encodedBatch, encodedV2) = channels[slot].sealBatch(hubTime: time) else { return }
        // Journaled before it is published: no subscriber sees a batch the journal may not have.
        if journal != nil {
            // The journal keeps v1 batches: with a journal, v1 is always encoded (`updateWireFormats`).
            guard let encodedBatch else { preconditionFailure("a journaling hub encodes every batch in v1") }
            let ticket = journal!.append()
            actions.append(
                .appendToJournal(
                    JournalAppend(
                        ticket: ticket, board: channels[slot].name, encodedBatch: encodedBatch, sequence: sequence,
                        hubTime: time, agents: Array(channels[slot].progressPending.values), state: channels[slot].state)))
            channels[slot].progressPending.removeAll(keepingCapacity: true)
        }
        if let encodedBatch {
            let bytes = WireCodec.field(1, wrapping: encodedBatch)  // PublishMessage.batch
            actions.append(
                .publish(Publication(board: channels[slot].name, kind: .batch(sequence: sequence), topic: channels[slot].topic, bytes: bytes)))
            counters.publishedBytes += bytes.count
        }
        counters.batches += 1
        if let encodedV2 {
            let bytesV2 = WireCodec.field(1, wrapping: encodedV2)
            actions.append(
                .publish(Publication(board: channels[slot].name, kind: .batch(sequence: sequence), topic: channels[slot].topicV2, bytes: bytesV2)))
            counters.publishedBytes += bytesV2.count
        }
        let (board, live) = (channels[slot].name, channels[slot].state.liveTouchCount)
        counters.liveTouches += live - (liveTouchesByBoard[board] ?? 0)
        liveTouchesByBoard[board] = live == 0 ? nil : live
        if configuration.metricsBoardLabels { counters.liveTouchesChanged[board] = live }
    }

    mutating func syncJournalIfDue(force: Bool, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        guard journal != nil, let through = journal!.syncIfDue(force: force, now: now) else { return }
        actions.append(.syncJournal(through: through))
    }

    /// A board's heartbeat, on its v1 topic and, while it publishes v2, on its v2 topic.
    mutating func publishHeartbeat(slot: Int, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        var message = Touchsync_V1_PublishMessage()
        message.heartbeat = channels[slot].heartbeat(hubTime: hubTime(at: now))
        let publication = Publication(
            board: channels[slot].name,
            kind: .heartbeat(sequence: message.heartbeat.sequence, digest: BoardDigest(rawValue: message.heartbeat.digest)),
            topic: channels[slot].topic, bytes: WireCodec.encode(message))
        actions.append(.publish(publication))
        if channels[slot].publishesV2 {
            var v2 = publication
            v2.topic = channels[slot].topicV2
            actions.append(.publish(v2))
        }
    }

    /// Which formats a board's batches are encoded in: v2 while its v2
    /// topic has subscribers; v1 unless only v2 is read (no journal, no v1
    /// subscriber, no prefix subscription, a v2 one). A stream that starts
    /// continues the published state, so what is pending is published first.
    mutating func updateWireFormats(slot: Int, now: ContinuousClock.Instant, into actions: inout [HubAction]) {
        let v2 = subscriptions[channels[slot].topicV2] != nil
        let v1 = journal != nil || subscriptions[channels[slot].topic] != nil || prefixSubscriptions > 0 || !v2
        if channels[slot].publishesV1 && !v1 { channels[slot].stop(.v1) }
        if channels[slot].publishesV2 && !v2 { channels[slot].stop(.v2) }
        if (v1 && !channels[slot].publishesV1) || (v2 && !channels[slot].publishesV2) {
            publishPending(slot: slot, now: now, into: &actions)
            if v1 { channels[slot].start(.v1) }
            if v2 { channels[slot].start(.v2) }
        }
    }
}

/// Whether a publish topic is one board's whole topic, v1 (a zero byte) or v2 (a one byte).
func isBoardTopic(_ topic: [UInt8]) -> Bool {
    guard topic.last == 0 || topic.last == 1, let name = String(validating: topic.dropLast(), as: UTF8.self) else { return false }
    return isValidBoardName(name)
}
