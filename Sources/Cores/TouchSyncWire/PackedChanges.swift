import TouchSyncCore

// Wire format v2's agent frame (docs/protocol.md, "Wire format v2 (agents)"):
// a frame's touch changes as one packed sample stream, `TouchFrame.packed_changes`.
// Unlike the subscribers' stream it carries no state across messages (a
// refused or resent frame must decode alone), so each run of samples (a
// change's samples and tail, or its amendments) starts from the run before
// it in the frame: its first position from that run's first position, its
// first time offset and first interval from that run's (the fingers of one
// event share their timestamps). Residuals go to the column of their order
// (first sample, second sample, the rest), whose magnitudes differ widely.

public enum PackedChanges {
    /// `changes` packed against the frame's `event_time`.
    public static func encode(_ changes: [TouchChange], timeReference: Int64) -> [UInt8] {
        var out = ProtoWriter(capacity: 16 + changes.count * 24)
        write(changes, timeReference: timeReference, into: &out)
        return out.bytes
    }

    /// The same, appended to `out` (inside a message being written).
    static func write(_ changes: [TouchChange], timeReference: Int64, into out: inout ProtoWriter) {
        var columns = ChangeColumns()
        write(changes, timeReference: timeReference, into: &out, columns: &columns)
    }

    /// The same with `columns` reused (an agent's encoder keeps one: no allocation per frame but the message's).
    static func write(_ changes: [TouchChange], timeReference: Int64, into out: inout ProtoWriter, columns: inout ChangeColumns) {
        out.varint(UInt64(changes.count))
        var previousTouch: Int64 = 0
        for change in changes {
            let touch = Int64(bitPattern: change.touch)
            out.varint(zigZag(touch &- previousTouch))
            previousTouch = touch
            // One byte (not a varint): min(count, 3), amended, phase, min(tail, 3); then what did not fit.
            let (count, tail) = (change.samples.count, change.predicted.count)
            let amended = !change.amendments.isEmpty
            out.bytes.append(UInt8(min(count, 3) << 6 | (amended ? 32 : 0) | Int(change.phase.rawValue) << 2 | min(tail, 3)))
            if count >= 3 { out.varint(UInt64(count - 3)) }
            if tail >= 3 { out.varint(UInt64(tail - 3)) }
            if amended { out.varint(UInt64(change.amendments.count)) }
        }

        columns.reset()
        var runs = RunState(timeReference: timeReference)
        for change in changes {
            runs.encode(change.samples, tail: change.predicted, into: &columns)
            if !change.amendments.isEmpty { runs.encode(change.amendments, tail: [], into: &columns) }
        }
        columns.write(to: &out)
    }

