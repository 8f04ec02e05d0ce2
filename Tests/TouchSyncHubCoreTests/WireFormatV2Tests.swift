import HubCoreHarness
import Testing
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire

/// The hub publishes a board in wire format v2 exactly while someone
/// subscribes to its v2 topic; v1 subscribers see the same bytes either way.
@Suite("Hub core: wire format v2 on its own topic")
struct WireFormatV2Tests {
    @Test func aV2SubscriberGetsPackedBatchesAndHeartbeatsWhileSubscribed() {
        let hub = CoreHarness { $0.timing.heartbeatInterval = .seconds(1) }
        let pen = peer("pen")
        let v1 = WireFormat.v1.topic(board: "b"), v2 = WireFormat.v2.topic(board: "b")
        _ = hub.send(.subscribed(topic: v1, by: nil))  // a v1 subscriber all along
        hub.hello(pen, board: "b")
        _ = hub.message(pen, .numbered(sequence: 1, began(1)))
        _ = hub.endTurn()
        #expect(hub.actions.publications.allSatisfy { $0.topic == v1 }, "nobody asked for v2: nothing encoded in v2")

        // Subscribing: the v2 stream continues the published state, with a heartbeat at once.
        let subscribed = hub.send(.subscribed(topic: v2, by: nil))
        #expect(subscribed.publications.filter { $0.topic == v2 }.map(\.kind) == [.heartbeat(sequence: 1, digest: hub.core.board("b")!.digest)])
        var sequence = UInt64(1)
        for step in 1...5 {
            _ = hub.message(pen, .numbered(sequence: UInt64(1 + step), moved(1, x: Int32(step * 64), t: Int64(step * 8_333))))
            let turn = hub.endTurn()
            sequence += 1
            let batches = turn.batchPublications
            #expect(batches.map(\.topic) == [v1, v2], "each batch on both topics")
            #expect(batches.map(\.kind) == [.batch(sequence: sequence), .batch(sequence: sequence)])
            #expect(batches[1].bytes.count < batches[0].bytes.count, "v2 is smaller: \(batches.map(\.bytes.count))")
        }
        #expect(hub.replicasV2["b"] == hub.core.board("b"), "the v2 replica follows from its subscription on")
        hub.advance(.seconds(1))
        #expect(hub.endTurn().publications.filter { if case .heartbeat = $0.kind { true } else { false } }.map(\.topic) == [v1, v2])

        // The last v2 subscriber gone: v1 only again.
        _ = hub.send(.subscribed(topic: v2, by: nil))
        _ = hub.send(.unsubscribed(topic: v2, by: nil))
        _ = hub.message(pen, .numbered(sequence: 7, moved(1, x: 9 * 64, t: 9 * 8_333)))
        #expect(hub.endTurn().publications.map(\.topic).contains(v2), "one v2 subscriber is left")
        _ = hub.send(.unsubscribed(topic: v2, by: nil))
        _ = hub.message(pen, .numbered(sequence: 8, moved(1, x: 10 * 64, t: 10 * 8_333)))
        let after = hub.endTurn().publications
        #expect(!after.isEmpty && after.allSatisfy { $0.topic == v1 })
    }

