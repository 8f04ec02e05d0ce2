import TouchSyncCore
import TouchSyncWire

/// The packed wire's batches, gateway to tab (docs/protocol.md, "Packed
/// frames"): a binary batch whose appends and predictions go as blocks of
/// segments (`s`), each sample's residuals bit-packed at one width per column
/// and block, as wire format v2 packs a board's appends: second-order deltas
/// continuing each stroke's samples, a prediction against the stroke's
/// motion. Nothing is carried from one batch to the next but the board
/// itself, so every tab of a board is sent the same bytes.
public enum PackedBatch {
    /// The first byte of a packed batch.
    public static let kind: UInt8 = 0x04
    /// The letter of a block of segments.
    static let blockLetter = UInt8(ascii: "s")

    /// A batch as the tabs' replicas see it, from the board after it (as
    /// `BrowserWire.model(_:after:)`: a stroke gone by the end of the batch
    /// has its samples left out, its prediction removed instead).
    public static func encode(_ batch: DiffBatch, after board: BoardState) -> [UInt8] {
        var body = BrowserBinary.Writer()
        body.bytes.reserveCapacity(16 + batch.diffs.count * 8)
        var items = 0
        var appendedInBatch: [StrokeID: Int] = [:]
        for diff in batch.diffs {
            if case .appended(let id, _, let samples) = diff { appendedInBatch[id, default: 0] += samples.count }
        }
        var appendedSoFar: [StrokeID: Int] = [:]
        func stroke(_ id: StrokeID) -> Stroke? {
            board.activeStroke(id) ?? board.acceptedStrokes.last(where: { $0.id == id })
        }
        var block = SegmentBlock()
        var index = 0
        let diffs = batch.diffs
        while index < diffs.count {
            switch diffs[index] {
            case .appended, .predicted:
                // A block: consecutive appends and predictions, each stroke once; an append and its stroke's prediction are one segment.
                var pending: [SegmentBlock.Segment] = []
                var inBlock = Set<StrokeID>()
                while index < diffs.count {
                    let id: StrokeID
                    var real: ArraySlice<Sample> = []
                    var tail: [Sample]? = nil
                    var offset: Int? = nil
                    switch diffs[index] {
                    case .appended(let appendedID, let at, let samples):
                        id = appendedID
                        offset = Int(at)
                        real = samples[...]
                        if index + 1 < diffs.count, case .predicted(id, let predicted) = diffs[index + 1] { tail = predicted }
                    case .predicted(let predictedID, let predicted):
                        id = predictedID
                        tail = predicted
                    default:
                        id = StrokeID(0)
                    }
                    guard id.rawValue != 0, !inBlock.contains(id) else { break }
                    inBlock.insert(id)
                    guard let stroke = stroke(id) else {
                        // Gone by the end of the batch: no samples, its prediction removed (each of its diffs the JSON batch's empty `p`).
                        pending.append(SegmentBlock.Segment(id: id, before: [], real: [], tail: []))
                        index += 1
                        continue
                    }
                    index += offset != nil && tail != nil ? 2 : 1
                    let stored = min(offset ?? (stroke.samples.count - (appendedInBatch[id] ?? 0) + (appendedSoFar[id] ?? 0)), stroke.samples.count)
                    appendedSoFar[id, default: 0] += real.count
                    let before = stored >= 2 ? [stroke.samples[stored - 2], stroke.samples[stored - 1]] : stored == 1 ? [stroke.samples[0]] : []
                    pending.append(SegmentBlock.Segment(id: id, before: before, real: real, tail: tail))
                }
                block.reset(anchor: pending.lazy.filter(\.hasSamples).compactMap(\.before.last).first.map(SegmentBlock.point))
                for segment in pending { block.add(segment) }
                body.byte(blockLetter)
                block.write(to: &body)
                items += 1
            default:
                BrowserBinary.write(BrowserWire.model(diffs[index]), to: &body)
                items += 1
                index += 1
            }
        }
        var out = BrowserBinary.Writer()
        out.bytes.reserveCapacity(body.bytes.count + 12)
        out.byte(kind)
        out.varint(batch.sequence)
        out.varint(UInt64(items))
        out.bytes.append(contentsOf: body.bytes)
        return out.bytes
    }

    /// The sequence of a packed batch, read without decoding it (a tab that
    /// is behind or waits for a snapshot skips the rest).
    public static func sequence(of bytes: some Collection<UInt8>) -> UInt64? {
        var reader = BrowserBinary.Reader(Array(bytes.prefix(11)))
        guard (try? reader.byte()) == kind else { return nil }
        return try? reader.varint()
    }

