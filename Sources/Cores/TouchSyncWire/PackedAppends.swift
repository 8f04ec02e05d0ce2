import TouchSyncCore

// Wire format v2's appends (docs/protocol.md, "Wire format v2"): the
// segments of a v1 `StrokeAppends`, with offsets implied and the residuals
// bit-packed at one width per column and block, values that do not fit
// escaped to a varint list. The residuals are v1's: second-order deltas
// continuing each stroke's chain for x, y and time, first-order deltas
// across the block for force and angles.

public enum PackedAppends {
    /// Samples in one `packed_appends` (tails included), a decoder's bound
    /// before it allocates anything: a sample can take no bits at all
    /// (every width 0), so the count alone must be bounded.
    public static let maxSamples = 1 << 20

    /// The width v2's encoder gives a column of zigzag values: the one that
    /// makes the column smallest, `w` bits per value plus 8 bits per byte of
    /// escaped varints, the smallest such width on ties; 0 only when every
    /// value is 0. Normative: two hubs publish the same bytes.
    public static func width(of values: ArraySlice<UInt64>) -> Int { packedWidth(values) }

    /// The same rule over widths 0 to 15 (a value that needs more is escaped).
    public static func nibbleWidth(of values: ArraySlice<UInt64>) -> Int { packedWidth(values, maximum: 15) }
}

/// Where v2 expects a segment's first predicted sample: `gap` after the
/// stroke's last sample `last` (the time residual is the gap minus the
/// block's previous first-tail gap), on the line through `beforeLast` and
/// `last` scaled to that gap (truncated toward zero); at `last` when there
/// is no earlier sample, no time between the two, or the difference or the product overflows.
@inline(__always)
public func predictedPosition(last: Int64, beforeLast: Int64?, lastTime: Int64, beforeLastTime: Int64?, gap: Int64) -> Int64 {
    guard let beforeLast, let beforeLastTime else { return last }
    let interval = lastTime &- beforeLastTime
    guard interval > 0 else { return last }
    let (motion, motionOverflow) = last.subtractingReportingOverflow(beforeLast)
    let (scaled, overflow) = motion.multipliedReportingOverflow(by: gap)
    guard !motionOverflow, !overflow else { return last }
    let (value, sumOverflow) = last.addingReportingOverflow(scaled / interval)
    return sumOverflow ? last : value
}

/// `predictedPosition` for x and y of a tail's first sample, `gap` after `last`.
@inline(__always)
func predictedPoint(last: Sample, beforeLast: Sample?, gap: Int64) -> (x: Int64, y: Int64) {
    (
        predictedPosition(
            last: Int64(last.x), beforeLast: beforeLast.map { Int64($0.x) }, lastTime: last.time, beforeLastTime: beforeLast?.time,
            gap: gap),
        predictedPosition(
            last: Int64(last.y), beforeLast: beforeLast.map { Int64($0.y) }, lastTime: last.time, beforeLastTime: beforeLast?.time,
            gap: gap)
    )
}

/// One `packed_appends` under construction: the v2 counterpart of `AppendBlock`.
struct PackedAppendBlock: Sendable {
    private var headers: [UInt64] = []  // per segment: zigzag id delta, count, tail code
    private var xy: [UInt64] = []  // zigzag residuals, x then y per sample
    private var times: [UInt64] = []
    private var attributes = PackedAttributes()
    /// The time from the last sample to the first predicted one, in the block's previous tail.
    private var tailGap: Int64 = 0
    private var previousID: Int64 = 0
    private var x = DeltaChain(), y = DeltaChain(), time = DeltaChain()
    private var bits = BitWriter()
    private var escaped: [UInt64] = []
    private(set) var number: UInt64 = 1

    var isEmpty: Bool { headers.isEmpty }

    mutating func reset() {
        headers.removeAll(keepingCapacity: true)
        xy.removeAll(keepingCapacity: true)
        times.removeAll(keepingCapacity: true)
        attributes.reset()
        tailGap = 0
        previousID = 0
        number &+= 1
    }