    /// Agents negotiate v2 frames in their hello: the welcome says the
    /// version asked for (1 or 2), anything else is UNSUPPORTED_VERSION in
    /// words; packed frames are applied as their v1 twins are.
    @Test func agentsAreWelcomedInTheVersionTheyAskFor() throws {
        let hub = CoreHarness()
        for version: UInt32 in [1, 2] {
            let replies = hub.send(
                .agentMessage(
                    from: peer("agent-\(version)"),
                    .hello(AgentHello(protocolVersion: version, board: "b", sessionID: Array("s\(version)".utf8))), bytes: 40))
            let welcome = try #require(replies.replies(to: peer("agent-\(version)")).compactMap { if case .welcome(let w) = $0 { w } else { nil } }.first)
            #expect(welcome.protocolVersion == version && HubReply.welcome(welcome).proto.welcome.protocolVersion == version)
        }
        let refused = hub.send(.agentMessage(from: peer("future"), .hello(AgentHello(protocolVersion: 3, board: "b", sessionID: [1])), bytes: 40))
        let refusal = try #require(refused.errors(to: peer("future")).first)
        #expect(refusal.code == .unsupportedVersion && refusal.message == "this hub speaks protocols 1 to 2, not 3")

        // The same frames from a v1 agent and a v2 agent on two boards make the same strokes.
        let frames = [
            TouchFrame(sequence: 1, changes: [TouchChange(touch: 1, phase: .began, samples: [Sample(x: 64, y: 64, time: 1000)], predicted: [Sample(x: 70, y: 64, time: 9000)])]),
            TouchFrame(sequence: 2, changes: [TouchChange(touch: 1, phase: .moved, samples: [Sample(x: 80, y: 70, time: 9000)])]),
            TouchFrame(sequence: 3, changes: [TouchChange(touch: 1, phase: .ended, samples: [Sample(x: 90, y: 75, time: 17000)])]),
        ]
        for (name, format) in [("one", WireFormat.v1), ("two", WireFormat.v2)] {
            let agent = peer("drawer-\(name)")
            hub.hello(agent, board: name, session: name)
            for frame in frames {
                var message = Touchsync_V1_AgentMessage()
                message.sequence = frame.sequence
                message.frame = frame.proto(format)
                let bytes = WireCodec.encode(message)
                _ = bytes.withUnsafeBytes { hub.message(agent, try! AgentRequest.decode($0).get(), bytes: bytes.count) }
            }
            _ = hub.endTurn()
        }
        let one = try #require(hub.core.board("one")), two = try #require(hub.core.board("two"))
        #expect(one.acceptedStrokes.count == 1 && one.sequence == two.sequence)
        #expect(one.acceptedStrokes.map { Array($0.samples) } == two.acceptedStrokes.map { Array($0.samples) })
    }

    /// A v2 subscription to a board nobody drew on is answered with one
    /// heartbeat at sequence 0 (so the subscriber knows the hub speaks v2);
    /// a v1 subscription to it, or a name that is no board name, is not.
    @Test func aV2SubscriptionToABoardNotDrawnOnGetsAnEmptyHeartbeat() throws {
        let hub = CoreHarness()
        let answer = hub.send(.subscribed(topic: WireFormat.v2.topic(board: "later"), by: nil))
        #expect(answer.publications.map(\.kind) == [.heartbeat(sequence: 0, digest: BoardState.emptyDigest)])
        #expect(answer.publications.first?.topic == WireFormat.v2.topic(board: "later"))
        let heartbeat = try WireCodec.decode(Touchsync_V1_PublishMessage.self, from: try #require(answer.publications.first).bytes).heartbeat
        #expect(heartbeat.board == "later" && heartbeat.sequence == 0 && BoardDigest(rawValue: heartbeat.digest).description == "0c8657ae0d7aac18")
        #expect(hub.send(.subscribed(topic: WireFormat.v1.topic(board: "later"), by: nil)).isEmpty)
        #expect(hub.send(.subscribed(topic: Array("bad\u{7}".utf8) + [1], by: nil)).isEmpty)
    }

    /// A board only v2 subscribers watch (no journal) is not encoded in v1;
    /// a v1 subscriber arriving starts the v1 stream again from the
    /// published state, and it continues exactly.
    @Test func aBoardOnlyV2SubscribersWatchIsEncodedInV2Only() {
        let hub = CoreHarness()
        let pen = peer("pen")
        let v1 = WireFormat.v1.topic(board: "b"), v2 = WireFormat.v2.topic(board: "b")
        _ = hub.send(.subscribed(topic: v2, by: nil))
        hub.hello(pen, board: "b")
        _ = hub.message(pen, .numbered(sequence: 1, began(1)))
        for step in 1...4 { _ = hub.message(pen, .numbered(sequence: UInt64(1 + step), moved(1, x: Int32(step * 64), t: Int64(step * 8_333)))) }
        let before = hub.endTurn().batchPublications
        #expect(!before.isEmpty && before.allSatisfy { $0.topic == v2 }, "v2 only: \(before.map(\.topic))")
        #expect(hub.replicasV2["b"] == hub.core.board("b"))

        // A v1 subscriber arrives: what was pending goes out (in v2), then both streams carry on.
        _ = hub.message(pen, .numbered(sequence: 6, moved(1, x: 6 * 64, t: 6 * 8_333)))
        _ = hub.send(.subscribed(topic: v1, by: nil))
        var v1Replica = hub.core.board("b")!  // its snapshot, requested after subscribing
        _ = hub.message(pen, .numbered(sequence: 7, moved(1, x: 7 * 64, t: 7 * 8_333)))
        _ = hub.message(pen, .numbered(sequence: 8, .frame(TouchFrame(changes: [TouchChange(touch: 1, phase: .ended)]))))
        let after = hub.endTurn().batchPublications
        #expect(after.map(\.topic) == [v1, v2])
        for publication in after where publication.topic == v1 {
            let batch = try? WireCodec.decode(Touchsync_V1_PublishMessage.self, from: publication.bytes).batch
            #expect((try? batch.map { try v1Replica.apply($0) }) != nil, "the restarted v1 stream continues the state")
        }
        #expect(v1Replica == hub.core.board("b") && hub.replicasV2["b"] == hub.core.board("b"))

        // The v1 subscriber leaves: v2 only again.
        _ = hub.send(.unsubscribed(topic: v1, by: nil))
        _ = hub.message(pen, .numbered(sequence: 9, began(2)))
        #expect(hub.endTurn().batchPublications.map(\.topic) == [v2])
    }

    /// A prefix subscription (a relay following `*` or `team-*`) may want
    /// any board in v1: a v2-only board is encoded in v1 again at once.
    @Test func aPrefixSubscriptionKeepsV1() {
        let hub = CoreHarness()
        let pen = peer("pen")
        let v1 = WireFormat.v1.topic(board: "team-a"), v2 = WireFormat.v2.topic(board: "team-a")
        _ = hub.send(.subscribed(topic: v2, by: nil))
        hub.hello(pen, board: "team-a")
        _ = hub.message(pen, .numbered(sequence: 1, began(1)))
        #expect(hub.endTurn().batchPublications.map(\.topic) == [v2])
        _ = hub.send(.subscribed(topic: Array("team-".utf8), by: nil))
        _ = hub.message(pen, .numbered(sequence: 2, moved(1, x: 64, t: 8_333)))
        #expect(hub.endTurn().batchPublications.map(\.topic) == [v1, v2])
        // And a board created while the prefix subscription stands starts with v1 too.
        _ = hub.send(.subscribed(topic: WireFormat.v2.topic(board: "team-b"), by: nil))
        hub.hello(peer("ink"), board: "team-b")
        _ = hub.message(peer("ink"), .numbered(sequence: 1, began(1)))
        #expect(Set(hub.endTurn().batchPublications.filter { $0.board == "team-b" }.map(\.topic))
            == [WireFormat.v1.topic(board: "team-b"), WireFormat.v2.topic(board: "team-b")])
    }

