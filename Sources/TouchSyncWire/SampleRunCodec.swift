import TouchSyncCore

/// Samples to and from `touchsync.v1.SampleRun`: columnar, second-order
/// deltas for position and time, run-length flags, sparse force and angles.
public enum SampleRunCodec {
    static let flagBits: UInt32 = 4
    static let flagMask: UInt32 = (1 << flagBits) - 1

    /// Encodes `samples` followed by the predicted tail `predicted`, times
    /// relative to `timeReference` (the enclosing message's).
    public static func encode(_ samples: [Sample], predicted: [Sample] = [], timeReference: Int64 = 0)
        -> Touchsync_V1_SampleRun
    {
        var run = Touchsync_V1_SampleRun()
        let count = samples.count + predicted.count
        guard count > 0 else { return run }
        var xs = [Int32](), ys = [Int32](), times = [Int64](), flagRuns = [UInt32]()
        xs.reserveCapacity(count)
        ys.reserveCapacity(count)
        times.reserveCapacity(count)
        var forces = [Int32](), azimuths = [Int32](), altitudes = [Int32]()
        var px: Int64 = 0, dx: Int64 = 0, py: Int64 = 0, dy: Int64 = 0, pt: Int64 = 0, dt: Int64 = 0
        var lastForce: Int32 = 0, lastAzimuth: Int32 = 0, lastAltitude: Int32 = 0
        var runFlags: UInt32 = 0, runLength: UInt32 = 0
        var anyEstimation = false
        for index in 0..<count {
            let sample = index < samples.count ? samples[index] : predicted[index - samples.count]
            xs.append(secondOrder(index, Int64(sample.x), &px, &dx, base: 0, as: Int32.self))
            ys.append(secondOrder(index, Int64(sample.y), &py, &dy, base: 0, as: Int32.self))
            // time_base stays 0: the first entry is the offset from the reference itself.
            times.append(secondOrder(index, sample.time, &pt, &dt, base: timeReference, as: Int64.self))
            let flags = UInt32(sample.flags.rawValue)
            if runLength > 0 && flags != runFlags {
                flagRuns.append(runLength << flagBits | runFlags)
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
            if sample.estimationIndex != 0 { anyEstimation = true }
        }
        // One run of all-zero flags is the common case: say nothing at all.
        if !(flagRuns.isEmpty && runFlags == 0) { flagRuns.append(runLength << flagBits | runFlags) }
        if anyEstimation { run.estimationIndex = samples.map(\.estimationIndex) + predicted.map(\.estimationIndex) }
        run.x = xs
        run.y = ys
        run.time = times
        run.flagRuns = flagRuns
        run.force = forces
        run.azimuth = azimuths
        run.altitude = altitudes
        run.predictedCount = UInt32(predicted.count)
        return run
    }

    @inlinable
    static func secondOrder<T: FixedWidthInteger & SignedInteger>(
        _ index: Int, _ value: Int64, _ previous: inout Int64, _ delta: inout Int64, base: Int64, as: T.Type
    ) -> T {
        let encoded: Int64
        switch index {
        case 0: encoded = value &- base
        case 1:
            delta = value &- previous
            encoded = delta
        default:
            let next = value &- previous
            encoded = next &- delta
            delta = next
        }
        previous = value
        return T(truncatingIfNeeded: encoded)
    }

    /// Decodes a run that may carry a predicted tail.
    public static func decode(_ run: Touchsync_V1_SampleRun, timeReference: Int64 = 0) throws(WireError) -> (
        samples: [Sample], predicted: [Sample]
    ) {
        var all = try decodeAll(run, timeReference: timeReference)
        let tail = Int(run.predictedCount)
        guard tail <= all.count else {
            throw .malformed("predicted_count \(tail) exceeds the run's \(all.count) samples")
        }
        let predicted = Array(all[(all.count - tail)...])
        all.removeLast(tail)
        return (all, predicted)
    }

    /// Decodes a run where no prediction is allowed.
    public static func decodeSamples(_ run: Touchsync_V1_SampleRun, timeReference: Int64 = 0) throws(WireError)
        -> [Sample]
    {
        guard run.predictedCount == 0 else { throw .malformed("a predicted tail where none is allowed") }
        return try decodeAll(run, timeReference: timeReference)
    }

    /// Decodes and checks a run: consistent columns, no overflow. Values are
    /// range-checked by the model (`Sample.validate`), not here.
    static func decodeAll(_ run: Touchsync_V1_SampleRun, timeReference: Int64) throws(WireError) -> [Sample] {
        let count = run.x.count
        guard run.y.count == count, run.time.count == count else {
            throw .malformed("sample run columns differ in length (x \(count), y \(run.y.count), time \(run.time.count))")
        }
        guard run.estimationIndex.isEmpty || run.estimationIndex.count == count else {
            throw .malformed("sample run has \(run.estimationIndex.count) estimation indices for \(count) samples")
        }
        var samples = [Sample]()
        samples.reserveCapacity(count)
        var px: Int64 = 0, dx: Int64 = 0, py: Int64 = 0, dy: Int64 = 0, pt: Int64 = 0, dt: Int64 = 0
        let (timeBase, baseOverflow) = timeReference.addingReportingOverflow(run.timeBase)
        if baseOverflow { throw .malformed("time base overflows") }
        var flagIndex = 0
        var runLeft: UInt32 = run.flagRuns.isEmpty ? UInt32(count) : 0
        var flags: UInt8 = 0
        var forceIndex = 0, angleIndex = 0
        var force: Int32 = 0, azimuth: Int32 = 0, altitude: Int32 = 0
        for index in 0..<count {
            let x = try undo(index, Int64(run.x[index]), &px, &dx, base: 0, field: "x")
            let y = try undo(index, Int64(run.y[index]), &py, &dy, base: 0, field: "y")
            let time = try undo(index, run.time[index], &pt, &dt, base: timeBase, field: "time")
            guard let x32 = Int32(exactly: x), let y32 = Int32(exactly: y) else {
                throw .malformed("sample \(index): position leaves the 32-bit range")
            }
            while runLeft == 0 {
                guard flagIndex < run.flagRuns.count else { throw .malformed("flag runs cover fewer samples than the run has") }
                let entry = run.flagRuns[flagIndex]
                flagIndex += 1
                runLeft = entry >> flagBits
                flags = UInt8(entry & flagMask)
            }
            runLeft -= 1
            var sample = Sample(x: x32, y: y32, time: time, flags: SampleFlags(rawValue: flags))
            if sample.flags.contains(.hasForce) {
                guard forceIndex < run.force.count else { throw .malformed("fewer force values than samples with force") }
                force &+= run.force[forceIndex]
                forceIndex += 1
                guard let value = UInt16(exactly: force) else { throw .malformed("sample \(index): force out of range") }
                sample.force = value
            }
            if sample.flags.contains(.hasAngles) {
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
            samples.append(sample)
        }
        guard runLeft == 0, flagIndex == run.flagRuns.count else {
            throw .malformed("flag runs cover more samples than the run has")
        }
        guard forceIndex == run.force.count, angleIndex == run.azimuth.count, angleIndex == run.altitude.count else {
            throw .malformed("more force or angle values than samples that carry them")
        }
        return samples
    }

    /// Inverse of `secondOrder`, refusing arithmetic overflow (hostile input).
    @inline(__always)
    static func undo(
        _ index: Int, _ encoded: Int64, _ previous: inout Int64, _ delta: inout Int64, base: Int64, field: String
    ) throws(WireError) -> Int64 {
        var value: Int64
        var overflow = false
        switch index {
        case 0: (value, overflow) = base.addingReportingOverflow(encoded)
        case 1:
            delta = encoded
            (value, overflow) = previous.addingReportingOverflow(delta)
        default:
            var deltaOverflow: Bool
            (delta, deltaOverflow) = delta.addingReportingOverflow(encoded)
            (value, overflow) = previous.addingReportingOverflow(delta)
            overflow = overflow || deltaOverflow
        }
        if overflow { throw .malformed("sample \(index): \(field) overflows") }
        previous = value
        return value
    }
}