    /// A segment continuing `chain`, which moves on over `samples`.
    mutating func add(
        _ id: StrokeID, chain: inout StrokeChain, samples: [Sample], predicted tail: [Sample]?, timeReference: Int64
    ) {
        defer { chain.advance(over: samples) }
        chain.block = number
        headers.append(zigZag(Int64(bitPattern: id.rawValue) &- previousID))
        previousID = Int64(bitPattern: id.rawValue)
        // The count and the tail code share a varint: count << 2 | min(tail, 3), then tail − 3 when that is 3.
        let tailCode = tail.map { UInt64($0.count + 1) } ?? 0
        headers.append(UInt64(samples.count) << 2 | min(tailCode, 3))
        headers.append(tailCode >= 3 ? tailCode - 3 : .max)
        x.prime(chain.last.map { Int64($0.x) }, chain.beforeLast.map { Int64($0.x) }, base: 0)
        y.prime(chain.last.map { Int64($0.y) }, chain.beforeLast.map { Int64($0.y) }, base: 0)
        time.prime(chain.last?.time, chain.beforeLast?.time, base: timeReference)
        for sample in samples { append(sample) }
        guard let tail, let first = tail.first else { return }
        var after = chain
        after.advance(over: samples)
        if let last = after.last {
            // The first predicted sample against the stroke's motion; the rest of the tail continues from it.
            let gap = first.time &- last.time
            times.append(zigZag(gap &- tailGap))
            tailGap = gap
            let beforeLast = after.beforeLast
            let (expectedX, expectedY) = predictedPoint(last: last, beforeLast: beforeLast, gap: gap)
            xy.append(zigZag(Int64(first.x) &- expectedX))
            xy.append(zigZag(Int64(first.y) &- expectedY))
            appendRest(first)
            x.prime(Int64(first.x), Int64(last.x), base: 0)
            y.prime(Int64(first.y), Int64(last.y), base: 0)
            time.prime(first.time, last.time, base: timeReference)
        } else {
            append(first)
        }
        for sample in tail.dropFirst() { append(sample) }
    }

    private mutating func append(_ sample: Sample) {
        xy.append(zigZag(x.encode(Int64(sample.x))))
        xy.append(zigZag(y.encode(Int64(sample.y))))
        times.append(zigZag(time.encode(sample.time)))
        appendRest(sample)
    }

    /// A sample's flags, force, angles and estimation index.
    private mutating func appendRest(_ sample: Sample) { attributes.add(sample) }

    /// The block as one `Diff` (field 4 of the batch) holding `packed_appends` (field 11).
    mutating func write(to out: inout ProtoWriter) {
        out.lengthDelimited(4) { diff in diff.lengthDelimited(11) { writeBody(to: &$0) } }
    }

    private mutating func writeBody(to packed: inout ProtoWriter) {
        packed.varint(UInt64(headers.count / 3))
        for value in headers where value != .max { packed.varint(value) }  // .max: no tail varint
        let anyCoalesced = attributes.writeSections(to: &packed)
        let widthXY = packedWidth(xy[...]), widthTime = packedWidth(times[...])
        packed.varint(UInt64(widthXY))
        packed.varint(UInt64(widthTime))
        attributes.writeWidths(to: &packed)

        escaped.removeAll(keepingCapacity: true)
        bits.reset()
        func field(_ value: UInt64, _ width: Int) { writeField(value, width: width, bits: &bits, escaped: &escaped) }
        for (index, sampleFlags) in attributes.flags.enumerated() {
            if anyCoalesced { bits.write(sampleFlags & SampleFlags.coalesced.rawValue != 0 ? 1 : 0, bits: 1) }
            field(xy[2 * index], widthXY)
            field(xy[2 * index + 1], widthXY)
            field(times[index], widthTime)
            attributes.writeFields(of: index, bits: &bits, escaped: &escaped)
        }
        bits.flush()
        packed.bytes.append(contentsOf: bits.bytes)
        for value in escaped { packed.varint(value) }
    }
}

/// Reads one `packed_appends` against the replica it continues.
enum PackedAppendsReader {
    static func decode(
        _ bytes: UnsafeRawBufferPointer, _ region: Range<Int>, timeReference: Int64, state: BoardState,
        chains: inout StrokeChains, into diffs: inout [StrokeDiff]
    ) throws(DiffStreamError) {
        do {
            var cursor = PackedCursor(bytes, region, context: "packed appends")
            try decode(&cursor, timeReference: timeReference, state: state, chains: &chains, into: &diffs)
        } catch let error as DiffStreamError {
            throw error
        } catch {
            throw .wire(error as? WireError ?? .malformed("packed appends: \(error)"))
        }
    }

