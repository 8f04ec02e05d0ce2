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
    /// The letter of a block of segments (wire `packed`).
    static let blockLetter = UInt8(ascii: "s")
    /// The letter of a block of segments of wire `packed2`.
    static let block2Letter = UInt8(ascii: "S")

    /// The two packed wires' blocks: `packed` ("s": segments named by id
    /// difference, one width per column) and `packed2` ("S": segments named by
    /// rank among the strokes in progress, the first predicted samples in
    /// columns of their own, times and motion against the stroke's period).
    public enum Blocks: Sendable { case packed, packed2 }

    /// A batch as the tabs' replicas see it, from the board after it (as
    /// `BrowserWire.model(_:after:)`: a stroke gone by the end of the batch
    /// has its samples left out, its prediction removed instead). nil only
    /// when `packed2` cannot name a segment's stroke by rank (a stroke not in
    /// progress: the hub never sends one); the batch then goes as a binary batch.
    public static func encode(_ batch: DiffBatch, after board: BoardState, blocks: Blocks = .packed) -> [UInt8]? {
        // packed2 names strokes by rank among those in progress where the block stands (ascending ids): the
        // board's before the batch (those after it, less the ones it began, with the ones it ended), then as it goes.
        var inProgress: [StrokeID] = []
        if blocks == .packed2 {
            var begun: [StrokeID] = [], ended: [StrokeID] = []
            for diff in batch.diffs {
                switch diff {
                case .began(let id, _, _, _): begun.append(id)
                case .accepted(let id, _), .cancelled(let id): ended.append(id)
                default: break
                }
            }
            inProgress = board.activeStrokeIDs
            if !begun.isEmpty || !ended.isEmpty {
                inProgress = Set(inProgress).union(ended).subtracting(begun).sorted()
            }
        }
        func rank(_ id: StrokeID) -> Int? {
            var (low, high) = (0, inProgress.count)
            while low < high {
                let middle = (low + high) / 2
                if inProgress[middle] < id { low = middle + 1 } else { high = middle }
            }
            return low < inProgress.count && inProgress[low] == id ? low : nil
        }
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
        var block = SegmentBlock(blocks: blocks)
        var index = 0
        let diffs = batch.diffs
        while index < diffs.count {
            if blocks == .packed2 {
                switch diffs[index] {
                case .began(let id, _, _, _): if rank(id) == nil { inProgress.insert(id, at: inProgress.firstIndex { $0 > id } ?? inProgress.count) }
                case .accepted(let id, _), .cancelled(let id): if let at = rank(id) { inProgress.remove(at: at) }
                default: break
                }
            }
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
                    let before = (max(stored - (blocks == .packed ? 2 : 3), 0)..<stored).map { stroke.samples[$0] }
                    pending.append(SegmentBlock.Segment(id: id, before: before, real: real, tail: tail))
                }
                if blocks == .packed2 {
                    // By rank: ascending (appends and predictions of different strokes commute).
                    for position in pending.indices {
                        guard let rank = rank(pending[position].id) else { return nil }
                        pending[position].rank = rank
                    }
                    pending.sort { $0.rank < $1.rank }
                }
                block.reset(anchor: pending.lazy.filter(\.hasSamples).compactMap(\.before.last).first.map(SegmentBlock.point))
                for segment in pending { block.add(segment) }
                body.byte(blocks == .packed ? blockLetter : block2Letter)
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
        if blocks == .packed { out.varint(UInt64(items)) }  // packed2: the items run to the frame's end
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
    public static func decode(_ bytes: some Collection<UInt8>, replica: BrowserReplica, blocks: Blocks = .packed) throws(BrowserWireError) -> BrowserBatch {
        var reader = BrowserBinary.Reader(Array(bytes))
        guard try reader.byte() == kind else { throw BrowserWireError("MALFORMED", "a packed batch starts with 0x04") }
        let seq = try reader.varint()
        let count = blocks == .packed ? try reader.count(limit: reader.bytes.count) : Int.max
        var strokes = SegmentChains(replica: replica)
        var diffs: [BrowserDiff] = []
        var items = 0
        // packed2: the strokes in progress by id, kept until a diff begins or ends one.
        var ranked: [UInt64]? = nil
        while items < count, blocks == .packed || reader.at < reader.bytes.count {
            items += 1
            if reader.at < reader.bytes.count, reader.bytes[reader.at] == (blocks == .packed ? blockLetter : block2Letter) {
                reader.at += 1
                if blocks == .packed2, ranked == nil { ranked = strokes.inProgress() }
                try SegmentBlock.read(from: &reader, strokes: &strokes, into: &diffs, ranked: ranked)
                continue
            }
            let diff = try BrowserBinary.readDiff(from: &reader)
            switch diff {
            case .began(let id, _, _, _, _):
                strokes.began(id)
                ranked = nil
            case .accepted(let id, _), .cancelled(let id):
                strokes.ended(id)
                ranked = nil
            case .amended, .cleared, .removed, .restored: break
            case .appended, .predicted: throw BrowserWireError("MALFORMED", "a packed batch has its samples in blocks (\(blocks == .packed ? "s" : "S"))")
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
        var third: BrowserSample? = nil
    }
    let replica: BrowserReplica
    /// Strokes the batch began, extended or ended so far (nil: ended).
    private var changed: [UInt64: Chain?] = [:]

    init(replica: BrowserReplica) { self.replica = replica }

    func chain(_ id: UInt64) -> Chain? {
        if let known = changed[id] { return known }
        guard let stroke = replica.active[id] else { return nil }
        return Chain(
            count: stroke.samples.count, last: stroke.samples.last, beforeLast: stroke.samples.dropLast().last, third: stroke.samples.dropLast(2).last)
    }

    /// The strokes in progress where a block stands, by id (a packed2 segment's rank indexes them).
    func inProgress() -> [UInt64] {
        var ids = replica.active.keys.filter { id in
            if case .some(.none) = changed[id] { return false }  // ended in the batch
            return true
        }
        for (id, chain) in changed where chain != nil && replica.active[id] == nil { ids.append(id) }
        return ids.sorted()
    }

    mutating func began(_ id: UInt64) { changed[id] = Chain() }
    mutating func ended(_ id: UInt64) { changed[id] = .some(nil) }
    mutating func set(_ id: UInt64, _ chain: Chain) { changed[id] = chain }
}

/// One block of segments under construction, or being read.
struct SegmentBlock {
    var blocks: PackedBatch.Blocks
    /// Per segment (packed): zigzag id delta, count << 2 | min(tail code, 3), tail code − 3 (.max: none);
    /// (packed2): rank delta, count, tail code.
    private var headers: [UInt64] = []
    private var xy: [UInt64] = []
    private var times: [UInt64] = []
    private var forces: [UInt64] = []
    /// Per sample: whether it is a first predicted sample coded against the motion (packed2 gives those columns of their own).
    private var againstMotion: [Bool] = []
    private var previousID: UInt64 = 0
    private var previousRank = -1
    private var anchor = TouchChains.Point(x: 0, y: 0, t: 0)
    /// The gap of the block's previous first predicted sample coded against motion (nil: none yet).
    private var gap: Int64? = nil
    private var force: Int64 = 0

    init(blocks: PackedBatch.Blocks) { self.blocks = blocks }

    /// A segment of stroke `id`: `before` its last stored samples (at most two, three for packed2; oldest first), its new samples and its new prediction (nil: unchanged).
    struct Segment {
        var id: StrokeID
        var before: [Sample]
        var real: ArraySlice<Sample>
        var tail: [Sample]?
        /// packed2: the stroke's rank among those in progress where the block stands.
        var rank = 0
        var hasSamples: Bool { !real.isEmpty || !(tail ?? []).isEmpty }
    }

    /// An empty block whose anchor starts at `anchor` (the last stored sample
    /// of the first segment with samples whose stroke holds one), else at zero.
    mutating func reset(anchor: TouchChains.Point?) {
        self = SegmentBlock(blocks: blocks)
        if let anchor { self.anchor = anchor }
    }

    mutating func add(_ segment: Segment) {
        let (id, before, real, tail) = (segment.id, segment.before, segment.real, segment.tail)
        let tailCode = tail.map { UInt64($0.count + 1) } ?? 0
        switch blocks {
        case .packed:
            headers.append(zigZag(Int64(bitPattern: id.rawValue &- previousID)))
            previousID = id.rawValue
            headers.append(UInt64(real.count) << 2 | min(tailCode, 3))
            headers.append(tailCode >= 3 ? tailCode - 3 : .max)
        case .packed2:
            headers.append(UInt64(segment.rank - previousRank - 1))
            previousRank = segment.rank
            headers.append(UInt64(real.count))
            headers.append(tailCode)
        }
        let byPeriod = blocks == .packed2
        var run = TouchChains.Run()
        for sample in before { run.advance(to: Self.point(sample)) }
        for sample in real {
            let point = Self.point(sample)
            add(point, expected: byPeriod ? run.expectedByPeriod(from: anchor) : run.expected(from: anchor), sample)
            run.advance(to: point)
            anchor = point
        }
        var tailRun = run
        for (index, sample) in (tail ?? []).enumerated() {
            let point = Self.point(sample)
            if index == 0, let last = run.last {
                let gap = point.t &- last.t
                let expected = byPeriod ? run.alongMotionByPeriod(gap: gap) : run.alongMotion(gap: gap)
                xy.append(zigZag(point.x &- expected.x))
                xy.append(zigZag(point.y &- expected.y))
                times.append(zigZag(gap &- (self.gap ?? (byPeriod ? run.period : run.interval))))
                againstMotion.append(true)
                self.gap = gap
                addForce(sample)
            } else {
                add(point, expected: byPeriod ? tailRun.expectedByPeriod(from: anchor) : tailRun.expected(from: anchor), sample)
            }
            tailRun.advance(to: point)
        }
    }

    static func point(_ sample: Sample) -> TouchChains.Point { TouchChains.Point(x: Int64(sample.x), y: Int64(sample.y), t: sample.time) }

    private mutating func add(_ point: TouchChains.Point, expected: TouchChains.Point, _ sample: Sample) {
        xy.append(zigZag(point.x &- expected.x))
        xy.append(zigZag(point.y &- expected.y))
        times.append(zigZag(point.t &- expected.t))
        againstMotion.append(false)
        addForce(sample)
    }

    private mutating func addForce(_ sample: Sample) {
        let value = sample.flags.contains(.hasForce) ? Int64(sample.force) : 0
        forces.append(zigZag(value &- force))
        force = value
    }

    /// The block: segments, their headers, the widths, the bit stream, the escaped values.
    func write(to out: inout BrowserBinary.Writer) {
        let segments = headers.count / 3
        // Widths per column: [x and y, t, force], and for packed2 [x and y, t] of the first predicted samples too.
        var widths: [Int]
        switch blocks {
        case .packed:
            out.varint(UInt64(segments))
            for value in headers where value != .max { out.varint(value) }
            widths = [PackedAppends.width(of: xy[...]), PackedAppends.width(of: times[...]), PackedAppends.width(of: forces[...])]
            for width in widths { out.varint(UInt64(width)) }
            widths += [widths[0], widths[1]]
        case .packed2:
            func column(_ values: [UInt64], motion: Bool, per: Int) -> [UInt64] {
                var out: [UInt64] = []
                for (index, value) in values.enumerated() where againstMotion[index / per] == motion { out.append(value) }
                return out
            }
            widths = [
                PackedAppends.nibbleWidth(of: column(xy, motion: false, per: 2)[...]), PackedAppends.nibbleWidth(of: column(times, motion: false, per: 1)[...]),
                PackedAppends.nibbleWidth(of: forces[...]),
                PackedAppends.nibbleWidth(of: column(xy, motion: true, per: 2)[...]), PackedAppends.nibbleWidth(of: column(times, motion: true, per: 1)[...]),
            ]
            out.varint(UInt64(segments) << 1 | (widths[2] > 0 ? 1 : 0))
            for segment in 0..<segments {
                let (rank, count, tail) = (headers[3 * segment], headers[3 * segment + 1], headers[3 * segment + 2])
                out.byte(UInt8(min(rank, 15)) | UInt8(min(count, 3)) << 4 | UInt8(min(tail, 3)) << 6)
                if rank >= 15 { out.varint(rank - 15) }
                if count >= 3 { out.varint(count - 3) }
                if tail >= 3 { out.varint(tail - 3) }
            }
            out.byte(UInt8(widths[0] | widths[1] << 4))
            out.byte(UInt8(widths[3] | widths[4] << 4))
            if widths[2] > 0 { out.byte(UInt8(widths[2])) }
        }
        var bits = BitWriter()
        var escaped: [UInt64] = []
        for index in times.indices {
            let (widthXY, widthTime) = againstMotion[index] ? (widths[3], widths[4]) : (widths[0], widths[1])
            writeField(xy[2 * index], width: widthXY, bits: &bits, escaped: &escaped)
            writeField(xy[2 * index + 1], width: widthXY, bits: &bits, escaped: &escaped)
            writeField(times[index], width: widthTime, bits: &bits, escaped: &escaped)
            writeField(forces[index], width: widths[2], bits: &bits, escaped: &escaped)
        }
        bits.flush()
        out.bytes.append(contentsOf: bits.bytes)
        for value in escaped { out.varint(value) }
    }

    /// Reads a block (after its letter) into the diffs it stands for: per
    /// segment an append (when it has samples, or neither samples nor a new
    /// prediction) and a prediction (when it replaces or removes one).
    /// `ranked`: on wire packed2, the strokes in progress by id (nil: a packed block).
    static func read(
        from reader: inout BrowserBinary.Reader, strokes: inout SegmentChains, into diffs: inout [BrowserDiff], ranked: [UInt64]?
    ) throws(BrowserWireError) {
        let blocks: PackedBatch.Blocks = ranked == nil ? .packed : .packed2
        let ranked = ranked ?? []
        let head = try reader.varint()
        let segmentCount = try Self.count(blocks == .packed ? head : head >> 1, limit: reader.bytes.count)
        guard segmentCount >= 1 else { throw BrowserWireError("MALFORMED", "a block has at least one segment") }
        var segments: [(id: UInt64, count: Int, tailCode: UInt64)] = []
        segments.reserveCapacity(segmentCount)
        var id: UInt64 = 0
        var total = 0
        var rank = -1
        for _ in 0..<segmentCount {
            var count: UInt64
            var tailCode: UInt64
            switch blocks {
            case .packed:
                id = id &+ UInt64(bitPattern: try reader.zigzag())
                let code = try reader.varint()
                tailCode = code & 3
                if tailCode == 3 { tailCode = 3 &+ (try reader.varint()) }
                count = code >> 2
            case .packed2:
                let header = try reader.byte()
                var delta = UInt64(header & 15)
                count = UInt64(header >> 4 & 3)
                tailCode = UInt64(header >> 6)
                if delta == 15 { delta = 15 &+ (try reader.varint()) }
                if count == 3 { count = 3 &+ (try reader.varint()) }
                if tailCode == 3 { tailCode = 3 &+ (try reader.varint()) }
                guard delta < UInt64(ranked.count), rank + 1 + Int(delta) < ranked.count else {
                    throw BrowserWireError("MALFORMED", "a segment's rank is past the \(ranked.count) strokes in progress")
                }
                rank += 1 + Int(delta)
                id = ranked[rank]
            }
            guard count <= UInt64(PackedAppends.maxSamples), tailCode <= UInt64(PackedAppends.maxSamples) + 1 else {
                throw BrowserWireError("MALFORMED", "a block of more than \(PackedAppends.maxSamples) samples")
            }
            total += Int(count) + Int(max(tailCode, 1) - 1)
            guard total <= PackedAppends.maxSamples else { throw BrowserWireError("MALFORMED", "a block of more than \(PackedAppends.maxSamples) samples") }
            segments.append((id, Int(count), tailCode))
        }
        // Widths: [x and y, t, force, x and y against motion, t against motion].
        var widths: [Int] = []
        switch blocks {
        case .packed:
            for _ in 0..<3 {
                let width = try reader.varint()
                guard width <= 64 else { throw BrowserWireError("MALFORMED", "a width is 0 to 64, not \(width)") }
                widths.append(Int(width))
            }
            widths += [widths[0], widths[1]]
        case .packed2:
            let real = try reader.byte(), motion = try reader.byte()
            let force = head & 1 == 1 ? try reader.byte() : 0
            guard force <= 15 else { throw BrowserWireError("MALFORMED", "a width is 0 to 15, not \(force)") }
            widths = [Int(real & 15), Int(real >> 4), Int(force), Int(motion & 15), Int(motion >> 4)]
        }
        // The bits each segment's samples take: its first predicted sample may be coded against motion (packed2: other widths).
        var streamBits = 0
        for segment in segments {
            let tail = Int(max(segment.tailCode, 1) - 1)
            let motion = tail > 0 && strokes.chain(segment.id).map { $0.last != nil || segment.count > 0 } ?? (segment.count > 0)
            streamBits += (segment.count + tail - (motion ? 1 : 0)) * (2 * widths[0] + widths[1] + widths[2])
            if motion { streamBits += 2 * widths[3] + widths[4] + widths[2] }
        }
        let streamBytes = (streamBits + 7) / 8
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
        let byPeriod = blocks == .packed2
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
            var run = TouchChains.Run(last: chain.last.map(point), beforeLast: chain.beforeLast.map(point), third: chain.third.map(point))
            let offset = chain.count
            let base = chain.last
            var real: [BrowserSample] = []
            real.reserveCapacity(segment.count)
            for _ in 0..<segment.count {
                let decoded = try sample(byPeriod ? run.expectedByPeriod(from: anchor) : run.expected(from: anchor))
                real.append(decoded)
                run.advance(to: point(decoded))
                anchor = point(decoded)
                chain.third = chain.beforeLast
                chain.beforeLast = chain.last
                chain.last = decoded
            }
            chain.count += segment.count
            var tail: [BrowserSample] = []
            var tailRun = run
            for index in 0..<Int(max(segment.tailCode, 1) - 1) {
                let decoded: BrowserSample
                if index == 0, let last = run.last {
                    let x = zigZagDecoded(try field(widths[3]))
                    let y = zigZagDecoded(try field(widths[3]))
                    let thisGap = (gap ?? (byPeriod ? run.period : run.interval)) &+ zigZagDecoded(try field(widths[4]))
                    gap = thisGap
                    force = force &+ zigZagDecoded(try field(widths[2]))
                    let expected = byPeriod ? run.alongMotionByPeriod(gap: thisGap) : run.alongMotion(gap: thisGap)
                    decoded = BrowserSample(x: expected.x &+ x, y: expected.y &+ y, t: last.t &+ thisGap, force: force)
                } else {
                    decoded = try sample(byPeriod ? tailRun.expectedByPeriod(from: anchor) : tailRun.expected(from: anchor))
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

    /// A segment count read from the frame, no more than its bytes could hold.
    private static func count(_ value: UInt64, limit: Int) throws(BrowserWireError) -> Int {
        guard value <= UInt64(limit) else { throw BrowserWireError("MALFORMED", "a count of \(value) in a frame of \(limit) bytes") }
        return Int(value)
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
