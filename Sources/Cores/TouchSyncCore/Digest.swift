/// A 64-bit fingerprint of a board's visible state: strokes in progress (in
/// begin order, with their predicted tails) and accepted strokes (in
/// acceptance order), every sample field included. Two replicas with equal
/// digests show the same board. It is deterministic across processes and
/// machines (Swift's `Hasher` is seeded per process, so it is not used), but
/// not cryptographic: it detects divergence, not forgery.
public struct BoardDigest: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String {
        let hex = String(rawValue, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

extension BoardState {
    /// The digest of a board nobody drew on (`0c8657ae0d7aac18`).
    public static let emptyDigest = BoardState().digest

    public var digest: BoardDigest { digest(includingPredictions: true) }

    /// The digest, or (`includingPredictions` false) the digest of this board
    /// with every predicted tail removed: what a replica of a stream without
    /// predictions holds (docs/protocol.md, "Streams without predictions").
    public func digest(includingPredictions: Bool) -> BoardDigest {
        var hasher = DigestHasher()
        hashStrokes(orderedActiveStrokes, into: &hasher, predictions: includingPredictions)
        hashStrokes(acceptedStrokes, into: &hasher, predictions: false)  // accepted strokes have none
        return BoardDigest(rawValue: hasher.finalize())
    }

    /// Both digests, with and without predictions, in one pass over the
    /// accepted strokes (which dominate a board): what a hub publishing the
    /// stream without predictions needs once a heartbeat.
    public var digests: (digest: BoardDigest, withoutPredictions: BoardDigest) {
        var both = DigestHasherPair()
        let active = orderedActiveStrokes
        hashStrokes(active, into: &both.first, predictions: true)
        hashStrokes(active, into: &both.second, predictions: false)
        hashStrokes(acceptedStrokes, into: &both, predictions: false)
        return (BoardDigest(rawValue: both.first.finalize()), BoardDigest(rawValue: both.second.finalize()))
    }

    /// A list of strokes as the digest takes it: their count, then each.
    private func hashStrokes(_ strokes: [Stroke], into sink: inout some DigestSink, predictions: Bool) {
        sink.combine(UInt64(strokes.count))
        for stroke in strokes { sink.combine(stroke, predictions: predictions) }
    }
}

/// What the digest's words go into: one hasher, or two fed the same words.
protocol DigestSink {
    mutating func combine(_ word: UInt64)
}

/// A word-at-a-time mixer after xxHash64's round and avalanche.
struct DigestHasher: DigestSink {
    private var state: UInt64 = 0x2754_6F75_6368_5379  // "'TouchSy"
    private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F

    mutating func combine(_ word: UInt64) {
        var lane = state &+ word &* Self.prime2
        lane = (lane << 31) | (lane >> 33)
        state = lane &* Self.prime1
    }

    func finalize() -> UInt64 {
        var hash = state
        hash ^= hash >> 33
        hash = hash &* Self.prime2
        hash ^= hash >> 29
        hash = hash &* Self.prime1
        hash ^= hash >> 32
        return hash
    }
}

/// Two hashers fed the same words: the board's two digests in one pass over
/// its accepted strokes (each sample decoded once; the two chains are
/// independent, so the processor runs them side by side).
struct DigestHasherPair: DigestSink {
    var first = DigestHasher(), second = DigestHasher()

    mutating func combine(_ word: UInt64) {
        first.combine(word)
        second.combine(word)
    }
}

extension DigestSink {
    mutating func combine(_ text: String) {
        var count: UInt64 = 0
        var word: UInt64 = 0
        for byte in text.utf8 {
            word = (word << 8) | UInt64(byte)
            count += 1
            if count % 8 == 0 {
                combine(word)
                word = 0
            }
        }
        combine(word)
        combine(count)
    }

    mutating func combine(_ sample: Sample) {
        combineSample(
            x: sample.x, y: sample.y, time: sample.time, force: sample.force, azimuth: UInt16(bitPattern: sample.azimuth),
            altitude: UInt16(bitPattern: sample.altitude), flags: sample.flags.rawValue, estimationIndex: sample.estimationIndex)
    }

    /// A sample's four words (docs/protocol.md, "Digest", step 4), from a
    /// `Sample` or straight from a packed stroke's columns.
    @inline(__always)
    mutating func combineSample(
        x: Int32, y: Int32, time: Int64, force: UInt16, azimuth: UInt16, altitude: UInt16, flags: UInt8, estimationIndex: UInt32
    ) {
        combine(UInt64(UInt32(bitPattern: x)) << 32 | UInt64(UInt32(bitPattern: y)))
        combine(UInt64(bitPattern: time))
        combine(UInt64(force) << 48 | UInt64(azimuth) << 32 | UInt64(altitude) << 16 | UInt64(flags))
        combine(UInt64(estimationIndex))
    }

    mutating func combine(_ stroke: Stroke, predictions: Bool) {
        combine(stroke.id.rawValue)
        combine(stroke.owner.rawValue)
        combine(stroke.touch)
        combine(UInt64(stroke.style.rgba) << 32 | UInt64(stroke.style.width))
        combine(stroke.acceptedPosition ?? 0)
        combine(UInt64(stroke.samples.count))
        stroke.samples.hash(into: &self)
        let predicted = predictions ? stroke.predicted : []
        combine(UInt64(predicted.count))
        for sample in predicted { combine(sample) }
    }
}

extension StrokeSamples {
    /// Feeds every sample's four digest words to `sink`. A packed stroke is
    /// read straight from its columns in one loop per 64-sample checkpoint,
    /// with nothing but the digest's words built: heartbeats and every late
    /// join's check walk whole boards this way.
    func hash(into sink: inout some DigestSink) {
        guard let packed else {
            for sample in open { sink.combine(sample) }
            return
        }
        packed.bytes.withUnsafeBufferPointer { bytes in
            packed.attributes.withUnsafeBufferPointer { attributes in
                // An empty stroke (no sample; the caller hashed its count) may have no storage at all.
                guard packed.count > 0, let bytes = bytes.baseAddress, let attributes = attributes.baseAddress else { return }
                Self.hash(packed, bytes: bytes, attributes: attributes, into: &sink)
            }
        }
    }

    private static func hash(
        _ packed: Packed, bytes: UnsafePointer<UInt8>, attributes: UnsafePointer<UInt8>, into sink: inout some DigestSink
    ) {
        let count = packed.count, stride = packed.attributeStride
        let estimations = packed.estimations
        var nextEstimation = 0
        var nextEstimationOffset = estimations.first?.offset ?? Int.max
        var position = 0
        var offset = 0
        while offset < count {
            // A checkpoint's first sample is whole; the next is predicted to
            // stay where it is; the rest to repeat the step before them.
            let chunkStart = offset, chunkEnd = Swift.min(offset + checkpointInterval, count)
            var x: Int32 = 0, y: Int32 = 0, time: Int64 = 0
            var dx: Int32 = 0, dy: Int32 = 0, dt: Int64 = 0
            while offset < chunkEnd {
                let nextX = x &+ dx &+ Int32(truncatingIfNeeded: zigZagDecoded(readWholeVarint(bytes, &position)))
                let nextY = y &+ dy &+ Int32(truncatingIfNeeded: zigZagDecoded(readWholeVarint(bytes, &position)))
                let nextTime = time &+ dt &+ zigZagDecoded(readWholeVarint(bytes, &position))
                if offset == chunkStart {
                    (dx, dy, dt) = (0, 0, 0)
                } else {
                    (dx, dy, dt) = (nextX &- x, nextY &- y, nextTime &- time)
                }
                (x, y, time) = (nextX, nextY, nextTime)
                // Flags, then force and angles as little-endian 16-bit values (absent: 0).
                let base = attributes + offset &* stride
                func u16(_ at: Int) -> UInt16 { UInt16(base[at]) | UInt16(base[at + 1]) << 8 }
                var estimationIndex: UInt32 = 0
                if offset == nextEstimationOffset {
                    estimationIndex = estimations[nextEstimation].index
                    nextEstimation += 1
                    nextEstimationOffset = nextEstimation < estimations.count ? estimations[nextEstimation].offset : Int.max
                }
                sink.combineSample(
                    x: x, y: y, time: time, force: stride >= 3 ? u16(1) : 0, azimuth: stride == 7 ? u16(3) : 0,
                    altitude: stride == 7 ? u16(5) : 0, flags: base[0], estimationIndex: estimationIndex)
                offset += 1
            }
        }
    }
}
