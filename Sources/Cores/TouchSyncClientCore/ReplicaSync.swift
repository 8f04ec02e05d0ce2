import TouchSyncCore
import TouchSyncWire

/// The subscriber side of the Clone pattern for one board, without I/O:
/// ask for a snapshot, keep the live batches that arrive meanwhile, load the
/// chunks and check their digest, then apply batches in sequence order;
/// heartbeats check the replica's sequence and digest; anything wrong asks
/// for a new snapshot. Time is an argument. The transport (a SUB and a
/// DEALER for `BoardSubscriber`, the relay's upstream sockets) decodes what
/// it receives, calls these methods and carries out the actions returned.
public struct ReplicaSync: Sendable {
    public enum Phase: Sendable {
        /// Waiting for snapshot `request`: its chunks so far, and the batches received meanwhile.
        case syncing(request: UInt64, chunks: [SnapshotChunkContents], queued: [Touchsync_V1_DiffBatch], deadline: ContinuousClock.Instant)
        case live(BoardState)
    }

    public enum Action: Sendable, Equatable {
        /// Send `SnapshotRequest{board, request_id: requestID}`.
        case requestSnapshot(requestID: UInt64)
        /// The replica was given up (the reason says why); a snapshot is asked for.
        case resyncing(reason: String)
        /// The replica is loaded from a snapshot: `state` at `sequence`; `digest` is the snapshot's (with predictions).
        case synced(BoardState, digest: BoardDigest, chunks: Int)
        /// A live batch was applied.
        case applied(DiffBatch)
        /// A heartbeat while live; at the replica's own sequence, whether its digest agrees (nil otherwise).
        case heartbeat(sequence: UInt64, agrees: Bool?, silentUsers: [String])
        /// Nothing heard from the hub for the silence time-out.
        case silent
        /// The hub will never serve this board here (FORBIDDEN, WRONG_HUB).
        case failed(String)
        /// Another hub serves the board (WRONG_HUB naming it): connect the
        /// publish and snapshot sockets there instead; the snapshot request
        /// that follows goes to it.
        case redirect(publish: String, snapshot: String, hub: String)
    }

    /// Redirects followed without a snapshot before a WRONG_HUB is final (hubs disagreeing).
    /// Only with one hub given: a sync given several keeps going round them.
    public static let maxRedirects = 8
    private var redirects = 0

    /// A hub the board can be followed on: where its stream and snapshots are.
    public struct Hub: Sendable, Hashable {
        public var publish: String
        public var snapshot: String
        public var name: String
        public init(publish: String, snapshot: String, name: String = "") {
            self.publish = publish
            self.snapshot = snapshot
            self.name = name.isEmpty ? publish : name
        }
    }

    /// The hubs known to serve boards (issue 39: a board moves when its hub
    /// dies): those given, then those a WRONG_HUB named. With two or more,
    /// the sync follows the board: when the hub followed falls silent, or a
    /// snapshot does not come, or it says WRONG_HUB without naming the
    /// owner, the next one is asked (a `redirect`), and a WRONG_HUB naming
    /// the owner goes there. With one or none, the transport's hub is kept.
    public private(set) var hubs: [Hub]
    /// The index in `hubs` of the hub followed now.
    public private(set) var followed = 0
    private var following: Bool { hubs.count >= 2 }

