import HubCoreHarness
import Testing
import TouchSyncClientCore
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncSimulation
import TouchSyncWire

/// A board's v2 stream without predictions (topic: the name and 0x02): the
/// v2 batches with every predicted tail left out, published while someone
/// subscribes to it; heartbeats on it carry the digest its replicas hold.
@Suite("Hub core: the stream without predictions")
struct StreamWithoutPredictionsTests {
    /// Feeds a simulated two-user session (predictions on every event) to `hub`, ending a turn every `framesPerTurn` frames.
    static func draw(on hub: CoreHarness, frames: Int, framesPerTurn: Int = 3, seed: UInt64 = 26, afterTurn: () -> Void = {}) {
        var profile = SimulationProfile()
        profile.users = 2
        profile.fingersPerUser = 2
        profile.predicted = 1...3
        profile.cancelRate = 0.05
        profile.clearRate = 0.01
        var simulator = SessionSimulator(seed: seed, profile: profile)
        for user in simulator.users { hub.hello(Peer(routingID: Array(user.rawValue.utf8)), board: "b", session: user.rawValue) }
        var numbers: [UserNamespace: UInt64] = [:]
        for index in 0..<frames {
            let (user, request): (UserNamespace, NumberedRequest)
            switch simulator.next() {
            case .frame(let who, let frame, _): (user, request) = (who, .frame(frame))
            case .clear(let who, let scope): (user, request) = (who, .clear(scope))
            }
            numbers[user, default: 0] += 1
            _ = hub.message(Peer(routingID: Array(user.rawValue.utf8)), .numbered(sequence: numbers[user]!, request))
            if index % framesPerTurn == framesPerTurn - 1 {
                hub.advance(.milliseconds(10))
                _ = hub.endTurn()
                afterTurn()
            }
        }
        _ = hub.endTurn()
        afterTurn()
    }

    static func topic(_ stream: PublishStream) -> [UInt8] { stream.topic(board: "b") }

    /// Every batch of the session on the three topics: the stream without
    /// predictions keeps the replica at the board minus its tails, turn after
    /// turn, in fewer bytes than v2; v1 and v2 are what they would be without it.
    @Test func itsReplicaIsTheBoardWithoutPredictions() throws {
        let hub = CoreHarness { $0.timing.heartbeatInterval = .seconds(3600) }
        for stream in PublishStream.allCases { _ = hub.send(.subscribed(topic: Self.topic(stream), by: nil)) }
        var turnsWithTails = 0
        Self.draw(on: hub, frames: 400) {
            let board = hub.core.board("b")!
            if board.orderedActiveStrokes.contains(where: { !$0.predicted.isEmpty }) { turnsWithTails += 1 }
            #expect(hub.replicasWithoutPredictions["b"]?.digest == board.digest(includingPredictions: false))
            #expect(hub.replicasWithoutPredictions["b"]?.sequence == board.sequence)
            #expect(hub.replicasV2["b"] == board && hub.replicas["b"] == board)
        }
        #expect(turnsWithTails > 50, "the session has predictions to leave out (\(turnsWithTails) turns)")
        #expect(hub.replicasWithoutPredictions["b"]!.orderedActiveStrokes.allSatisfy { $0.predicted.isEmpty })

        // Each batch is on every topic with the same sequence; none is larger without tails, and all of them together are smaller.
        var bytes: [PublishStream: Int] = [:]
        var sequences: [PublishStream: [UInt64]] = [:]
        for publication in hub.actions.batchPublications {
            let stream = try #require(PublishStream.parse(topic: publication.topic)?.stream)
            bytes[stream, default: 0] += publication.bytes.count
            if case .batch(let sequence) = publication.kind { sequences[stream, default: []].append(sequence) }
        }
        #expect(sequences[.v1] == sequences[.v2] && sequences[.v2] == sequences[.v2WithoutPredictions])
        #expect(bytes[.v2WithoutPredictions]! < bytes[.v2]!, "\(bytes)")
        let v2 = hub.actions.batchPublications.filter { $0.topic == Self.topic(.v2) }
        let lean = hub.actions.batchPublications.filter { $0.topic == Self.topic(.v2WithoutPredictions) }
        for (with, without) in zip(v2, lean) { #expect(without.bytes.count <= with.bytes.count) }

        // The same session on a hub with a v1 and a v2 subscriber only: the same bytes on those topics.
        let plain = CoreHarness { $0.timing.heartbeatInterval = .seconds(3600) }
        for stream in [PublishStream.v1, .v2] { _ = plain.send(.subscribed(topic: Self.topic(stream), by: nil)) }
        Self.draw(on: plain, frames: 400)
        for stream in [PublishStream.v1, .v2] {
            #expect(
                plain.actions.batchPublications.filter { $0.topic == Self.topic(stream) }.map(\.bytes)
                    == hub.actions.batchPublications.filter { $0.topic == Self.topic(stream) }.map(\.bytes),
                "\(stream) does not depend on the stream without predictions")
        }
    }

