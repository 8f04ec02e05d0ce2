import PropertyBased
import Testing
import TouchSyncCore
import TouchSyncSimulation
import TouchSyncWire

/// Valid samples of every shape: smooth walks, jumps to the range limits, every flag mix.
/// Valid samples from one seed.
func sampleRun(seed: UInt64) -> [Sample] {
    var random = SplitMix64(seed: seed)
    let count = Int.random(in: 0...200, using: &random)
    let limit = Sample.maxCoordinateUnits
    var x = Int32.random(in: -limit...limit, using: &random)
    var y = Int32.random(in: -limit...limit, using: &random)
    var time = Int64.random(in: 0...(1 << 50), using: &random)
    return (0..<count).map { _ in
        if random.chance(0.05) {
            x = random.chance(0.5) ? limit : -limit
            y = Int32.random(in: -limit...limit, using: &random)
        } else {
            x = max(-limit, min(limit, x &+ Int32.random(in: -300...300, using: &random)))
            y = max(-limit, min(limit, y &+ Int32.random(in: -300...300, using: &random)))
        }
        time += Int64.random(in: 0...20_000, using: &random)
        var sample = Sample(x: x, y: y, time: time)
        sample.flags = SampleFlags(rawValue: UInt8.random(in: 0...15, using: &random))
        if sample.flags.contains(.hasForce) { sample.force = UInt16.random(in: 0...UInt16.max, using: &random) }
        if sample.flags.contains(.hasAngles) {
            sample.azimuth = Int16.random(in: -Sample.maxAngleUnits...Sample.maxAngleUnits, using: &random)
            sample.altitude = Int16.random(in: -Sample.maxAngleUnits...Sample.maxAngleUnits, using: &random)
        }
        if random.chance(0.1) { sample.estimationIndex = UInt32.random(in: 1...UInt32.max, using: &random) }
        return sample
    }
}

