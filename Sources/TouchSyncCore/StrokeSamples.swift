/// A stroke's stored samples: a plain `[Sample]` while the stroke is in
/// progress (appends and amendments are the hub's and every replica's hot
/// path), packed once it is accepted (`pack()`), at about a third of the
/// memory (`[Sample]` takes 32 bytes a sample).
///
/// Packed, x, y and time go into one byte stream as zig-zag varint
/// residuals against a linear prediction from the two samples before (so a
/// steady finger and a steady sample rate cost a byte or two per value). Every 64th sample is
/// written whole, with no prediction, and its byte offset is kept, so any
/// sample is found by decoding at most 63 others. Stored positions and times
/// never change (amendments refine only the rest), so the stream is only
/// ever appended to. Flags, force and angles, which amendments can change,
/// sit in a fixed-width column that is only as wide as the stroke needs; the
/// few non-zero estimation indices are kept aside by offset.
///
/// The columns sit in one copy-on-write object, so copying a stroke (the
/// model does, moving strokes between its tables) retains one reference,
/// not four.
///
/// It is a `Sequence`, not a `Collection`: iterating decodes in one pass,
/// while `self[offset]` costs up to 63 decodes (generic collection
/// algorithms would be quadratic over it). The last two samples are kept
/// whole, for appending and for the diff stream that continues from them.
public struct StrokeSamples: Sequence, Sendable, ExpressibleByArrayLiteral {
    @usableFromInline static let checkpointInterval = 64

    @usableFromInline
    final class Columns: @unchecked Sendable {
        /// Residuals of x, y and time, sample after sample.
        @exclusivity(unchecked) @usableFromInline var packed: [UInt8] = []
        /// Per sample: flags; then force (2 bytes, little-endian) when the stride
        /// is 3 or more; then azimuth and altitude (2 bytes each) when it is 7.
        @exclusivity(unchecked) @usableFromInline var attributes: [UInt8] = []
        @exclusivity(unchecked) @usableFromInline var attributeStride = 1
        /// Byte offsets in `packed` of samples 64, 128, ... (sample 0 is at 0).
        @exclusivity(unchecked) @usableFromInline var checkpoints: [Int] = []
        /// The samples whose estimation index is not 0, by offset.
        @exclusivity(unchecked) @usableFromInline var estimations: [Estimation] = []
        @exclusivity(unchecked) @usableFromInline var storedCount = 0
        // The last two samples whole: what the next one is predicted from.
        @exclusivity(unchecked) @usableFromInline var lastSample: Sample?
        @exclusivity(unchecked) @usableFromInline var beforeLast: Sample?

        @inlinable init() {}

        /// Packs `samples` into these empty columns in one pass, each column
        /// allocated at its exact size (packing is what accepting a stroke
        /// costs, on the hub and on every replica).
        @usableFromInline
        func fill(from samples: UnsafeBufferPointer<Sample>) {
            let count = samples.count
            guard count > 0 else { return }
            var stride = 1
            var estimationCount = 0
            for sample in samples {
                stride = Swift.max(stride, StrokeSamples.stride(for: sample))
                if sample.estimationIndex != 0 { estimationCount += 1 }
            }
            checkpoints.reserveCapacity((count - 1) / StrokeSamples.checkpointInterval)
            estimations.reserveCapacity(estimationCount)
            let worstCase = [UInt8](unsafeUninitializedCapacity: count * StrokeSamples.maxPackedBytes) { out, written in
                var end = 0
                var predictor = Predictor()
                for offset in 0..<count {
                    let sample = samples[offset]
                    if offset > 0 && offset % StrokeSamples.checkpointInterval == 0 { checkpoints.append(end) }
                    let (px, py, pt) = predictor.prediction(at: offset)
                    StrokeSamples.writeVarint(UInt64(zigZag32(sample.x &- px)), out, &end)
                    StrokeSamples.writeVarint(UInt64(zigZag32(sample.y &- py)), out, &end)
                    StrokeSamples.writeVarint(zigZag64(sample.time &- pt), out, &end)
                    predictor.advance(to: sample.x, sample.y, sample.time)
                    if sample.estimationIndex != 0 {
                        estimations.append(Estimation(offset: offset, index: sample.estimationIndex))
                    }
                }
                written = end
            }
            packed = [UInt8](unsafeUninitializedCapacity: worstCase.count) { out, written in
                written = worstCase.withUnsafeBufferPointer { out.initialize(fromContentsOf: $0) }
            }
            attributes = [UInt8](unsafeUninitializedCapacity: count * stride) { out, written in
                for offset in 0..<count {
                    StrokeSamples.writeAttributes(of: samples[offset], stride: stride, into: out, at: offset * stride)
                }
                written = count * stride
            }
            attributeStride = stride
            storedCount = count
            lastSample = samples[count - 1]
            beforeLast = count >= 2 ? samples[count - 2] : nil
        }

