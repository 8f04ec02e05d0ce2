import Foundation
import PropertyChecks
import Testing
import TouchSyncCore
import TouchSyncSimulation
import TouchSyncWire

/// Wire format v2's diff stream (docs/protocol.md, "Wire format v2"): the
/// same batches with bit-packed appends.
@Suite("Wire format v2: packed appends")
struct PackedAppendsTests {
    /// The same session published in v1 and v2: replicas fed either (through
    /// the one-pass reader and through SwiftProtobuf) equal the hub after
    /// every batch; a v2 stream started mid-session continues a snapshot
    /// taken then; v2 is smaller.
    @Test func v2ReplicasConvergeWithV1Ones() async {
        await checkProperty(count: 40, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 1...12)) { seed, window in
            var simulator = batchTestSimulator(seed: seed)
            var hub = BoardState()
            var v1 = DiffStreamEncoder(board: "board")
            var v2 = DiffStreamEncoder(board: "board", format: .v2)
            var coalescer = DiffCoalescer()
            var replicaV1 = BoardState(), replicaV2 = BoardState(), replicaV2Proto = BoardState()
            var late: (replica: BoardState, encoder: DiffStreamEncoder)? = nil
            let joinAt = 50 + Int(seed % 500)
            var bytes = (v1: 0, v2: 0)
            for step in 1...800 {
                coalescer.add(contentsOf: try reduceNext(&simulator, into: &hub))
                if (step % window == 0 || step == 800) && !coalescer.isEmpty {
                    let batch = hub.sealBatch(coalescer.take(), hubTime: Int64(step))
                    let encodedV1 = v1.encodedBytes(batch), encodedV2 = v2.encodedBytes(batch)
                    bytes.v1 += encodedV1.count
                    bytes.v2 += encodedV2.count
                    try encodedV1.withUnsafeBytes { _ = try replicaV1.apply(encodedBatch: $0) }
                    try encodedV2.withUnsafeBytes { _ = try replicaV2.apply(encodedBatch: $0) }
                    let proto = try WireCodec.decode(Touchsync_V1_DiffBatch.self, from: encodedV2)
                    #expect(WireCodec.encode(proto) == encodedV2, "v2 batches are canonical protobuf too")
                    #expect(proto.board.isEmpty, "a v2 batch's topic names its board")
                    #expect(!proto.diffs.contains { if case .appends = $0.kind { true } else { false } }, "no v1 appends in v2")
                    try replicaV2Proto.apply(proto)
                    if late != nil {
                        let encoded = late!.encoder.encodedBytes(batch)
                        try encoded.withUnsafeBytes { _ = try late!.replica.apply(encodedBatch: $0) }
                    }
                    #expect(replicaV2 == hub)
                }
                // A v2 stream started at a tick boundary, from the published state, continues a snapshot taken then.
                if step >= joinAt && late == nil && coalescer.isEmpty {
                    late = (try BoardState(snapshot: hub.snapshot()), DiffStreamEncoder(board: "board", format: .v2, continuing: hub))
                }
            }
            #expect(replicaV1 == hub && replicaV2 == hub && replicaV2Proto == hub)
            #expect(replicaV2.digest == hub.digest)
            #expect(late?.replica == hub)
            #expect(bytes.v2 < bytes.v1, "v2 \(bytes.v2) bytes, v1 \(bytes.v1)")
        }
    }

    /// Sessions like a load run's (default profile: force, 0 to 2 predicted
    /// samples, cancels, vanished touches, estimates, pauses), with the v2
    /// stream stopped and restarted at random (a subscriber that left and
    /// came back): a replica that resyncs from a snapshot at every gap ends
    /// with the hub's board after every batch it applies.
    @Test func v2StreamsStoppedAndRestartedStayExact() async {
        await checkProperty(count: 30, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 1...6)) { seed, window in
            var profile = SimulationProfile()
            profile.users = 1 + Int(seed % 5)
            var simulator = SessionSimulator(seed: seed, profile: profile)
            var random = SplitMix64(seed: seed ^ 0x5EED)
            var hub = BoardState()
            var encoder: DiffStreamEncoder? = DiffStreamEncoder(board: "b", format: .v2)
            var coalescer = DiffCoalescer()
            var replica = BoardState()
            var resyncs = 0
            var applied = 0
            for step in 1...600 {
                coalescer.add(contentsOf: try reduceNext(&simulator, into: &hub))
                guard step % window == 0 || step == 600, !coalescer.isEmpty else { continue }
                let batch = hub.sealBatch(coalescer.take(), hubTime: Int64(step))
                if let bytes = encoder?.encodedBytes(batch) {
                    if batch.sequence != replica.sequence + 1 {
                        replica = try BoardState(snapshot: hub.snapshot())  // the gap: resync
                        resyncs += 1
                    } else {
                        try bytes.withUnsafeBytes { _ = try replica.apply(encodedBatch: $0) }
                        applied += 1
                    }
                    #expect(replica == hub, "step \(step)")
                }
                // Between batches: the last v2 subscriber leaves, or one arrives (from the published state).
                if random.chance(0.05) { encoder = encoder == nil ? DiffStreamEncoder(board: "b", format: .v2, continuing: hub) : nil }
            }
            #expect(applied > 0, "v2 batches applied \(applied), resyncs \(resyncs)")
        }
    }

    /// The width rule, by hand: bits per value plus 8 per escaped byte, the smallest width on ties.
    @Test func theWidthIsTheSmallestEncoding() {
        #expect(PackedAppends.width(of: [0, 0, 0]) == 0)
        #expect(PackedAppends.width(of: [1, 1, 1]) == 2)  // 1 escapes at width 1 (all ones)
        #expect(PackedAppends.width(of: [0, 0, 0, 5]) == 1)  // 4 + 8 (5 escaped) ties 3 x 4 = 12: the smaller width
        #expect(PackedAppends.width(of: [12800, 6400, 128, 64, 4, 3]) == 3)
        #expect(PackedAppends.width(of: [0, 8332, 2]) == 2)
        #expect(PackedAppends.width(of: [.max]) == 1)  // nothing fits: one bit and the escape
        #expect(PackedAppends.width(of: Array(repeating: UInt64.max - 1, count: 100)[...]) == 64)
    }

    /// protocol.md's worked example of v2, byte for byte (worked out from the text).
    @Test func documentedV2ExampleEncodesAsDocumented() throws {
        var hub = BoardState()
        var diffs: [StrokeDiff] = []
        let samples = [
            Sample(x: 6400, y: 3200, time: 1_000_000), Sample(x: 6464, y: 3232, time: 1_004_166),
            Sample(x: 6530, y: 3262, time: 1_008_333),
        ]
        try hub.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: samples)]), from: UserNamespace("a"),
            style: .default, into: &diffs)
        var encoder = DiffStreamEncoder(board: "b", format: .v2)
        let proto = try WireCodec.decode(Touchsync_V1_DiffBatch.self, from: encoder.encodedBytes(hub.sealBatch(diffs, hubTime: 1)))
        #expect(proto.timeReference == 1_000_000)
        guard proto.diffs.count == 2, case .packedAppends(let packed) = proto.diffs[1].kind else {
            Issue.record("expected a began and packed appends: \(proto.diffs)")
            return
        }
        let expected: [UInt8] = [
            0x01, 0x02, 0x0C,  // one segment: stroke 1 (delta 1, zigzag 2), 3 samples (3 << 2), prediction unchanged (0)
            0x00, 0x03, 0x02,  // no features; x and y 3 bits, time 2 bits
            0x3F, 0xFF, 0x9C,  // the bit stream: 8 bits a sample
            0x80, 0x64, 0x80, 0x32, 0x80, 0x01, 0x40, 0x8C, 0x41,  // escaped: 12800 6400 128 64 8332
        ]
        #expect(Array(packed) == expected, "\(packed.map { String(format: "%02x", $0) }.joined(separator: " "))")
        var replica = BoardState()
        try replica.apply(proto)
        #expect(replica == hub)
    }

    /// Hostile or broken packed appends are MALFORMED, never a crash or a
    /// huge allocation; nothing of a refused batch is applied.
    @Test func malformedPackedAppendsAreRefused() throws {
        var hub = BoardState()
        var diffs: [StrokeDiff] = []
        try hub.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [Sample(x: 1, y: 1, time: 1)])]),
            from: UserNamespace("a"), style: .default, into: &diffs)
        var encoder = DiffStreamEncoder(board: "b", format: .v2)
        var replica = BoardState()
        try replica.apply(encoder.encode(hub.sealBatch(diffs, hubTime: 1)))
        diffs = []
        try hub.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .moved, samples: [Sample(x: 2, y: 2, time: 2)])]),
            from: UserNamespace("a"), style: .default, into: &diffs)
        let good = encoder.encode(hub.sealBatch(diffs, hubTime: 2))
        guard case .packedAppends(let valid) = good.diffs[0].kind else {
            Issue.record("expected packed appends")
            return
        }

        func refusal(_ packed: [UInt8]) -> DiffStreamError? {
            var batch = good
            batch.diffs[0].kind = .packedAppends(Data(packed))
            var copy = replica
            do {
                try copy.apply(batch)
                return nil
            } catch {
                #expect(copy == replica)
                return error
            }
        }
        func isMalformed(_ packed: [UInt8]) -> Bool {
            guard case .wire(let error) = refusal(packed) else { return false }
            return error.code == .malformed
        }
        #expect(refusal(Array(valid)) == nil)
        #expect(isMalformed([]), "empty")
        #expect(isMalformed([0x00]), "no segment")
        #expect(isMalformed([0x01, 0x02, 0x84, 0x80, 0x80, 0x02, 0x00, 0x00, 0x00]), "2^20 + 1 samples at width 0: refused before allocating")
        #expect(isMalformed([0x01, 0x02, 0x04, 0x08]), "unknown feature bits")
        #expect(isMalformed([0x01, 0x02, 0x04, 0x00, 0x41, 0x00]), "a width of 65")
        #expect(isMalformed([0x01, 0x02, 0x04, 0x00, 0x08, 0x08]), "the bit stream cut off")
        #expect(isMalformed(Array(valid) + [0x00]), "a byte after the escapes")
        #expect(isMalformed([0x01, 0x02, 0x04, 0x02, 0x01, 0x13, 0x00, 0x00]), "a flag run with the coalesced bit")
        #expect(isMalformed([0x01, 0x02, 0x04, 0x02, 0x01, 0x24, 0x00, 0x00]), "flag runs covering 2 of 1 samples")
        #expect(isMalformed([0x01, 0x02, 0x04, 0x00, 0x01, 0x00, 0x04]), "a padding bit set (x and y 0 in a 2-bit stream)")
        #expect(isMalformed([0x01, 0x7F, 0x04, 0x00, 0x00, 0x00]), "a stroke id below 1")
        if case .replica(.unknownStroke) = refusal([0x01, 0x0E, 0x04, 0x00, 0x00, 0x00]) {} else {
            Issue.record("a stroke that is not active is the replica's refusal")
        }
    }

    /// v2 amendments carry no position or time: they take the stored
    /// sample's, from the replica or from the same batch; broken ones are refused.
    @Test func packedAmendmentsTakeTheStoredPositionAndTime() throws {
        var hub = BoardState()
        var diffs: [StrokeDiff] = []
        var estimate = Sample(x: 640, y: 320, time: 1_000_000, force: 100, flags: [.estimated, .hasForce], estimationIndex: 7)
        try hub.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [estimate, Sample(x: 700, y: 330, time: 1_004_000)])]),
            from: UserNamespace("a"), style: .default, into: &diffs)
        var encoder = DiffStreamEncoder(board: "b", format: .v2)
        var replica = BoardState()
        try replica.apply(encoder.encode(hub.sealBatch(diffs, hubTime: 1)))
        estimate.flags = [.hasForce]
        estimate.force = 900
        let batch = hub.sealBatch([.amended(StrokeID(1), offset: 0, sample: estimate)], hubTime: 2)
        let bytes = encoder.encodedBytes(batch)
        let proto = try WireCodec.decode(Touchsync_V1_DiffBatch.self, from: bytes)
        guard case .packedAmended(let packed) = proto.diffs.first?.kind else {
            Issue.record("expected a packed amendment: \(proto.diffs)")
            return
        }
        #expect(Array(packed) == [0x01, 0x00, 0x04, 0x84, 0x07, 0x07], "stroke 1, offset 0, has force, force 900, index 7")
        let before = replica
        var viaReader = replica
        try bytes.withUnsafeBytes { _ = try viaReader.apply(encodedBatch: $0) }
        try replica.apply(proto)
        try hub.apply(batch.diffs[0])
        #expect(replica == hub && viaReader == hub)
        #expect(replica.activeStroke(StrokeID(1))?.samples[0] == estimate)

        func refusal(_ bytes: [UInt8]) -> DiffStreamError? {
            var broken = proto
            broken.diffs[0].kind = .packedAmended(Data(bytes))
            var copy = before
            do {
                try copy.apply(broken)
                return nil
            } catch {
                return error
            }
        }
        #expect(refusal([0x01, 0x00, 0x10, 0x00]) == .wire(.malformed("packed amendment: unknown flags 16")))
        #expect(refusal([0x01, 0x00, 0x00, 0x00, 0x00]) == .wire(.malformed("packed amendment: bytes after the estimation index")))
        #expect(refusal([0x01, 0x00, 0x04]) == .wire(.malformed("packed amendment: cut off")))
        #expect(refusal([0x01, 0x00, 0x04, 0x80, 0x80, 0x04, 0x00]) == .wire(.malformed("packed amendment: force out of range")))
        #expect(refusal([0x09, 0x00, 0x00, 0x00]) == .replica(.unknownStroke(StrokeID(9))))
        #expect(refusal([0x01, 0x02, 0x00, 0x00]) == .replica(.wrongOffset(StrokeID(1), expected: 1, received: 2)))
    }

    /// Valid v2 batches with bytes changed at random: applied or refused, never a crash.
    @Test func damagedV2BatchesAreRefusedNotFatal() async {
        await checkProperty(count: 20, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            var simulator = batchTestSimulator(seed: seed)
            var hub = BoardState()
            var encoder = DiffStreamEncoder(board: "board", format: .v2)
            var replica = BoardState()
            var random = SplitMix64(seed: seed)
            var refused = 0
            for step in 1...200 {
                let diffs = try reduceNext(&simulator, into: &hub)
                guard !diffs.isEmpty else { continue }
                let bytes = encoder.encodedBytes(hub.sealBatch(diffs, hubTime: Int64(step)))
                var damaged = bytes
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    damaged[Int.random(in: 0..<damaged.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
                var copy = replica
                do {
                    try damaged.withUnsafeBytes { _ = try copy.apply(encodedBatch: $0) }
                } catch {
                    refused += 1
                }
                try bytes.withUnsafeBytes { _ = try replica.apply(encodedBatch: $0) }
            }
            #expect(replica == hub)
            #expect(refused > 0)
        }
    }
}
