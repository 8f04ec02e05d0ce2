import TouchSyncAccessModel
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
        let wasPending = channels[slot].needsBatch
        defer { if !wasPending && channels[slot].needsBatch { publisher.markDirty(slot) } }
        switch accepted {
        case .unchanged:
            return try body(&channels[slot])
        case .of(let owner):
            let before = channels[slot].state.acceptedSamples(of: owner)
            defer {
                let delta = channels[slot].state.acceptedSamples(of: owner) - before
                if delta != 0 { ledger.with { $0.quotas.count(delta, of: owner) } }
            }
            return try body(&channels[slot])
        case .anyone:
            let before = channels[slot].state.acceptedSamplesByOwner  // rare: clears and erases
            defer {
                let after = channels[slot].state.acceptedSamplesByOwner
                ledger.with { ledger in
                    for user in Set(before.keys).union(after.keys) { ledger.quotas.count((after[user] ?? 0) - (before[user] ?? 0), of: user) }
                }
            }
            return try body(&channels[slot])
        }
    }

    mutating func publishDirtyBoards(force: Bool, now: Moment, into actions: inout [HubAction]) {
        guard publisher.takeDue(force: force, now: now, into: &publishing) else { return }
        for slot in publishing { publishPending(slot: slot, now: now, into: &actions) }
    }

    /// Seals a board's pending diffs into its next batch: journaled first, then published.
    mutating func publishPending(slot: Int, now: Moment, into actions: inout [HubAction]) {
        let time = hubTime(at: now)
        guard let sealed = channels[slot].sealBatch(hubTime: time) else { return }
        let sequence = sealed.sequence
        // Journaled before it is published: no subscriber sees a batch the journal may not have.
        if journal != nil {
            // The journal keeps v1 batches: with a journal, v1 is always encoded (`updateWireFormats`).
            guard let encodedBatch = sealed.v1 else { preconditionFailure("a journaling hub encodes every batch in v1") }
            let ticket = journal!.append()
            actions.append(
                .appendToJournal(
                    JournalAppend(
                        ticket: ticket, board: channels[slot].name, encodedBatch: encodedBatch, sequence: sequence,
                        hubTime: time, agents: Array(channels[slot].progressPending.values), state: channels[slot].state)))
            channels[slot].progressPending.removeAll(keepingCapacity: true)
        }
        for stream in PublishStream.allCases {
            guard let encoded = sealed[stream] else { continue }
            let bytes = WireCodec.field(1, wrapping: encoded)  // PublishMessage.batch
            actions.append(
                .publish(
                    Publication(
                        board: channels[slot].name, kind: .batch(sequence: sequence), topic: channels[slot].topic(stream), bytes: bytes)))
            counters.publishedBytes += bytes.count
        }
        counters.batches += 1
        let (board, live) = (channels[slot].name, channels[slot].state.liveTouchCount)
        counters.liveTouches += live - (liveTouchesByBoard[board] ?? 0)
        liveTouchesByBoard[board] = live == 0 ? nil : live
        if configuration.metricsBoardLabels { counters.liveTouchesChanged[board] = live }
    }

    mutating func syncJournalIfDue(force: Bool, now: Moment, into actions: inout [HubAction]) {
        guard journal != nil, let through = journal!.syncIfDue(force: force, now: now) else { return }
        actions.append(.syncJournal(through: through))
    }

    /// A board's heartbeat on the topic of each stream it publishes (v1
    /// always); on the stream without predictions it also carries the digest
    /// that stream's replicas hold. Diffs a publish interval holds back go
    /// first: the digest is the board's, and a heartbeat must not pair it with
    /// the sequence before them (every subscriber would resync).
    mutating func publishHeartbeat(slot: Int, now: Moment, into actions: inout [HubAction]) {
        publishPending(slot: slot, now: now, into: &actions)
        var message = Touchsync_V1_PublishMessage()
        message.heartbeat = channels[slot].heartbeat(hubTime: hubTime(at: now))
        let publication = Publication(
            board: channels[slot].name,
            kind: .heartbeat(sequence: message.heartbeat.sequence, digest: BoardDigest(rawValue: message.heartbeat.digest)),
            topic: channels[slot].topic, bytes: WireCodec.encode(message))
        actions.append(.publish(publication))
        if channels[slot].publishes(.v2) {
            var v2 = publication
            v2.topic = channels[slot].topic(.v2)
            actions.append(.publish(v2))
        }
        if channels[slot].publishes(.v2WithoutPredictions) {
            message.heartbeat.digestWithoutPredictions = channels[slot].digestWithoutPredictions().rawValue
            var lean = publication
            lean.topic = channels[slot].topic(.v2WithoutPredictions)
            lean.bytes = WireCodec.encode(message)
            actions.append(.publish(lean))
        }
    }

    /// Which streams a board's batches are encoded for: v2 and v2 without
    /// predictions while their topics have subscribers; v1 unless only
    /// those are read (no journal, no v1 subscriber, no prefix subscription,
    /// another one). A stream that starts continues the published state, so
    /// what is pending is published first.
    mutating func updateWireFormats(slot: Int, now: Moment, into actions: inout [HubAction]) {
        let v2 = subscriptions[channels[slot].topic(.v2)] != nil
        let lean = subscriptions[channels[slot].topic(.v2WithoutPredictions)] != nil
        let v1 = journal != nil || subscriptions[channels[slot].topic] != nil || prefixSubscriptions > 0 || !(v2 || lean)
        func wanted(_ stream: PublishStream) -> Bool {
            switch stream {
            case .v1: v1
            case .v2: v2
            case .v2WithoutPredictions: lean
            }
        }
        for stream in PublishStream.allCases where channels[slot].publishes(stream) && !wanted(stream) { channels[slot].stop(stream) }
        let starting = PublishStream.allCases.filter { wanted($0) && !channels[slot].publishes($0) }
        if !starting.isEmpty {
            publishPending(slot: slot, now: now, into: &actions)
            for stream in starting { channels[slot].start(stream) }
        }
    }
}

/// Whether a publish topic is one board's whole topic (any stream).
func isBoardTopic(_ topic: [UInt8]) -> Bool { PublishStream.parse(topic: topic) != nil }
