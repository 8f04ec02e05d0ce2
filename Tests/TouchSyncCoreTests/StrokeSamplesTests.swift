import Foundation
import PropertyChecks
import Testing
import TouchSyncCore
import TouchSyncSimulation

/// The packed stroke storage against a plain `[Sample]` kept beside it.
@Suite("Packed stroke samples")
struct StrokeSamplesTests {
    /// Random samples of every shape: smooth runs, jumps across the whole
    /// Int32 and Int64 range (the model stores what a replica is sent, so
    /// even values the hub refuses must come back exactly), force and angles
    /// appearing part-way, estimation indices.
    static func randomSamples(_ random: inout SplitMix64, count: Int) -> [Sample] {
        var samples: [Sample] = []
        var x: Int32 = Int32.random(in: -10_000...10_000, using: &random)
        var y: Int32 = 0
        var time = Int64.random(in: 0...1_000_000_000, using: &random)
        let wild = random.chance(0.3)
        for _ in 0..<count {
            if wild && random.chance(0.2) {
                x = Int32.random(in: Int32.min...Int32.max, using: &random)
                y = Int32.random(in: Int32.min...Int32.max, using: &random)
                time = Int64.random(in: Int64.min...Int64.max, using: &random)
            } else {
                x &+= Int32.random(in: -300...300, using: &random)
                y &+= Int32.random(in: -300...300, using: &random)
                time &+= Int64.random(in: 0...20_000, using: &random)
            }
            var sample = Sample(x: x, y: y, time: time)
            sample.flags = SampleFlags(rawValue: UInt8.random(in: 0...15, using: &random))
            if random.chance(0.3) { sample.force = UInt16.random(in: 0...UInt16.max, using: &random) }
            if random.chance(0.1) {
                sample.azimuth = Int16.random(in: Int16.min...Int16.max, using: &random)
                sample.altitude = Int16.random(in: Int16.min...Int16.max, using: &random)
            }
            if random.chance(0.1) { sample.estimationIndex = UInt32.random(in: 1...UInt32.max, using: &random) }
            samples.append(sample)
        }
        return samples
    }

