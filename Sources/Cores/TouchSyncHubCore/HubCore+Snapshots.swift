import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

// HubCore, snapshots and board lists.
extension HubCore {
    // MARK: Snapshots

    /// The most boards one list reply holds.
    public static let maxBoardsListed = 1_000

    /// Boards whose names start with `prefix` and sort after `after` (UTF-8
    /// bytes), that `party` may watch on an authenticated hub, in name order.
    func boardList(prefix: String, after: String, limit: Int, for party: RequestParty) -> ([BoardSummary], more: Bool) {
        let limit = limit <= 0 || limit > Self.maxBoardsListed ? Self.maxBoardsListed : limit
        let afterBytes = Array(after.utf8)
        var names: [(name: String, slot: Int)] = []
        for (name, slot) in channels.slotsByName where name.hasPrefix(prefix) && (after.isEmpty || afterBytes.lexicographicallyPrecedes(Array(name.utf8))) {
            if access != nil, !party.mayWatch(name, access: access) { continue }
            names.append((name, slot))
        }
        names.sort { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
        let more = names.count > limit
        var agents: [Int: Int] = [:]
        for session in sessions.all { agents[session.boardSlot, default: 0] += 1 }
        let boards = names.prefix(limit).map { entry in
            let channel = channels[entry.slot]
            return BoardSummary(
                board: entry.name, sequence: channel.state.sequence, acceptedStrokes: channel.state.acceptedStrokes.count,
                activeStrokes: channel.state.touches.values.reduce(0) { $0 + $1.count }, agents: agents[entry.slot] ?? 0,
                lastChangeTime: channel.lastChangeHubTime)
        }
        return (boards, more)
    }

    /// Who a snapshot or board list request is for, or nil after refusing it.
    mutating func party(
        of peer: PeerID, user: UserNamespace?, _ onBehalf: OnBehalf?, requestID: UInt64, into actions: inout [HubAction]
    ) -> RequestParty? {
        switch RequestParty.resolve(user: user?.rawValue, actAs: onBehalf?.actAs ?? "", token: onBehalf?.token ?? "", access: access) {
        case .success(let party):
            return party
        case .failure(let refusal):
            counters.refused(refusal.code)
            actions.append(.refuseSnapshot(to: peer, requestID: requestID, refusal))
            return nil
        }
    }

    /// Counts a snapshot or board-list request in its party's allowance (its
    /// user, the user it asks for, or its connection); past it, refuses it and returns false.
    /// Per requester (a user, else a connection), and on a plain hub per
    /// remote address too, at four times that (300 connections of one
    /// address, each within its own allowance, made the hub encode 1,500
    /// snapshots a second). A gateway asking for itself (`acts_for`) has
    /// twenty times a user's: one replica per board for all its tabs, where
    /// 24 boards opened at once were refused down to 5 a second.
    mutating func admitSnapshot(
        by peer: PeerID, party: RequestParty, address: String? = nil, requestID: UInt64, now: Moment, into actions: inout [HubAction]
    ) -> Bool {
        var refusal: String? = nil
        let requester = party.allowanceKey.map { Array($0.utf8) } ?? peer.bytes
        if party.through == nil, let user = party.user, access?.actsForOthers(user) == true {
            // A gateway asking for itself: its boards' replicas.
            if !ledger.with({ $0.snapshotAllowanceOfGateways.admit(requester, now: now) }) {
                refusal = "more than \(UserLedger.gatewaySnapshotFactor * configuration.limits.maxSnapshotsPerSecond) snapshot requests per second from gateway \(user)"
            }
        } else if !ledger.with({ $0.snapshotAllowance.admit(requester, now: now) }) {
            refusal = "more than \(configuration.limits.maxSnapshotsPerSecond) snapshot requests per second"
        } else if party.allowanceKey == nil, let address, !ledger.with({ $0.snapshotAllowancePerAddress.admit(Array(address.utf8), now: now) }) {
            refusal = "more than \(4 * configuration.limits.maxSnapshotsPerSecond) snapshot requests per second from address \(address)"
        }
        guard let refusal else { return true }
        counters.refused(.rateLimited)
        actions.append(.refuseSnapshot(to: peer, requestID: requestID, HubRefusal(.rateLimited, refusal)))
        return false
    }

    mutating func snapshot(
        _ board: String, for peer: PeerID, requestID: UInt64, now: Moment, into actions: inout [HubAction]
    ) {
        guard isValidBoardName(board) else {
            counters.refused(.unknownBoard)
            actions.append(
                .refuseSnapshot(to: peer, requestID: requestID, HubRefusal(.unknownBoard, boardNameRule)))
            return
        }
        if channels.slot(of: board) == nil && configuration.storeCommits {
            // The store may hold the board (its hub died, or nobody claimed it
            // yet): an empty snapshot would be a lie. Look it up; nothing is created.
            switch storeWaits.park(StoreWaits.ParkedSnapshot(peer: peer, requestID: requestID), board: board) {
            case .parked(let askStore):
                if askStore { actions.append(.lookUpBoard(board)) }
            case .full:
                actions.append(
                    .refuseSnapshot(
                        to: peer, requestID: requestID,
                        HubRefusal(.storageUnavailable, "board \(board) is still being looked up in the board store: ask again")))
            }
            return
        }
        sendSnapshot(of: board, to: peer, requestID: requestID, now: now, into: &actions)
    }

    /// The board as published now, or, nobody having drawn on it, the empty
    /// board at sequence 0 (its first batch will be 1; nothing is created for
    /// a mere spectator).
    mutating func sendSnapshot(
        of board: String, to peer: PeerID, requestID: UInt64, now: Moment, into actions: inout [HubAction]
    ) {
        guard let slot = channels.slot(of: board) else {
            let empty = BoardState()
            actions.append(.sendSnapshot(to: peer, requestID: requestID, board: board, state: empty, digest: empty.digest))
            return
        }
        // Publish first: the snapshot must be exactly the state at its sequence.
        publishPending(slot: slot, now: now, into: &actions)
        let digest = channels[slot].digest()
        actions.append(.sendSnapshot(to: peer, requestID: requestID, board: board, state: channels[slot].state, digest: digest))
    }
}