        /// Re-lays the attribute column out at a wider stride.
        @usableFromInline
        func widenAttributes(to stride: Int, count: Int) {
            var wider = [UInt8](repeating: 0, count: count * stride)
            for offset in 0..<count {
                for byte in 0..<attributeStride {
                    wider[offset * stride + byte] = attributes[offset * attributeStride + byte]
                }
            }
            attributes = wider
            attributeStride = stride
        }

        @inlinable
        func copy() -> Columns {
            let copy = Columns()
            copy.packed = packed
            copy.attributes = attributes
            copy.attributeStride = attributeStride
            copy.checkpoints = checkpoints
            copy.estimations = estimations
            copy.storedCount = storedCount
            copy.lastSample = lastSample
            copy.beforeLast = beforeLast
            return copy
        }
    }

    /// The decoder's (and the one-pass packer's) state: the previous sample's
    /// location and the step that led to it.
    @usableFromInline
    struct Predictor {
        @usableFromInline var x: Int32 = 0, y: Int32 = 0, time: Int64 = 0
        @usableFromInline var dx: Int32 = 0, dy: Int32 = 0, dt: Int64 = 0

        @inlinable init() {}

        /// What sample `offset` is predicted to be: nothing at a checkpoint,
        /// the previous sample right after one, else the previous plus its step.
        @inlinable
        func prediction(at offset: Int) -> (Int32, Int32, Int64) {
            switch offset % StrokeSamples.checkpointInterval {
            case 0: (0, 0, 0)
            case 1: (x, y, time)
            default: (x &+ dx, y &+ dy, time &+ dt)
            }
        }

        @inlinable
        mutating func advance(to nextX: Int32, _ nextY: Int32, _ nextTime: Int64) {
            (dx, dy, dt) = (nextX &- x, nextY &- y, nextTime &- time)
            (x, y, time) = (nextX, nextY, nextTime)
        }

        /// Sample `offset`'s location, from its residuals at `position` in `packed`.
        @inlinable
        mutating func decode<Bytes: RandomAccessCollection<UInt8>>(
            _ packed: Bytes, _ position: inout Int, at offset: Int
        ) -> (Int32, Int32, Int64) where Bytes.Index == Int {
            func varint() -> UInt64 {
                var value: UInt64 = 0
                var shift: UInt64 = 0
                while true {
                    let byte = packed[position]
                    position += 1
                    value |= UInt64(byte & 0x7f) << shift
                    if byte < 0x80 { return value }
                    shift += 7
                }
            }
            let rx = zigZagDecoded32(varint())
            let ry = zigZagDecoded32(varint())
            let rt = zigZagDecoded64(varint())
            let (px, py, pt) = prediction(at: offset)
            let next = (px &+ rx, py &+ ry, pt &+ rt)
            advance(to: next.0, next.1, next.2)
            return next
        }
    }

