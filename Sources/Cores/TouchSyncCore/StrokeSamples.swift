/// A stroke's stored samples: a plain `[Sample]` while the stroke is in
/// progress (appends and amendments are the hub's and every replica's hot
/// path), packed once it is accepted (`pack()`), at about a third of the
/// memory (`[Sample]` takes 32 bytes a sample).
///
/// Packed, x, y and time go into one byte stream as zig-zag varint
/// residuals against a linear prediction from the two samples before (so a
/// steady finger and a steady sample rate cost a byte or two per value).
/// Every 64th sample is written whole, with no prediction, and its byte
/// offset is kept, so any sample is found by decoding at most 63 others.
/// Flags, force and angles sit in a fixed-width column only as wide as the
/// stroke needs; the few non-zero estimation indices are kept aside by
/// offset; the last two samples are kept whole (the diff stream continues
/// from them).
///
/// A packed stroke is one immutable object, shared by copies (copying a
/// stroke, which the model does when it moves strokes between its tables,
/// retains one reference). Changing a packed stroke unpacks it first; the
/// board never does, as accepted strokes no longer change.
///
/// It is a `Sequence`, not a `Collection`: iterating decodes in one pass,
/// while `self[offset]` costs up to 63 decodes (generic collection
/// algorithms would be quadratic over it).
public struct StrokeSamples: Sequence, Sendable, ExpressibleByArrayLiteral {
    @usableFromInline static let checkpointInterval = 64
    /// The most bytes one sample's residuals take (x and y 5 each, time 10).
    @usableFromInline static let maxPackedBytes = 20

    /// The samples while not packed.
    @usableFromInline var open: [Sample] = []
    /// The samples once packed (nil before).
    @usableFromInline var packed: Packed?

    public init() {}

    public init<Samples: Sequence>(_ samples: Samples) where Samples.Element == Sample {
        open = Array(samples)
    }

    public init(arrayLiteral samples: Sample...) {
        open = samples
    }

    public var isPacked: Bool { packed != nil }
    public var count: Int { packed?.count ?? open.count }
    public var isEmpty: Bool { count == 0 }
    public var underestimatedCount: Int { count }
    public var first: Sample? { isEmpty ? nil : self[0] }
    public var last: Sample? { packed == nil ? open.last : packed!.last }
    /// The sample before the last: with `last`, what the next sample is
    /// predicted from, here and in the diff stream.
    public var secondToLast: Sample? {
        if let packed { return packed.secondToLast }
        return open.count >= 2 ? open[open.count - 2] : nil
    }

    /// Bytes the samples hold on the heap (capacity, not count; without the
    /// objects' headers).
    public var heapBytes: Int {
        guard let packed else { return open.capacity * MemoryLayout<Sample>.stride }
        return packed.bytes.capacity + packed.attributes.capacity
            + packed.checkpoints.capacity * MemoryLayout<Int>.stride
            + packed.estimations.capacity * MemoryLayout<Estimation>.stride
    }

    /// Packs the samples (a stroke that is accepted no longer grows).
    public mutating func pack() {
        guard packed == nil else { return }
        packed = open.withUnsafeBufferPointer { Packed($0) }
        open = []
    }

    /// Back to a plain array, before a change.
    @usableFromInline
    mutating func unpack() {
        guard packed != nil else { return }
        open = Array(self)
        packed = nil
    }

    @inlinable
    public mutating func append<Samples: Sequence>(contentsOf samples: Samples) where Samples.Element == Sample {
        unpack()
        open.append(contentsOf: samples)
    }

    @inlinable
    public mutating func append(_ sample: Sample) {
        unpack()
        open.append(sample)
    }

    /// The sample at `offset` (0 ..< count): the last two at once, any other
    /// of a packed stroke by decoding from the checkpoint before it.
    public subscript(offset: Int) -> Sample {
        get {
            guard let packed else { return open[offset] }
            precondition(offset >= 0 && offset < packed.count, "sample offset \(offset) out of 0..<\(packed.count)")
            if offset == packed.count - 1 { return packed.last! }
            if offset == packed.count - 2 { return packed.secondToLast! }
            let checkpoint = offset / Self.checkpointInterval
            var cursor = Cursor(packed, packed.bytes, packed.attributes, from: checkpoint)
            while cursor.offset < offset { _ = cursor.next() }
            return cursor.next()
        }
        set {
            unpack()
            open[offset] = newValue
        }
    }

