import PropertyChecks
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

/// The sessions of the batch tests: 1 to 4 users, force on every other
/// seed, estimates and clears.
func batchTestSimulator(seed: UInt64) -> SessionSimulator {
    var profile = SimulationProfile()
    profile.users = 1 + Int(seed % 4)
    profile.withForce = seed % 2 == 0
    profile.estimateRate = 0.1
    profile.clearRate = 0.01
    return SessionSimulator(seed: seed, profile: profile)
}

/// The simulator's next input (a frame or a clear) applied to `hub`: the diffs it made.
func reduceNext(_ simulator: inout SessionSimulator, into hub: inout BoardState) throws -> [StrokeDiff] {
    var diffs: [StrokeDiff] = []
    switch simulator.next() {
    case .frame(let user, let frame, let style): try hub.reduce(frame, from: user, style: style, into: &diffs)
    case .clear(let user, let scope): hub.clear(scope, by: user, into: &diffs)
    }
    return diffs
}

/// A board after `events` simulated inputs (frames only), each sealed as a batch.
func simulatedBoard(seed: UInt64, events: Int) throws -> BoardState {
    var simulator = SessionSimulator(seed: seed)
    var hub = BoardState()
    for _ in 0..<events {
        var diffs: [StrokeDiff] = []
        if case .frame(let user, let frame, let style) = simulator.next() {
            try hub.reduce(frame, from: user, style: style, into: &diffs)
            if !diffs.isEmpty { _ = hub.sealBatch(diffs, hubTime: 0) }
        }
    }
    return hub
}

/// Encodes a batch as the hub does (the one-pass writer) and checks the
/// bytes are exactly SwiftProtobuf's serialization of what they decode to.
func encodeChecked(_ encoder: inout DiffStreamEncoder, _ batch: DiffBatch) throws -> Touchsync_V1_DiffBatch {
    let bytes = encoder.encodedBytes(batch)
    let decoded = try WireCodec.decode(Touchsync_V1_DiffBatch.self, from: bytes)
    #expect(WireCodec.encode(decoded) == bytes, "the one-pass writer's bytes are not canonical protobuf")
    return decoded
}

@Suite("Wire protocol")
struct WireTests {
    @Test func sampleRunsRoundTripThroughBytes() async {
        await checkProperty(count: 200, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 0...5)) { seed, tail in
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

    /// The one-pass reader takes a batch's board name as SwiftProtobuf does:
    /// any UTF-8 text (U+FFFD itself included) exactly, and gives up on bytes
    /// that are not UTF-8, so that SwiftProtobuf refuses them.
    @Test func batchNamesAreReadAsUTF8OrNotAtAll() throws {
        func batch(named name: [UInt8]) -> [UInt8] {
            [0x0A, UInt8(name.count)] + name + [0x10, 0x01]  // board (field 1), sequence 1 (field 2)
        }
        for text in ["b", "tableau-\u{E9}", "\u{FFFD}", "\u{1F58C}-board-\u{FFFD}-x", String(repeating: "\u{E9}", count: 60)] {
            let bytes = batch(named: Array(text.utf8))
            let read = try #require(bytes.withUnsafeBytes { DiffBatchReader.decode($0, against: BoardState()) })
            #expect(read.board == text && read.board.utf8.elementsEqual(text.utf8))
            #expect(try WireCodec.decode(Touchsync_V1_DiffBatch.self, from: bytes).board == text)
        }
        // Invalid: a lone continuation byte, a truncated sequence, an overlong encoding, a surrogate,
        // and 3 bytes that decoding repairs into one U+FFFD (the same length).
        for name: [UInt8] in [[0x62, 0x80], [0xE2, 0x82], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xE2, 0x82, 0x28]] {
            let bytes = batch(named: name)
            #expect(bytes.withUnsafeBytes { DiffBatchReader.decode($0, against: BoardState()) } == nil, "\(name)")
            #expect(throws: (any Error).self) { try WireCodec.decode(Touchsync_V1_DiffBatch.self, from: bytes) }
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

    /// The hub's batches, encoded to bytes and decoded against each replica,
    /// rebuild its board exactly: for a replica from the start and for one
    /// that joins from a snapshot at a random point, with batches folded
    /// over windows of random size.
    @Test func replicasFedEncodedBatchesConverge() async {
        await checkProperty(count: 40, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 1...12)) { seed, window in
            var simulator = batchTestSimulator(seed: seed)
            var hub = BoardState()
            var encoder = DiffStreamEncoder(board: "board")
            var coalescer = DiffCoalescer()
            var replica = BoardState()
            var late: BoardState? = nil
            let joinAt = 50 + Int(seed % 500)
            var published = 0
            for step in 1...800 {
                coalescer.add(contentsOf: try reduceNext(&simulator, into: &hub))
                if (step % window == 0 || step == 800) && !coalescer.isEmpty {
                    var message = Touchsync_V1_PublishMessage()
                    message.batch = try encodeChecked(&encoder, hub.sealBatch(coalescer.take(), hubTime: Int64(step)))
                    let bytes = WireCodec.encode(message)
                    let decoded = try WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes).batch
                    #expect(decoded.board == "board")
                    try replica.apply(decoded)
                    if late != nil { try late!.applyIfNew(decoded) }
                    published += 1
                }
                // A spectator joins at the first tick boundary from joinAt on: a hub snapshots
                // only sealed state (every diff it applied has been published).
                if step >= joinAt && late == nil && coalescer.isEmpty { late = try BoardState(snapshot: hub.snapshot()) }
            }
            #expect(published > 10)
            #expect(replica == hub)
            #expect(replica.digest == hub.digest)
            #expect(late == hub)
        }
    }