    /// The changes of one `packed_changes`; MALFORMED when it is not exactly one.
    public static func decode(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>, timeReference: Int64) throws(WireError)
        -> [TouchChange]
    {
        var cursor = PackedCursor(bytes, region, context: "packed changes")
        let count = try cursor.varint()
        guard count >= 1, count <= UInt64(region.count) else { throw cursor.malformed("\(count) changes") }
        var layout: [(touch: TouchID, phase: TouchPhase, count: Int, tail: Int, amendments: Int)] = []
        layout.reserveCapacity(Int(count))
        var touch: Int64 = 0
        var total = 0
        // Per-column figures in SIMD values: the hub decodes a frame without allocating for them.
        var byOrder = SIMD3<Int>()
        func run(_ count: Int, tail: Int) {
            let length = count + tail
            if length > 0 { byOrder[0] += 1 }
            if length > 1 { byOrder[columnOrder(1, count: count)] += 1 }
            if length > 2 { byOrder[2] += length - 2 }
        }
        func bounded(_ value: UInt64, _ what: String) throws(WireError) -> Int {
            guard value <= UInt64(PackedAppends.maxSamples) else {
                throw cursor.malformed("\(what) of more than \(PackedAppends.maxSamples) samples")
            }
            return Int(value)
        }
        for _ in 0..<count {
            touch &+= zigZagDecoded(try cursor.varint())
            let header = try cursor.byte()
            guard let phase = TouchPhase(rawValue: (header >> 2) & 7) else {
                throw cursor.malformed("phase \((header >> 2) & 7) is not a phase")
            }
            var samples = Int(header >> 6), tail = Int(header & 3)
            if samples == 3 { samples += try bounded(try cursor.varint(), "a change") }
            if tail == 3 { tail += try bounded(try cursor.varint(), "a tail") }
            let amendments = header & 32 != 0 ? try bounded(try cursor.varint(), "amendments") : 0
            guard header & 32 == 0 || amendments > 0 else { throw cursor.malformed("an amended change with no amendments") }
            guard samples <= PackedAppends.maxSamples else { throw cursor.malformed("a change of more than \(PackedAppends.maxSamples) samples") }
            total += samples + tail + amendments
            guard total <= PackedAppends.maxSamples else { throw cursor.malformed("more than \(PackedAppends.maxSamples) samples") }
            layout.append((UInt64(bitPattern: touch), phase, samples, tail, amendments))
            run(samples, tail: tail)
            run(amendments, tail: 0)
        }
        let sections = try PackedFlagSections.read(total: total, from: &cursor)
        var widthXY = SIMD3<UInt64>(), widthTime = SIMD3<UInt64>()
        for order in 0..<3 { widthXY[order] = try cursor.varint() }
        for order in 0..<3 { widthTime[order] = try cursor.varint() }
        let widthForce = sections.withForce > 0 ? try cursor.varint() : 0
        let widthAngles = sections.withAngles > 0 ? try cursor.varint() : 0
        guard max(widthXY.max(), widthTime.max(), widthForce, widthAngles) <= 64 else { throw cursor.malformed("a width above 64") }
        var totalBits = total * (sections.hasCoalesced ? 1 : 0) + sections.withForce * Int(widthForce)
        totalBits += sections.withAngles * 2 * Int(widthAngles)
        for order in 0..<3 { totalBits += byOrder[order] * (2 * Int(widthXY[order]) + Int(widthTime[order])) }
        let stream = try cursor.bitStream(bytes: (totalBits + 7) / 8)  // before the reader copies the cursor
        var reader = ChangeStreamReader(
            cursor: cursor, stream: stream,
            finisher: PackedSampleFinisher(sections, total: total, widthForce: widthForce, widthAngles: widthAngles),
            hasCoalesced: sections.hasCoalesced, widthXY: widthXY, widthTime: widthTime, runs: RunState(timeReference: timeReference))
        var changes: [TouchChange] = []
        changes.reserveCapacity(layout.count)
        for entry in layout {
            var change = TouchChange(touch: entry.touch, phase: entry.phase)
            (change.samples, change.predicted) = try reader.run(count: entry.count, tail: entry.tail)
            if entry.amendments > 0 { change.amendments = try reader.run(count: entry.amendments, tail: 0).samples }
            changes.append(change)
        }
        try reader.finish()
        return changes
    }
}

/// The column of a run's sample `index` when the run has `count` real
/// samples: its order (0, 1, 2 and beyond), except that a tail's first
/// sample after a real one is coded against the motion, in column 2.
@inline(__always)
private func columnOrder(_ index: Int, count: Int) -> Int { index == count && count > 0 ? 2 : min(index, 2) }

/// What a run starts from: the previous run's first position, first time
/// offset and first interval, and the frame's last tail gap.
private struct RunState {
    let timeReference: Int64
    var anchorX: Int64 = 0, anchorY: Int64 = 0
    var firstOffset: Int64 = 0, firstInterval: Int64 = 0
    var tailGap: Int64 = 0

    init(timeReference: Int64) { self.timeReference = timeReference }

    /// The residuals of `samples` then `tail` (the tail's first sample against the run's motion).
    mutating func encode(_ samples: [Sample], tail: [Sample], into columns: inout ChangeColumns) {
        var x = DeltaChain(), y = DeltaChain(), time = DeltaChain()
        x.prime(nil, nil, base: anchorX)
        y.prime(nil, nil, base: anchorY)
        time.prime(nil, nil, base: timeReference)
        var index = 0
        var last: Sample? = nil, beforeLast: Sample? = nil
        func add(_ sample: Sample) {
            let rx = x.encode(Int64(sample.x)), ry = y.encode(Int64(sample.y))
            var rt = time.encode(sample.time)
            if index == 0 {
                (rt, firstOffset) = (rt &- firstOffset, rt)
                (anchorX, anchorY) = (Int64(sample.x), Int64(sample.y))
            } else if index == 1 {
                (rt, firstInterval) = (rt &- firstInterval, rt)
            }
            columns.add(sample, x: rx, y: ry, time: rt, order: columnOrder(index, count: samples.count))
            (beforeLast, last) = (last, sample)
            index += 1
        }
        for sample in samples { add(sample) }
        guard let first = tail.first else { return }
        if let last {
            let gap = first.time &- last.time
            let (expectedX, expectedY) = predictedPoint(last: last, beforeLast: beforeLast, gap: gap)
            columns.add(first, x: Int64(first.x) &- expectedX, y: Int64(first.y) &- expectedY, time: gap &- tailGap, order: 2)
            tailGap = gap
            x.prime(Int64(first.x), Int64(last.x), base: 0)
            y.prime(Int64(first.y), Int64(last.y), base: 0)
            time.prime(first.time, last.time, base: 0)
            index += 1
        } else {
            add(first)
        }
        for sample in tail.dropFirst() { add(sample) }
    }
}

