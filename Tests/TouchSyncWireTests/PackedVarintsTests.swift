import Testing
import TouchSyncSimulation
@testable import TouchSyncWire

@Suite("Packed varints")
struct PackedVarintsTests {
    /// The byte-by-byte count the word-at-a-time one replaced.
    static func reference(_ bytes: [UInt8], _ region: Range<Int>) -> Int? {
        var count = 0
        var run = 0
        for index in region {
            if bytes[index] & 0x80 == 0 {
                count += 1
                run = 0
            } else {
                run += 1
                if run >= 10 { return nil }
            }
        }
        return run == 0 ? count : nil
    }

    /// Random regions (inside bytes that differ around them) with runs of
    /// continuation bytes of every length, across word boundaries: the same
    /// counts and the same refusals as byte by byte.
    @Test func countsAndRefusesAsByteByByte() {
        var generator = SplitMix64(seed: 26)
        var refused = 0, counted = 0
        for _ in 0..<20_000 {
            let continuationChance = UInt64.random(in: 0...100, using: &generator)
            let length = Int.random(in: 0...48, using: &generator)
            var bytes: [UInt8] = []
            for _ in 0..<(length + 16) {
                let continuation = UInt64.random(in: 0..<100, using: &generator) < continuationChance
                bytes.append(continuation ? UInt8.random(in: 0x80...0xFF, using: &generator) : UInt8.random(in: 0..<0x80, using: &generator))
            }
            let start = Int.random(in: 0...8, using: &generator)
            let region = start..<(start + length)
            let expected = Self.reference(bytes, region)
            let counts = bytes.withUnsafeBufferPointer { PackedVarints.countVarints($0.baseAddress!, region) }
            #expect(counts == expected, "\(bytes[region].map { $0 >= 0x80 ? "c" : "e" }.joined())")
            if expected == nil { refused += 1 } else { counted += 1 }
        }
        // Runs of exactly 9 and 10 continuation bytes, at every offset in a word.
        for offset in 0..<16 {
            for run in [8, 9, 10, 11] {
                let bytes = [UInt8](repeating: 1, count: offset) + [UInt8](repeating: 0x80, count: run) + [0x01, 0x02]
                let counts = bytes.withUnsafeBufferPointer { PackedVarints.countVarints($0.baseAddress!, 0..<bytes.count) }
                #expect(counts == Self.reference(bytes, 0..<bytes.count) && (counts == nil) == (run >= 10), "offset \(offset), run \(run)")
            }
        }
        #expect(refused > 1000 && counted > 1000, "both outcomes are exercised: \(refused) refused, \(counted) counted")
    }
}