    /// The samples while not packed.
    @usableFromInline var open: [Sample] = []
    /// The samples once packed (nil before); shared between copies until one
    /// of them changes (never mutated while shared).
    @usableFromInline var columns: Columns?
    public var isPacked: Bool { columns != nil }
    public var count: Int { columns?.storedCount ?? open.count }
    public var last: Sample? { columns == nil ? open.last : columns!.lastSample }

    @usableFromInline
    struct Estimation: Sendable, Equatable {
        @usableFromInline var offset: Int
        @usableFromInline var index: UInt32
        @inlinable init(offset: Int, index: UInt32) {
            self.offset = offset
            self.index = index
        }
    }

    public init() {}

    public init<Samples: Sequence>(_ samples: Samples) where Samples.Element == Sample {
        append(contentsOf: samples)
    }

    public init(arrayLiteral samples: Sample...) {
        append(contentsOf: samples)
    }

    public var isEmpty: Bool { count == 0 }
    public var underestimatedCount: Int { count }
    public var first: Sample? { count == 0 ? nil : self[0] }
    /// The sample before the last: with `last`, what the next sample is
    /// predicted from, here and in the diff stream.
    public var secondToLast: Sample? {
        if let columns { return columns.beforeLast }
        return open.count >= 2 ? open[open.count - 2] : nil
    }

    /// Bytes the columns hold on the heap (capacity, not count; without the
    /// objects' headers).
    public var heapBytes: Int {
        guard let columns else { return open.capacity * MemoryLayout<Sample>.stride }
        return columns.packed.capacity + columns.attributes.capacity
            + columns.checkpoints.capacity * MemoryLayout<Int>.stride
            + columns.estimations.capacity * MemoryLayout<Estimation>.stride
    }

    /// The columns (packed), copied first if another `StrokeSamples` shares them.
    @inlinable
    mutating func uniqueColumns() -> Columns {
        // No other reference may be held across the uniqueness check (a
        // bound `let` would make every check fail and every append copy).
        if columns == nil {
            columns = Columns()
        } else if !isKnownUniquelyReferenced(&columns!) {
            columns = columns!.copy()
        }
        return columns!
    }

    /// Packs the samples (a stroke that is accepted no longer grows) and
    /// gives back spare capacity. Later appends and changes still work.
    public mutating func pack() {
        guard columns == nil else {
            shrinkColumns()
            return
        }
        let packed = Columns()
        open.withUnsafeBufferPointer { packed.fill(from: $0) }
        columns = packed
        open = []
    }

    // MARK: Appending

    @inlinable
    public mutating func append<Samples: Sequence>(contentsOf samples: Samples) where Samples.Element == Sample {
        guard columns != nil else {
            open.append(contentsOf: samples)
            return
        }
        var iterator = samples.makeIterator()
        var pending = iterator.next()
        while pending != nil { appendChunk(&pending, &iterator) }
    }

    @inlinable
    public mutating func append(_ sample: Sample) {
        guard columns != nil else {
            open.append(sample)
            return
        }
        append(contentsOf: CollectionOfOne(sample))
    }

    /// Samples per pass of `appendChunk`, and the most bytes one sample takes.
    @usableFromInline static let chunk = 32
    @usableFromInline static let maxPackedBytes = 20

