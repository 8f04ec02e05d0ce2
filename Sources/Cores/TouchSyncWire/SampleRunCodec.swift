import TouchSyncCore

/// Samples to and from `touchsync.v1.SampleRun`: columnar, second-order
/// deltas for position and time, a coalesced bitmask, run-length flags,
/// sparse force and angles. See docs/protocol.md, "Sample runs".
public enum SampleRunCodec {
    /// Encodes `samples` followed by the predicted tail `predicted`, times
    /// relative to `timeReference` (the enclosing message's).
    public static func encode(_ samples: [Sample], predicted: [Sample] = [], timeReference: Int64 = 0)
        -> Touchsync_V1_SampleRun
    {
        var writer = SampleColumnWriter(capacity: samples.count + predicted.count)
        writer.startSegment(after: nil, nil, timeReference: timeReference)
        for sample in samples { writer.append(sample) }
        for sample in predicted { writer.append(sample) }
        var run = writer.finish()
        run.predictedCount = UInt32(predicted.count)
        return run
    }

    /// Decodes a run that may carry a predicted tail.
    public static func decode(_ run: Touchsync_V1_SampleRun, timeReference: Int64 = 0) throws(WireError) -> (
        samples: [Sample], predicted: [Sample]
    ) {
        try decode(DecodedSampleColumns(run), timeReference: timeReference)
    }

    /// Decodes a run where no prediction is allowed.
    public static func decodeSamples(_ run: Touchsync_V1_SampleRun, timeReference: Int64 = 0) throws(WireError)
        -> [Sample]
    {
        try decodeSamples(DecodedSampleColumns(run), timeReference: timeReference)
    }

    /// One pass over the columns into the real samples and the predicted tail.
    @inline(__always)
    static func decode<Columns: SampleColumns>(_ columns: Columns, timeReference: Int64) throws(WireError) -> (
        samples: [Sample], predicted: [Sample]
    ) {
        let tail = Int(columns.predictedCount)
        var reader = try SampleColumnReader(columns: columns)
        guard tail <= reader.count else {
            throw .malformed("predicted_count \(tail) exceeds the run's \(reader.count) samples")
        }
        try reader.startSegment(after: nil, nil, timeReference: timeReference)
        let samples = try reader.next(reader.count - tail)
        let predicted = tail > 0 ? try reader.next(tail) : []
        try reader.finish()
        return (samples, predicted)
    }

    @inline(__always)
    static func decodeSamples<Columns: SampleColumns>(_ columns: Columns, timeReference: Int64) throws(WireError)
        -> [Sample]
    {
        guard columns.predictedCount == 0 else { throw .malformed("a predicted tail where none is allowed") }
        return try decode(columns, timeReference: timeReference).samples
    }
}

/// One delta-coded column (x, y or time). A segment primed with the
/// stroke's last two stored values continues its chain: the first entry is
/// already a second-order delta.
struct DeltaChain {
    var previous: Int64 = 0
    var delta: Int64 = 0
    /// 0: the next entry is absolute (against the base); 1: first order; 2: second order.
    var order = 0
    var base: Int64 = 0

    mutating func prime(_ last: Int64?, _ beforeLast: Int64?, base: Int64) {
        self.base = base
        switch (last, beforeLast) {
        case (let last?, let beforeLast?):
            previous = last
            delta = last &- beforeLast
            order = 2
        case (let last?, nil):
            previous = last
            order = 1
        default:
            order = 0
        }
    }

    @inline(__always)
    mutating func encode(_ value: Int64) -> Int64 {
        let encoded: Int64
        switch order {
        case 0:
            encoded = value &- base
            order = 1
        case 1:
            delta = value &- previous
            encoded = delta
            order = 2
        default:
            let next = value &- previous
            encoded = next &- delta
            delta = next
        }
        previous = value
        return encoded
    }

    /// The inverse of `encode`, refusing arithmetic overflow (hostile input).
    @inline(__always)
    mutating func decode(_ encoded: Int64) -> Int64? {
        var value: Int64
        var overflow: Bool
        switch order {
        case 0:
            (value, overflow) = base.addingReportingOverflow(encoded)
            order = 1
        case 1:
            delta = encoded
            (value, overflow) = previous.addingReportingOverflow(encoded)
            order = 2
        default:
            let (next, deltaOverflow) = delta.addingReportingOverflow(encoded)
            delta = next
            (value, overflow) = previous.addingReportingOverflow(next)
            overflow = overflow || deltaOverflow
        }
        if overflow { return nil }
        previous = value
        return value
    }
}

/// Builds the columns of one `SampleRun`, segment after segment.
struct SampleColumnWriter {
    static let flagBits: UInt32 = 4
    static let runFlagsMask = SampleFlags.all.subtracting(.coalesced).rawValue

