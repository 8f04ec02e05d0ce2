import TouchSyncCore

// What wire format v2's two packed layouts share (docs/protocol.md,
// "Packed sample streams"): a column's width rule, the bit stream, and the
// flag and estimation sections ahead of it. `packed_appends` (hub to
// subscribers) and `packed_changes` (agent to hub) differ only in their
// headers and in where each sample's residuals start from.

/// `maximum`: the widest width allowed (64, or 15 where a width is a nibble).
func packedWidth(_ values: ArraySlice<UInt64>, maximum: Int = 64) -> Int {
    guard values.contains(where: { $0 != 0 }) else { return 0 }
    // Escaped bytes by the width a value needs not to be escaped (1...65), on
    // the stack: the hub chooses four widths per block.
    return withUnsafeTemporaryAllocation(of: Int.self, capacity: 66) { escapedBytes in
        escapedBytes.initialize(repeating: 0)
        for value in values {
            let needed = value == .max ? 65 : 64 - (value &+ 1).leadingZeroBitCount
            escapedBytes[needed] += varintSize(value)
        }
        var above = escapedBytes[2...].reduce(0, +)  // escaped at width 1
        var best = 1, bestCost = values.count + 8 * above
        for width in 2...max(maximum, 2) {
            above -= escapedBytes[width]
            let cost = width * values.count + 8 * above
            if cost < bestCost { (best, bestCost) = (width, cost) }
        }
        return best
    }
}

@inline(__always)
func varintSize(_ value: UInt64) -> Int { value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7 }

/// Bits, least significant first, into bytes filled from bit 0.
public struct BitWriter: Sendable {
    public private(set) var bytes: [UInt8] = []
    private var pending: UInt64 = 0
    private var pendingBits = 0

    public init() {}

    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        pending = 0
        pendingBits = 0
    }

    @inline(__always)
    public mutating func write(_ value: UInt64, bits: Int) {
        guard bits > 0 else { return }
        var value = bits == 64 ? value : value & ((1 << UInt64(bits)) - 1)
        var left = bits
        while left > 0 {
            let room = 64 - pendingBits
            let take = min(room, left)
            pending |= (take == 64 ? value : value & ((1 << UInt64(take)) - 1)) << UInt64(pendingBits)
            pendingBits += take
            left -= take
            value = take == 64 ? 0 : value >> UInt64(take)
            while pendingBits >= 8 {
                bytes.append(UInt8(truncatingIfNeeded: pending))
                pending >>= 8
                pendingBits -= 8
            }
        }
    }

    /// The last byte, its unused bits zero.
    public mutating func flush() {
        if pendingBits > 0 { bytes.append(UInt8(truncatingIfNeeded: pending)) }
        pending = 0
        pendingBits = 0
    }
}

/// Reads what `BitWriter` wrote from a region of received bytes.
struct BitReader {
    private let base: UnsafePointer<UInt8>?
    private var bit: Int
    private let endBit: Int

    init(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) {
        base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        bit = region.lowerBound * 8
        endBit = region.upperBound * 8
    }

    /// nil past the region's end.
    @inline(__always)
    mutating func read(bits: Int) -> UInt64? {
        guard bits > 0 else { return 0 }
        guard endBit - bit >= bits, let base else { return nil }
        var value: UInt64 = 0
        var done = 0
        while done < bits {
            let byte = UInt64(base[bit >> 3]) >> UInt64(bit & 7)
            let take = min(8 - (bit & 7), bits - done)
            value |= (byte & ((1 << UInt64(take)) - 1)) << UInt64(done)
            done += take
            bit += take
        }
        return value
    }

    /// Whether the bits left in the last byte are all zero.
    var paddingIsZero: Bool {
        guard bit < endBit, let base else { return true }
        return UInt64(base[(endBit - 1) >> 3]) >> UInt64(bit & 7) == 0
    }
}