    /// The offset of the latest sample carrying `estimationIndex` (not 0).
    public func lastOffset(ofEstimation index: UInt32) -> Int? {
        guard let packed else { return open.lastIndex { $0.estimationIndex == index } }
        return packed.estimations.last { $0.index == index }?.offset
    }

    // MARK: Reading

    public struct Iterator: IteratorProtocol {
        @usableFromInline let open: [Sample]
        @usableFromInline var cursor: Cursor<[UInt8]>?
        @usableFromInline var offset = 0

        @inlinable
        init(_ samples: StrokeSamples) {
            open = samples.open
            cursor = samples.packed.map { Cursor($0, $0.bytes, $0.attributes, from: 0) }
        }

        @inlinable
        public mutating func next() -> Sample? {
            guard cursor != nil else {
                guard offset < open.count else { return nil }
                offset += 1
                return open[offset - 1]
            }
            guard cursor!.offset < cursor!.count else { return nil }
            return cursor!.next()
        }
    }

    @inlinable
    public func makeIterator() -> Iterator { Iterator(self) }

    /// Every sample in order, read straight from the columns: the fast way
    /// through a packed stroke (snapshots and digests read whole boards).
    @inlinable
    public func forEach(_ body: (Sample) throws -> Void) rethrows {
        guard let packed else {
            for sample in open { try body(sample) }
            return
        }
        try packed.bytes.withUnsafeBufferPointer { bytes in
            try packed.attributes.withUnsafeBufferPointer { attributes in
                var cursor = Cursor(packed, bytes, attributes, from: 0)
                while cursor.offset < cursor.count { try body(cursor.next()) }
            }
        }
    }
}

extension StrokeSamples: Equatable {
    public static func == (lhs: StrokeSamples, rhs: StrokeSamples) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs)
    }
}

// MARK: - The packed form

extension StrokeSamples {
    @usableFromInline
    struct Estimation: Sendable, Equatable {
        @usableFromInline let offset: Int
        @usableFromInline let index: UInt32
        @inlinable init(offset: Int, index: UInt32) {
            self.offset = offset
            self.index = index
        }
    }

    /// A packed stroke, written once in one pass with each column at its
    /// exact size (packing is what accepting a stroke costs, on the hub and
    /// on every replica).
    @usableFromInline
    final class Packed: Sendable {
        /// Residuals of x, y and time, sample after sample.
        @usableFromInline let bytes: [UInt8]
        /// Per sample: flags; then force (2 bytes, little-endian) when the
        /// stride is 3 or more; then azimuth and altitude (2 bytes each) when
        /// it is 7.
        @usableFromInline let attributes: [UInt8]
        @usableFromInline let attributeStride: Int
        /// Byte offsets in `bytes` of samples 64, 128, ... (sample 0 is at 0).
        @usableFromInline let checkpoints: [Int]
        /// The samples whose estimation index is not 0, by offset.
        @usableFromInline let estimations: [Estimation]
        @usableFromInline let count: Int
        @usableFromInline let last: Sample?
        @usableFromInline let secondToLast: Sample?

        @usableFromInline
        init(_ samples: UnsafeBufferPointer<Sample>) {
            let count = samples.count
            var stride = 1
            var estimations: [Estimation] = []
            for (offset, sample) in samples.enumerated() {
                stride = Swift.max(stride, StrokeSamples.stride(for: sample))
                if sample.estimationIndex != 0 { estimations.append(Estimation(offset: offset, index: sample.estimationIndex)) }
            }
            var checkpoints: [Int] = []
            checkpoints.reserveCapacity(Swift.max(count - 1, 0) / StrokeSamples.checkpointInterval)
            let worstCase = [UInt8](unsafeUninitializedCapacity: count * StrokeSamples.maxPackedBytes) { out, written in
                var end = 0
                var predictor = Predictor()
                for offset in 0..<count {
                    let sample = samples[offset]
                    if offset > 0 && offset % StrokeSamples.checkpointInterval == 0 { checkpoints.append(end) }
                    let (px, py, pt) = predictor.prediction(at: offset)
                    StrokeSamples.writeVarint(zigZag(sample.x &- px), out, &end)
                    StrokeSamples.writeVarint(zigZag(sample.y &- py), out, &end)
                    StrokeSamples.writeVarint(zigZag(sample.time &- pt), out, &end)
                    predictor.advance(to: sample.x, sample.y, sample.time)
                }
                written = end
            }
            self.bytes = [UInt8](unsafeUninitializedCapacity: worstCase.count) { out, written in
                written = worstCase.withUnsafeBufferPointer { out.initialize(fromContentsOf: $0) }
            }
            self.attributes = [UInt8](unsafeUninitializedCapacity: count * stride) { out, written in
                for offset in 0..<count {
                    StrokeSamples.writeAttributes(of: samples[offset], stride: stride, into: out, at: offset * stride)
                }
                written = count * stride
            }
            self.attributeStride = stride
            self.checkpoints = checkpoints
            self.estimations = estimations
            self.count = count
            self.last = samples.last
            self.secondToLast = count >= 2 ? samples[count - 2] : nil
        }