    /// Heartbeats on the stream without predictions carry both digests; on
    /// v1 and v2 they stay as they were (no `digest_without_predictions`).
    @Test func itsHeartbeatsCarryTheDigestItsReplicasHold() throws {
        let hub = CoreHarness { $0.timing.heartbeatInterval = .seconds(1) }
        for stream in PublishStream.allCases { _ = hub.send(.subscribed(topic: Self.topic(stream), by: nil)) }
        Self.draw(on: hub, frames: 61, framesPerTurn: 1)
        let board = hub.core.board("b")!
        #expect(board.orderedActiveStrokes.contains { !$0.predicted.isEmpty }, "a tail to leave out when the heartbeat goes")
        hub.advance(.seconds(2))
        let heartbeats = hub.endTurn().publications.filter { if case .heartbeat = $0.kind { true } else { false } }
        #expect(heartbeats.map(\.topic) == PublishStream.allCases.map(Self.topic))
        for publication in heartbeats {
            let heartbeat = try WireCodec.decode(Touchsync_V1_PublishMessage.self, from: publication.bytes).heartbeat
            #expect(heartbeat.sequence == board.sequence && heartbeat.digest == board.digest.rawValue)
            let lean = publication.topic == Self.topic(.v2WithoutPredictions)
            #expect(heartbeat.digestWithoutPredictions == (lean ? board.digest(includingPredictions: false).rawValue : 0))
        }
        #expect(board.digest(includingPredictions: false) != board.digest)
        #expect(hub.replicasWithoutPredictions["b"]?.digest.rawValue
            == (try WireCodec.decode(Touchsync_V1_PublishMessage.self, from: heartbeats[2].bytes).heartbeat.digestWithoutPredictions))

        // A board nobody drew on: the first heartbeat says sequence 0 with the empty board's digest, twice.
        let answer = hub.send(.subscribed(topic: PublishStream.v2WithoutPredictions.topic(board: "later"), by: nil))
        let empty = try WireCodec.decode(Touchsync_V1_PublishMessage.self, from: try #require(answer.publications.first).bytes).heartbeat
        #expect(empty.sequence == 0 && empty.digest == BoardState.emptyDigest.rawValue)
        #expect(empty.digestWithoutPredictions == BoardState.emptyDigest.rawValue)
    }