/// The sections of a v2 sample stream ahead of its widths: the feature
/// varint (1 coalesced bits in the stream, 2 flag runs, 4 estimation
/// indexes), the flag runs (count, then `length << 4 | flags`) and the
/// estimation indexes (count, then per index the samples skipped and the index).
struct PackedFlagSections {
    var hasCoalesced = false
    /// Flag runs (the coalesced flag is never in them); empty: no flags.
    var runs: [(length: UInt64, flags: UInt8)] = []
    var withForce = 0, withAngles = 0
    /// (position among the samples, index), in order.
    var estimations: [(position: Int, index: UInt32)] = []

    /// Writes the sections for `flags` (one per sample) and returns whether the stream carries coalesced bits.
    static func write(flags: [UInt8], estimations: [(position: Int, index: UInt32)], to packed: inout ProtoWriter) -> Bool {
        let anyCoalesced = flags.contains { $0 & SampleFlags.coalesced.rawValue != 0 }
        let runMask = SampleColumnWriter.runFlagsMask
        let anyRunFlags = flags.contains { $0 & runMask != 0 }
        packed.varint((anyCoalesced ? 1 : 0) | (anyRunFlags ? 2 : 0) | (estimations.isEmpty ? 0 : 4))
        if anyRunFlags {
            // The number of runs, then the runs: two passes, no array.
            var count: UInt64 = 1
            for index in flags.indices.dropFirst() where flags[index] & runMask != flags[index - 1] & runMask { count += 1 }
            packed.varint(count)
            var runFlags = flags[0] & runMask, length: UInt64 = 0
            for sampleFlags in flags {
                if sampleFlags & runMask != runFlags {
                    packed.varint(length << 4 | UInt64(runFlags))
                    (runFlags, length) = (sampleFlags & runMask, 0)
                }
                length += 1
            }
            packed.varint(length << 4 | UInt64(runFlags))
        }
        if !estimations.isEmpty {
            packed.varint(UInt64(estimations.count))
            var next = 0
            for (position, index) in estimations {
                packed.varint(UInt64(position - next))
                packed.varint(UInt64(index))
                next = position + 1
            }
        }
        return anyCoalesced
    }

    /// Reads the sections for a stream of `total` samples.
    static func read(total: Int, from cursor: inout PackedCursor) throws(WireError) -> PackedFlagSections {
        var sections = PackedFlagSections()
        let features = try cursor.varint()
        guard features <= 7 else { throw cursor.malformed("unknown feature bits \(features)") }
        sections.hasCoalesced = features & 1 != 0
        if features & 2 != 0 {
            let count = try cursor.varint()
            guard count >= 1, count <= UInt64(total) else { throw cursor.malformed("\(count) flag runs for \(total) samples") }
            var covered: UInt64 = 0
            for _ in 0..<count {
                let entry = try cursor.varint()
                let (length, flags) = (entry >> 4, UInt8(entry & 0xF))
                guard length >= 1, flags & SampleFlags.coalesced.rawValue == 0 else {
                    throw cursor.malformed("a flag run is empty or sets the coalesced flag")
                }
                covered += length
                guard covered <= UInt64(total) else { throw cursor.malformed("flag runs cover more samples than the segments hold") }
                if flags & SampleFlags.hasForce.rawValue != 0 { sections.withForce += Int(length) }
                if flags & SampleFlags.hasAngles.rawValue != 0 { sections.withAngles += Int(length) }
                sections.runs.append((length, flags))
            }
            guard covered == UInt64(total) else { throw cursor.malformed("flag runs cover fewer samples than the segments hold") }
        }
        if features & 4 != 0 {
            let count = try cursor.varint()
            guard count >= 1, count <= UInt64(total) else { throw cursor.malformed("\(count) estimation indexes for \(total) samples") }
            sections.estimations.reserveCapacity(Int(count))
            var next = 0
            for _ in 0..<count {
                let skip = try cursor.varint()
                guard skip < UInt64(total - next) else { throw cursor.malformed("an estimation index past the last sample") }
                guard let index = UInt32(exactly: try cursor.varint()), index != 0 else {
                    throw cursor.malformed("an estimation index of 0 or beyond 32 bits")
                }
                sections.estimations.append((next + Int(skip), index))
                next += Int(skip) + 1
            }
        }
        return sections
    }
}