    private var xs: [Int32] = [], ys: [Int32] = [], times: [Int64] = []
    private var flagRuns: [UInt32] = [], coalesced: [UInt8] = []
    private var forces: [Int32] = [], azimuths: [Int32] = [], altitudes: [Int32] = []
    private var estimations: [UInt32] = []
    private var x = DeltaChain(), y = DeltaChain(), time = DeltaChain()
    private var lastForce: Int32 = 0, lastAzimuth: Int32 = 0, lastAltitude: Int32 = 0
    private var runFlags: UInt32 = 0, runLength: UInt32 = 0
    private var anyCoalesced = false, anyEstimation = false
    private(set) var count = 0

    init(capacity: Int) {
        xs.reserveCapacity(capacity)
        ys.reserveCapacity(capacity)
        times.reserveCapacity(capacity)
    }

    /// Empty again, keeping the columns' capacity (the hub reuses one writer).
    mutating func reset() {
        xs.removeAll(keepingCapacity: true)
        ys.removeAll(keepingCapacity: true)
        times.removeAll(keepingCapacity: true)
        flagRuns.removeAll(keepingCapacity: true)
        coalesced.removeAll(keepingCapacity: true)
        forces.removeAll(keepingCapacity: true)
        azimuths.removeAll(keepingCapacity: true)
        altitudes.removeAll(keepingCapacity: true)
        estimations.removeAll(keepingCapacity: true)
        x = DeltaChain()
        y = DeltaChain()
        time = DeltaChain()
        lastForce = 0
        lastAzimuth = 0
        lastAltitude = 0
        runFlags = 0
        runLength = 0
        anyCoalesced = false
        anyEstimation = false
        count = 0
    }

    /// Starts a segment continuing a stroke whose last stored samples are
    /// `last` and `beforeLast` (nil when the stroke has fewer).
    mutating func startSegment(after last: Sample?, _ beforeLast: Sample?, timeReference: Int64) {
        x.prime(last.map { Int64($0.x) }, beforeLast.map { Int64($0.x) }, base: 0)
        y.prime(last.map { Int64($0.y) }, beforeLast.map { Int64($0.y) }, base: 0)
        time.prime(last?.time, beforeLast?.time, base: timeReference)
    }

    mutating func append(_ sample: Sample) {
        xs.append(Int32(truncatingIfNeeded: x.encode(Int64(sample.x))))
        ys.append(Int32(truncatingIfNeeded: y.encode(Int64(sample.y))))
        times.append(time.encode(sample.time))
        if sample.flags.contains(.coalesced) {
            if !anyCoalesced {
                coalesced.append(contentsOf: repeatElement(0, count: (count + 8) / 8))
                anyCoalesced = true
            }
        }
        if anyCoalesced {
            if count / 8 >= coalesced.count { coalesced.append(0) }
            if sample.flags.contains(.coalesced) { coalesced[count / 8] |= 1 << UInt8(count % 8) }
        }
        let flags = UInt32(sample.flags.rawValue & Self.runFlagsMask)
        if runLength > 0 && flags != runFlags {
            flagRuns.append(runLength << Self.flagBits | runFlags)
            runLength = 0
        }
        runFlags = flags
        runLength += 1
        if sample.flags.contains(.hasForce) {
            forces.append(Int32(sample.force) - lastForce)
            lastForce = Int32(sample.force)
        }
        if sample.flags.contains(.hasAngles) {
            azimuths.append(Int32(sample.azimuth) - lastAzimuth)
            altitudes.append(Int32(sample.altitude) - lastAltitude)
            lastAzimuth = Int32(sample.azimuth)
            lastAltitude = Int32(sample.altitude)
        }
        if sample.estimationIndex != 0 && !anyEstimation {
            estimations.append(contentsOf: repeatElement(0, count: count))
            anyEstimation = true
        }
        if anyEstimation { estimations.append(sample.estimationIndex) }
        count += 1
    }

    /// The last flag run and the mask's padding.
    private mutating func close() {
        // One run with none of these flags is the common case: say nothing at all.
        if !(flagRuns.isEmpty && runFlags == 0) { flagRuns.append(runLength << Self.flagBits | runFlags) }
        if anyCoalesced {
            while coalesced.count < (count + 7) / 8 { coalesced.append(0) }
        }
    }

    consuming func finish() -> Touchsync_V1_SampleRun {
        var run = Touchsync_V1_SampleRun()
        guard count > 0 else { return run }
        close()
        run.x = xs
        run.y = ys
        run.time = times
        run.flagRuns = flagRuns
        if anyCoalesced { run.coalesced = .init(coalesced) }
        run.force = forces
        run.azimuth = azimuths
        run.altitude = altitudes
        run.estimationIndex = estimations
        return run
    }