/// The residuals of a frame by column, then written as one v2 sample
/// stream. Reusable: `reset` keeps every buffer's capacity.
struct ChangeColumns: Sendable {
    /// x then y of each sample, by column order (first sample, second, the rest).
    /// Three stored arrays and a branch per order, not an array of arrays: that
    /// cost the agents' encoder 10-12% (`bench`, 4.05-4.18 against 4.56-4.61 M samples/s).
    private var xy: ([UInt64], [UInt64], [UInt64]) = ([], [], [])
    private var times: ([UInt64], [UInt64], [UInt64]) = ([], [], [])
    private var orders: [UInt8] = []
    private var attributes = PackedAttributes()
    private var bits = BitWriter()
    private var escaped: [UInt64] = []

    mutating func reset() {
        xy.0.removeAll(keepingCapacity: true)
        xy.1.removeAll(keepingCapacity: true)
        xy.2.removeAll(keepingCapacity: true)
        times.0.removeAll(keepingCapacity: true)
        times.1.removeAll(keepingCapacity: true)
        times.2.removeAll(keepingCapacity: true)
        orders.removeAll(keepingCapacity: true)
        attributes.reset()
    }

    mutating func add(_ sample: Sample, x: Int64, y: Int64, time: Int64, order: Int) {
        switch order {
        case 0:
            xy.0.append(zigZag(x))
            xy.0.append(zigZag(y))
            times.0.append(zigZag(time))
        case 1:
            xy.1.append(zigZag(x))
            xy.1.append(zigZag(y))
            times.1.append(zigZag(time))
        default:
            xy.2.append(zigZag(x))
            xy.2.append(zigZag(y))
            times.2.append(zigZag(time))
        }
        orders.append(UInt8(order))
        attributes.add(sample)
    }

    mutating func write(to out: inout ProtoWriter) {
        let anyCoalesced = attributes.writeSections(to: &out)
        let widthXY = (packedWidth(xy.0[...]), packedWidth(xy.1[...]), packedWidth(xy.2[...]))
        let widthTime = (packedWidth(times.0[...]), packedWidth(times.1[...]), packedWidth(times.2[...]))
        out.varint(UInt64(widthXY.0))
        out.varint(UInt64(widthXY.1))
        out.varint(UInt64(widthXY.2))
        out.varint(UInt64(widthTime.0))
        out.varint(UInt64(widthTime.1))
        out.varint(UInt64(widthTime.2))
        attributes.writeWidths(to: &out)

        bits.reset()
        escaped.removeAll(keepingCapacity: true)
        var next = (0, 0, 0)
        for index in orders.indices {
            if anyCoalesced { bits.write(attributes.flags[index] & SampleFlags.coalesced.rawValue != 0 ? 1 : 0, bits: 1) }
            switch orders[index] {
            case 0:
                writeField(xy.0[2 * next.0], width: widthXY.0, bits: &bits, escaped: &escaped)
                writeField(xy.0[2 * next.0 + 1], width: widthXY.0, bits: &bits, escaped: &escaped)
                writeField(times.0[next.0], width: widthTime.0, bits: &bits, escaped: &escaped)
                next.0 += 1
            case 1:
                writeField(xy.1[2 * next.1], width: widthXY.1, bits: &bits, escaped: &escaped)
                writeField(xy.1[2 * next.1 + 1], width: widthXY.1, bits: &bits, escaped: &escaped)
                writeField(times.1[next.1], width: widthTime.1, bits: &bits, escaped: &escaped)
                next.1 += 1
            default:
                writeField(xy.2[2 * next.2], width: widthXY.2, bits: &bits, escaped: &escaped)
                writeField(xy.2[2 * next.2 + 1], width: widthXY.2, bits: &bits, escaped: &escaped)
                writeField(times.2[next.2], width: widthTime.2, bits: &bits, escaped: &escaped)
                next.2 += 1
            }
            attributes.writeFields(of: index, bits: &bits, escaped: &escaped)
        }
        bits.flush()
        out.bytes.append(contentsOf: bits.bytes)
        for value in escaped { out.varint(value) }
    }
}