    @Test("stores exactly what was appended, read in order and at any offset")
    func roundTrip() async {
        await checkProperty(count: 200, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 0...300)) { seed, count in
            var random = SplitMix64(seed: seed)
            let samples = Self.randomSamples(&random, count: count)
            var stored = StrokeSamples()
            // In pieces of random size, as diffs append them; packed part-way
            // (or never), so appends to either form are covered.
            let packAt = Int.random(in: 0...samples.count + 1, using: &random)
            var index = 0
            while index < samples.count {
                if index >= packAt && !stored.isPacked { stored.pack() }
                let piece = min(samples.count - index, Int.random(in: 1...70, using: &random))
                stored.append(contentsOf: samples[index..<index + piece])
                index += piece
            }
            #expect(stored.count == samples.count)
            #expect(Array(stored) == samples)
            #expect(stored.last == samples.last)
            #expect(stored.first == samples.first)
            #expect(stored.secondToLast == (samples.count >= 2 ? samples[samples.count - 2] : nil))
            for offset in samples.indices where offset % 7 == 0 || offset >= samples.count - 3 {
                #expect(stored[offset] == samples[offset], "offset \(offset) of \(samples.count)")
            }
            var packed = stored
            packed.pack()
            #expect(packed.isPacked)
            #expect(Array(packed) == samples)
            #expect(packed == stored)
            #expect(StrokeSamples(samples) == stored)
            for offset in samples.indices where offset % 5 == 0 || offset >= samples.count - 3 {
                #expect(packed[offset] == samples[offset], "offset \(offset) of \(samples.count), packed")
            }
            var visited: [Sample] = []
            packed.forEach { visited.append($0) }
            #expect(visited == samples, "forEach over the packed columns")
            visited = []
            stored.forEach { visited.append($0) }
            #expect(visited == samples, "forEach as stored")
            #expect(packed.last == samples.last)
            #expect(packed.secondToLast == (samples.count >= 2 ? samples[samples.count - 2] : nil))
        }
    }

    /// Amendments refine force, angles, flags and estimation index in place;
    /// a changed location (only a replica fed by a broken hub sees one) is
    /// stored too. Appends after the changes continue correctly.
    @Test("changes at any offset read back, and appends continue from them")
    func amendments() async {
        await checkProperty(count: 150, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 1...200)) { seed, count in
            var random = SplitMix64(seed: seed)
            var expected = Self.randomSamples(&random, count: count)
            var stored = StrokeSamples(expected)
            let packFirst = random.chance(0.7)
            if packFirst { stored.pack() }
            for _ in 0..<10 {
                let offset = Int.random(in: 0..<count, using: &random)
                var changed = Self.randomSamples(&random, count: 1)[0]
                if random.chance(0.8) {
                    changed.x = expected[offset].x
                    changed.y = expected[offset].y
                    changed.time = expected[offset].time
                }
                if random.chance(0.3) { changed.estimationIndex = 0 }
                expected[offset] = changed
                stored[offset] = changed
                #expect(stored[offset] == changed)
            }
            if !packFirst { stored.pack() }
            #expect(Array(stored) == expected)
            let more = Self.randomSamples(&random, count: Int.random(in: 0...80, using: &random))
            expected += more
            stored.append(contentsOf: more)
            #expect(Array(stored) == expected)
            #expect(stored == StrokeSamples(expected))
            for offset in expected.indices where expected[offset].estimationIndex != 0 {
                let index = expected[offset].estimationIndex
                #expect(stored.lastOffset(ofEstimation: index) == expected.lastIndex { $0.estimationIndex == index })
            }
        }
    }

    /// Copies share the packed columns until one of them changes.
    @Test("a copy keeps its samples when the original changes")
    func copiesAreValues() {
        var original: StrokeSamples = [Sample(x: 1, y: 2, time: 3), Sample(x: 4, y: 5, time: 6)]
        original.pack()
        let copy = original
        original.append(Sample(x: 7, y: 8, time: 9))
        original[0] = Sample(x: 1, y: 2, time: 3, force: 5, flags: .hasForce)
        #expect(Array(copy) == [Sample(x: 1, y: 2, time: 3), Sample(x: 4, y: 5, time: 6)])
        #expect(copy.count == 2 && copy.last == Sample(x: 4, y: 5, time: 6))
        #expect(original.count == 3 && original[0].force == 5 && original.last == Sample(x: 7, y: 8, time: 9))
    }

    /// The board packs what it accepts, keeps what is in progress plain, and a
    /// snapshot loaded without packing has the same digest before and after
    /// `packAcceptedStrokes()`.
    @Test("boards pack accepted strokes, from reduce, diffs and snapshots")
    func boardsPackAcceptedStrokes() throws {
        var simulator = SessionSimulator(seed: 5, profile: SimulationProfile())
        var hub = TestHub()
        var replica = BoardState()
        for _ in 0..<400 {
            if let batch = try hub.feed(simulator.next()) { try replica.apply(batch) }
        }
        #expect(!hub.board.acceptedStrokes.isEmpty)
        for board in [hub.board, replica] {
            #expect(board.acceptedStrokes.allSatisfy { $0.samples.isPacked })
            #expect(board.orderedActiveStrokes.allSatisfy { !$0.samples.isPacked })
        }
        #expect(replica.digest == hub.board.digest)
        var loaded = try BoardState(snapshot: hub.board.snapshot(), packing: false)
        var plain = hub.board.snapshot()
        for index in plain.acceptedStrokes.indices {
            plain.acceptedStrokes[index].samples = StrokeSamples(Array(plain.acceptedStrokes[index].samples))
        }
        var unpacked = try BoardState(snapshot: plain, packing: false)
        #expect(unpacked.acceptedStrokes.allSatisfy { !$0.samples.isPacked })
        #expect(unpacked.digest == hub.board.digest)
        unpacked.packAcceptedStrokes()
        loaded.packAcceptedStrokes()
        #expect(unpacked.acceptedStrokes.allSatisfy { $0.samples.isPacked })
        #expect(unpacked.digest == hub.board.digest && loaded.digest == hub.board.digest)
        #expect(try BoardState(snapshot: plain).acceptedStrokes.allSatisfy { $0.samples.isPacked })
    }

    @Test("different samples are not equal")
    func inequality() {
        var a: StrokeSamples = [Sample(x: 1, y: 2, time: 3), Sample(x: 4, y: 5, time: 6)]
        a.pack()
        var b = a
        #expect(a == b)
        b[0] = Sample(x: 1, y: 2, time: 3, force: 9, flags: .hasForce)
        #expect(a != b)
        #expect(a != [Sample(x: 1, y: 2, time: 3)])
    }

    /// The point of packing: a smooth finger with force costs well under a
    /// third of `[Sample]`'s 32 bytes per sample.
    @Test("a smooth stroke packs into a few bytes per sample")
    func compact() {
        var stored = StrokeSamples()
        for step in 0..<1000 {
            let angle = Double(step) / 100
            stored.append(
                Sample(
                    x: Int32(20_000 + 8_000 * cos(angle)), y: Int32(20_000 + 8_000 * sin(angle)), time: 1_000_000 + Int64(step) * 8_333,
                    force: UInt16(1000 + step % 300), flags: .hasForce))
        }
        let unpacked = Double(stored.heapBytes) / Double(stored.count)
        #expect(unpacked >= 32, "\(unpacked) bytes per sample before packing")
        stored.pack()
        let perSample = Double(stored.heapBytes) / Double(stored.count)
        #expect(perSample < 10, "\(perSample) bytes per sample")
    }
}