    /// Up to `chunk` samples, encoded into buffers on the stack and appended
    /// with one copy per array (per-byte appends cost a third of the replica's
    /// time).
    @inlinable
    mutating func appendChunk<Source: IteratorProtocol<Sample>>(_ pending: inout Sample?, _ iterator: inout Source) {
        let columns = uniqueColumns()
        var attributeStride = columns.attributeStride
        var packedCount = columns.packed.count
        var storedCount = columns.storedCount
        var lastSample = columns.lastSample
        var beforeLast = columns.beforeLast
        defer {
            columns.storedCount = storedCount
            columns.lastSample = lastSample
            columns.beforeLast = beforeLast
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.chunk * Self.maxPackedBytes) { packedOut in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.chunk * 7) { attributesOut in
                var packedEnd = 0
                var attributesEnd = 0
                var written = 0
                func flush() {
                    columns.packed.append(contentsOf: UnsafeBufferPointer(rebasing: packedOut[..<packedEnd]))
                    columns.attributes.append(contentsOf: UnsafeBufferPointer(rebasing: attributesOut[..<attributesEnd]))
                    packedCount += packedEnd
                    packedEnd = 0
                    attributesEnd = 0
                }
                while written < Self.chunk, let sample = pending {
                    let needed = Self.stride(for: sample)
                    if needed > attributeStride {
                        flush()
                        columns.widenAttributes(to: needed, count: storedCount)
                        attributeStride = needed
                    }
                    let phase = storedCount % Self.checkpointInterval
                    if phase == 0 && storedCount > 0 { columns.checkpoints.append(packedCount + packedEnd) }
                    let (px, py, pt) = Self.prediction(phase: phase, lastSample, beforeLast)
                    Self.writeVarint(UInt64(zigZag32(sample.x &- px)), packedOut, &packedEnd)
                    Self.writeVarint(UInt64(zigZag32(sample.y &- py)), packedOut, &packedEnd)
                    Self.writeVarint(zigZag64(sample.time &- pt), packedOut, &packedEnd)
                    Self.writeAttributes(of: sample, stride: attributeStride, into: attributesOut, at: attributesEnd)
                    attributesEnd += attributeStride
                    if sample.estimationIndex != 0 {
                        columns.estimations.append(Estimation(offset: storedCount, index: sample.estimationIndex))
                    }
                    beforeLast = lastSample
                    lastSample = sample
                    storedCount += 1
                    written += 1
                    pending = iterator.next()
                }
                flush()
            }
        }
    }

    /// What the next sample is predicted to be: nothing at a checkpoint, the
    /// last sample right after one, else the last plus the last step.
    @inlinable
    static func prediction(phase: Int, _ last: Sample?, _ beforeLast: Sample?) -> (Int32, Int32, Int64) {
        guard phase != 0, let last else { return (0, 0, 0) }
        guard phase >= 2, let beforeLast else { return (last.x, last.y, last.time) }
        return (
            last.x &+ (last.x &- beforeLast.x), last.y &+ (last.y &- beforeLast.y),
            last.time &+ (last.time &- beforeLast.time)
        )
    }

    /// Writes `sample`'s flags, force and angles at `base` in the layout of `stride`.
    @inlinable
    static func writeAttributes(of sample: Sample, stride: Int, into out: UnsafeMutableBufferPointer<UInt8>, at base: Int) {
        out[base] = sample.flags.rawValue
        guard stride >= 3 else { return }
        out[base + 1] = UInt8(truncatingIfNeeded: sample.force)
        out[base + 2] = UInt8(truncatingIfNeeded: sample.force >> 8)
        guard stride == 7 else { return }
        let azimuth = UInt16(bitPattern: sample.azimuth)
        let altitude = UInt16(bitPattern: sample.altitude)
        out[base + 3] = UInt8(truncatingIfNeeded: azimuth)
        out[base + 4] = UInt8(truncatingIfNeeded: azimuth >> 8)
        out[base + 5] = UInt8(truncatingIfNeeded: altitude)
        out[base + 6] = UInt8(truncatingIfNeeded: altitude >> 8)
    }

    /// A sample at a location with the flags, force and angles stored at `base`.
    @inlinable
    static func readSample<Bytes: RandomAccessCollection<UInt8>>(
        x: Int32, y: Int32, time: Int64, _ attributes: Bytes, stride: Int, at base: Int
    ) -> Sample where Bytes.Index == Int {
        var sample = Sample(x: x, y: y, time: time, flags: SampleFlags(rawValue: attributes[base]))
        guard stride >= 3 else { return sample }
        sample.force = UInt16(attributes[base + 1]) | UInt16(attributes[base + 2]) << 8
        guard stride == 7 else { return sample }
        sample.azimuth = Int16(bitPattern: UInt16(attributes[base + 3]) | UInt16(attributes[base + 4]) << 8)
        sample.altitude = Int16(bitPattern: UInt16(attributes[base + 5]) | UInt16(attributes[base + 6]) << 8)
        return sample
    }

    @inlinable
    static func stride(for sample: Sample) -> Int {
        if sample.azimuth != 0 || sample.altitude != 0 { return 7 }
        return sample.force != 0 ? 3 : 1
    }

    @inlinable
    static func writeVarint(_ value: UInt64, _ out: UnsafeMutableBufferPointer<UInt8>, _ end: inout Int) {
        var value = value
        while value >= 0x80 {
            out[end] = UInt8(truncatingIfNeeded: value) | 0x80
            end += 1
            value >>= 7
        }
        out[end] = UInt8(truncatingIfNeeded: value)
        end += 1
    }

    /// Gives back the spare capacity the packed appends left.
    mutating func shrinkColumns() {
        func exact<Element>(_ array: inout [Element]) {
            guard array.capacity > array.count else { return }
            array = [Element](unsafeUninitializedCapacity: array.count) { buffer, initialized in
                initialized = array.withUnsafeBufferPointer { source in
                    buffer.initialize(fromContentsOf: source)
                }
            }
        }
        let columns = uniqueColumns()
        exact(&columns.packed)
        exact(&columns.attributes)
        exact(&columns.checkpoints)
        exact(&columns.estimations)
    }

    // MARK: Reading

    public struct Iterator: IteratorProtocol {
        @usableFromInline let open: [Sample]
        @usableFromInline let isOpen: Bool
        // The columns, read once.
        @usableFromInline let packed: [UInt8]
        @usableFromInline let attributes: [UInt8]
        @usableFromInline let attributeStride: Int
        @usableFromInline let estimations: [Estimation]
        @usableFromInline let storedCount: Int
        @usableFromInline var offset = 0
        @usableFromInline var position = 0
        @usableFromInline var nextEstimation = 0
        @usableFromInline var predictor = Predictor()

        @inlinable
        init(_ samples: StrokeSamples) {
            open = samples.open
            isOpen = samples.columns == nil
            packed = samples.columns?.packed ?? []
            attributes = samples.columns?.attributes ?? []
            attributeStride = samples.columns?.attributeStride ?? 1
            estimations = samples.columns?.estimations ?? []
            storedCount = samples.columns?.storedCount ?? 0
        }

        @inlinable
        public mutating func next() -> Sample? {
            if isOpen {
                guard offset < open.count else { return nil }
                offset += 1
                return open[offset - 1]
            }
            guard offset < storedCount else { return nil }
            let (nx, ny, nt) = predictor.decode(packed, &position, at: offset)
            var sample = StrokeSamples.readSample(
                x: nx, y: ny, time: nt, attributes, stride: attributeStride, at: offset * attributeStride)
            if nextEstimation < estimations.count && estimations[nextEstimation].offset == offset {
                sample.estimationIndex = estimations[nextEstimation].index
                nextEstimation += 1
            }
            offset += 1
            return sample
        }
    }

    @inlinable
    public func makeIterator() -> Iterator { Iterator(self) }

    /// Every sample in order, read straight from the columns: the fast way
    /// through a packed stroke (snapshots and digests read whole boards).
    @inlinable
    public func forEach(_ body: (Sample) throws -> Void) rethrows {
        guard let columns else {
            for sample in open { try body(sample) }
            return
        }
        let count = columns.storedCount
        let stride = columns.attributeStride
        let estimations = columns.estimations
        try columns.packed.withUnsafeBufferPointer { packed in
            try columns.attributes.withUnsafeBufferPointer { attributes in
                var position = 0
                var nextEstimation = 0
                var predictor = Predictor()
                for offset in 0..<count {
                    let (nx, ny, nt) = predictor.decode(packed, &position, at: offset)
                    var sample = Self.readSample(x: nx, y: ny, time: nt, attributes, stride: stride, at: offset * stride)
                    if nextEstimation < estimations.count && estimations[nextEstimation].offset == offset {
                        sample.estimationIndex = estimations[nextEstimation].index
                        nextEstimation += 1
                    }
                    try body(sample)
                }
            }
        }
    }

    /// The index in `estimations` of the entry at or after `offset`.
    func estimationSlot(atOrAfter offset: Int) -> Int {
        let estimations = columns!.estimations
        var low = 0
        var high = estimations.count
        while low < high {
            let middle = (low + high) / 2
            if estimations[middle].offset < offset { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The sample at `offset` (0 ..< count): the last two at once, any other
    /// by decoding from the checkpoint before it.
    public subscript(offset: Int) -> Sample {
        get {
            guard let columns else { return open[offset] }
            precondition(offset >= 0 && offset < count, "sample offset \(offset) out of 0..<\(count)")
            if offset == count - 1 { return last! }
            if offset == count - 2 { return columns.beforeLast! }
            let checkpoint = offset / Self.checkpointInterval
            var iterator = Iterator(self)
            iterator.offset = checkpoint * Self.checkpointInterval
            iterator.position = checkpoint == 0 ? 0 : columns.checkpoints[checkpoint - 1]
            iterator.nextEstimation = estimationSlot(atOrAfter: iterator.offset)
            while iterator.offset < offset { _ = iterator.next() }
            return iterator.next()!
        }
        set {
            guard columns != nil else {
                open[offset] = newValue
                return
            }
            let old = self[offset]
            guard old.x == newValue.x, old.y == newValue.y, old.time == newValue.time else {
                // The stream holds locations and times; changing one means
                // writing it again (the hub never does: amendments keep them).
                var rewritten = Array(self)
                rewritten[offset] = newValue
                self = StrokeSamples(rewritten)
                pack()
                return
            }
            let columns = uniqueColumns()
            let needed = Self.stride(for: newValue)
            if needed > columns.attributeStride { columns.widenAttributes(to: needed, count: count) }
            let attributeStride = columns.attributeStride
            let base = offset * attributeStride
            columns.attributes.withUnsafeMutableBufferPointer { out in
                Self.writeAttributes(of: newValue, stride: attributeStride, into: out, at: base)
            }
            let slot = estimationSlot(atOrAfter: offset)
            let present = slot < columns.estimations.count && columns.estimations[slot].offset == offset
            switch (present, newValue.estimationIndex) {
            case (true, 0): columns.estimations.remove(at: slot)
            case (true, let index): columns.estimations[slot].index = index
            case (false, 0): break
            case (false, let index): columns.estimations.insert(Estimation(offset: offset, index: index), at: slot)
            }
            if offset == count - 1 { columns.lastSample = newValue }
            if offset == count - 2 { columns.beforeLast = newValue }
        }
    }

    /// The offset of the latest sample carrying `estimationIndex` (not 0).
    public func lastOffset(ofEstimation index: UInt32) -> Int? {
        guard let columns else { return open.lastIndex { $0.estimationIndex == index } }
        return columns.estimations.last { $0.index == index }?.offset
    }
}

extension StrokeSamples: Equatable {
    public static func == (lhs: StrokeSamples, rhs: StrokeSamples) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs)
    }
}

@inlinable func zigZag32(_ value: Int32) -> UInt32 { UInt32(bitPattern: (value << 1) ^ (value >> 31)) }
@inlinable func zigZag64(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }
@inlinable func zigZagDecoded32(_ raw: UInt64) -> Int32 {
    let value = UInt32(truncatingIfNeeded: raw)
    return Int32(bitPattern: value >> 1) ^ -Int32(bitPattern: value & 1)
}
@inlinable func zigZagDecoded64(_ raw: UInt64) -> Int64 { Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1) }