    public let board: String
    /// Whether the replica keeps predicted tails (its stream carries them).
    /// False for a stream without predictions: a loaded snapshot's tails are
    /// removed after its digest is checked, and heartbeats are checked
    /// against `digest_without_predictions`. Set it before the snapshot is
    /// asked for when the stream changes (a fall-back to v1 sets it true).
    public var predictions: Bool = true
    public var snapshotTimeout: Duration
    public var silenceTimeout: Duration
    public private(set) var phase: Phase {
        didSet { digestChecked = nil }
    }
    /// The replica's digest as last computed, at its sequence: a heartbeat at
    /// an unchanged replica's sequence (an idle board's, every second) reads
    /// it instead of walking the whole board again, which cost every
    /// subscriber of a large board its size in work each second. Any change
    /// of `phase` forgets it.
    private var digestChecked: (sequence: UInt64, digest: BoardDigest)? = nil
    /// Whole-board digest walks done for heartbeats (what the cache saves; for tests).
    package private(set) var heartbeatDigestWalks = 0
    private var nextRequest: UInt64 = 1
    /// The hub (its index in `hubs`) left for its silence, and when: a
    /// WRONG_HUB naming it is not followed and the round of hubs passes it
    /// over for a while, as an agent does (`SilentHub`).
    private var silentHub: SilentHub<Int>? = nil
    /// How soon the next hub is asked after a WRONG_HUB naming the silent hub
    /// (the others may know the new owner a renewal later).
    public static let ownerSilentRetry: Duration = .milliseconds(200)
    /// A snapshot request refused RATE_LIMITED is asked again of the same
    /// hub after this (the hub's allowances count per second), plus up to
    /// half a second that depends on the board, so that the boards of one
    /// client refused together do not come back together; it used to wait
    /// the whole snapshot time-out (2 s for a gateway's boards).
    public static let rateLimitedRetry: Duration = .seconds(1)
    /// When a snapshot request refused RATE_LIMITED is asked again (same hub).
    private(set) var retryRefusedAt: ContinuousClock.Instant? = nil
    private(set) var lastHeard: ContinuousClock.Instant
    private(set) var reportedSilence = false
    /// For a moment after a snapshot's load (until the publish stream shows
    /// its sequence, or a second has passed), a heartbeat behind the replica
    /// may be one queued on the publish connection before the snapshot, which
    /// can overtake it on its own connection: stale, not the hub going back.
    private var staleHeartbeatsUntil: ContinuousClock.Instant? = nil

    /// Starts syncing: the first action asks for a snapshot.
    /// `hubs`: the hubs to follow the board over (the transport connects to
    /// the first); none or one keeps the transport's hub (see `hubs`).
    public static func start(
        board: String, predictions: Bool = true, snapshotTimeout: Duration = .seconds(2), silenceTimeout: Duration = .seconds(3),
        hubs: [Hub] = [], now: ContinuousClock.Instant
    ) -> (ReplicaSync, [Action]) {
        var sync = ReplicaSync(board: board, snapshotTimeout: snapshotTimeout, silenceTimeout: silenceTimeout, lastHeard: now)
        var unique: [Hub] = []
        for hub in hubs where !unique.contains(where: { $0.publish == hub.publish && $0.snapshot == hub.snapshot }) { unique.append(hub) }
        sync.hubs = unique
        sync.predictions = predictions
        var actions: [Action] = []
        sync.requestSnapshot(reason: nil, now: now, into: &actions)
        return (sync, actions)
    }

    private init(board: String, snapshotTimeout: Duration, silenceTimeout: Duration, lastHeard: ContinuousClock.Instant) {
        self.board = board
        self.snapshotTimeout = snapshotTimeout
        self.silenceTimeout = silenceTimeout
        self.lastHeard = lastHeard
        phase = .live(BoardState())
        hubs = []
    }

    /// The replica, while live.
    public var replica: BoardState? {
        if case .live(let state) = phase { return state }
        return nil
    }

    public var isLive: Bool { replica != nil }

    // MARK: Events

    /// A snapshot chunk arrived for `requestID`.
    public mutating func chunk(_ chunk: SnapshotChunkContents, for requestID: UInt64, now: ContinuousClock.Instant) -> [Action] {
        guard case .syncing(let request, var chunks, let queued, let deadline) = phase, requestID == request else {
            return []  // a reply to a request given up on
        }
        // Each index once (a transport may repeat or reorder; ZeroMQ over TCP does neither).
        guard !chunks.contains(where: { $0.index == chunk.index }) else { return [] }
        chunks.append(chunk)
        guard chunks.count == Int(chunk.count) else {
            phase = .syncing(request: request, chunks: chunks, queued: queued, deadline: deadline)
            return []
        }
        chunks.sort { $0.index < $1.index }
        var actions: [Action] = []
        load(chunks, queued: queued, now: now, into: &actions)
        return actions
    }