    /// A packed batch as the JSON batch it stands for, read against `replica`
    /// (the tab's board before it: a segment continues its stroke's samples
    /// there, or those an earlier diff of the batch appended).
    public static func decode(_ bytes: some Collection<UInt8>, replica: BrowserReplica) throws(BrowserWireError) -> BrowserBatch {
        var reader = BrowserBinary.Reader(Array(bytes))
        guard try reader.byte() == kind else { throw BrowserWireError("MALFORMED", "a packed batch starts with 0x04") }
        let seq = try reader.varint()
        let count = try reader.count(limit: reader.bytes.count)
        var strokes = SegmentChains(replica: replica)
        var diffs: [BrowserDiff] = []
        diffs.reserveCapacity(count)
        for _ in 0..<count {
            if reader.at < reader.bytes.count, reader.bytes[reader.at] == blockLetter {
                reader.at += 1
                try SegmentBlock.read(from: &reader, strokes: &strokes, into: &diffs)
                continue
            }
            let diff = try BrowserBinary.readDiff(from: &reader)
            switch diff {
            case .began(let id, _, _, _, _): strokes.began(id)
            case .accepted(let id, _), .cancelled(let id): strokes.ended(id)
            case .amended, .cleared, .removed, .restored: break
            case .appended, .predicted: throw BrowserWireError("MALFORMED", "a packed batch has its samples in blocks (s)")
            }
            diffs.append(diff)
        }
        try reader.end()
        return BrowserBatch(seq: seq, diffs: diffs)
    }
}

/// The strokes a packed batch's segments continue while it is read: their
/// sample counts and last two samples, from the replica and the batch so far.
struct SegmentChains {
    struct Chain {
        var count = 0
        var last: BrowserSample? = nil
        var beforeLast: BrowserSample? = nil
    }
    let replica: BrowserReplica
    /// Strokes the batch began, extended or ended so far (nil: ended).
    private var changed: [UInt64: Chain?] = [:]

    init(replica: BrowserReplica) { self.replica = replica }

    func chain(_ id: UInt64) -> Chain? {
        if let known = changed[id] { return known }
        guard let stroke = replica.active[id] else { return nil }
        return Chain(count: stroke.samples.count, last: stroke.samples.last, beforeLast: stroke.samples.dropLast().last)
    }

    mutating func began(_ id: UInt64) { changed[id] = Chain() }
    mutating func ended(_ id: UInt64) { changed[id] = .some(nil) }
    mutating func set(_ id: UInt64, _ chain: Chain) { changed[id] = chain }
}

/// One block of segments under construction, or being read.
struct SegmentBlock {
    private var headers: [UInt64] = []  // per segment: zigzag id delta, count << 2 | min(tail code, 3), tail code − 3 (.max: none)
    private var xy: [UInt64] = []
    private var times: [UInt64] = []
    private var forces: [UInt64] = []
    private var previousID: UInt64 = 0
    private var anchor = TouchChains.Point(x: 0, y: 0, t: 0)
    /// The gap of the block's previous first predicted sample coded against motion (nil: none yet).
    private var gap: Int64? = nil
    private var force: Int64 = 0

    /// A segment of stroke `id`: `before` its last stored samples (at most two, oldest first), its new samples and its new prediction (nil: unchanged).
    struct Segment {
        var id: StrokeID
        var before: [Sample]
        var real: ArraySlice<Sample>
        var tail: [Sample]?
        var hasSamples: Bool { !real.isEmpty || !(tail ?? []).isEmpty }
    }

    /// An empty block whose anchor starts at `anchor` (the last stored sample
    /// of the first segment with samples whose stroke holds one), else at zero.
    mutating func reset(anchor: TouchChains.Point?) {
        self = SegmentBlock()
        if let anchor { self.anchor = anchor }
    }

    mutating func add(_ segment: Segment) {
        let (id, before, real, tail) = (segment.id, segment.before, segment.real, segment.tail)
        headers.append(zigZag(Int64(bitPattern: id.rawValue &- previousID)))
        previousID = id.rawValue
        let tailCode = tail.map { UInt64($0.count + 1) } ?? 0
        headers.append(UInt64(real.count) << 2 | min(tailCode, 3))
        headers.append(tailCode >= 3 ? tailCode - 3 : .max)
        var run = TouchChains.Run()
        for sample in before { run.advance(to: Self.point(sample)) }
        for sample in real {
            let point = Self.point(sample)
            add(point, expected: run.expected(from: anchor), sample)
            run.advance(to: point)
            anchor = point
        }
        var tailRun = run
        for (index, sample) in (tail ?? []).enumerated() {
            let point = Self.point(sample)
            if index == 0, let last = run.last {
                let gap = point.t &- last.t
                let expected = run.alongMotion(gap: gap)
                xy.append(zigZag(point.x &- expected.x))
                xy.append(zigZag(point.y &- expected.y))
                times.append(zigZag(gap &- (self.gap ?? run.interval)))
                self.gap = gap
                addForce(sample)
            } else {
                add(point, expected: tailRun.expected(from: anchor), sample)
            }
            tailRun.advance(to: point)
        }
    }

