// A packed stroke as bytes (docs/protocol.md, "Packed snapshots"): the
// storage form itself, so a hub sends an accepted stroke without decoding
// it and a replica keeps what it received without packing it again. Reading
// checks everything (one pass over every sample, which also finds the
// checkpoints) and refuses what the writer could not have written.

extension StrokeSamples {
    /// Why transferred bytes are not a packed stroke.
    public struct TransferError: Error, Sendable, Equatable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// Appends the samples' transfer form to `out`: varints count, stride,
    /// estimation count and (skip, index) pairs, residual byte count; the
    /// residual bytes; the attribute bytes. Packs a copy first if needed.
    public func writeTransfer(into out: inout [UInt8]) {
        guard let packed else {
            var copy = self
            copy.pack()
            return copy.writeTransfer(into: &out)
        }
        func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                out.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            out.append(UInt8(value))
        }
        varint(UInt64(packed.count))
        varint(UInt64(packed.attributeStride))
        varint(UInt64(packed.estimations.count))
        var next = 0
        for estimation in packed.estimations {
            varint(UInt64(estimation.offset - next))
            varint(UInt64(estimation.index))
            next = estimation.offset + 1
        }
        varint(UInt64(packed.bytes.count))
        out.append(contentsOf: packed.bytes)
        out.append(contentsOf: packed.attributes)
    }

    /// The bytes `writeTransfer` appends (exactly, for a packed stroke: a
    /// length prefix is written before them).
    public var transferByteCount: Int {
        guard let packed else { return count * 8 + 16 }
        func size(_ value: Int) -> Int { value < 0x80 ? 1 : (64 - UInt64(value).leadingZeroBitCount + 6) / 7 }
        var total = size(packed.count) + size(packed.attributeStride) + size(packed.estimations.count)
        var next = 0
        for estimation in packed.estimations {
            total += size(estimation.offset - next) + size(Int(estimation.index))
            next = estimation.offset + 1
        }
        return total + size(packed.bytes.count) + packed.bytes.count + packed.attributes.count
    }

    /// Packed samples from their transfer form (exactly `bytes`), checked.
    public init(transfer bytes: UnsafeRawBufferPointer) throws(TransferError) {
        func fail(_ reason: String) -> TransferError { TransferError(reason: "packed samples: \(reason)") }
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { throw fail("no bytes") }
        var position = 0
        func varint() throws(TransferError) -> UInt64 {
            guard let value = readCheckedVarint(base, &position, end: bytes.count) else { throw fail("a varint is cut off or too long") }
            return value
        }
        let count = try varint()
        // Every sample takes at least three residual bytes: the count is bounded by the bytes before anything is allocated.
        guard count >= 1, count <= UInt64(bytes.count / 3) else { throw fail("\(count) samples in \(bytes.count) bytes") }
        let stride = try varint()
        guard stride == 1 || stride == 3 || stride == 7 else { throw fail("attribute stride \(stride) (1, 3 or 7)") }
        let estimationCount = try varint()
        guard estimationCount <= count else { throw fail("\(estimationCount) estimation indexes for \(count) samples") }
        var estimations: [Estimation] = []
        estimations.reserveCapacity(Int(estimationCount))
        var next = 0
        for _ in 0..<estimationCount {
            let skip = try varint()
            guard skip < count - UInt64(next) else { throw fail("an estimation index past the last sample") }
            guard let index = UInt32(exactly: try varint()), index != 0 else { throw fail("an estimation index of 0 or beyond 32 bits") }
            estimations.append(Estimation(offset: next + Int(skip), index: index))
            next += Int(skip) + 1
        }
        let residualCount = try varint()
        let (n, s) = (Int(count), Int(stride))
        guard residualCount <= UInt64(bytes.count - position), bytes.count - position - Int(residualCount) == n * s else {
            throw fail("\(bytes.count - position) bytes left for \(residualCount) residual bytes and \(n) x \(s) attribute bytes")
        }
        let residualStart = position, residualEnd = position + Int(residualCount)
        // The residuals must be exactly 3n varints (each ends at a byte below 0x80); counting the
        // ends finds the checkpoints without decoding a sample (the replica's digest check decodes
        // them all next). A reader of these bytes then never reads past them, whatever they hold.
        let residuals = UnsafeBufferPointer(start: base + residualStart, count: Int(residualCount))
        let (checkpoints, ends) = Self.checkpoints(ofResiduals: residuals, samples: n)
        guard ends == 3 * n, residualCount > 0, base[residualEnd - 1] < 0x80 else {
            throw fail("the residuals hold \(ends) whole varints, not \(3 * n)")
        }
        // The last two samples, decoded from the checkpoint before them.
        var predictor = Predictor()
        var last: (Int32, Int32, Int64) = (0, 0, 0), beforeLast: (Int32, Int32, Int64) = (0, 0, 0)
        let firstDecoded = Swift.max(n - 2, 0) / StrokeSamples.checkpointInterval * StrokeSamples.checkpointInterval
        position = residualStart + (firstDecoded == 0 ? 0 : checkpoints[firstDecoded / StrokeSamples.checkpointInterval - 1])
        for offset in firstDecoded..<n {  // whole varints, checked above
            let rx = readWholeVarint(base, &position), ry = readWholeVarint(base, &position)
            let rt = readWholeVarint(base, &position)
            let (px, py, pt) = predictor.prediction(at: offset)
            predictor.advance(
                to: px &+ Int32(truncatingIfNeeded: zigZagDecoded(rx)), py &+ Int32(truncatingIfNeeded: zigZagDecoded(ry)),
                pt &+ zigZagDecoded(rt))
            (beforeLast, last) = (last, (predictor.x, predictor.y, predictor.time))
        }
        let attributes = UnsafeBufferPointer(start: base + residualEnd, count: n * s)
        if let offset = Self.firstInvalidFlags(attributes, stride: s) {
            throw fail("sample \(offset): flags \(attributes[offset * s])")
        }
        func sample(_ offset: Int, _ values: (Int32, Int32, Int64)) -> Sample {
            var sample = Sample(x: values.0, y: values.1, time: values.2, flags: SampleFlags(rawValue: attributes[offset * s]))
            if s >= 3 { sample.force = UInt16(attributes[offset * s + 1]) | UInt16(attributes[offset * s + 2]) << 8 }
            if s == 7 {
                sample.azimuth = Int16(bitPattern: UInt16(attributes[offset * s + 3]) | UInt16(attributes[offset * s + 4]) << 8)
                sample.altitude = Int16(bitPattern: UInt16(attributes[offset * s + 5]) | UInt16(attributes[offset * s + 6]) << 8)
            }
            if let estimation = estimations.last(where: { $0.offset == offset }) { sample.estimationIndex = estimation.index }
            return sample
        }
        self.init()
        packed = Packed(
            bytes: Array(UnsafeBufferPointer(start: base + residualStart, count: Int(residualCount))), attributes: Array(attributes),
            attributeStride: s, checkpoints: checkpoints, estimations: estimations, count: n, last: sample(n - 1, last),
            secondToLast: n >= 2 ? sample(n - 2, beforeLast) : nil)
    }
}

