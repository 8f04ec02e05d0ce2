import TouchSyncAccess
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncWire

/// Keeps every observation the core reports.
public final class RecordingObserver: HubObserver {
    public private(set) var observations: [HubObservation] = []
    public func observe(_ observation: HubObservation) { observations.append(observation) }
}

/// A `HubCore` driven by hand: a manual clock (an instant that only moves
/// when the test says), every action it returns recorded, and a replica fed
/// from its publications exactly as a subscriber would be. No sockets.
public final class CoreHarness {
    public var core: HubCore
    public let start: ContinuousClock.Instant
    public private(set) var now: ContinuousClock.Instant
    /// Every action, in order, since the last `take()`.
    public private(set) var actions: [HubAction] = []
    /// Replicas of every board, fed from published batches.
    public private(set) var replicas: [String: BoardState] = [:]
    /// Replicas that follow the boards' v2 topics, from a copy of the v1 replica when they subscribe (their snapshot).
    public private(set) var replicasV2: [String: BoardState] = [:]
    /// Replicas that follow the boards' streams without predictions (their snapshot's tails removed).
    public private(set) var replicasWithoutPredictions: [String: BoardState] = [:]
    public private(set) var batches: [String: [UInt64]] = [:]
    /// What the core reported for the logs.
    public let observer = RecordingObserver()

    public init(_ configure: (inout HubConfiguration) -> Void = { _ in }, recovered: [RecoveredBoard] = [], access: AccessList? = nil) {
        var configuration = HubConfiguration()
        configure(&configuration)
        start = ContinuousClock.now
        now = start
        core = HubCore(
            configuration: configuration, recovered: recovered, now: start, wallClockMicroseconds: 1_700_000_000_000_000,
            observer: observer, access: access)
        for board in recovered { replicas[board.name] = board.state }
    }

    /// Moves the manual clock on.
    public func advance(_ duration: Duration) { now += duration }
    public func advance(to instant: ContinuousClock.Instant) { now = instant }

    /// Handles `event` now; records and returns its actions (replicas follow publications).
    @discardableResult
    public func send(_ event: HubEvent) -> [HubAction] {
        let produced = core.handle(event, now: now)
        for action in produced {
            guard case .publish(let publication) = action else { continue }
            guard let message = try? WireCodec.decode(Touchsync_V1_PublishMessage.self, from: publication.bytes) else {
                fatalError("the core published bytes that are not a PublishMessage")
            }
            if case .batch(let batch) = message.body {
                // Each stream's replicas (v1, v2, v2 without predictions) follow their own topic.
                let stream = PublishStream(rawValue: publication.topic.last ?? 0) ?? .v1
                if stream == .v1 { batches[publication.board, default: []].append(batch.sequence) }
                do {
                    switch stream {
                    case .v1: try replicas[publication.board, default: BoardState()].apply(batch)
                    case .v2: try replicasV2[publication.board, default: BoardState()].apply(batch)
                    case .v2WithoutPredictions: try replicasWithoutPredictions[publication.board, default: BoardState()].apply(batch)
                    }
                } catch {
                    fatalError("a \(stream) replica refused batch \(batch.sequence) of \(publication.board): \(error)")
                }
            }
        }
        // A subscriber starts from a snapshot: a v2 replica when it first subscribes, a v1 one
        // when the v1 stream (re)starts (a board only v2 subscribers watched was not encoded in v1).
        if case .subscribed(let topic, _) = event {
            if let (board, stream) = PublishStream.parse(topic: topic) {
                let state = core.board(board) ?? BoardState()
                switch stream {
                case .v1: if replicas[board]?.sequence ?? 0 != state.sequence { replicas[board] = state }
                case .v2: if replicasV2[board] == nil { replicasV2[board] = state }
                case .v2WithoutPredictions:
                    if replicasWithoutPredictions[board] == nil {
                        var lean = state
                        lean.removePredictions()  // as `ReplicaSync` loads its snapshot
                        replicasWithoutPredictions[board] = lean
                    }
                }
            } else {
                // A prefix: any board's v1 stream may restart.
                for board in Set(replicas.keys).union(replicasV2.keys) {
                    if let state = core.board(board), replicas[board]?.sequence ?? 0 != state.sequence { replicas[board] = state }
                }
            }
        }
        actions += produced
        return produced
    }