    /// Batches of a busy board's tick touch many strokes (a decoder keeps
    /// the first few in a list and indexes the rest): replicas fed them in v1
    /// and v2, through the one-pass reader and through SwiftProtobuf, equal
    /// the hub after every batch.
    @Test func batchesTouchingManyStrokesDecode() async {
        await checkProperty(count: 12, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            var profile = SimulationProfile()
            profile.users = 8
            profile.fingersPerUser = 5
            profile.strokeLength = 2...12  // strokes end and begin within a batch
            var simulator = SessionSimulator(seed: seed, profile: profile)
            var hub = BoardState()
            var v1 = DiffStreamEncoder(board: "board"), v2 = DiffStreamEncoder(board: "board", format: .v2)
            var coalescer = DiffCoalescer()
            var replicas = (v1: BoardState(), v2: BoardState(), proto: BoardState())
            var mostStrokes = 0
            for step in 1...600 {
                coalescer.add(contentsOf: try reduceNext(&simulator, into: &hub))
                guard step % 40 == 0, !coalescer.isEmpty else { continue }
                let batch = hub.sealBatch(coalescer.take(), hubTime: Int64(step))
                mostStrokes = max(mostStrokes, Set(batch.diffs.map(\.strokeIDForTest)).count)
                let encodedV1 = v1.encodedBytes(batch), encodedV2 = v2.encodedBytes(batch)
                try encodedV1.withUnsafeBytes { _ = try replicas.v1.apply(encodedBatch: $0) }
                try encodedV2.withUnsafeBytes { _ = try replicas.v2.apply(encodedBatch: $0) }
                try replicas.proto.apply(WireCodec.decode(Touchsync_V1_DiffBatch.self, from: encodedV1))
                #expect(replicas.v1 == hub && replicas.v2 == hub && replicas.proto == hub)
            }
            #expect(mostStrokes > 16, "a batch touched at most \(mostStrokes) strokes")
        }
    }

    @Test func appendsOfSeveralStrokesTravelAsOneBlock() throws {
        var hub = BoardState()
        var diffs: [StrokeDiff] = []
        let first = [Sample(x: 6400, y: 6400, time: 1_000_000), Sample(x: 6464, y: 6400, time: 1_004_166)]
        try hub.reduce(
            TouchFrame(changes: [
                TouchChange(touch: 1, phase: .began, samples: first),
                TouchChange(touch: 2, phase: .began, samples: [Sample(x: 9000, y: 100, time: 1_000_000)]),
            ]), from: UserNamespace("a"), style: .default, into: &diffs)
        var encoder = DiffStreamEncoder(board: "b")
        var replica = BoardState()
        try replica.apply(encodeChecked(&encoder, hub.sealBatch(diffs, hubTime: 1)))

        diffs = []
        let next = [Sample(x: 6528, y: 6400, time: 1_008_333), Sample(x: 6592, y: 6400, time: 1_012_500)]
        try hub.reduce(
            TouchFrame(changes: [
                TouchChange(touch: 1, phase: .moved, samples: next, predicted: [Sample(x: 6656, y: 6400, time: 1_016_666)]),
                TouchChange(touch: 2, phase: .stationary),
            ]), from: UserNamespace("a"), style: .default, into: &diffs)
        let proto = try encodeChecked(&encoder, hub.sealBatch(diffs, hubTime: 2))
        #expect(proto.diffs.count == 1)
        let block = proto.diffs[0].appends
        #expect(block.strokeID == [1])
        #expect(block.offset == [2] && block.count == [2] && block.predicted == [2])
        // Continuing a straight line at constant speed: every second difference is 0.
        #expect(block.samples.x == [0, 0, 0])
        #expect(block.samples.time == [1, 0, -1])  // deltas 4166, 4167, 4167, 4166
        try replica.apply(proto)
        #expect(replica == hub)
    }