    /// The hub refused snapshot `requestID`; a WRONG_HUB naming the hub
    /// that serves the board (`owner`) moves the replica there.
    public mutating func snapshotRefused(
        _ requestID: UInt64, code: ErrorCode?, message: String, owner: Touchsync_V1_HubAddress? = nil, now: ContinuousClock.Instant
    ) -> [Action] {
        guard case .syncing(let request, _, _, _) = phase, requestID == request else { return [] }
        if following, code == .wrongHub {
            var actions: [Action] = []
            if let owner, !owner.publish.isEmpty, !owner.snapshot.isEmpty {
                let hub = Hub(publish: owner.publish, snapshot: owner.snapshot, name: owner.name)
                let known = hubs.firstIndex(where: { $0.publish == hub.publish && $0.snapshot == hub.snapshot })
                if let known, wentSilentLately(known, now: now) {
                    // The owner named went silent on us: the next hub shortly, not back there.
                    actions.append(.resyncing(reason: "hub \(hubs[followed].name) names hub \(hub.name), which went silent: asking the next hub shortly"))
                    phase = .syncing(request: request, chunks: [], queued: [], deadline: now + Self.ownerSilentRetry)
                    return actions
                }
                if let known {
                    followed = known
                } else {
                    hubs.append(hub)
                    followed = hubs.count - 1
                }
                actions.append(.redirect(publish: hub.publish, snapshot: hub.snapshot, hub: hubs[followed].name))
                requestSnapshot(reason: "board served by hub \(hubs[followed].name) (WRONG_HUB)", now: now, into: &actions)
            } else {
                moveOn(reason: "hub \(hubs[followed].name) does not hold the board (WRONG_HUB)", now: now, into: &actions)
            }
            return actions
        }
        if code == .wrongHub, let owner, !owner.publish.isEmpty, !owner.snapshot.isEmpty, redirects < Self.maxRedirects {
            redirects += 1
            var actions: [Action] = [.redirect(publish: owner.publish, snapshot: owner.snapshot, hub: owner.name)]
            requestSnapshot(reason: "board served by hub \(owner.name) (WRONG_HUB)", now: now, into: &actions)
            return actions
        }
        switch code {
        case .forbidden: return [.failed("the hub refused this board (FORBIDDEN): \(message)")]
        case .wrongHub: return [.failed("this hub does not hold the board (WRONG_HUB): \(message)")]
        case .rateLimited:
            retryRefusedAt = now + Self.rateLimitedRetryDelay(board: board)
            return []
        default: return []  // retried at the snapshot time-out (a busy hub)
        }
    }

    /// A snapshot reply that could not be used (undecodable).
    public mutating func unusableSnapshot(_ reason: String, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        requestSnapshot(reason: "unusable snapshot: \(reason)", now: now, into: &actions)
        return actions
    }

    /// Something arrived from the publish stream (for the silence time-out).
    public mutating func heard(now: ContinuousClock.Instant) {
        lastHeard = now
        reportedSilence = false
    }

    /// A published batch, decoded. While syncing it is kept for after the snapshot.
    public mutating func batch(_ batch: Touchsync_V1_DiffBatch, now: ContinuousClock.Instant) -> [Action] {
        heard(now: now)
        switch phase {
        case .syncing(let request, let chunks, var queued, let deadline):
            queued.append(batch)
            phase = .syncing(request: request, chunks: chunks, queued: queued, deadline: deadline)
            return []
        case .live:
            var actions: [Action] = []
            applyLive(sequence: batch.sequence, now: now, into: &actions) { state throws(DiffStreamError) in try state.apply(batch) }
            return actions
        }
    }

