import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

/// Subscriptions to the boards' streams, and the requests on the snapshot socket.
extension HubCore {
    mutating func subscribed(_ topic: [UInt8], by user: UserNamespace?, now: Moment, into actions: inout [HubAction]) {
        if let access {
            // Whole board topics (any stream) of boards the user may watch, or a
            // prefix (a relay following many boards) that only such boards can match.
            guard let user, let watched = Self.watchable(topic, by: user, in: access) else {
                counters.refused(.forbidden)
                observer?.observe(.subscriptionRefused(user: user))
                return
            }
            actions.append(.allowSubscription(topic: topic))
            if watchedBoards[user, default: []].count < 1024 { watchedBoards[user, default: []].insert(watched) }
        }
        subscriptions[topic, default: 0] += 1
        counters.subscriptions = subscriptions.values.reduce(0, +)
        if !isBoardTopic(topic) {
            // A prefix may cover any board: every board is encoded in v1 again.
            prefixSubscriptions += 1
            for slot in channels.heldSlots where !channels[slot].publishesV1 { updateWireFormats(slot: slot, now: now, into: &actions) }
        }
        // Tell the newcomer where the board stands, so it can spot a gap at
        // once, but at most once per interval per board (a flood of
        // subscriptions must not become a flood of heartbeats to everyone).
        let boardTopic = PublishStream.parse(topic: topic)
        if let name = boardTopic?.board, let slot = channels.slot(of: name) {
            // The streams its batches are encoded for may change (a first subscriber of one).
            updateWireFormats(slot: slot, now: now, into: &actions)
            if publisher.subscriberArrived(at: slot, now: now) {
                publishHeartbeat(slot: slot, now: now, into: &actions)
            }
        } else if let (name, stream) = boardTopic, stream != .v1, !configuration.storeCommits, wrongHub(for: name) == nil {
            // A board nobody drew on yet: one heartbeat at sequence 0 (the
            // empty board) tells the v2 subscriber that this hub speaks v2.
            var message = Touchsync_V1_PublishMessage()
            message.heartbeat.board = name
            message.heartbeat.hubTime = hubTime(at: now)
            message.heartbeat.digest = BoardState.emptyDigest.rawValue
            if !stream.carriesPredictions { message.heartbeat.digestWithoutPredictions = BoardState.emptyDigest.rawValue }
            actions.append(
                .publish(
                    Publication(
                        board: name, kind: .heartbeat(sequence: 0, digest: BoardState.emptyDigest), topic: topic,
                        bytes: WireCodec.encode(message))))
        }
    }

    /// What a subscription to `topic` lets `user` watch, as an access list
    /// reload checks it again (`Watched`); nil when the list does not let
    /// the user watch all of it.
    static func watchable(_ topic: [UInt8], by user: UserNamespace, in access: AccessList) -> Watched? {
        if let name = PublishStream.parse(topic: topic)?.board {
            return access.role(of: user.rawValue, on: name) != nil ? .board(name) : nil
        }
        // A prefix of board names (no stream byte, which no name holds), in UTF-8 bytes cut anywhere.
        guard topic.count <= 128, !topic.contains(where: { PublishStream(rawValue: $0) != nil }),
            access.mayWatchEvery(startingWith: topic, user: user.rawValue)
        else { return nil }
        return .prefix(topic)
    }

    /// Whether `user` may subscribe to `topic` (a whole board topic, or a
    /// prefix of board names), as the core decides it: what the front of a
    /// hub with board threads asks before it lets libzmq pass the subscription.
    public static func mayWatch(_ topic: [UInt8], by user: UserNamespace, in access: AccessList) -> Bool {
        watchable(topic, by: user, in: access) != nil
    }

    mutating func unsubscribed(_ topic: [UInt8], now: Moment, into actions: inout [HubAction]) {
        if access != nil { actions.append(.dropSubscription(topic: topic)) }
        if let count = subscriptions[topic] { subscriptions[topic] = count > 1 ? count - 1 : nil }
        counters.subscriptions = subscriptions.values.reduce(0, +)
        if !isBoardTopic(topic) { prefixSubscriptions = max(0, prefixSubscriptions - 1) }
        // The last subscriber of a format gone: the board may stop encoding it.
        if subscriptions[topic] == nil, let name = PublishStream.parse(topic: topic)?.board, let slot = channels.slot(of: name) {
            updateWireFormats(slot: slot, now: now, into: &actions)
        }
    }

    mutating func snapshotRequested(
        _ board: String, by peer: PeerID, user: UserNamespace?, onBehalf: OnBehalf?, address: String?, requestID: UInt64, now: Moment,
        into actions: inout [HubAction]
    ) {
        guard let party = party(of: peer, user: user, onBehalf, requestID: requestID, into: &actions) else { return }
        // Before the allowance: a WRONG_HUB costs no snapshot, and followers looking for a
        // board's new hub during a failover ask round the hubs (issue 39: 36 subscribers of one
        // address spent its allowance on these refusals, then waited 2 s when the board came).
        if let wrong = wrongHub(for: board) {
            counters.refused(.wrongHub)
            actions.append(.refuseSnapshot(to: peer, requestID: requestID, wrong))
            return
        }
        guard admitSnapshot(by: peer, party: party, address: address, requestID: requestID, now: now, into: &actions) else { return }
        guard party.mayWatch(board, access: access) else {
            counters.refused(.forbidden)
            actions.append(
                .refuseSnapshot(
                    to: peer, requestID: requestID,
                    HubRefusal(.forbidden, "\(party.user ?? "this peer") may not watch board \(board)")))
            return
        }
        snapshot(board, for: peer, requestID: requestID, now: now, into: &actions)
    }

    mutating func boardListRequested(
        prefix: String, after: String, limit: Int, by peer: PeerID, user: UserNamespace?, onBehalf: OnBehalf?, address: String?, requestID: UInt64,
        now: Moment, into actions: inout [HubAction]
    ) {
        guard let party = party(of: peer, user: user, onBehalf, requestID: requestID, into: &actions),
            admitSnapshot(by: peer, party: party, address: address, requestID: requestID, now: now, into: &actions)
        else { return }
        let (boards, more) = boardList(prefix: prefix, after: after, limit: limit, for: party)
        actions.append(.sendBoardList(to: peer, requestID: requestID, boards: boards, more: more))
    }
}
