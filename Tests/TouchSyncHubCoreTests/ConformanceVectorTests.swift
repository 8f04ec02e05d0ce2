import HubCoreHarness
import Foundation
import Testing
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncSimulation
import TouchSyncWire

/// The conformance vectors in proto/conformance/v1 (docs/protocol.md,
/// "Conformance vectors"): agent messages in, the exact published batches,
/// refusals and digests out. This test runs them through the hub's core;
/// `TOUCHSYNC_WRITE_VECTORS=1 swift test --filter ConformanceVectorTests`
/// writes them afresh (review the diff: a change is a protocol change).
@Suite("Conformance vectors")
struct ConformanceVectorTests {
    /// v1: the board's topic; v2: the same session as a v2 subscriber (subscribed before the first hello) receives it.
    static func file(_ format: WireFormat) -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("proto/conformance/\(format)/hub-session.json")
    }

    struct Vectors: Codable {
        var description: String
        var board: String
        var steps: [Step]
        var snapshot: [String]
        var finalDigest: String
        /// The reply to a snapshot request for board "never-drawn-on": one empty chunk at sequence 0, not an error.
        var neverDrawnSnapshot: [String]
    }

    struct Step: Codable {
        var note: String
        var user: String
        /// An AgentMessage, hex; the hub handles it, then ends its turn 10 ms later.
        var message: String
        /// The PublishMessage (a DiffBatch) the turn publishes, hex, or nil.
        var published: String?
        /// The error codes (`ErrorCode` numbers) sent back to the user, in order.
        var errors: [Int]
        /// The highest message number acknowledged to the user after the turn, if any ack was sent.
        var acknowledged: UInt64?
        var digest: String
        var sequence: UInt64
        /// v2 only: the same turn's batch on the stream without predictions (topic: the board and a two byte), hex, or nil.
        var publishedWithoutPredictions: String? = nil
        /// v2 only: the board's digest with every predicted tail removed (what that stream's replica holds).
        var digestWithoutPredictions: String? = nil
    }

    /// The inputs: hellos, a simulated two-user session, styles and clears, and error cases;
    /// in v2 the hellos ask for protocol 2 and the frames are packed (but for the two that
    /// break v1 columns on purpose), and at the end a broken packed frame is refused and a
    /// stroke is drawn after the board clear.
    static func inputs(_ format: WireFormat = .v1) -> [(note: String, user: String, message: Touchsync_V1_AgentMessage)] {
        var inputs: [(String, String, Touchsync_V1_AgentMessage)] = []
        var numbers: [String: UInt64] = [:]
        func numbered(_ user: String, _ body: Touchsync_V1_AgentMessage.OneOf_Body, _ note: String) {
            numbers[user, default: 0] += 1
            var message = Touchsync_V1_AgentMessage()
            message.sequence = numbers[user]!
            message.body = body
            inputs.append((note, user, message))
        }
        for user in ["user-0", "user-1"] {
            var hello = Touchsync_V1_AgentMessage()
            hello.hello.protocolVersion = UInt32(format.rawValue)
            hello.hello.board = "conformance"
            hello.hello.sessionID = Data(user.utf8)
            inputs.append(("hello", user, hello))
        }
        var style = Touchsync_V1_SetStyle()
        style.style = StrokeStyle(rgba: 0x1565_C0FF, width: 320).proto
        numbered("user-1", .style(style), "a style for user-1's next strokes")
        var profile = SimulationProfile()
        profile.users = 2
        profile.fingersPerUser = 2
        profile.clearRate = 0
        profile.estimateRate = 0.1
        profile.cancelRate = 0.05
        profile.vanishRate = 0.05
        var simulator = SessionSimulator(seed: 2026, profile: profile)
        for index in 0..<40 {
            guard case .frame(let user, let frame, _) = simulator.next() else { continue }
            numbered(user.rawValue, .frame(frame.proto(format)), "simulated frame \(index)")
        }
        numbered("user-1", .undo(Touchsync_V1_Undo()), "user-1 undoes its most recent accepted stroke")
        numbered("user-1", .undo(Touchsync_V1_Undo()), "and the one before")
        numbered("user-1", .redo(Touchsync_V1_Redo()), "user-1 redoes the last undone stroke: back in its place")
        numbered("user-0", .undo(Touchsync_V1_Undo()), "user-0 undoes one of its strokes")
        var erase = Touchsync_V1_Erase()
        erase.strokeIds = [3]
        numbered("user-1", .erase(erase), "user-1 erases stroke 3 (anyone may on a hub without access lists)")
        var missing = Touchsync_V1_Erase()
        missing.strokeIds = [999]
        numbered("user-1", .erase(missing), "erasing a stroke that is not on the board: UNKNOWN_STROKE")
        func edit(_ ids: [UInt64], _ change: Touchsync_V1_Edit.OneOf_Change?) -> Touchsync_V1_AgentMessage.OneOf_Body {
            var edit = Touchsync_V1_Edit()
            edit.strokeIds = ids
            edit.change = change
            return .edit(edit)
        }
        numbered("user-1", .frame(TouchFrame(changes: [60, 61].map { touch in
            TouchChange(touch: touch, phase: .began, samples: (0..<3).map { Sample(x: Int32(touch) * 640 + $0 * 320, y: 1280 + $0 * 64, time: 20_000_000 + Int64($0) * 8000) })
        }).proto(format)), "user-1 begins two strokes (ids 10 and 11)")
        numbered("user-1", .frame(TouchFrame(changes: [60, 61].map { TouchChange(touch: $0, phase: .ended) }).proto(format)), "and ends them")
        var move = Touchsync_V1_Transform()
        (move.offsetX, move.offsetY, move.scale, move.originX, move.originY) = (640, -320, 1.5, 1000, 2000)
        numbered("user-1", edit([10, 11], .transform(move)), "user-1 moves strokes 10 and 11 and scales them 1.5 times about (1000, 2000): removed, then restored in place")
        numbered("user-1", edit([11], .rgba(0x2E7D_32FF)), "user-1 recolours stroke 11")
        var copy = Touchsync_V1_Transform()
        copy.offsetY = 6400
        numbered("user-1", edit([11, 10], .duplicate(copy)), "user-1 copies strokes 11 and 10, 100 points lower: two new strokes of its own")
        numbered("user-1", .undo(Touchsync_V1_Undo()), "user-1's undo takes its latest operation, the copy")
        numbered("user-1", .undo(Touchsync_V1_Undo()), "and then the recolour")
        numbered("user-1", .redo(Touchsync_V1_Redo()), "user-1 redoes the recolour")
        numbered("user-0", edit([10], .delete(true)), "user-0 deletes stroke 10 as an edit (undoable, unlike an erase)")
        numbered("user-0", .undo(Touchsync_V1_Undo()), "user-0's undo puts stroke 10 back as it was")
        numbered("user-1", edit([999], .delete(true)), "editing a stroke that is not on the board: UNKNOWN_STROKE")
        numbered("user-1", edit([10], nil), "an edit without a change: INVALID_VALUE")
        var huge = Touchsync_V1_Transform()
        huge.scale = 100
        numbered("user-1", edit([10], .transform(huge)), "a scale above 64: INVALID_VALUE")
        // A session that asks for less than the hub grants (a gateway's guest tab: Hello.role_limit DRAW).
        var guest = Touchsync_V1_AgentMessage()
        guest.hello.protocolVersion = UInt32(format.rawValue)
        guest.hello.board = "conformance"
        guest.hello.sessionID = Data("user-2".utf8)
        guest.hello.roleLimit = .draw
        inputs.append(("user-2 says hello with role_limit DRAW: on this hub (no access list) it would otherwise be admin", "user-2", guest))
        var others = Touchsync_V1_Erase()
        others.strokeIds = [11]
        numbered("user-2", .erase(others), "user-2 erases user-1's stroke 11: FORBIDDEN (another's stroke needs admin)")
        numbered("user-2", edit([11], .delete(true)), "user-2 deletes user-1's stroke 11 as an edit: FORBIDDEN")
        var wholeBoard = Touchsync_V1_Clear()
        wholeBoard.scope = .board
        numbered("user-2", .clear(wholeBoard), "user-2 clears the board: FORBIDDEN (needs admin)")
        var clear = Touchsync_V1_Clear()
        clear.scope = .own
        numbered("user-0", .clear(clear), "user-0 clears its accepted strokes")
        // Refusals: each takes its place in the numbering, changes nothing.
        func frame(_ changes: [TouchChange]) -> Touchsync_V1_AgentMessage.OneOf_Body { .frame(TouchFrame(changes: changes).proto(format)) }
        numbered("user-0", frame([TouchChange(touch: 900, phase: .moved, samples: [Sample(x: 1, y: 1, time: 9_000_000)])]), "moved for a touch that is not down: UNKNOWN_TOUCH")
        numbered("user-0", frame([TouchChange(touch: 901, phase: .began)]), "began without samples: MISSING_SAMPLES")
        numbered("user-0", frame([
            TouchChange(touch: 902, phase: .began, samples: [Sample(x: 1, y: 1, time: 9_000_000)]),
            TouchChange(touch: 902, phase: .moved, samples: [Sample(x: 2, y: 1, time: 9_000_001)]),
        ]), "the same touch twice in a frame: PHASE_ORDER")
        numbered("user-0", frame([TouchChange(touch: 903, phase: .began, samples: [Sample(x: 64_000_001, y: 1, time: 9_000_000)])]), "x beyond 1,000,000 points: INVALID_VALUE")
        numbered("user-0", frame((0..<65).map { TouchChange(touch: TouchID(1000 + $0), phase: .began, samples: [Sample(x: 1, y: 1, time: 9_000_000)]) }), "65 changes: FRAME_TOO_LARGE")
        var thin = Touchsync_V1_SetStyle()
        thin.style = StrokeStyle(rgba: 0, width: 0).proto
        numbered("user-0", .style(thin), "a zero width: INVALID_VALUE")
        var bad = Touchsync_V1_Clear()
        bad.scope = .UNRECOGNIZED(7)
        numbered("user-0", .clear(bad), "an unknown clear scope: INVALID_VALUE")
        // Values the model refuses, and values the wire cannot carry.
        numbered("user-0", .style(Touchsync_V1_SetStyle()), "a SetStyle without a style is a zero width: INVALID_VALUE")
        var wide = Touchsync_V1_SetStyle()
        wide.style = StrokeStyle(rgba: 0, width: 1001 * 64).proto
        numbered("user-0", .style(wide), "a width above 1,000 points: INVALID_VALUE")
        var pressed = Sample(x: 64, y: 64, time: 9_000_000)
        pressed.force = 1024
        pressed.flags.insert(.hasForce)
        var heavy = TouchFrame(changes: [TouchChange(touch: 904, phase: .began, samples: [pressed])]).proto
        heavy.changes[0].samples.force = [70_000]
        numbered("user-0", .frame(heavy), "a force beyond 65,535 (the model's UInt16) cannot be represented: MALFORMED")
        var tilted = Sample(x: 64, y: 64, time: 9_000_000)
        tilted.azimuth = 30_000
        tilted.flags.insert(.hasAngles)
        numbered("user-0", frame([TouchChange(touch: 905, phase: .began, samples: [tilted])]), "an azimuth beyond 2π (25,736) that fits the Int16: INVALID_VALUE")
        var bitmap = TouchFrame(changes: [TouchChange(touch: 906, phase: .began, samples: [Sample(x: 64, y: 64, time: 9_000_000)])]).proto
        bitmap.changes[0].samples.coalesced = Data([0, 0])
        numbered("user-0", .frame(bitmap), "a coalesced bitmap longer than the run needs (2 bytes for 1 sample): MALFORMED")
        var erasures = Touchsync_V1_Erase()
        erasures.strokeIds = (1...1025).map { UInt64($0) }
        numbered("user-0", .erase(erasures), "an erase naming 1,025 ids: FRAME_TOO_LARGE")
        numbered("user-0", .erase(Touchsync_V1_Erase()), "an erase naming no id: nothing changes, no batch")
        numbered("user-0", .clear(clear), "a clear that removes nothing still publishes a Cleared batch")
        var ghost = TouchFrame(changes: [TouchChange(touch: 907, phase: .began, samples: [Sample(x: 64, y: 64, time: 9_000_000)])])
        ghost.aliveTouches = [907, 999]
        numbered("user-0", .frame(ghost.proto(format)), "an alive set naming a touch that is not down (999): accepted, 999 ignored")
        numbered("user-0", frame([TouchChange(touch: 907, phase: .cancelled)]), "and that touch cancelled again")
        // Numbering: a message takes its number when it has one (sequence ≥ 1) and is numbered or has no body this hub knows.
        numbers["user-0"]! += 1
        var bodiless = Touchsync_V1_AgentMessage()
        bodiless.sequence = numbers["user-0"]!
        inputs.append(("a number and no body this hub knows: MALFORMED, and it takes its number (acknowledged)", "user-0", bodiless))
        var unnumbered = Touchsync_V1_AgentMessage()
        unnumbered.frame = TouchFrame(changes: [TouchChange(touch: 908, phase: .began, samples: [Sample(x: 64, y: 64, time: 9_000_000)])]).proto(format)
        inputs.append(("a frame with sequence 0: MALFORMED with sequence 0, no number taken, nothing applied", "user-0", unnumbered))
        numbered("user-0", .undo(Touchsync_V1_Undo()), "the next number is still in order (no OUT_OF_ORDER): an undo with nothing to undo")
        var gap = Touchsync_V1_AgentMessage()
        gap.sequence = numbers["user-0"]! + 2
        gap.frame = TouchFrame(changes: []).proto
        inputs.append(("a number skipped: OUT_OF_ORDER (the hub says so once, then waits)", "user-0", gap))
        var board = Touchsync_V1_Clear()
        board.scope = .board
        numbered("user-1", .clear(board), "user-1 clears the board's accepted strokes (strokes in progress stay)")
        if format == .v2 {
            var cut = TouchFrame(changes: [TouchChange(touch: 909, phase: .began, samples: [Sample(x: 64, y: 64, time: 9_000_000)])]).proto(.v2)
            cut.packedChanges.removeLast()
            numbered("user-0", .frame(cut), "packed changes cut off: MALFORMED, and it takes its number")
            // A stroke accepted after the board clear, so that the final snapshot has one to pack.
            let line = (0..<3).map { Sample(x: 6400 + Int32($0) * 640, y: 3200, time: 9_100_000 + Int64($0) * 8_333) }
            numbered("user-0", frame([TouchChange(touch: 910, phase: .began, samples: [line[0]])]), "a stroke after the clear: began")
            numbered("user-0", frame([TouchChange(touch: 910, phase: .moved, samples: [line[1]])]), "moved")
            numbered("user-0", frame([TouchChange(touch: 910, phase: .ended, samples: [line[2]])]), "ended: accepted, packed in the final snapshot")
        }
        return inputs
    }

    static func run(_ inputs: [(note: String, user: String, message: Touchsync_V1_AgentMessage)], format: WireFormat = .v1) -> (
        steps: [Step], snapshot: [String], digest: String, neverDrawn: [String]
    ) {
        let hub = CoreHarness()
        let topic = format.topic(board: "conformance")
        let leanTopic = PublishStream.v2WithoutPredictions.topic(board: "conformance")
        if format == .v2 {
            _ = hub.send(.subscribed(topic: topic, by: nil))
            _ = hub.send(.subscribed(topic: leanTopic, by: nil))
        }
        var steps: [Step] = []
        for (note, user, message) in inputs {
            let bytes = WireCodec.encode(message)
            let peer = peer(user)
            var actions = bytes.withUnsafeBytes { raw -> [HubAction] in
                switch AgentRequest.decode(raw) {
                case .success(let request): hub.message(peer, request, bytes: bytes.count)
                case .failure(let error): hub.send(.undecodable(from: peer, error))
                }
            }
            hub.advance(.milliseconds(10))
            actions += hub.endTurn()
            let published = actions.publications.first { if case .batch = $0.kind { $0.topic == topic } else { false } }
            let lean = actions.publications.first { if case .batch = $0.kind { $0.topic == leanTopic } else { false } }
            let board = hub.core.board("conformance") ?? BoardState()
            steps.append(
                Step(
                    note: note, user: user, message: hex(bytes), published: published.map { hex($0.bytes) },
                    errors: actions.errors(to: peer).map { $0.code.rawValue }, acknowledged: actions.acks(to: peer).last,
                    digest: board.digest.description, sequence: board.sequence,
                    publishedWithoutPredictions: format == .v2 ? lean.map { hex($0.bytes) } : nil,
                    digestWithoutPredictions: format == .v2 ? board.digest(includingPredictions: false).description : nil))
        }
        var snapshot: [String] = []
        let final = hub.core.board("conformance") ?? BoardState()
        for action in hub.send(.snapshotRequested(by: PeerID(Array("snap".utf8)), user: nil, board: "conformance", requestID: 1)) {
            if case .sendSnapshot(_, _, let board, let state, let digest) = action {
                // v2: as a request with packed_samples gets it.
                snapshot = SnapshotCodec.chunks(
                    of: state.snapshot(), board: board, digest: digest, samplesPerChunk: 64, packedSamples: format == .v2
                ).map { hex(WireCodec.encode($0)) }
            }
        }
        var neverDrawn: [String] = []
        for action in hub.send(.snapshotRequested(by: PeerID(Array("snap".utf8)), user: nil, board: "never-drawn-on", requestID: 2)) {
            if case .sendSnapshot(_, _, let board, let state, let digest) = action {
                neverDrawn = SnapshotCodec.chunks(of: state.snapshot(), board: board, digest: digest, samplesPerChunk: 64).map { hex(WireCodec.encode($0)) }
            }
        }
        return (steps, snapshot, final.digest.description, neverDrawn)
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test(arguments: WireFormat.allCases) func theHubMatchesTheVectors(format: WireFormat) throws {
        let (steps, snapshot, digest, neverDrawn) = Self.run(Self.inputs(format), format: format)
        if ProcessInfo.processInfo.environment["TOUCHSYNC_WRITE_VECTORS"] != nil {
            let description =
                format == .v1
                ? "TouchSync protocol v1 conformance vectors (docs/protocol.md, \"Conformance vectors\"): two agents on board \"conformance\"; each step is one AgentMessage from `user`, after which the hub ends its turn 10 ms later and publishes at most one batch. Hub times start at 1700000000000000 µs."
                : "TouchSync wire format v2 conformance vectors (docs/protocol.md, \"Wire format v2\" and \"Conformance vectors\"): the v1 session with hellos asking for protocol 2 and its frames packed (packed_changes; the two frames that break v1 columns on purpose stay v1) then one broken packed frame and a stroke drawn after the board clear (so that the final snapshot has an accepted stroke to pack), as published on the board's v2 topic (\"conformance\" and a one byte; its snapshot as a request with packed_samples gets it) to a subscriber that subscribed before the first hello, which also subscribed to the stream without predictions (\"conformance\" and a two byte: publishedWithoutPredictions, digestWithoutPredictions). Each step is one AgentMessage from `user`, after which the hub ends its turn 10 ms later and publishes at most one batch. Hub times start at 1700000000000000 µs."
            let vectors = Vectors(
                description: description, board: "conformance", steps: steps, snapshot: snapshot, finalDigest: digest,
                neverDrawnSnapshot: neverDrawn)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try FileManager.default.createDirectory(at: Self.file(format).deletingLastPathComponent(), withIntermediateDirectories: true)
            try encoder.encode(vectors).write(to: Self.file(format))
        }
        let vectors = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: Self.file(format)))
        #expect(vectors.steps.count == steps.count)
        for (index, (expected, actual)) in zip(vectors.steps, steps).enumerated() {
            #expect(actual.message == expected.message, "step \(index): the input differs (regenerate the vectors?)")
            #expect(actual.published == expected.published, "step \(index) (\(expected.note)): published batch")
            #expect(actual.errors == expected.errors, "step \(index) (\(expected.note)): errors")
            #expect(actual.acknowledged == expected.acknowledged, "step \(index): ack")
            #expect(actual.digest == expected.digest && actual.sequence == expected.sequence, "step \(index): digest")
            #expect(actual.publishedWithoutPredictions == expected.publishedWithoutPredictions, "step \(index): published without predictions")
            #expect(actual.digestWithoutPredictions == expected.digestWithoutPredictions, "step \(index): digest without predictions")
        }
        #expect(snapshot == vectors.snapshot)
        #expect(digest == vectors.finalDigest)
        #expect(neverDrawn == vectors.neverDrawnSnapshot)
        // A board nobody drew on: one chunk, sequence 0, no strokes, the empty board's digest.
        let empty = try WireCodec.decode(Touchsync_V1_SnapshotChunk.self, from: bytes(try #require(vectors.neverDrawnSnapshot.first)))
        #expect(vectors.neverDrawnSnapshot.count == 1 && empty.sequence == 0 && empty.strokes.isEmpty && empty.count == 1)
        #expect(BoardDigest(rawValue: empty.digest).description == "0c8657ae0d7aac18")
        // The vectors exercise what they claim: batches, and each refusal.
        #expect(vectors.steps.filter { $0.published != nil }.count > 20)
        let codes: [ErrorCode] = [.unknownTouch, .missingSamples, .phaseOrder, .invalidValue, .frameTooLarge, .outOfOrder, .unknownStroke, .malformed]
        #expect(Set(vectors.steps.flatMap(\.errors)).isSuperset(of: codes.map(\.rawValue)))
    }

    /// A subscriber needs only the published batches: applied in order to an
    /// empty board, they give every step's digest, and the final snapshot loads to the same board.
    @Test(arguments: WireFormat.allCases) func aReplicaFromThePublishedBatchesMatches(format: WireFormat) throws {
        let vectors = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: Self.file(format)))
        var replica = BoardState(), leanReplica = BoardState()
        for step in vectors.steps {
            if let published = step.published {
                let message = try WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes(published))
                guard case .batch(let batch) = message.body else { Issue.record("not a batch"); return }
                _ = try replica.apply(batch)
            }
            #expect(replica.digest.description == step.digest && replica.sequence == step.sequence)
            if let published = step.publishedWithoutPredictions {
                _ = try leanReplica.apply(WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes(published)).batch)
            }
            if let digest = step.digestWithoutPredictions {
                // v2: the stream without predictions gives the digest without predictions.
                #expect(leanReplica.digest.description == digest && leanReplica.sequence == step.sequence)
            }
        }
        let chunks = try vectors.snapshot.map { try WireCodec.decode(Touchsync_V1_SnapshotChunk.self, from: bytes($0)) }
        let (snapshot, digest) = try SnapshotCodec.assemble(chunks)
        #expect(try BoardState(snapshot: snapshot).digest == digest && digest.description == vectors.finalDigest)
    }

    /// v2 carries the same session in fewer bytes, and only its appends differ.
    @Test func theV2StreamIsTheV1StreamPacked() throws {
        let v1 = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: Self.file(.v1)))
        let v2 = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: Self.file(.v2)))
        // The same session: v2 has a broken packed frame more, which changes nothing, then a stroke after the clear.
        #expect(v2.steps.count == v1.steps.count + 4)
        let common = v2.steps.prefix(v1.steps.count)
        #expect(v1.steps.map(\.note) == common.map(\.note))
        #expect(v1.steps.map(\.digest) == common.map(\.digest))
        #expect(v1.steps.map(\.errors) == common.map(\.errors))
        #expect(v1.steps.map { $0.published == nil } == common.map { $0.published == nil })
        let broken = v2.steps[v1.steps.count]
        #expect(broken.errors == [ErrorCode.malformed.rawValue] && broken.published == nil && broken.digest == v1.finalDigest)
        // Its frames travel packed, in fewer bytes than v1's.
        let packedFrames = { (steps: ArraySlice<Step>, packed: Bool) in
            try steps.map { try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: bytes($0.message)) }
                .filter { if case .frame(let frame) = $0.body { !frame.packedChanges.isEmpty == packed } else { false } }
                .count
        }
        #expect(try packedFrames(common, true) >= 40 && packedFrames(v1.steps[...], true) == 0)
        let messageBytes = { (steps: ArraySlice<Step>) in steps.reduce(0) { $0 + $1.message.count / 2 } }
        print("conformance session: agent messages v1 \(messageBytes(v1.steps[...])) bytes, v2 \(messageBytes(common))")
        #expect(messageBytes(common) < messageBytes(v1.steps[...]))
        let size = { (vectors: Vectors) in vectors.steps.compactMap(\.published).reduce(0) { $0 + $1.count / 2 } }
        print("conformance session: v1 \(size(v1)) bytes published, v2 \(size(v2))")
        #expect(size(v2) < size(v1))
        var packed = 0
        for step in v2.steps {
            guard let published = step.published else { continue }
            let batch = try WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes(published)).batch
            for diff in batch.diffs {
                if case .appends = diff.kind { Issue.record("v1 appends in a v2 batch") }
                if case .packedAppends = diff.kind { packed += 1 }
            }
        }
        #expect(packed > 20)
        // The stream without predictions: a batch at every turn v2 has one, never larger, smaller in all.
        #expect(v2.steps.allSatisfy { ($0.published == nil) == ($0.publishedWithoutPredictions == nil) })
        #expect(v2.steps.allSatisfy { ($0.publishedWithoutPredictions?.count ?? 0) <= ($0.published?.count ?? 0) })
        let lean = v2.steps.compactMap(\.publishedWithoutPredictions).reduce(0) { $0 + $1.count / 2 }
        print("conformance session: v2 without predictions \(lean) bytes published")
        #expect(lean < size(v2))
        #expect(v2.steps.contains { $0.digestWithoutPredictions != $0.digest })
        // Its snapshot carries the accepted strokes packed, and loads to the same board as v1's.
        let records = try v2.snapshot.flatMap { try WireCodec.decode(Touchsync_V1_SnapshotChunk.self, from: bytes($0)).strokes }
        #expect(records.contains { !$0.packedSamples.isEmpty } && records.allSatisfy { $0.packedSamples.isEmpty == ($0.acceptedPosition == 0) })
    }

    func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }
}