    /// A hub that journals always encodes v1 (the journal keeps v1 batches).
    @Test func aJournalingHubKeepsV1() {
        let hub = CoreHarness { $0.journal = JournalConfiguration(directory: "unused") }
        let pen = peer("pen")
        _ = hub.send(.subscribed(topic: WireFormat.v2.topic(board: "b"), by: nil))
        hub.hello(pen, board: "b")
        _ = hub.message(pen, .numbered(sequence: 1, began(1)))
        let turn = hub.endTurn()
        #expect(turn.journalAppends.count == 1)
        #expect(Set(turn.batchPublications.map(\.topic))
            == [WireFormat.v1.topic(board: "b"), WireFormat.v2.topic(board: "b")])
    }

    /// A v2 subscription made before the board exists starts its stream with
    /// the board's first batch; the v1 stream is byte for byte the one a hub
    /// without v2 subscribers publishes.
    @Test func v1BytesDoNotDependOnV2Subscribers() {
        let plain = CoreHarness(), mixed = CoreHarness()
        for hub in [plain, mixed] { _ = hub.send(.subscribed(topic: WireFormat.v1.topic(board: "b"), by: nil)) }
        _ = mixed.send(.subscribed(topic: WireFormat.v2.topic(board: "b"), by: nil))
        var v1: [[[UInt8]]] = [[], []]
        for (index, hub) in [plain, mixed].enumerated() {
            let pen = peer("pen")
            hub.hello(pen, board: "b")
            _ = hub.message(pen, .numbered(sequence: 1, began(1)))
            for step in 1...20 {
                _ = hub.message(pen, .numbered(sequence: UInt64(1 + step), moved(1, x: Int32(step * step * 7), t: Int64(step * 8_333))))
                if step % 3 == 0 { _ = hub.endTurn() }
            }
            _ = hub.endTurn()
            v1[index] = hub.actions.publications.filter { $0.topic.last == 0 }
                .compactMap { if case .batch = $0.kind { $0.bytes } else { nil } }
        }
        #expect(!v1[0].isEmpty && v1[0] == v1[1])
        #expect(mixed.replicasV2["b"] == mixed.core.board("b"))
        #expect(mixed.replicasV2["b"]?.sequence == plain.core.board("b")?.sequence)
    }
}