/// Varints read one at a time from a region of received bytes; errors name `context`.
struct PackedCursor {
    let bytes: UnsafeRawBufferPointer
    var position: Int
    let end: Int
    let context: String

    init(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>, context: String) {
        self.bytes = bytes
        position = region.lowerBound
        end = region.upperBound
        self.context = context
    }

    func malformed(_ reason: String) -> WireError { .malformed("\(context): \(reason)") }

    mutating func varint() throws(WireError) -> UInt64 {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
            let value = readCheckedVarint(base, &position, end: end)
        else { throw malformed("a varint is cut off or too long") }
        return value
    }

    mutating func byte() throws(WireError) -> UInt8 {
        guard position < end else { throw malformed("cut off") }
        defer { position += 1 }
        return bytes[position]
    }

    /// The next `count` bytes as a bit stream.
    mutating func bitStream(bytes count: Int) throws(WireError) -> BitReader {
        guard end - position >= count else { throw malformed("the bit stream is cut off") }
        defer { position += count }
        return BitReader(bytes, position..<(position + count))
    }

    /// The escape rule: a value of all ones at its width is followed by its varint in the escapes.
    @inline(__always)
    mutating func field(_ width: UInt64, from stream: inout BitReader) throws(WireError) -> UInt64 {
        guard let value = stream.read(bits: Int(width)) else { throw malformed("the bit stream is cut off") }
        let escape: UInt64 = width == 64 ? .max : (1 << width) - 1
        return width > 0 && value == escape ? try varint() : value
    }
}

/// Writes a value at `width` bits, or the escape and the value into `escaped`.
@inline(__always)
public func writeField(_ value: UInt64, width: Int, bits: inout BitWriter, escaped: inout [UInt64]) {
    guard width > 0 else { return }
    let escape: UInt64 = width == 64 ? .max : (1 << UInt64(width)) - 1
    if value >= escape {
        bits.write(escape, bits: width)
        escaped.append(value)
    } else {
        bits.write(value, bits: width)
    }
}

/// A v2 sample's flags, estimation index, force and angles, after its
/// position and time: flags from the runs, the rest from the bit stream.
struct PackedSampleFinisher {
    private let sections: PackedFlagSections
    private let widthForce: UInt64, widthAngles: UInt64
    private var run = 0, runLeft: UInt64
    private var estimation = 0
    private var force: Int64 = 0, azimuth: Int64 = 0, altitude: Int64 = 0
    private(set) var sampleIndex = 0

    init(_ sections: PackedFlagSections, total: Int, widthForce: UInt64, widthAngles: UInt64) {
        self.sections = sections
        self.widthForce = widthForce
        self.widthAngles = widthAngles
        runLeft = sections.runs.first?.length ?? UInt64(total)
    }

    mutating func sample(
        x: Int64, y: Int64, time: Int64, coalesced: Bool, cursor: inout PackedCursor, stream: inout BitReader
    ) throws(WireError) -> Sample {
        guard let x32 = Int32(exactly: x), let y32 = Int32(exactly: y) else {
            throw cursor.malformed("sample \(sampleIndex): position leaves the 32-bit range")
        }
        if runLeft == 0 {
            run += 1
            runLeft = sections.runs[run].length
        }
        runLeft -= 1
        var flags = SampleFlags(rawValue: sections.runs.isEmpty ? 0 : sections.runs[run].flags)
        if coalesced { flags.insert(.coalesced) }
        var sample = Sample(x: x32, y: y32, time: time, flags: flags)
        if estimation < sections.estimations.count && sections.estimations[estimation].position == sampleIndex {
            sample.estimationIndex = sections.estimations[estimation].index
            estimation += 1
        }
        if flags.contains(.hasForce) {
            force &+= zigZagDecoded(try cursor.field(widthForce, from: &stream))
            guard let value = UInt16(exactly: force) else { throw cursor.malformed("sample \(sampleIndex): force out of range") }
            sample.force = value
        }
        if flags.contains(.hasAngles) {
            azimuth &+= zigZagDecoded(try cursor.field(widthAngles, from: &stream))
            altitude &+= zigZagDecoded(try cursor.field(widthAngles, from: &stream))
            guard let a = Int16(exactly: azimuth), let b = Int16(exactly: altitude) else {
                throw cursor.malformed("sample \(sampleIndex): angle out of range")
            }
            sample.azimuth = a
            sample.altitude = b
        }
        sampleIndex += 1
        return sample
    }