    /// `bytes`: the message's size on the wire, as the transport reports it (the byte quota pays for it).
    public func message(_ peer: Peer, _ request: AgentRequest, bytes: Int = 100) -> [HubAction] {
        send(.agentMessage(from: peer, request, bytes: bytes))
    }

    @discardableResult
    public func hello(_ peer: Peer, board: String, resumeAfter: UInt64 = 0, session: String = "session-1") -> AgentWelcome? {
        let replies = send(
            .agentMessage(from: peer, .hello(AgentHello(board: board, resumeAfter: resumeAfter, sessionID: Array(session.utf8))), bytes: 40))
        for case .reply(_, .welcome(let welcome)) in replies { return welcome }
        return nil
    }

    /// Ends a turn: what the loop does after each wake-up.
    @discardableResult
    public func endTurn(inputWaiting: Bool = false) -> [HubAction] { send(.turnEnded(inputWaiting: inputWaiting)) }

    /// Takes the recorded actions.
    public func take() -> [HubAction] {
        defer { actions.removeAll() }
        return actions
    }
}

extension [HubAction] {
    public func replies(to peer: Peer) -> [HubReply] {
        compactMap { action in
            guard case .reply(let to, let reply) = action, to == peer.id else { return nil }
            return reply
        }
    }

    public func acks(to peer: Peer) -> [UInt64] {
        replies(to: peer).compactMap { if case .ack(let through) = $0 { through } else { nil } }
    }

    public func errors(to peer: Peer) -> [HubRefusal] {
        replies(to: peer).compactMap { if case .error(let refusal) = $0 { refusal } else { nil } }
    }

    public var publications: [Publication] {
        compactMap { if case .publish(let publication) = $0 { publication } else { nil } }
    }

    /// The publications that carry a batch (not heartbeats).
    public var batchPublications: [Publication] {
        publications.filter { if case .batch = $0.kind { true } else { false } }
    }

    public var batchSequences: [UInt64] {
        publications.compactMap { if case .batch(let sequence) = $0.kind { sequence } else { nil } }
    }

    public var heartbeats: [(board: String, sequence: UInt64, digest: BoardDigest, silent: [String])] {
        publications.compactMap { publication in
            guard case .heartbeat(let sequence, let digest) = publication.kind,
                let message = try? WireCodec.decode(Touchsync_V1_PublishMessage.self, from: publication.bytes)
            else { return nil }
            return (publication.board, sequence, digest, message.heartbeat.silentUsers)
        }
    }

    public var journalAppends: [JournalAppend] {
        compactMap { if case .appendToJournal(let append) = $0 { append } else { nil } }
    }

    public var journalSyncs: [UInt64] {
        compactMap { if case .syncJournal(let through) = $0 { through } else { nil } }
    }
}

public func peer(_ name: String) -> Peer { Peer(routingID: Array(name.utf8)) }

public func began(_ touch: UInt64, x: Int32 = 0, t: Int64 = 0) -> NumberedRequest {
    .frame(TouchFrame(changes: [TouchChange(touch: TouchID(touch), phase: .began, samples: [Sample(x: x, y: 0, time: t)])]))
}

public func moved(_ touch: UInt64, x: Int32, t: Int64) -> NumberedRequest {
    .frame(TouchFrame(changes: [TouchChange(touch: TouchID(touch), phase: .moved, samples: [Sample(x: x, y: 0, time: t)])]))
}

public func ended(_ touch: UInt64, x: Int32, t: Int64) -> NumberedRequest {
    .frame(TouchFrame(changes: [TouchChange(touch: TouchID(touch), phase: .ended, samples: [Sample(x: x, y: 0, time: t)])]))
}