    /// Undo (a removal), redo (the stroke restored whole, with force and
    /// flags) and erase travel the diff stream; a replica that joins after
    /// the undo, from a snapshot, still gets the restored stroke right.
    @Test func removedAndRestoredStrokesTravel() throws {
        var hub = BoardState()
        var history = UndoHistory()
        var encoder = DiffStreamEncoder(board: "b")
        var replica = BoardState()
        var diffs: [StrokeDiff] = []
        let pen = try Sample(x: 10, y: 20, timestamp: 1, force: 0.5, coalesced: true)
        for touch: TouchID in [1, 2] {
            try hub.reduce(
                TouchFrame(changes: [TouchChange(touch: touch, phase: .began, samples: [pen, Sample(x: 30, y: 40, time: 2_000_000)])]),
                from: UserNamespace("a"), style: .default, into: &diffs)
            try hub.reduce(TouchFrame(changes: [TouchChange(touch: touch, phase: .ended)]), from: UserNamespace("a"), style: .default, into: &diffs)
        }
        history.note(diffs, on: hub)
        try replica.apply(encodeChecked(&encoder, hub.sealBatch(diffs, hubTime: 1)))
        diffs = []
        history.undo(by: UserNamespace("a"), on: &hub, into: &diffs)
        history.undo(by: UserNamespace("a"), on: &hub, into: &diffs)
        let undone = try encodeChecked(&encoder, hub.sealBatch(diffs, hubTime: 2))
        #expect(undone.diffs.map(\.removed.strokeID) == [2, 1])
        try replica.apply(undone)
        let late = try BoardState(snapshot: hub.snapshot())
        var lateReplica = late
        diffs = []
        history.redo(by: UserNamespace("a"), on: &hub, into: &diffs)
        let redone = try encodeChecked(&encoder, hub.sealBatch(diffs, hubTime: 3))
        #expect(redone.diffs.first?.restored.stroke.strokeID == 1)
        try replica.apply(redone)
        try lateReplica.apply(redone)
        #expect(replica == hub && lateReplica.digest == hub.digest)
        #expect(hub.acceptedStrokes.first?.samples.first == pen)
        diffs = []
        try hub.erase([StrokeID(1)], by: UserNamespace("a"), anyOwner: false, into: &diffs)
        try replica.apply(encodeChecked(&encoder, hub.sealBatch(diffs, hubTime: 4)))
        #expect(replica == hub && hub.acceptedStrokes.isEmpty)
    }