    /// The end of a stream: zero padding, and every escaped value read.
    static func finish(_ stream: BitReader, _ cursor: PackedCursor) throws(WireError) {
        guard stream.paddingIsZero else { throw cursor.malformed("the bit stream's padding is not zero") }
        guard cursor.position == cursor.end else {
            throw cursor.malformed("\(cursor.end - cursor.position) bytes after the escaped values")
        }
    }
}

/// A v2 sample stream's attributes under construction, sample by sample:
/// flags, force and angles (first-order deltas across the stream), and the
/// estimation indexes; then written as the sections, the widths of force
/// and angles, and each sample's fields in the bit stream.
struct PackedAttributes: Sendable {
    private(set) var flags: [UInt8] = []
    private var forces: [UInt64] = [], angles: [UInt64] = []  // angles: azimuth then altitude
    /// (position in the stream, index) of the samples with an estimation index.
    private var estimations: [(position: Int, index: UInt32)] = []
    private var lastForce: Int64 = 0, lastAzimuth: Int64 = 0, lastAltitude: Int64 = 0
    private var widthForce = 0, widthAngles = 0, nextForce = 0, nextAngle = 0

    mutating func reset() {
        flags.removeAll(keepingCapacity: true)
        forces.removeAll(keepingCapacity: true)
        angles.removeAll(keepingCapacity: true)
        estimations.removeAll(keepingCapacity: true)
        (lastForce, lastAzimuth, lastAltitude) = (0, 0, 0)
        (widthForce, widthAngles, nextForce, nextAngle) = (0, 0, 0, 0)
    }

    mutating func add(_ sample: Sample) {
        flags.append(sample.flags.rawValue)
        if sample.flags.contains(.hasForce) {
            forces.append(zigZag(Int64(sample.force) - lastForce))
            lastForce = Int64(sample.force)
        }
        if sample.flags.contains(.hasAngles) {
            angles.append(zigZag(Int64(sample.azimuth) - lastAzimuth))
            angles.append(zigZag(Int64(sample.altitude) - lastAltitude))
            lastAzimuth = Int64(sample.azimuth)
            lastAltitude = Int64(sample.altitude)
        }
        if sample.estimationIndex != 0 { estimations.append((flags.count - 1, sample.estimationIndex)) }
    }

    /// The features, flag runs and estimation indexes; whether samples carry a coalesced bit.
    func writeSections(to out: inout ProtoWriter) -> Bool {
        PackedFlagSections.write(flags: flags, estimations: estimations, to: &out)
    }

    /// The widths of force and angles, each only when some sample has it (after the stream's other widths).
    mutating func writeWidths(to out: inout ProtoWriter) {
        widthForce = forces.isEmpty ? 0 : packedWidth(forces[...])
        widthAngles = angles.isEmpty ? 0 : packedWidth(angles[...])
        if !forces.isEmpty { out.varint(UInt64(widthForce)) }
        if !angles.isEmpty { out.varint(UInt64(widthAngles)) }
        (nextForce, nextAngle) = (0, 0)
    }

    /// Sample `index`'s force and angles in the bit stream (samples in order, after `writeWidths`).
    mutating func writeFields(of index: Int, bits: inout BitWriter, escaped: inout [UInt64]) {
        if flags[index] & SampleFlags.hasForce.rawValue != 0 {
            writeField(forces[nextForce], width: widthForce, bits: &bits, escaped: &escaped)
            nextForce += 1
        }
        if flags[index] & SampleFlags.hasAngles.rawValue != 0 {
            writeField(angles[nextAngle], width: widthAngles, bits: &bits, escaped: &escaped)
            writeField(angles[nextAngle + 1], width: widthAngles, bits: &bits, escaped: &escaped)
            nextAngle += 2
        }
    }
}
