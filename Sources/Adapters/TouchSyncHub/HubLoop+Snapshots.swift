import Logging
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire
import ZeroMQ

// HubLoop: snapshot requests in, snapshots out (bounded by what requesters read).
extension HubLoop {
    func sendSnapshot(to peer: PeerID, requestID: UInt64, board: String, state: BoardState, digest: BoardDigest) {
        guard held.broken.isEmpty || !held.broken.contains(board) else {
            // Reads fenced: the board's storage or lease is failing, so its state here may not be the store's.
            packedSnapshotRequests.remove(SnapshotRequestKey(peer: peer, requestID: requestID))
            snapshotService.sendError(
                to: peer.bytes, requestID: requestID, code: .storageUnavailable,
                "board \(board) cannot be served here now: this hub cannot reach the board store (or renew its lease); ask again, or another hub", owner: nil)
            return
        }
        let key = SnapshotJobKey(peer: peer, requestID: requestID)
        let packed = packedSnapshotRequests.remove(SnapshotRequestKey(peer: peer, requestID: requestID)) != nil
        guard snapshotsEncoding[key] == nil else {
            snapshotService.sendError(
                to: peer.bytes, requestID: requestID, code: .rateLimited, "request \(requestID) is still being answered: give each request its own id")
            return
        }
        guard snapshotsEncoding.count < Self.maxSnapshotsEncoding, let snapshotEncoder else {
            snapshotService.sendError(
                to: peer.bytes, requestID: requestID, code: .rateLimited,
                "this hub is encoding \(Self.maxSnapshotsEncoding) snapshots already: ask again shortly")
            return
        }
        snapshotsEncoding[key] = SnapshotProgress(requester: snapshotReaders.withLock { $0.takeRequester(peer) })
        snapshotEncoder.post(
            SnapshotEncoderThread.Job(
                key: key, board: board, state: state, digest: digest,
                samplesPerChunk: configuration.sockets.snapshotSamplesPerChunk, packedSamples: packed))
    }

    /// A chunk the encoder wrote: sent, unless its requester stopped reading
    /// (a full queue: the rest of that snapshot is dropped and its next
    /// requests refused for a while) or, at the first chunk, its owner has
    /// too much unread by now (requests admitted in one turn are encoded later).
    func snapshotEncoded(_ chunk: EncodedSnapshotChunk) {
        guard var progress = snapshotsEncoding[chunk.key] else { return }
        let peer = chunk.key.peer
        if progress.chunks == 0, let requester = progress.requester, !snapshotReaders.withLock({ $0.admits(requester) }) {
            progress.abandoned = true
            snapshotService.sendError(
                to: peer.bytes, requestID: chunk.key.requestID, code: .rateLimited,
                "your earlier snapshots are still unread: read them, or ask again later")
        }
        progress.chunks += 1
        if !progress.abandoned && !chunk.bytes.isEmpty {
            if snapshotService.sendChunk(chunk.bytes, to: peer.bytes) {
                if let requester = progress.requester {
                    let (bytes, now) = (chunk.bytes.count, clock.now)
                    snapshotReaders.withLock { $0.sent(to: requester, bytes: bytes, now: now) }
                }
            } else {
                progress.abandoned = true
                if notReading.count >= 4096 { notReading = notReading.filter { clock.now - $0.value < Self.notReadingPenalty } }
                notReading[peer] = clock.now
            }
        }
        snapshotsEncoding[chunk.key] = chunk.last ? nil : progress
    }

    func drainSnapshotRequests() throws(ZMQError) {
        for _ in 0..<configuration.sockets.maxMessagesPerTurn {
            guard let (peer, user, decoded, descriptor, address) = try snapshotService.next() else { return }
            // Snapshot memory is bounded per owner and in all: not while its earlier snapshots lie unread.
            let owner = authenticated ? user : nil
            guard snapshotReaders.withLock({ $0.admit(PeerID(peer), descriptor: descriptor, user: owner, address: address) }) else {
                let requestID = (try? decoded.get())?.requestID ?? 0
                snapshotService.sendError(
                    to: peer, requestID: requestID, code: .rateLimited, "your earlier snapshots are still unread: read them, or ask again later")
                continue
            }
            if let since = notReading[PeerID(peer)] {
                if clock.now - since < Self.notReadingPenalty {
                    snapshotService.sendError(
                        to: peer, requestID: 0, code: .rateLimited, "your previous snapshot was not read: no snapshot for 10 s")
                    continue
                }
                notReading[PeerID(peer)] = nil
            }
            switch decoded {
            case .success(let request) where request.listBoards:
                handle(
                    .boardListRequested(
                        by: PeerID(peer), user: authenticated ? user.map { UserNamespace($0) } : nil, prefix: request.board,
                        after: request.after, limit: Int(request.limit), requestID: request.requestID,
                        onBehalf: OnBehalf(actAs: request.actAs, token: request.token), address: address))
            case .success(let request):
                if request.packedSamples {
                    // Bounded: requests refused or never answered would otherwise pile up (forgetting one only costs v1).
                    if packedSnapshotRequests.count >= 4096 { packedSnapshotRequests.removeAll() }
                    packedSnapshotRequests.insert(SnapshotRequestKey(peer: PeerID(peer), requestID: request.requestID))
                }
                handle(
                    .snapshotRequested(
                        by: PeerID(peer), user: authenticated ? user.map { UserNamespace($0) } : nil, board: request.board,
                        requestID: request.requestID, onBehalf: OnBehalf(actAs: request.actAs, token: request.token), address: address))
            case .failure:
                snapshotService.sendError(to: peer, requestID: 0, code: .malformed, "not a SnapshotRequest")
            }
        }
    }
}