/// Reads the runs of a `packed_changes` in order, undoing `RunState.encode`.
private struct ChangeStreamReader {
    var cursor: PackedCursor
    var stream: BitReader
    var finisher: PackedSampleFinisher
    let hasCoalesced: Bool
    let widthXY: SIMD3<UInt64>, widthTime: SIMD3<UInt64>
    var runs: RunState

    mutating func run(count: Int, tail: Int) throws(WireError) -> (samples: [Sample], tail: [Sample]) {
        var x = DeltaChain(), y = DeltaChain(), time = DeltaChain()
        x.prime(nil, nil, base: runs.anchorX)
        y.prime(nil, nil, base: runs.anchorY)
        time.prime(nil, nil, base: runs.timeReference)
        var samples: [Sample] = [], predicted: [Sample] = []
        samples.reserveCapacity(count)
        predicted.reserveCapacity(tail)
        for index in 0..<(count + tail) {
            let order = columnOrder(index, count: count)
            var coalesced = false
            if hasCoalesced {  // a plain bit, never an escape
                guard let bit = stream.read(bits: 1) else { throw cursor.malformed("the bit stream is cut off") }
                coalesced = bit == 1
            }
            let rx = zigZagDecoded(try cursor.field(widthXY[order], from: &stream))
            let ry = zigZagDecoded(try cursor.field(widthXY[order], from: &stream))
            var rt = zigZagDecoded(try cursor.field(widthTime[order], from: &stream))
            let xValue: Int64, yValue: Int64, timeValue: Int64
            if index == count, count > 0, let last = samples.last {
                // The tail's first sample, against the run's motion.
                let beforeLast = count > 1 ? samples[count - 2] : nil
                let (gap, gapOverflow) = runs.tailGap.addingReportingOverflow(rt)
                let (t, timeOverflow) = last.time.addingReportingOverflow(gap)
                guard !gapOverflow, !timeOverflow else { throw cursor.malformed("sample \(finisher.sampleIndex): time overflows") }
                runs.tailGap = gap
                let (expectedX, expectedY) = predictedPoint(last: last, beforeLast: beforeLast, gap: gap)
                let (px, xOverflow) = expectedX.addingReportingOverflow(rx)
                let (py, yOverflow) = expectedY.addingReportingOverflow(ry)
                guard !xOverflow, !yOverflow else { throw cursor.malformed("sample \(finisher.sampleIndex): position overflows") }
                (xValue, yValue, timeValue) = (px, py, t)
                x.prime(px, Int64(last.x), base: 0)
                y.prime(py, Int64(last.y), base: 0)
                time.prime(t, last.time, base: 0)
            } else {
                if index == 0 {
                    let (offset, overflow) = runs.firstOffset.addingReportingOverflow(rt)
                    guard !overflow else { throw cursor.malformed("sample \(finisher.sampleIndex): time overflows") }
                    (rt, runs.firstOffset) = (offset, offset)
                } else if index == 1 {
                    let (interval, overflow) = runs.firstInterval.addingReportingOverflow(rt)
                    guard !overflow else { throw cursor.malformed("sample \(finisher.sampleIndex): time overflows") }
                    (rt, runs.firstInterval) = (interval, interval)
                }
                guard let xv = x.decode(rx), let yv = y.decode(ry), let tv = time.decode(rt) else {
                    throw cursor.malformed("sample \(finisher.sampleIndex): position or time overflows")
                }
                (xValue, yValue, timeValue) = (xv, yv, tv)
                if index == 0 { (runs.anchorX, runs.anchorY) = (xv, yv) }
            }
            let sample = try finisher.sample(x: xValue, y: yValue, time: timeValue, coalesced: coalesced, cursor: &cursor, stream: &stream)
            if index < count { samples.append(sample) } else { predicted.append(sample) }
        }
        return (samples, predicted)
    }

    func finish() throws(WireError) { try PackedSampleFinisher.finish(stream, cursor) }
}
