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
        let all = try decodeAll(run, timeReference: timeReference)
        let tail = Int(run.predictedCount)
        guard tail <= all.count else {
            throw .malformed("predicted_count \(tail) exceeds the run's \(all.count) samples")
        }
        return (Array(all[..<(all.count - tail)]), Array(all[(all.count - tail)...]))
    }

    /// Decodes a run where no prediction is allowed.
    public static func decodeSamples(_ run: Touchsync_V1_SampleRun, timeReference: Int64 = 0) throws(WireError)
        -> [Sample]
    {
        guard run.predictedCount == 0 else { throw .malformed("a predicted tail where none is allowed") }
        return try decodeAll(run, timeReference: timeReference)
    }

    static func decodeAll(_ run: Touchsync_V1_SampleRun, timeReference: Int64) throws(WireError) -> [Sample] {
        var reader = try SampleColumnReader(run)
        try reader.startSegment(after: nil, nil, timeReference: timeReference)
        var samples = [Sample]()
        samples.reserveCapacity(reader.count)
        for _ in 0..<reader.count { samples.append(try reader.next()) }
        try reader.finish()
        return samples
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
                coalesced = [UInt8](repeating: 0, count: (count + 8) / 8)
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
            estimations = [UInt32](repeating: 0, count: count)
            anyEstimation = true
        }
        if anyEstimation { estimations.append(sample.estimationIndex) }
        count += 1
    }

    consuming func finish() -> Touchsync_V1_SampleRun {
        var run = Touchsync_V1_SampleRun()
        guard count > 0 else { return run }
        // One run with none of these flags is the common case: say nothing at all.
        if !(flagRuns.isEmpty && runFlags == 0) { flagRuns.append(runLength << Self.flagBits | runFlags) }
        run.x = xs
        run.y = ys
        run.time = times
        run.flagRuns = flagRuns
        if anyCoalesced {
            while coalesced.count < (count + 7) / 8 { coalesced.append(0) }
            run.coalesced = .init(coalesced)
        }
        run.force = forces
        run.azimuth = azimuths
        run.altitude = altitudes
        run.estimationIndex = estimations
        return run
    }
}

/// Reads the samples of one `SampleRun`, segment after segment, checking
/// every column against the others.
struct SampleColumnReader {
    private let run: Touchsync_V1_SampleRun
    private let coalesced: [UInt8]
    let count: Int
    private var index = 0
    private var x = DeltaChain(), y = DeltaChain(), time = DeltaChain()
    private var flagIndex = 0
    private var runLeft: UInt32
    private var flags: UInt8 = 0
    private var forceIndex = 0, angleIndex = 0
    private var force: Int32 = 0, azimuth: Int32 = 0, altitude: Int32 = 0

    init(_ run: Touchsync_V1_SampleRun) throws(WireError) {
        count = run.x.count
        guard run.y.count == count, run.time.count == count else {
            throw .malformed("sample run columns differ in length (x \(count), y \(run.y.count), time \(run.time.count))")
        }
        guard run.estimationIndex.isEmpty || run.estimationIndex.count == count else {
            throw .malformed("sample run has \(run.estimationIndex.count) estimation indices for \(count) samples")
        }
        coalesced = Array(run.coalesced)
        guard coalesced.isEmpty || coalesced.count == (count + 7) / 8 else {
            throw .malformed("coalesced mask of \(coalesced.count) bytes for \(count) samples")
        }
        self.run = run
        runLeft = run.flagRuns.isEmpty ? UInt32(count) : 0
    }

    mutating func startSegment(after last: Sample?, _ beforeLast: Sample?, timeReference: Int64) throws(WireError) {
        x.prime(last.map { Int64($0.x) }, beforeLast.map { Int64($0.x) }, base: 0)
        y.prime(last.map { Int64($0.y) }, beforeLast.map { Int64($0.y) }, base: 0)
        let (base, overflow) = timeReference.addingReportingOverflow(run.timeBase)
        if overflow { throw .malformed("time base overflows") }
        time.prime(last?.time, beforeLast?.time, base: base)
    }

    mutating func next() throws(WireError) -> Sample {
        guard index < count else { throw .malformed("a segment reads past the run's \(count) samples") }
        guard let xValue = x.decode(Int64(run.x[index])), let yValue = y.decode(Int64(run.y[index])),
            let timeValue = time.decode(run.time[index])
        else { throw .malformed("sample \(index): position or time overflows") }
        guard let x32 = Int32(exactly: xValue), let y32 = Int32(exactly: yValue) else {
            throw .malformed("sample \(index): position leaves the 32-bit range")
        }
        while runLeft == 0 {
            guard flagIndex < run.flagRuns.count else { throw .malformed("flag runs cover fewer samples than the run has") }
            let entry = run.flagRuns[flagIndex]
            flagIndex += 1
            runLeft = entry >> SampleColumnWriter.flagBits
            flags = UInt8(entry & ((1 << SampleColumnWriter.flagBits) - 1))
            guard flags & SampleFlags.coalesced.rawValue == 0 else {
                throw .malformed("the coalesced flag belongs in the coalesced mask, not in flag runs")
            }
        }
        runLeft -= 1
        var sampleFlags = SampleFlags(rawValue: flags)
        if !coalesced.isEmpty && coalesced[index / 8] & (1 << UInt8(index % 8)) != 0 { sampleFlags.insert(.coalesced) }
        var sample = Sample(x: x32, y: y32, time: timeValue, flags: sampleFlags)
        if sampleFlags.contains(.hasForce) {
            guard forceIndex < run.force.count else { throw .malformed("fewer force values than samples with force") }
            force &+= run.force[forceIndex]
            forceIndex += 1
            guard let value = UInt16(exactly: force) else { throw .malformed("sample \(index): force out of range") }
            sample.force = value
        }
        if sampleFlags.contains(.hasAngles) {
            guard angleIndex < run.azimuth.count, angleIndex < run.altitude.count else {
                throw .malformed("fewer angle values than samples with angles")
            }
            azimuth &+= run.azimuth[angleIndex]
            altitude &+= run.altitude[angleIndex]
            angleIndex += 1
            guard let a = Int16(exactly: azimuth), let b = Int16(exactly: altitude) else {
                throw .malformed("sample \(index): angle out of range")
            }
            sample.azimuth = a
            sample.altitude = b
        }
        if !run.estimationIndex.isEmpty { sample.estimationIndex = run.estimationIndex[index] }
        index += 1
        return sample
    }

    /// Checks that the segments used every column exactly.
    func finish() throws(WireError) {
        guard index == count else { throw .malformed("\(count - index) samples of the run belong to no segment") }
        guard runLeft == 0, flagIndex == run.flagRuns.count else {
            throw .malformed("flag runs cover more samples than the run has")
        }
        guard forceIndex == run.force.count, angleIndex == run.azimuth.count, angleIndex == run.altitude.count else {
            throw .malformed("more force or angle values than samples that carry them")
        }
        if let last = coalesced.last, count % 8 != 0, last >> UInt8(count % 8) != 0 {
            throw .malformed("coalesced mask sets bits past the last sample")
        }
    }
}
