import Foundation
import PropertyChecks
import Testing
import TouchSyncCore
import TouchSyncSimulation
import TouchSyncWire

/// Wire format v2's agent frames (docs/protocol.md, "Wire format v2
/// (agents)"): a frame's changes packed into one sample stream. Round trips
/// through both readers are in `AgentFrameDecoderTests` (every frame shape,
/// in both formats, and damaged messages).
@Suite("Wire format v2: packed changes")
struct PackedChangesTests {
    /// The worked example of protocol.md, byte for byte (the bytes were
    /// worked out from the text by a separate implementation first).
    @Test func theWorkedExampleEncodesAsDocumented() throws {
        var coalesced = Sample(x: 640, y: 1280, time: 995_834)
        coalesced.flags.insert(.coalesced)
        let changes = [
            TouchChange(
                touch: 3, phase: .moved, samples: [coalesced, Sample(x: 704, y: 1312, time: 1_000_000)],
                predicted: [Sample(x: 768, y: 1344, time: 1_008_333)]),
            TouchChange(touch: 4, phase: .began, samples: [Sample(x: 1920, y: 1280, time: 1_000_000)]),
        ]
        let bytes = PackedChanges.encode(changes, timeReference: 1_000_000)
        #expect(hex(bytes) == "020689024401" + "0c08080e0e0f" + "010a4017418040" + "8ca0bf1f8d20000500" + "4610")
        let decoded = try bytes.withUnsafeBytes { try PackedChanges.decode($0, 0..<$0.count, timeReference: 1_000_000) }
        #expect(decoded == changes)
        // As a frame: v1 needs more bytes for the same changes.
        let frame = TouchFrame(sequence: 1, changes: changes, aliveTouches: [3, 4])
        let sizes = (v1: WireCodec.encode(frame.proto(.v1)).count, v2: WireCodec.encode(frame.proto(.v2)).count)
        #expect(sizes.v2 == 42 && sizes.v1 == 63, "\(sizes)")
        #expect(try TouchFrame(frame.proto(.v2), sequence: 1) == frame)
    }

    /// Long runs (more than three samples, a tail of more than three), a
    /// change with no samples, amendments, every flag, and ids and values at
    /// their limits come back exactly.
    @Test func everyShapeRoundTrips() async {
        await checkProperty(count: 60, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            let run = sampleRun(seed: seed)
            let third = run.count / 3
            let estimated = run.filter { $0.estimationIndex != 0 }
            let changes = [
                TouchChange(touch: .max, phase: .moved, samples: Array(run[..<third]), predicted: Array(run[third..<(2 * third)])),
                TouchChange(touch: 0, phase: .stationary, amendments: estimated),
                TouchChange(touch: seed, phase: .began, samples: Array(run[(2 * third)...]), amendments: Array(estimated.prefix(2))),
                TouchChange(touch: seed &+ 1, phase: .ended),
                TouchChange(touch: 7, phase: .cancelled, predicted: Array(run.prefix(4))),
            ]
            let reference = run.last?.time ?? 0
            let bytes = PackedChanges.encode(changes, timeReference: reference)
            let decoded = try bytes.withUnsafeBytes { try PackedChanges.decode($0, 0..<$0.count, timeReference: reference) }
            #expect(decoded == changes)
        }
    }

    /// An agent's frames are written straight from the model
    /// (`AgentFrameEncoder`, one reused from frame to frame as an agent
    /// does), byte for byte what the generated code writes for the same
    /// message, in both formats: simulated frames (alive sets, coalesced and
    /// predicted samples, the agent's own numbering), plus frames without an
    /// alive set, with an empty one, without changes, and with every shape
    /// of change at sequence 0 and 2^64 - 1.
    @Test func framesWrittenStraightFromTheModelMatchTheGeneratedCode() async {
        func generated(_ frame: TouchFrame, _ sequence: UInt64, _ format: WireFormat) -> [UInt8] {
            var message = Touchsync_V1_AgentMessage()
            message.sequence = sequence
            message.frame = frame.proto(format)
            return WireCodec.encode(message)
        }
        var profile = SimulationProfile()
        profile.users = 2
        profile.fingersPerUser = 3
        var simulator = SessionSimulator(seed: 42, profile: profile)
        var frames = 0
        var encoder = AgentFrameEncoder()
        while frames < 500 {
            guard case .frame(_, let frame, _) = simulator.next() else { continue }
            for format in WireFormat.allCases {
                #expect(encoder.message(frame, sequence: frame.sequence, format: format) == generated(frame, frame.sequence, format))
            }
            frames += 1
        }
        await checkProperty(count: 60, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            let run = sampleRun(seed: seed)
            let half = run.count / 2
            let changes = [
                TouchChange(touch: seed, phase: .moved, samples: Array(run[..<half]), predicted: Array(run[half...])),
                TouchChange(touch: 0, phase: .stationary, amendments: run.filter { $0.estimationIndex != 0 }),
                TouchChange(touch: .max, phase: .ended),
            ]
            for alive in [nil, [], [seed, 0, .max]] as [[UInt64]?] {
                for changes in [changes, []] {
                    let frame = TouchFrame(sequence: 1, changes: changes, aliveTouches: alive)
                    for sequence in [0, seed, .max] as [UInt64] {
                        #expect(frame.encodedMessage(sequence: sequence, format: .v2) == generated(frame, sequence, .v2))
                        #expect(encoder.message(frame, sequence: sequence, format: .v2) == generated(frame, sequence, .v2))
                    }
                }
            }
        }
    }