    private static func decode(
        _ cursor: inout PackedCursor, timeReference: Int64, state: BoardState, chains: inout StrokeChains,
        into diffs: inout [StrokeDiff]
    ) throws {
        let region = cursor.position..<cursor.end
        func malformed(_ reason: String) -> WireError { cursor.malformed(reason) }
        func varint() throws(WireError) -> UInt64 { try cursor.varint() }

        let segments = try varint()
        guard segments >= 1, segments <= UInt64(region.count) else { throw malformed("\(segments) segments") }
        var layout: [(id: StrokeID, count: Int, tail: Int)] = []
        layout.reserveCapacity(Int(segments))
        var raw: Int64 = 0
        var total = 0
        for _ in 0..<segments {
            let (next, overflow) = raw.addingReportingOverflow(zigZagDecoded(try varint()))
            guard !overflow, next > 0 else { throw malformed("stroke id delta out of range") }
            raw = next
            let countAndTail = try varint()
            let count = countAndTail >> 2
            var tailCode = countAndTail & 3
            if tailCode == 3 {
                let more = try varint()
                guard more <= UInt64(PackedAppends.maxSamples) else { throw malformed("a tail of more than \(PackedAppends.maxSamples) samples") }
                tailCode += more
            }
            guard count <= UInt64(PackedAppends.maxSamples), tailCode <= UInt64(PackedAppends.maxSamples) + 1 else {
                throw malformed("a segment of more than \(PackedAppends.maxSamples) samples")
            }
            let tail = Int(tailCode) - 1
            total += Int(count) + max(tail, 0)
            guard total <= PackedAppends.maxSamples else {
                throw malformed("more than \(PackedAppends.maxSamples) samples")
            }
            layout.append((StrokeID(UInt64(raw)), Int(count), tail))
        }
        let sections = try PackedFlagSections.read(total: total, from: &cursor)
        let (hasCoalesced, withForce, withAngles) = (sections.hasCoalesced, sections.withForce, sections.withAngles)
        let widthXY = try varint(), widthTime = try varint()
        let widthForce = withForce > 0 ? try varint() : 0
        let widthAngles = withAngles > 0 ? try varint() : 0
        guard widthXY <= 64, widthTime <= 64, widthForce <= 64, widthAngles <= 64 else { throw malformed("a width above 64") }
        let totalBits =
            total * ((hasCoalesced ? 1 : 0) + 2 * Int(widthXY) + Int(widthTime)) + withForce * Int(widthForce)
            + withAngles * 2 * Int(widthAngles)
        var stream = try cursor.bitStream(bytes: (totalBits + 7) / 8)
        func field(_ width: UInt64) throws(WireError) -> UInt64 { try cursor.field(width, from: &stream) }

        var finisher = PackedSampleFinisher(sections, total: total, widthForce: widthForce, widthAngles: widthAngles)
        var x = DeltaChain(), y = DeltaChain(), time = DeltaChain()
        var tailGap: Int64 = 0
        /// The next sample; `after` (the stroke's last two samples) for a segment's first predicted one.
        func next(firstOfTail after: StrokeChain? = nil) throws -> Sample {
            var coalesced = false
            if hasCoalesced {  // a plain bit, never an escape
                guard let bit = stream.read(bits: 1) else { throw malformed("the bit stream is cut off") }
                coalesced = bit == 1
            }
            let (rx, ry, rt) = (zigZagDecoded(try field(widthXY)), zigZagDecoded(try field(widthXY)), zigZagDecoded(try field(widthTime)))
            let xValue: Int64, yValue: Int64, timeValue: Int64
            if let after, let last = after.last {
                let (gap, gapOverflow) = tailGap.addingReportingOverflow(rt)
                let (t, timeOverflow) = last.time.addingReportingOverflow(gap)
                guard !gapOverflow, !timeOverflow else { throw malformed("sample \(finisher.sampleIndex): time overflows") }
                tailGap = gap
                let (expectedX, expectedY) = predictedPoint(last: last, beforeLast: after.beforeLast, gap: gap)
                let (px, xOverflow) = expectedX.addingReportingOverflow(rx)
                let (py, yOverflow) = expectedY.addingReportingOverflow(ry)
                guard !xOverflow, !yOverflow else { throw malformed("sample \(finisher.sampleIndex): position overflows") }
                (xValue, yValue, timeValue) = (px, py, t)
                // The rest of the tail continues from this sample.
                x.prime(px, Int64(last.x), base: 0)
                y.prime(py, Int64(last.y), base: 0)
                time.prime(t, last.time, base: 0)
            } else {
                guard let xv = x.decode(rx), let yv = y.decode(ry), let tv = time.decode(rt) else {
                    throw malformed("sample \(finisher.sampleIndex): position or time overflows")
                }
                (xValue, yValue, timeValue) = (xv, yv, tv)
            }
            return try finisher.sample(x: xValue, y: yValue, time: timeValue, coalesced: coalesced, cursor: &cursor, stream: &stream)
        }

        for segment in layout {
            var current = try chains.chain(segment.id, in: state)
            x.prime(current.last.map { Int64($0.x) }, current.beforeLast.map { Int64($0.x) }, base: 0)
            y.prime(current.last.map { Int64($0.y) }, current.beforeLast.map { Int64($0.y) }, base: 0)
            time.prime(current.last?.time, current.beforeLast?.time, base: timeReference)
            if segment.count > 0 {
                var samples: [Sample] = []
                samples.reserveCapacity(segment.count)
                for _ in 0..<segment.count { samples.append(try next()) }
                diffs.append(.appended(segment.id, offset: current.count, samples: samples))
                current.advance(over: samples)
            }
            if segment.tail >= 0 {
                var tail: [Sample] = []
                tail.reserveCapacity(segment.tail)
                for index in 0..<segment.tail { tail.append(try next(firstOfTail: index == 0 ? current : nil)) }
                diffs.append(.predicted(segment.id, samples: tail))
            }
            chains.set(segment.id, current)
        }
        try PackedSampleFinisher.finish(stream, cursor)
    }
}