extension StrokeSamples {
    /// The byte offsets of samples 64, 128, ... in `residuals` (when they
    /// are 3 x `samples` varints) and how many varints end in them, found
    /// by counting varint ends a word at a time (`forEachVarintEndWord`).
    static func checkpoints(ofResiduals residuals: UnsafeBufferPointer<UInt8>, samples: Int) -> (checkpoints: [Int], ends: Int) {
        guard let base = residuals.baseAddress else { return ([], 0) }
        let varintsPerCheckpoint = 3 * checkpointInterval
        let totalEnds = 3 * samples
        var checkpoints: [Int] = []
        checkpoints.reserveCapacity(Swift.max(samples - 1, 0) / checkpointInterval)
        var ends = 0
        var nextCheckpoint = varintsPerCheckpoint  // the count of ends after which a checkpoint starts
        // A word is walked end by end only when a checkpoint falls in it.
        forEachVarintEndWord(base, count: residuals.count) { endBits, index, _ in
            let inWord = endBits.nonzeroBitCount
            guard ends + inWord >= nextCheckpoint else {
                ends += inWord
                return true
            }
            var bits = endBits
            while bits != 0 {
                ends += 1
                if ends == nextCheckpoint {
                    if ends < totalEnds { checkpoints.append(index + bits.trailingZeroBitCount / 8 + 1) }
                    nextCheckpoint += varintsPerCheckpoint
                }
                bits &= bits - 1
            }
            return true
        }
        return (checkpoints, ends)
    }

    /// The first sample whose flags byte is above `SampleFlags.all` (flags
    /// only: eight samples a word).
    static func firstInvalidFlags(_ attributes: UnsafeBufferPointer<UInt8>, stride: Int) -> Int? {
        let samples = attributes.count / stride
        var offset = 0
        if stride == 1, let base = attributes.baseAddress {
            // Flags are 0 to 15: a word of them has no bit in any byte's high half.
            while offset + 8 <= samples,
                UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self) & 0xF0F0_F0F0_F0F0_F0F0 == 0
            {
                offset += 8
            }
        }
        while offset < samples {
            if attributes[offset * stride] > SampleFlags.all.rawValue { return offset }
            offset += 1
        }
        return nil
    }
}