    /// A published batch applied in place while live (the hot path: `apply`
    /// reads the received bytes into the replica). Returns nil while syncing:
    /// decode the batch and pass it to `batch(_:now:)` instead.
    public mutating func liveBatch(
        sequence: UInt64, now: ContinuousClock.Instant, _ apply: (inout BoardState) throws(DiffStreamError) -> DiffBatch
    ) -> [Action]? {
        guard case .live = phase else { return nil }
        heard(now: now)
        var actions: [Action] = []
        applyLive(sequence: sequence, now: now, into: &actions, apply)
        return actions
    }

    /// A message from the hub that is not a protocol message: the stream cannot be trusted.
    public mutating func malformed(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        requestSnapshot(reason: "malformed message from the hub", now: now, into: &actions)
        return actions
    }

    /// A heartbeat: the hub's sequence and digest for the board.
    public mutating func heartbeat(_ heartbeat: Touchsync_V1_BoardHeartbeat, now: ContinuousClock.Instant) -> [Action] {
        heard(now: now)
        guard case .live(let state) = phase else { return [] }
        var actions: [Action] = []
        let expected = predictions ? heartbeat.digest : heartbeat.digestWithoutPredictions
        let agrees = heartbeat.sequence == state.sequence ? digest(of: state).rawValue == expected : nil
        actions.append(.heartbeat(sequence: heartbeat.sequence, agrees: agrees, silentUsers: heartbeat.silentUsers))
        if heartbeat.sequence >= state.sequence { staleHeartbeatsUntil = nil }
        if heartbeat.sequence > state.sequence {
            // Batches and heartbeats leave the hub in order on one socket:
            // a heartbeat ahead of us means batches were dropped on the way.
            requestSnapshot(reason: "heartbeat at \(heartbeat.sequence), replica at \(state.sequence)", now: now, into: &actions)
        } else if heartbeat.sequence == state.sequence {
            if agrees == false { requestSnapshot(reason: "digest differs from the hub's at \(state.sequence)", now: now, into: &actions) }
        } else if let until = staleHeartbeatsUntil, now < until {
            // queued before the snapshot we loaded
        } else {
            // Behind what we applied: the hub restarted without some batches
            // we saw (lost with unsynced journal writes). Its board is the truth.
            requestSnapshot(
                reason: "the hub is at \(heartbeat.sequence), behind the replica at \(state.sequence): it went back", now: now,
                into: &actions)
        }
        return actions
    }

    /// Time passed: a snapshot that did not come is asked for again; silence is reported once.
    /// Following several hubs, a snapshot that does not come or a silent hub sends the sync to the next one.
    public mutating func tick(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        if let retry = retryRefusedAt, now >= retry, case .syncing = phase {
            requestSnapshot(reason: "the hub limited snapshot requests (RATE_LIMITED): asking again", now: now, into: &actions)
        } else if case .syncing(_, _, _, let deadline) = phase, now >= deadline {
            if following {
                moveOn(reason: "no complete snapshot from hub \(hubs[followed].name) within \(snapshotTimeout)", now: now, into: &actions)
            } else {
                requestSnapshot(reason: "no complete snapshot within \(snapshotTimeout)", now: now, into: &actions)
            }
        }
        if !reportedSilence && now - lastHeard >= silenceTimeout {
            reportedSilence = true
            actions.append(.silent)
            if following, isLive {
                silentHub = SilentHub(key: followed, since: now)
                moveOn(reason: "nothing from hub \(hubs[followed].name) for \(silenceTimeout)", now: now, into: &actions)
            }
        }
        return actions
    }

    private func wentSilentLately(_ index: Int, now: ContinuousClock.Instant) -> Bool {
        silentHub?.covers(index, now: now, silenceTimeout: silenceTimeout) == true
    }