/// Wire format v2's amendment: the stored sample's new flags, force, angles
/// and estimation index; its position and time are the stored ones.
enum PackedAmendment {
    static func write(_ id: StrokeID, offset: Int, _ sample: Sample, to out: inout ProtoWriter) {
        out.lengthDelimited(4) { diff in
            diff.lengthDelimited(12) { body in
                body.varint(id.rawValue)
                body.varint(UInt64(offset))
                body.varint(UInt64(sample.flags.rawValue))
                if sample.flags.contains(.hasForce) { body.varint(UInt64(sample.force)) }
                if sample.flags.contains(.hasAngles) {
                    body.varint(zigZag(Int64(sample.azimuth)))
                    body.varint(zigZag(Int64(sample.altitude)))
                }
                body.varint(UInt64(sample.estimationIndex))
            }
        }
    }

    /// The amendment as the model's diff: the sample it amends is looked up
    /// among the batch's diffs so far, then in the replica.
    static func decode(
        _ bytes: UnsafeRawBufferPointer, _ region: Range<Int>, state: BoardState, decoded diffs: [StrokeDiff]
    ) throws(DiffStreamError) -> StrokeDiff {
        func malformed(_ reason: String) -> DiffStreamError { .wire(.malformed("packed amendment: \(reason)")) }
        guard var fields = PackedVarints(bytes, region) else { throw malformed("a varint is cut off or too long") }
        func next() throws(DiffStreamError) -> UInt64 {
            guard fields.hasMore else { throw malformed("cut off") }
            return fields.next()
        }
        let id = StrokeID(try next())
        guard let offset = Int(exactly: try next()), offset <= Int(UInt32.max) else { throw malformed("offset out of range") }
        let flagBits = try next()
        guard flagBits <= UInt64(SampleFlags.all.rawValue) else { throw malformed("unknown flags \(flagBits)") }
        let flags = SampleFlags(rawValue: UInt8(flagBits))
        var force: UInt16 = 0, azimuth: Int16 = 0, altitude: Int16 = 0
        if flags.contains(.hasForce) {
            guard let value = UInt16(exactly: try next()) else { throw malformed("force out of range") }
            force = value
        }
        if flags.contains(.hasAngles) {
            guard let a = Int16(exactly: zigZagDecoded(try next())), let b = Int16(exactly: zigZagDecoded(try next())) else {
                throw malformed("angle out of range")
            }
            (azimuth, altitude) = (a, b)
        }
        guard let estimation = UInt32(exactly: try next()) else { throw malformed("estimation index beyond 32 bits") }
        guard !fields.hasMore else { throw malformed("bytes after the estimation index") }
        var stored: Sample? = nil
        for diff in diffs.reversed() {
            if case .appended(id, let start, let samples) = diff, offset >= start, offset < start + samples.count {
                stored = samples[offset - start]
                break
            }
        }
        if stored == nil {
            guard let stroke = state.activeStroke(id) else { throw .replica(.unknownStroke(id)) }
            guard offset < stroke.samples.count else {
                throw .replica(.wrongOffset(id, expected: stroke.samples.count - 1, received: offset))
            }
            stored = stroke.samples[offset]
        }
        let sample = Sample(
            x: stored!.x, y: stored!.y, time: stored!.time, force: force, azimuth: azimuth, altitude: altitude, flags: flags,
            estimationIndex: estimation)
        return .amended(id, offset: offset, sample: sample)
    }
}