    @Test func malformedOrMisfittingBatchesAreRefused() throws {
        var hub = BoardState()
        var diffs: [StrokeDiff] = []
        try hub.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [Sample(x: 1, y: 1, time: 1)])]),
            from: UserNamespace("a"), style: .default, into: &diffs)
        var encoder = DiffStreamEncoder(board: "b")
        let opening = try encodeChecked(&encoder, hub.sealBatch(diffs, hubTime: 1))
        diffs = []
        try hub.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .moved, samples: [Sample(x: 2, y: 2, time: 2)])]),
            from: UserNamespace("a"), style: .default, into: &diffs)
        let good = try encodeChecked(&encoder, hub.sealBatch(diffs, hubTime: 2))
        var replica = BoardState()
        try replica.apply(opening)

        func refused(_ change: (inout Touchsync_V1_StrokeAppends) -> Void) -> DiffStreamError? {
            var batch = good
            change(&batch.diffs[0].appends)
            var copy = replica
            do {
                try copy.apply(batch)
                return nil
            } catch {
                #expect(copy == replica)  // nothing of a refused batch is applied
                return error
            }
        }
        #expect(refused { $0.offset = [0] } == .replica(.wrongOffset(StrokeID(1), expected: 1, received: 0)))
        #expect(refused { $0.strokeID = [7] } == .replica(.unknownStroke(StrokeID(7))))
        #expect(refused { $0.strokeID = [-1] } == .wire(.malformed("stroke id delta out of range")))
        #expect(refused { $0.count = [] } == .wire(.malformed("stroke appends columns differ in length")))
        #expect(refused { $0.count = [5] } == .wire(.malformed("a segment is longer than the run")))
        #expect(refused { $0.count = [0] } == .wire(.malformed("1 samples of the run belong to no segment")))
        var gap = good
        gap.sequence = 3
        #expect(throws: DiffStreamError.replica(.sequenceGap(expected: 2, received: 3))) { try replica.apply(gap) }
        try replica.apply(good)
        #expect(replica == hub)
        #expect(try replica.applyIfNew(good) == false)
    }

    @Test func snapshotsSplitIntoChunksAndReassemble() throws {
        let hub = try simulatedBoard(seed: 5, events: 3000)
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
        #expect(throws: WireError.self) { try SnapshotCodec.assemble([Touchsync_V1_SnapshotChunk]()) }
        // An empty board is one chunk with no strokes.
        let empty = SnapshotCodec.chunks(of: BoardState().snapshot(), board: "e", digest: BoardState().digest)
        #expect(empty.count == 1)
        #expect(try SnapshotCodec.assemble(empty).snapshot == BoardState().snapshot())
    }

    /// The hub writes snapshot replies in one pass: byte for byte what
    /// SwiftProtobuf writes for the same chunks (strokes in progress with
    /// predictions, force, angles, estimated samples; every chunk size);
    /// subscribers read them in one pass into the same strokes. Packed
    /// (wire format v2): accepted strokes carry their stored bytes (about
    /// v1's size: the gain is that nothing is decoded or packed again).
    @Test(arguments: [false, true]) func snapshotRepliesAreWrittenAsSwiftProtobufWritesThem(packed: Bool) throws {
        for seed: UInt64 in [5, 6, 7] {
            let hub = try simulatedBoard(seed: seed, events: 1500)
            #expect(hub.liveTouchCount > 0 && !hub.acceptedStrokes.isEmpty)
            for (board, state) in [("b", hub), ("empty", BoardState())] {
                for perChunk in [1, 300, SnapshotCodec.defaultSamplesPerChunk] {
                    let chunks = SnapshotCodec.chunks(
                        of: state.snapshot(), board: board, digest: state.digest, samplesPerChunk: perChunk, packedSamples: packed)
                    let replies = SnapshotCodec.encodedReplies(
                        of: state.snapshot(), board: board, digest: state.digest, requestID: seed, samplesPerChunk: perChunk,
                        packedSamples: packed)
                    #expect(replies.count == chunks.count)
                    let records = chunks.flatMap(\.strokes)
                    #expect(records.allSatisfy { ($0.acceptedPosition != 0 && packed) == !$0.packedSamples.isEmpty })
                    #expect(records.allSatisfy { $0.packedSamples.isEmpty || $0.samples.x.isEmpty })
                    // Loaded, the board is the hub's, and packed strokes stay packed.
                    let (snapshot, digest) = try SnapshotCodec.assemble(chunks)
                    let loaded = try BoardState(snapshot: snapshot, packing: false)
                    #expect(loaded.digest == digest && loaded == state)
                    #expect(loaded.acceptedStrokes.allSatisfy { $0.samples.isPacked == packed })
                    for (chunk, bytes) in zip(chunks, replies) {
                        var reply = Touchsync_V1_SnapshotReply()
                        reply.chunk = chunk
                        reply.requestID = seed
                        #expect(WireCodec.encode(reply) == bytes)
                        // A late joiner reads it in one pass into the same strokes.
                        let read = bytes.withUnsafeBytes { SnapshotReplyReader.read($0) }
                        #expect(read?.requestID == seed)
                        #expect(try read?.chunk == SnapshotChunkContents(chunk))
                        // Damaged: whatever the one-pass reader still reads, SwiftProtobuf's path reads the same.
                        var random = SplitMix64(seed: seed &+ UInt64(bytes.count))
                        for _ in 0..<20 {
                            var damaged = bytes
                            damaged[Int.random(in: 0..<damaged.count, using: &random)] ^= 1 << UInt8.random(in: 0...7, using: &random)
                            guard let fast = damaged.withUnsafeBytes({ SnapshotReplyReader.read($0) }) else { continue }
                            let slow = try? WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: damaged)
                            #expect(fast.requestID == slow?.requestID)
                            #expect(fast.chunk == slow.flatMap { try? SnapshotChunkContents($0.chunk) })
                        }
                    }
                }
            }
        }
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

extension StrokeDiff {
    /// The stroke a diff is about (a clear by a user: none, 0).
    var strokeIDForTest: UInt64 {
        switch self {
        case .began(let id, _, _, _), .appended(let id, _, _), .predicted(let id, _), .amended(let id, _, _), .accepted(let id, _),
            .cancelled(let id), .removed(let id):
            id.rawValue
        case .restored(let stroke): stroke.id.rawValue
        case .cleared: 0
        }
    }
}