    static func point(_ sample: Sample) -> TouchChains.Point { TouchChains.Point(x: Int64(sample.x), y: Int64(sample.y), t: sample.time) }

    private mutating func add(_ point: TouchChains.Point, expected: TouchChains.Point, _ sample: Sample) {
        xy.append(zigZag(point.x &- expected.x))
        xy.append(zigZag(point.y &- expected.y))
        times.append(zigZag(point.t &- expected.t))
        addForce(sample)
    }

    private mutating func addForce(_ sample: Sample) {
        let value = sample.flags.contains(.hasForce) ? Int64(sample.force) : 0
        forces.append(zigZag(value &- force))
        force = value
    }

    /// The block: segments, their headers, the widths (x and y, time, force), the bit stream, the escaped values.
    func write(to out: inout BrowserBinary.Writer) {
        out.varint(UInt64(headers.count / 3))
        for value in headers where value != .max { out.varint(value) }
        let widthXY = PackedAppends.width(of: xy[...])
        let widthTime = PackedAppends.width(of: times[...])
        let widthForce = PackedAppends.width(of: forces[...])
        out.varint(UInt64(widthXY))
        out.varint(UInt64(widthTime))
        out.varint(UInt64(widthForce))
        var bits = BitWriter()
        var escaped: [UInt64] = []
        for index in times.indices {
            writeField(xy[2 * index], width: widthXY, bits: &bits, escaped: &escaped)
            writeField(xy[2 * index + 1], width: widthXY, bits: &bits, escaped: &escaped)
            writeField(times[index], width: widthTime, bits: &bits, escaped: &escaped)
            writeField(forces[index], width: widthForce, bits: &bits, escaped: &escaped)
        }
        bits.flush()
        out.bytes.append(contentsOf: bits.bytes)
        for value in escaped { out.varint(value) }
    }