    /// The body of the `SampleRun` `finish()` returns, with
    /// `predictedCount`, written as SwiftProtobuf would serialize it (no
    /// time base).
    mutating func write(to out: inout ProtoWriter, predictedCount: UInt32 = 0) {
        guard count > 0 else { return }
        close()
        out.packed(1, xs) { zigZag($0) }
        out.packed(2, ys) { zigZag($0) }
        out.packed(4, times) { zigZag($0) }
        out.packed(5, flagRuns) { UInt64($0) }
        out.packed(6, forces) { zigZag($0) }
        out.packed(7, azimuths) { zigZag($0) }
        out.packed(8, altitudes) { zigZag($0) }
        out.packed(9, estimations) { UInt64($0) }
        out.uint64Field(10, UInt64(predictedCount))
        if anyCoalesced { out.bytesField(11, coalesced) }
    }
}

/// The columns of one `SampleRun` as `SampleColumnReader` reads them:
/// SwiftProtobuf's decoded arrays, or the packed fields of the received
/// bytes (`PackedSampleColumns`, the hot path).
protocol SampleColumns {
    var xCount: Int { get }
    var yCount: Int { get }
    var timeCount: Int { get }
    var estimationCount: Int { get }
    var timeBase: Int64 { get }
    var predictedCount: UInt32 { get }
    /// The coalesced mask's length in bytes.
    var coalescedCount: Int { get }
    func coalescedByte(_ index: Int) -> UInt8
    /// The next sample's encoded x, y, time and estimation index (0 when
    /// the column is empty); called at most `xCount` times, once the
    /// lengths are checked equal.
    mutating func nextSample() -> (x: Int32, y: Int32, time: Int64, estimation: UInt32)
    /// nil when the column has no value left.
    mutating func nextFlagRun() -> UInt32?
    mutating func nextForce() -> Int32?
    mutating func nextAngles() -> (azimuth: Int32, altitude: Int32)?
    /// Whether the flag runs, force and angle columns still hold values.
    var flagRunsLeft: Bool { get }
    var forcesLeft: Bool { get }
    var anglesLeft: Bool { get }
}

/// A decoded `Touchsync_V1_SampleRun`'s arrays.
struct DecodedSampleColumns: SampleColumns {
    let run: Touchsync_V1_SampleRun
    private var index = 0, flagIndex = 0, forceIndex = 0, angleIndex = 0

    init(_ run: Touchsync_V1_SampleRun) { self.run = run }

    var xCount: Int { run.x.count }
    var yCount: Int { run.y.count }
    var timeCount: Int { run.time.count }
    var estimationCount: Int { run.estimationIndex.count }
    var timeBase: Int64 { run.timeBase }
    var predictedCount: UInt32 { run.predictedCount }
    var coalescedCount: Int { run.coalesced.count }
    func coalescedByte(_ index: Int) -> UInt8 { run.coalesced[run.coalesced.startIndex + index] }

    mutating func nextSample() -> (x: Int32, y: Int32, time: Int64, estimation: UInt32) {
        defer { index += 1 }
        return (run.x[index], run.y[index], run.time[index], run.estimationIndex.isEmpty ? 0 : run.estimationIndex[index])
    }

    mutating func nextFlagRun() -> UInt32? {
        guard flagIndex < run.flagRuns.count else { return nil }
        defer { flagIndex += 1 }
        return run.flagRuns[flagIndex]
    }

    mutating func nextForce() -> Int32? {
        guard forceIndex < run.force.count else { return nil }
        defer { forceIndex += 1 }
        return run.force[forceIndex]
    }

    mutating func nextAngles() -> (azimuth: Int32, altitude: Int32)? {
        guard angleIndex < run.azimuth.count, angleIndex < run.altitude.count else { return nil }
        defer { angleIndex += 1 }
        return (run.azimuth[angleIndex], run.altitude[angleIndex])
    }

    var flagRunsLeft: Bool { flagIndex < run.flagRuns.count }
    var forcesLeft: Bool { forceIndex < run.force.count }
    var anglesLeft: Bool { angleIndex < run.azimuth.count || angleIndex < run.altitude.count }
}

/// Reads the samples of one `SampleRun`, segment after segment, checking
/// every column against the others.
struct SampleColumnReader<Columns: SampleColumns> {
    private var columns: Columns
    let count: Int
    private let hasCoalesced: Bool
    private var index = 0
    private var x = DeltaChain(), y = DeltaChain(), time = DeltaChain()
    private var runLeft: UInt32
    private var flags: UInt8 = 0
    private var force: Int32 = 0, azimuth: Int32 = 0, altitude: Int32 = 0