        /// A packed stroke from its parts, as `init(transfer:)` checked them.
        init(
            bytes: [UInt8], attributes: [UInt8], attributeStride: Int, checkpoints: [Int], estimations: [Estimation], count: Int,
            last: Sample, secondToLast: Sample?
        ) {
            self.bytes = bytes
            self.attributes = attributes
            self.attributeStride = attributeStride
            self.checkpoints = checkpoints
            self.estimations = estimations
            self.count = count
            self.last = last
            self.secondToLast = secondToLast
        }

        /// The index in `estimations` of the entry at or after `offset`.
        @usableFromInline
        func estimationSlot(atOrAfter offset: Int) -> Int {
            var low = 0
            var high = estimations.count
            while low < high {
                let middle = (low + high) / 2
                if estimations[middle].offset < offset { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    /// What a sample is predicted from: the previous sample's location and
    /// the step that led to it (packing and reading share it).
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
    }

    /// Reads a packed stroke sample by sample, from an array (the iterator)
    /// or through pointers (`forEach`).
    @usableFromInline
    struct Cursor<Bytes: RandomAccessCollection<UInt8>> where Bytes.Index == Int {
        @usableFromInline let bytes: Bytes
        @usableFromInline let attributes: Bytes
        @usableFromInline let attributeStride: Int
        @usableFromInline let estimations: [Estimation]
        @usableFromInline let count: Int
        @usableFromInline var offset: Int
        @usableFromInline var position: Int
        @usableFromInline var nextEstimation: Int
        @usableFromInline var predictor = Predictor()

        /// A cursor at the start of checkpoint `checkpoint` (sample 64 x checkpoint).
        @inlinable
        init(_ packed: Packed, _ bytes: Bytes, _ attributes: Bytes, from checkpoint: Int) {
            self.bytes = bytes
            self.attributes = attributes
            attributeStride = packed.attributeStride
            estimations = packed.estimations
            count = packed.count
            offset = checkpoint * StrokeSamples.checkpointInterval
            position = checkpoint == 0 ? 0 : packed.checkpoints[checkpoint - 1]
            nextEstimation = checkpoint == 0 ? 0 : packed.estimationSlot(atOrAfter: offset)
        }

        /// The sample at `offset` (which must be below `count`), then moves on.
        @inlinable
        mutating func next() -> Sample {
            let x = Int32(truncatingIfNeeded: zigZagDecoded(readVarint()))
            let y = Int32(truncatingIfNeeded: zigZagDecoded(readVarint()))
            let time = zigZagDecoded(readVarint())
            let (px, py, pt) = predictor.prediction(at: offset)
            predictor.advance(to: px &+ x, py &+ y, pt &+ time)
            let base = offset * attributeStride
            var sample = Sample(
                x: predictor.x, y: predictor.y, time: predictor.time, flags: SampleFlags(rawValue: attributes[base]))
            if attributeStride >= 3 {
                sample.force = UInt16(attributes[base + 1]) | UInt16(attributes[base + 2]) << 8
                if attributeStride == 7 {
                    sample.azimuth = Int16(bitPattern: UInt16(attributes[base + 3]) | UInt16(attributes[base + 4]) << 8)
                    sample.altitude = Int16(bitPattern: UInt16(attributes[base + 5]) | UInt16(attributes[base + 6]) << 8)
                }
            }
            if nextEstimation < estimations.count && estimations[nextEstimation].offset == offset {
                sample.estimationIndex = estimations[nextEstimation].index
                nextEstimation += 1
            }
            offset += 1
            return sample
        }

        @inlinable
        mutating func readVarint() -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let byte = bytes[position]
                position += 1
                value |= UInt64(byte & 0x7f) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
        }
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

    /// The attribute bytes a sample needs: flags only, with force, or with force and angles.
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
}