    /// Reads a block (after its letter) into the diffs it stands for: per
    /// segment an append (when it has samples, or neither samples nor a new
    /// prediction) and a prediction (when it replaces or removes one).
    static func read(from reader: inout BrowserBinary.Reader, strokes: inout SegmentChains, into diffs: inout [BrowserDiff]) throws(BrowserWireError) {
        let segmentCount = try reader.count(limit: reader.bytes.count)
        guard segmentCount >= 1 else { throw BrowserWireError("MALFORMED", "a block has at least one segment") }
        var segments: [(id: UInt64, count: Int, tailCode: UInt64)] = []
        segments.reserveCapacity(segmentCount)
        var id: UInt64 = 0
        var total = 0
        for _ in 0..<segmentCount {
            id = id &+ UInt64(bitPattern: try reader.zigzag())
            let code = try reader.varint()
            var tailCode = code & 3
            if tailCode == 3 { tailCode = 3 &+ (try reader.varint()) }
            let count = code >> 2
            guard count <= UInt64(PackedAppends.maxSamples), tailCode <= UInt64(PackedAppends.maxSamples) + 1 else {
                throw BrowserWireError("MALFORMED", "a block of more than \(PackedAppends.maxSamples) samples")
            }
            total += Int(count) + Int(max(tailCode, 1) - 1)
            guard total <= PackedAppends.maxSamples else { throw BrowserWireError("MALFORMED", "a block of more than \(PackedAppends.maxSamples) samples") }
            segments.append((id, Int(count), tailCode))
        }
        var widths: [Int] = []
        for _ in 0..<3 {
            let width = try reader.varint()
            guard width <= 64 else { throw BrowserWireError("MALFORMED", "a width is 0 to 64, not \(width)") }
            widths.append(Int(width))
        }
        let bitsPerSample = 2 * widths[0] + widths[1] + widths[2]
        let streamBytes = (total * bitsPerSample + 7) / 8
        guard streamBytes <= reader.bytes.count - reader.at else { throw BrowserWireError("MALFORMED", "the bit stream runs past the frame") }
        var stream = BitStream(start: reader.at * 8, end: (reader.at + streamBytes) * 8)
        reader.at += streamBytes
        func field(_ width: Int) throws(BrowserWireError) -> UInt64 {
            guard width > 0 else { return 0 }
            let value = stream.read(width, from: reader.bytes)
            let escape: UInt64 = width == 64 ? .max : (1 << UInt64(width)) - 1
            return value == escape ? try reader.varint() : value
        }
        // The anchor starts at the last stored sample of the first segment with samples whose stroke holds one.
        var anchor = TouchChains.Point(x: 0, y: 0, t: 0)
        for segment in segments where segment.count > 0 || segment.tailCode > 1 {
            guard let last = strokes.chain(segment.id)?.last else { continue }
            anchor = TouchChains.Point(x: last.x, y: last.y, t: last.t)
            break
        }
        var gap: Int64? = nil
        var force: Int64 = 0
        func sample(_ expected: TouchChains.Point) throws(BrowserWireError) -> BrowserSample {
            let x = expected.x &+ zigZagDecoded(try field(widths[0]))
            let y = expected.y &+ zigZagDecoded(try field(widths[0]))
            let t = expected.t &+ zigZagDecoded(try field(widths[1]))
            force = force &+ zigZagDecoded(try field(widths[2]))
            return BrowserSample(x: x, y: y, t: t, force: force)
        }
        func point(_ sample: BrowserSample) -> TouchChains.Point { TouchChains.Point(x: sample.x, y: sample.y, t: sample.t) }
        for segment in segments {
            let needsSamples = segment.count > 0 || segment.tailCode > 1
            let known = strokes.chain(segment.id)
            guard known != nil || !needsSamples else { throw BrowserWireError("MALFORMED", "samples for stroke \(segment.id), not in progress") }
            var chain = known ?? SegmentChains.Chain()
            var run = TouchChains.Run(last: chain.last.map(point), beforeLast: chain.beforeLast.map(point))
            let offset = chain.count
            let base = chain.last
            var real: [BrowserSample] = []
            real.reserveCapacity(segment.count)
            for _ in 0..<segment.count {
                let decoded = try sample(run.expected(from: anchor))
                real.append(decoded)
                run.advance(to: point(decoded))
                anchor = point(decoded)
                chain.beforeLast = chain.last
                chain.last = decoded
            }
            chain.count += segment.count
            var tail: [BrowserSample] = []
            var tailRun = run
            for index in 0..<Int(max(segment.tailCode, 1) - 1) {
                let decoded: BrowserSample
                if index == 0, let last = run.last {
                    let x = zigZagDecoded(try field(widths[0]))
                    let y = zigZagDecoded(try field(widths[0]))
                    let thisGap = (gap ?? run.interval) &+ zigZagDecoded(try field(widths[1]))
                    gap = thisGap
                    force = force &+ zigZagDecoded(try field(widths[2]))
                    let expected = run.alongMotion(gap: thisGap)
                    decoded = BrowserSample(x: expected.x &+ x, y: expected.y &+ y, t: last.t &+ thisGap, force: force)
                } else {
                    decoded = try sample(tailRun.expected(from: anchor))
                }
                tail.append(decoded)
                tailRun.advance(to: point(decoded))
            }
            if known != nil { strokes.set(segment.id, chain) }
            if segment.count > 0 || segment.tailCode == 0 {
                diffs.append(.appended(id: segment.id, offset: offset, samples: flat(real, from: offset > 0 ? base : nil)))
            }
            if segment.tailCode > 0 { diffs.append(.predicted(id: segment.id, samples: flat(tail, from: chain.last))) }
        }
        guard stream.paddingIsZero(in: reader.bytes) else { throw BrowserWireError("MALFORMED", "the bit stream's unused bits are not zero") }
    }

    /// Four integers per sample, x, y and t as differences from the previous (the first from `base`, or absolute), as the JSON batch has them.
    static func flat(_ samples: [BrowserSample], from base: BrowserSample?) -> [Int64] {
        var out: [Int64] = []
        out.reserveCapacity(samples.count * 4)
        var previous = base ?? BrowserSample(x: 0, y: 0, t: 0, force: 0)
        for sample in samples {
            out.append(sample.x &- previous.x)
            out.append(sample.y &- previous.y)
            out.append(sample.t &- previous.t)
            out.append(sample.force)
            previous = sample
        }
        return out
    }
}

/// Bits of a region of a frame, least significant first.
struct BitStream {
    var bit: Int
    let end: Int

    init(start: Int, end: Int) {
        bit = start
        self.end = end
    }

    /// The next `width` bits (the caller checked the region holds them all).
    mutating func read(_ width: Int, from bytes: [UInt8]) -> UInt64 {
        var value: UInt64 = 0
        var done = 0
        while done < width {
            let byte = UInt64(bytes[bit >> 3]) >> UInt64(bit & 7)
            let take = min(8 - (bit & 7), width - done)
            value |= (byte & ((1 << UInt64(take)) - 1)) << UInt64(done)
            done += take
            bit += take
        }
        return value
    }

    func paddingIsZero(in bytes: [UInt8]) -> Bool {
        guard bit < end else { return true }
        return UInt64(bytes[(end - 1) >> 3]) >> UInt64(bit & 7) == 0
    }
}