    /// A subscriber arriving mid-session starts from the snapshot without its
    /// tails and continues exactly; the last one leaving stops the stream.
    @Test func itStartsAndStopsWithItsSubscribers() {
        let hub = CoreHarness { $0.timing.heartbeatInterval = .seconds(3600) }
        _ = hub.send(.subscribed(topic: Self.topic(.v1), by: nil))
        var turns = 0
        var publishedWhileSubscribed = 0
        Self.draw(on: hub, frames: 300) {
            turns += 1
            if turns == 20 { _ = hub.send(.subscribed(topic: Self.topic(.v2WithoutPredictions), by: nil)) }
            let lean = hub.actions.batchPublications.filter { $0.topic == Self.topic(.v2WithoutPredictions) }
            if turns < 20 { #expect(lean.isEmpty) }
            if (20..<80).contains(turns) {
                #expect(hub.replicasWithoutPredictions["b"]?.digest == hub.core.board("b")!.digest(includingPredictions: false))
                #expect(hub.replicasWithoutPredictions["b"]?.sequence == hub.core.board("b")!.sequence)
            }
            if turns == 80 {
                _ = hub.send(.unsubscribed(topic: Self.topic(.v2WithoutPredictions), by: nil))
                publishedWhileSubscribed = lean.count
            }
            if turns > 80 { #expect(lean.count == publishedWhileSubscribed, "nothing on the topic once its last subscriber left") }
        }
        #expect(turns > 90 && publishedWhileSubscribed > 20, "published while subscribed: \(publishedWhileSubscribed) batches")
        #expect(hub.replicas["b"] == hub.core.board("b"), "v1 went on throughout")
    }

    /// `ReplicaSync` without predictions: the snapshot (tails included) is
    /// checked against its digest, then loses its tails; heartbeats are
    /// checked against `digest_without_predictions`.
    @Test func aReplicaWithoutPredictionsChecksTheirDigest() throws {
        let hub = CoreHarness()
        Self.draw(on: hub, frames: 61, framesPerTurn: 1)
        let board = hub.core.board("b")!
        #expect(board.orderedActiveStrokes.contains { !$0.predicted.isEmpty })
        let start = hub.now
        var (sync, _) = ReplicaSync.start(board: "b", predictions: false, now: start)
        var loaded: [ReplicaSync.Action] = []
        SnapshotCodec.encodeReplies(of: board.snapshot(), board: "b", digest: board.digest, requestID: 1, samplesPerChunk: 1 << 20) { bytes in
            let reply = try! WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: bytes)
            loaded += sync.chunk(try! SnapshotChunkContents(reply.chunk), for: 1, now: start)
            return true
        }
        #expect(loaded.contains { if case .synced = $0 { true } else { false } }, "\(loaded)")
        let replica = try #require(sync.replica)
        #expect(replica.orderedActiveStrokes.allSatisfy { $0.predicted.isEmpty })
        #expect(replica.digest == board.digest(includingPredictions: false))

        var heartbeat = Touchsync_V1_BoardHeartbeat()
        heartbeat.board = "b"
        heartbeat.sequence = board.sequence
        heartbeat.digest = board.digest.rawValue
        heartbeat.digestWithoutPredictions = board.digest(includingPredictions: false).rawValue
        #expect(sync.heartbeat(heartbeat, now: start) == [.heartbeat(sequence: board.sequence, agrees: true, silentUsers: [])])
        heartbeat.digestWithoutPredictions ^= 1
        let wrong = sync.heartbeat(heartbeat, now: start)
        #expect(wrong.contains(.heartbeat(sequence: board.sequence, agrees: false, silentUsers: [])) && !sync.isLive)
    }

    /// The encoder leaves tails out and nothing else: a batch's samples,
    /// amendments and other diffs are v2's.
    @Test func theEncoderLeavesOutTailsOnly() throws {
        let id = StrokeID(1)
        let owner = UserNamespace("u")
        let real = [Sample(x: 64, y: 64, time: 1_000), Sample(x: 128, y: 70, time: 9_333)]
        let tail = [Sample(x: 190, y: 76, time: 17_666)]
        let batch = DiffBatch(
            sequence: 1, hubTime: 5,
            diffs: [
                .began(id, owner: owner, touch: 1, style: StrokeStyle(rgba: 0x6A1B_9AFF, width: 256)), .appended(id, offset: 0, samples: real),
                .predicted(id, samples: tail), .began(StrokeID(2), owner: owner, touch: 2, style: StrokeStyle(rgba: 0x6A1B_9AFF, width: 256)),
                .predicted(StrokeID(2), samples: tail),
            ])
        var with = DiffStreamEncoder(board: "b", stream: .v2)
        var without = DiffStreamEncoder(board: "b", stream: .v2WithoutPredictions)
        var replica = BoardState(), leanReplica = BoardState()
        try replica.apply(with.encode(batch))
        try leanReplica.apply(without.encode(batch))
        #expect(replica.activeStroke(id)?.predicted == tail && replica.activeStroke(StrokeID(2))?.predicted == tail)
        #expect(leanReplica.activeStroke(id)?.predicted == [] && leanReplica.activeStroke(StrokeID(2))?.predicted == [])
        #expect(Array(leanReplica.activeStroke(id)!.samples) == real)
        #expect(leanReplica.digest == replica.digest(includingPredictions: false))
        #expect(with.encodedBytes(DiffBatch(sequence: 2, hubTime: 6, diffs: [])).count > 0)
    }
}