    /// The next known hub: the transport connects there, and the snapshot request that follows goes to it.
    private mutating func moveOn(reason: String, now: ContinuousClock.Instant, into actions: inout [Action]) {
        followed = (followed + 1) % hubs.count
        if wentSilentLately(followed, now: now) { followed = (followed + 1) % hubs.count }  // two or more hubs: another
        let hub = hubs[followed]
        actions.append(.redirect(publish: hub.publish, snapshot: hub.snapshot, hub: hub.name))
        requestSnapshot(reason: "\(reason): asking hub \(hub.name)", now: now, into: &actions)
    }

    /// Asks for a new snapshot (a gap the transport saw, a user's request).
    public mutating func resync(reason: String, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        requestSnapshot(reason: reason, now: now, into: &actions)
        return actions
    }

    // MARK: Rules

    /// How long after a RATE_LIMITED refusal `board`'s snapshot is asked
    /// again: `rateLimitedRetry` plus up to 499 ms fixed by the board's name
    /// (FNV-1a), which spreads the retries of boards refused together.
    public static func rateLimitedRetryDelay(board: String) -> Duration {
        let spread = board.utf8.reduce(0xCBF2_9CE4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
        return rateLimitedRetry + .milliseconds(Int(spread % 500))
    }

    /// The live replica's digest, walked only when the replica changed since the last walk.
    private mutating func digest(of state: BoardState) -> BoardDigest {
        if let checked = digestChecked, checked.sequence == state.sequence { return checked.digest }
        let digest = state.digest
        heartbeatDigestWalks += 1
        digestChecked = (state.sequence, digest)
        return digest
    }

    private mutating func requestSnapshot(reason: String?, now: ContinuousClock.Instant, into actions: inout [Action]) {
        if let reason { actions.append(.resyncing(reason: reason)) }
        let request = nextRequest
        nextRequest += 1
        retryRefusedAt = nil
        phase = .syncing(request: request, chunks: [], queued: [], deadline: now + snapshotTimeout)
        actions.append(.requestSnapshot(requestID: request))
    }

    private mutating func load(
        _ chunks: [SnapshotChunkContents], queued: [Touchsync_V1_DiffBatch], now: ContinuousClock.Instant, into actions: inout [Action]
    ) {
        do {
            let (snapshot, digest) = try SnapshotCodec.assemble(chunks)
            var state = try BoardState(snapshot: snapshot, packing: false)
            redirects = 0
            guard state.digest == digest else {
                requestSnapshot(reason: "the snapshot's digest does not match its strokes", now: now, into: &actions)
                return
            }
            if !predictions { state.removePredictions() }  // checked above with them: the snapshot's digest covers them
            state.packAcceptedStrokes()
            staleHeartbeatsUntil = queued.contains { $0.sequence >= state.sequence } ? nil : now + .seconds(1)
            phase = .live(state)
            if predictions { digestChecked = (state.sequence, digest) }  // just checked against these very strokes
            actions.append(.synced(state, digest: digest, chunks: chunks.count))
            for batch in queued.sorted(by: { $0.sequence < $1.sequence }) where batch.sequence > state.sequence {
                guard case .live = phase else { return }
                applyLive(sequence: batch.sequence, now: now, into: &actions) { state throws(DiffStreamError) in try state.apply(batch) }
            }
        } catch {
            requestSnapshot(reason: "unusable snapshot: \(error)", now: now, into: &actions)
        }
    }

    private mutating func applyLive(
        sequence: UInt64, now: ContinuousClock.Instant, into actions: inout [Action],
        _ apply: (inout BoardState) throws(DiffStreamError) -> DiffBatch
    ) {
        guard case .live(var state) = phase else { return }
        if sequence >= state.sequence { staleHeartbeatsUntil = nil }
        if sequence <= state.sequence { return }  // already in the snapshot
        phase = .live(BoardState())  // let `state` be uniquely referenced while it changes
        do {
            let applied = try apply(&state)
            phase = .live(state)
            actions.append(.applied(applied))
        } catch {
            phase = .live(state)
            requestSnapshot(reason: "\(error)", now: now, into: &actions)
        }
    }
}