    /// Simulated sessions like a load run's: packed frames are well under
    /// half of v1's bytes.
    @Test func packedFramesAreSmallerThanV1() {
        var profile = SimulationProfile()
        profile.users = 4
        profile.fingersPerUser = 5
        profile.coalesced = 2...2
        profile.predicted = 1...1
        var simulator = SessionSimulator(seed: 26, profile: profile)
        var bytes = (v1: 0, v2: 0)
        var frames = 0
        while frames < 2000 {
            guard case .frame(_, let frame, _) = simulator.next() else { continue }
            bytes.v1 += WireCodec.encode(frame.proto(.v1)).count
            bytes.v2 += WireCodec.encode(frame.proto(.v2)).count
            frames += 1
        }
        print("2,000 simulated frames: v1 \(bytes.v1) bytes, v2 \(bytes.v2)")
        #expect(bytes.v2 * 2 < bytes.v1, "v2 \(bytes.v2) bytes, v1 \(bytes.v1)")
    }

    /// Broken or hostile packed bytes are MALFORMED with a reason, never a
    /// crash, an allocation the bytes do not pay for, or a partial frame.
    @Test func hostileBytesAreMalformed() {
        func refusal(_ bytes: [UInt8]) -> String? {
            let result = bytes.withUnsafeBytes { raw in
                Result { () throws(WireError) in try PackedChanges.decode(raw, 0..<raw.count, timeReference: 0) }
            }
            guard case .failure(let error) = result else { return nil }
            return error.code == .malformed ? error.reason : "not MALFORMED: \(error)"
        }
        // One began change of one sample (x 1, y 2, time 0): 01 04 44 00 03 00 00 00 00 00 22.
        let valid = PackedChanges.encode([TouchChange(touch: 2, phase: .began, samples: [Sample(x: 1, y: 2, time: 0)])], timeReference: 0)
        #expect(hex(valid) == "0104440003000000000022")
        #expect(refusal(valid) == nil)
        #expect(refusal([]) == "packed changes: a varint is cut off or too long")
        #expect(refusal([0x00]) == "packed changes: 0 changes")
        #expect(refusal([0x05, 0x00, 0x44]) == "packed changes: 5 changes")  // more changes than bytes
        #expect(refusal([0x01, 0x00, 0x40]) == "packed changes: phase 0 is not a phase")
        #expect(refusal([0x01, 0x00, 0x58]) == "packed changes: phase 6 is not a phase")
        #expect(refusal([0x01, 0x00, 0x64, 0x00]) == "packed changes: an amended change with no amendments")
        #expect(refusal(Array(valid.dropLast())) == "packed changes: the bit stream is cut off")
        #expect(refusal(valid + [0x00]) == "packed changes: 1 bytes after the escaped values")
        var padded = valid
        padded[padded.count - 1] |= 0x80
        #expect(refusal(padded) == "packed changes: the bit stream's padding is not zero")
        // Widths above 64, and unknown feature bits.
        #expect(refusal([0x01, 0x00, 0x44, 0x00, 65, 0, 0, 0, 0, 0]) == "packed changes: a width above 64")
        #expect(refusal([0x01, 0x00, 0x44, 0x08]) == "packed changes: unknown feature bits 8")
        // 2^20 + 1 samples at width 0 would take no bytes at all: the count alone is refused.
        let huge = [0x01, 0x00, 0xC4] + varint(UInt64(PackedAppends.maxSamples) - 2) + [0x00] + [UInt8](repeating: 0, count: 6)
        #expect(refusal(huge) == "packed changes: a change of more than \(PackedAppends.maxSamples) samples")
        // Values that leave their types: x beyond Int32 (an escaped residual of 2^40).
        let far = [0x01, 0x00, 0x44, 0x00, 0x01, 0, 0, 0, 0, 0, 0x01] + varint(zigZag(Int64(1) << 40))
        #expect(refusal(far)?.contains("position leaves the 32-bit range") == true, "\(refusal(far) ?? "accepted")")
        // Random bytes: refused or decoded, never a crash.
        var random = SplitMix64(seed: 26)
        for _ in 0..<20_000 {
            let bytes = (0..<Int.random(in: 1...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            _ = refusal(bytes)
        }
    }

    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