    init(columns: Columns) throws(WireError) {
        count = columns.xCount
        guard columns.yCount == count, columns.timeCount == count else {
            throw .malformed(
                "sample run columns differ in length (x \(count), y \(columns.yCount), time \(columns.timeCount))")
        }
        guard columns.estimationCount == 0 || columns.estimationCount == count else {
            throw .malformed("sample run has \(columns.estimationCount) estimation indices for \(count) samples")
        }
        guard columns.coalescedCount == 0 || columns.coalescedCount == (count + 7) / 8 else {
            throw .malformed("coalesced mask of \(columns.coalescedCount) bytes for \(count) samples")
        }
        hasCoalesced = columns.coalescedCount > 0
        runLeft = columns.flagRunsLeft ? 0 : UInt32(count)
        self.columns = columns
    }

    mutating func startSegment(after last: Sample?, _ beforeLast: Sample?, timeReference: Int64) throws(WireError) {
        x.prime(last.map { Int64($0.x) }, beforeLast.map { Int64($0.x) }, base: 0)
        y.prime(last.map { Int64($0.y) }, beforeLast.map { Int64($0.y) }, base: 0)
        let (base, overflow) = timeReference.addingReportingOverflow(columns.timeBase)
        if overflow { throw .malformed("time base overflows") }
        time.prime(last?.time, beforeLast?.time, base: base)
    }

    @inline(__always)
    mutating func next() throws(WireError) -> Sample {
        guard index < count else { throw .malformed("a segment reads past the run's \(count) samples") }
        let encoded = columns.nextSample()
        guard let xValue = x.decode(Int64(encoded.x)), let yValue = y.decode(Int64(encoded.y)),
            let timeValue = time.decode(encoded.time)
        else { throw .malformed("sample \(index): position or time overflows") }
        guard let x32 = Int32(exactly: xValue), let y32 = Int32(exactly: yValue) else {
            throw .malformed("sample \(index): position leaves the 32-bit range")
        }
        while runLeft == 0 {
            guard let entry = columns.nextFlagRun() else {
                throw .malformed("flag runs cover fewer samples than the run has")
            }
            runLeft = entry >> SampleColumnWriter.flagBits
            flags = UInt8(entry & ((1 << SampleColumnWriter.flagBits) - 1))
            guard flags & SampleFlags.coalesced.rawValue == 0 else {
                throw .malformed("the coalesced flag belongs in the coalesced mask, not in flag runs")
            }
        }
        runLeft -= 1
        var sampleFlags = SampleFlags(rawValue: flags)
        if hasCoalesced && columns.coalescedByte(index / 8) & (1 << UInt8(index % 8)) != 0 {
            sampleFlags.insert(.coalesced)
        }
        var sample = Sample(x: x32, y: y32, time: timeValue, flags: sampleFlags, estimationIndex: encoded.estimation)
        if sampleFlags.contains(.hasForce) {
            guard let delta = columns.nextForce() else { throw .malformed("fewer force values than samples with force") }
            force &+= delta
            guard let value = UInt16(exactly: force) else { throw .malformed("sample \(index): force out of range") }
            sample.force = value
        }
        if sampleFlags.contains(.hasAngles) {
            guard let (azimuthDelta, altitudeDelta) = columns.nextAngles() else {
                throw .malformed("fewer angle values than samples with angles")
            }
            azimuth &+= azimuthDelta
            altitude &+= altitudeDelta
            guard let a = Int16(exactly: azimuth), let b = Int16(exactly: altitude) else {
                throw .malformed("sample \(index): angle out of range")
            }
            sample.azimuth = a
            sample.altitude = b
        }
        index += 1
        return sample
    }

    /// The next `count` samples, in one array.
    @inline(__always)
    mutating func next(_ count: Int) throws(WireError) -> [Sample] {
        var samples: [Sample] = []
        samples.reserveCapacity(count)
        for _ in 0..<count { samples.append(try next()) }
        return samples
    }

    /// Checks that the segments used every column exactly.
    func finish() throws(WireError) {
        guard index == count else { throw .malformed("\(count - index) samples of the run belong to no segment") }
        guard runLeft == 0, !columns.flagRunsLeft else {
            throw .malformed("flag runs cover more samples than the run has")
        }
        guard !columns.forcesLeft, !columns.anglesLeft else {
            throw .malformed("more force or angle values than samples that carry them")
        }
        if hasCoalesced, count % 8 != 0, columns.coalescedByte(columns.coalescedCount - 1) >> UInt8(count % 8) != 0 {
            throw .malformed("coalesced mask sets bits past the last sample")
        }
    }
}

extension SampleColumnReader where Columns == DecodedSampleColumns {
    init(_ run: Touchsync_V1_SampleRun) throws(WireError) {
        try self.init(columns: DecodedSampleColumns(run))
    }
}