@Suite("Wire protocol")
struct WireTests {
    @Test func sampleRunsRoundTripThroughBytes() async {
        await propertyCheck(count: 200, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 0...5)) { seed, tail in
            let all = sampleRun(seed: seed)
            let split = max(0, all.count - tail)
            let samples = Array(all[..<split]), predicted = Array(all[split...])
            // Any reference works, near the samples (a frame's event time) or far (a snapshot's 0).
            let reference = all.first.map { $0.time + Int64(seed % 100_000) - 50_000 } ?? 0
            let bytes = WireCodec.encode(SampleRunCodec.encode(samples, predicted: predicted, timeReference: reference))
            let run = try WireCodec.decode(Touchsync_V1_SampleRun.self, from: bytes)
            let decoded = try SampleRunCodec.decode(run, timeReference: reference)
            #expect(decoded.samples == samples)
            #expect(decoded.predicted == predicted)
            if predicted.isEmpty {
                #expect(try SampleRunCodec.decodeSamples(run, timeReference: reference) == samples)
            } else {
                #expect(throws: WireError.self) { try SampleRunCodec.decodeSamples(run, timeReference: reference) }
            }
        }
    }

    /// The worked example in docs/protocol.md, byte for byte.
    @Test func documentedExampleEncodesAsDocumented() throws {
        let samples = [
            Sample(x: 6400, y: 3200, time: 1_000_000),
            Sample(x: 6464, y: 3232, time: 1_004_166),
            Sample(x: 6530, y: 3262, time: 1_008_333),
        ]
        let bytes = WireCodec.encode(SampleRunCodec.encode(samples, timeReference: 1_008_333))
        let hex = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
        #expect(hex.joined(separator: " ") == "0a 05 80 64 80 01 04 12 04 80 32 40 03 22 06 99 82 01 8c 41 02")
    }

    @Test func malformedSampleRunsAreRefused() throws {
        let good = SampleRunCodec.encode([
            Sample(x: 1, y: 2, time: 3, force: 10, flags: [.hasForce]), Sample(x: 4, y: 5, time: 6, flags: [.coalesced]),
        ])
        #expect(try SampleRunCodec.decode(good).samples.count == 2)

        func refused(_ change: (inout Touchsync_V1_SampleRun) -> Void, sourceLocation: SourceLocation = #_sourceLocation) {
            var run = good
            change(&run)
            let error = #expect(throws: WireError.self, sourceLocation: sourceLocation) { try SampleRunCodec.decode(run) }
            #expect(error?.code == .malformed, sourceLocation: sourceLocation)
        }
        refused { $0.y.removeLast() }
        refused { $0.time.append(1) }
        refused { $0.flagRuns = [1 << 4 | 4] }  // covers one sample of two
        refused { $0.flagRuns.append(1 << 4) }  // covers three
        refused { $0.force = [] }  // a sample says "has force", no value
        refused { $0.force.append(5) }  // a value no sample claims
        refused { $0.force = [70_000] }  // out of UInt16
        refused { $0.estimationIndex = [1] }
        refused { $0.x = [Int32.max, Int32.max] }  // leaves the Int32 range
        refused { $0.timeBase = .max; $0.time = [1, 0] }  // overflows
        refused { $0.predictedCount = 3 }  // a tail longer than the run
    }

    @Test func garbageBytesAreMalformed() {
        let error = #expect(throws: WireError.self) {
            try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: [0xFF, 0xFF, 0xFF, 0x0F, 0x01])
        }
        #expect(error?.code == .malformed)
        #expect(error?.reason.contains("touchsync.v1.AgentMessage") == true)
    }

    @Test func touchFramesRoundTripKeepingTheAliveSetDistinctFromNone() throws {
        var simulator = SessionSimulator(seed: 11)
        var frames = 0
        while frames < 300 {
            guard case .frame(_, let frame, _) = simulator.next() else { continue }
            frames += 1
            var message = Touchsync_V1_AgentMessage()
            message.sequence = frame.sequence
            message.frame = frame.proto
            let parsed = try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: WireCodec.encode(message))
            #expect(try TouchFrame(parsed.frame, sequence: parsed.sequence) == frame)
        }
        // "No touch is down" (an empty alive set) is not "the agent did not say".
        let none = TouchFrame(sequence: 1, changes: [], aliveTouches: nil)
        let empty = TouchFrame(sequence: 1, changes: [], aliveTouches: [])
        let decode = { (frame: TouchFrame) in
            try TouchFrame(WireCodec.decode(Touchsync_V1_TouchFrame.self, from: WireCodec.encode(frame.proto)), sequence: 1)
        }
        #expect(try decode(none).aliveTouches == nil)
        #expect(try decode(empty).aliveTouches == [])

        var bad = Touchsync_V1_TouchChange()
        bad.touchID = 1
        var frame = Touchsync_V1_TouchFrame()
        frame.changes = [bad]
        #expect(throws: WireError.malformed("touch phase 0 is not a phase")) { try TouchFrame(frame, sequence: 1) }
    }

    /// The hub's batches, encoded to bytes and decoded again, rebuild its board exactly.
    @Test func replicaFedDecodedBatchesConverges() throws {
        var simulator = SessionSimulator(seed: 99, profile: { var p = SimulationProfile(); p.users = 4; p.withForce = false; return p }())
        var coalescer = DiffCoalescer()
        var hub = BoardState()
        var replica = BoardState()
        for step in 0..<2000 {
            var diffs: [StrokeDiff] = []
            switch simulator.next() {
            case .frame(let user, let frame, let style): try hub.reduce(frame, from: user, style: style, into: &diffs)
            case .clear(let user, let scope): hub.clear(scope, by: user, into: &diffs)
            }
            // Half the session one batch per step, half coalesced over 7 steps, as a hub's tick would.
            coalescer.add(contentsOf: diffs)
            if coalescer.isEmpty || (step >= 1000 && step % 7 != 0) { continue }
            let batch = hub.sealBatch(coalescer.take(), hubTime: Int64(step))
            var message = Touchsync_V1_PublishMessage()
            message.batch = batch.proto(board: "board")
            let bytes = WireCodec.encode(message)
            let decoded = try WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes)
            #expect(decoded.batch.board == "board")
            try replica.apply(DiffBatch(decoded.batch))
        }
        if !coalescer.isEmpty {
            var message = Touchsync_V1_PublishMessage()
            message.batch = hub.sealBatch(coalescer.take(), hubTime: 0).proto(board: "board")
            try replica.apply(DiffBatch(WireCodec.decode(Touchsync_V1_PublishMessage.self, from: WireCodec.encode(message)).batch))
        }
        #expect(hub.sequence > 100)
        #expect(replica == hub)
        #expect(replica.digest == hub.digest)
    }

    @Test func snapshotsSplitIntoChunksAndReassemble() throws {
        var simulator = SessionSimulator(seed: 5)
        var hub = BoardState()
        for _ in 0..<3000 {
            var diffs: [StrokeDiff] = []
            if case .frame(let user, let frame, let style) = simulator.next() {
                try hub.reduce(frame, from: user, style: style, into: &diffs)
                if !diffs.isEmpty { _ = hub.sealBatch(diffs, hubTime: 0) }
            }
        }
        let snapshot = hub.snapshot()
        let chunks = SnapshotCodec.chunks(of: snapshot, board: "b", digest: hub.digest, samplesPerChunk: 500)
        #expect(chunks.count > 3)
        let wire = try chunks.map { try WireCodec.decode(Touchsync_V1_SnapshotChunk.self, from: WireCodec.encode($0)) }
        let (assembled, digest) = try SnapshotCodec.assemble(wire)
        #expect(assembled == snapshot)
        let loaded = try BoardState(snapshot: assembled)
        #expect(loaded.digest == digest)
        #expect(loaded == hub)

        #expect(throws: WireError.self) { try SnapshotCodec.assemble(Array(wire.reversed())) }
        #expect(throws: WireError.self) { try SnapshotCodec.assemble(Array(wire.dropLast())) }
        var stale = wire
        stale[1].sequence += 1
        #expect(throws: WireError.self) { try SnapshotCodec.assemble(stale) }
        #expect(throws: WireError.self) { try SnapshotCodec.assemble([]) }
        // An empty board is one chunk with no strokes.
        let empty = SnapshotCodec.chunks(of: BoardState().snapshot(), board: "e", digest: BoardState().digest)
        #expect(empty.count == 1)
        #expect(try SnapshotCodec.assemble(empty).snapshot == BoardState().snapshot())
    }

    @Test func appendAndPredictionTravelAsOneRun() throws {
        let s = StrokeID(3)
        let batch = DiffBatch(sequence: 1, hubTime: 5, diffs: [
            .appended(s, offset: 4, samples: [Sample(x: 1, y: 1, time: 1_000_000)]),
            .predicted(s, samples: [Sample(x: 2, y: 2, time: 1_008_000)]),
            .predicted(StrokeID(4), samples: []),
            .appended(StrokeID(4), offset: 0, samples: [Sample(x: 9, y: 9, time: 1_000_100)]),
        ])
        let proto = batch.proto(board: "b")
        #expect(proto.diffs.count == 3)
        #expect(proto.diffs[0].appended.replacesPrediction)
        #expect(proto.diffs[0].appended.samples.predictedCount == 1)
        #expect(proto.timeReference == 1_000_000)
        #expect(try DiffBatch(WireCodec.decode(Touchsync_V1_DiffBatch.self, from: WireCodec.encode(proto))) == batch)

        var sneaky = proto
        sneaky.diffs[0].appended.replacesPrediction = false
        #expect(throws: WireError.self) { try DiffBatch(sneaky) }
        var amendedTail = Touchsync_V1_DiffBatch()
        var diff = Touchsync_V1_Diff()
        var amended = Touchsync_V1_SampleAmended()
        amended.sample = SampleRunCodec.encode([], predicted: [Sample(x: 0, y: 0, time: 0)])
        diff.amended = amended
        amendedTail.diffs = [diff]
        #expect(throws: WireError.self) { try DiffBatch(amendedTail) }
    }

    @Test func errorsAndTopics() throws {
        let error = Touchsync_V1_Error(TouchInputError.unknownTouch(4, .moved), sequence: 17)
        let decoded = try WireCodec.decode(Touchsync_V1_Error.self, from: WireCodec.encode(error))
        #expect(decoded.code == .unknownTouch)
        #expect(decoded.sequence == 17)
        #expect(decoded.message == "moved for touch 4, which is not down")
        for code in ErrorCode.allCases { #expect(ErrorCode(code.proto) == code) }
        #expect(publishTopic(board: "ab") == [0x61, 0x62, 0])
        #expect(isValidBoardName("whiteboard"))
        #expect(!isValidBoardName(""))
        #expect(!isValidBoardName("a\u{0}b"))
        #expect(!isValidBoardName(String(repeating: "x", count: 129)))
    }
}
