import PropertyChecks
import Testing
import TouchSyncCore
import TouchSyncSimulation

/// Packed strokes as bytes (docs/protocol.md, "Packed snapshots"): what a
/// hub writes comes back as the same samples, and bytes it could not have
/// written are refused with a reason, never a crash.
@Suite("Packed samples in transfer form")
struct StrokeSamplesTransferTests {
    static func samples(seed: UInt64) -> [Sample] {
        var random = SplitMix64(seed: seed)
        let count = Int.random(in: 1...300, using: &random)
        let stride = seed % 3  // flags only, force, angles
        var x = Int32.random(in: -1_000_000...1_000_000, using: &random), y: Int32 = 0
        var time = Int64.random(in: -(1 << 40)...(1 << 50), using: &random)
        return (0..<count).map { _ in
            if random.chance(0.05) {
                x = random.chance(0.5) ? Int32.max : Int32.min
            } else {
                x = x &+ Int32.random(in: -300...300, using: &random)
            }
            y = y &+ Int32.random(in: -300...300, using: &random)
            time &+= Int64.random(in: 0...20_000, using: &random)
            var sample = Sample(x: x, y: y, time: time)
            sample.flags = SampleFlags(rawValue: UInt8.random(in: 0...15, using: &random))
            if stride >= 1 { sample.force = UInt16.random(in: 0...UInt16.max, using: &random) }
            if stride == 2 {
                sample.azimuth = Int16.random(in: Int16.min...Int16.max, using: &random)
                sample.altitude = Int16.random(in: Int16.min...Int16.max, using: &random)
            }
            if random.chance(0.1) { sample.estimationIndex = UInt32.random(in: 1...UInt32.max, using: &random) }
            return sample
        }
    }

    @Test func whatIsWrittenIsReadBack() async {
        await checkProperty(count: 200, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            let original = Self.samples(seed: seed)
            var packed = StrokeSamples(original)
            packed.pack()
            var bytes: [UInt8] = []
            packed.writeTransfer(into: &bytes)
            let read = try bytes.withUnsafeBytes { try StrokeSamples(transfer: $0) }
            #expect(read.isPacked && read.count == original.count)
            #expect(Array(read) == original)
            #expect(read.last == original.last && read.secondToLast == (original.count >= 2 ? original[original.count - 2] : nil))
            // Random access goes through the checkpoints the reader found.
            for offset in Swift.stride(from: 0, to: original.count, by: 37) { #expect(read[offset] == original[offset]) }
            // Written again, the same bytes (the stored form is kept as received).
            var again: [UInt8] = []
            read.writeTransfer(into: &again)
            #expect(again == bytes)
            #expect(bytes.count == packed.transferByteCount)
        }
    }

    @Test func brokenBytesAreRefused() {
        func refusal(_ bytes: [UInt8]) -> String? {
            let result = bytes.withUnsafeBytes { raw in
                Result { () throws(StrokeSamples.TransferError) in try StrokeSamples(transfer: raw) }
            }
            guard case .failure(let error) = result else { return nil }
            return error.reason
        }
        var one = StrokeSamples([Sample(x: 1, y: 2, time: 3, flags: .coalesced)])
        one.pack()
        var valid: [UInt8] = []
        one.writeTransfer(into: &valid)
        // Count 1, stride 1, no estimation, 3 residual bytes (zigzag 2, 4, 6), flags 1.
        #expect(valid == [1, 1, 0, 3, 2, 4, 6, 1])
        #expect(refusal(valid) == nil)
        #expect(refusal([]) == "packed samples: no bytes" || refusal([]) == "packed samples: a varint is cut off or too long")
        #expect(refusal([0, 1, 0, 0]) == "packed samples: 0 samples in 4 bytes")
        #expect(refusal([200, 1, 1, 0, 3, 2, 4, 6, 1]) == "packed samples: 200 samples in 9 bytes")
        #expect(refusal([1, 2, 0, 3, 2, 4, 6, 1]) == "packed samples: attribute stride 2 (1, 3 or 7)")
        #expect(refusal([1, 1, 2, 0, 1, 0, 1, 3, 2, 4, 6, 1]) == "packed samples: 2 estimation indexes for 1 samples")
        #expect(refusal([1, 1, 1, 1, 5, 3, 2, 4, 6, 1]) == "packed samples: an estimation index past the last sample")
        #expect(refusal([1, 1, 1, 0, 0, 3, 2, 4, 6, 1]) == "packed samples: an estimation index of 0 or beyond 32 bits")
        #expect(refusal(valid + [0]) == "packed samples: 5 bytes left for 3 residual bytes and 1 x 1 attribute bytes")
        #expect(refusal([1, 1, 0, 4, 2, 4, 6, 0, 1]) == "packed samples: the residuals hold 4 whole varints, not 3")
        #expect(refusal([1, 1, 0, 3, 2, 4, 0x86, 1]) == "packed samples: the residuals hold 2 whole varints, not 3")
        #expect(refusal([1, 1, 0, 4, 2, 4, 6, 0x86, 1]) == "packed samples: the residuals hold 3 whole varints, not 3", "cut off in a fourth")
        #expect(refusal([1, 1, 0, 3, 2, 4, 6, 16]) == "packed samples: sample 0: flags 16")
        // Longer strokes are checked eight bytes at a time: a bad flags byte or a
        // residual byte's continuation bit is found wherever it sits in a word.
        var twenty = StrokeSamples((0..<20).map { Sample(x: Int32($0) * 300, y: 0, time: Int64($0) * 8_000, flags: .coalesced) })
        twenty.pack()
        var twentyBytes: [UInt8] = []
        twenty.writeTransfer(into: &twentyBytes)
        #expect(refusal(twentyBytes) == nil)
        for bad in 0..<20 {
            var damaged = twentyBytes
            damaged[damaged.count - 20 + bad] = 0x31
            #expect(refusal(damaged) == "packed samples: sample \(bad): flags 49")
        }
        let residualStart = 4, residualEnd = twentyBytes.count - 20
        #expect(twentyBytes[residualStart - 1] == UInt8(residualEnd - residualStart))
        for index in residualStart..<(residualEnd - 1) where twentyBytes[index] < 0x80 {
            var damaged = twentyBytes
            damaged[index] |= 0x80  // two varints become one
            #expect(refusal(damaged) == "packed samples: the residuals hold 59 whole varints, not 60")
        }
        // Random damage: refused or read, never a crash.
        var random = SplitMix64(seed: 5)
        var bigger = StrokeSamples(Self.samples(seed: 2))
        bigger.pack()
        var bytes: [UInt8] = []
        bigger.writeTransfer(into: &bytes)
        for _ in 0..<5_000 {
            var damaged = bytes
            damaged[Int.random(in: 0..<damaged.count, using: &random)] ^= 1 << UInt8.random(in: 0...7, using: &random)
            if random.chance(0.2) { damaged.removeLast(Int.random(in: 1...damaged.count, using: &random)) }
            _ = refusal(damaged)
        }
    }
}
