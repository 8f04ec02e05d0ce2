import TouchSyncCore

/// A decoded batch could not be applied: the bytes were malformed, or they
/// do not fit the replica (a gap, an unknown stroke, a wrong offset). Either
/// way the subscriber must resync from a snapshot.
public enum DiffStreamError: Error, Hashable, Sendable, CustomStringConvertible {
    case wire(WireError)
    case replica(ReplicaError)

    public var description: String {
        switch self {
        case .wire(let error): "malformed batch: \(error)"
        case .replica(let error): "batch does not fit the replica: \(error)"
        }
    }
}

/// The last two stored samples of a stroke and its sample count: what a
/// segment of a `StrokeAppends` continues from.
struct StrokeChain: Sendable {
    var count = 0
    var last: Sample? = nil
    var beforeLast: Sample? = nil
    /// The encoder's append block holding this stroke's latest segment (a
    /// stroke has at most one segment per block).
    var block: UInt64 = 0

    init() {}

    init(_ stroke: Stroke) {
        count = stroke.samples.count
        last = stroke.samples.last
        beforeLast = stroke.samples.secondToLast
    }

    mutating func advance(over samples: [Sample]) {
        count += samples.count
        if samples.count >= 2 {
            beforeLast = samples[samples.count - 2]
            last = samples[samples.count - 1]
        } else if let only = samples.first {
            beforeLast = last
            last = only
        }
    }
}

/// The hub's encoder of one board's diff stream. It keeps, per active
/// stroke, the two samples its next segment continues from, exactly as
/// every replica that applied the same batches has them.
public struct DiffStreamEncoder: Sendable {
    public let board: String
    public let format: WireFormat
    /// Whether batches carry predicted tails (false: the "without
    /// predictions" stream drops every `predicted` diff; chains are unaffected,
    /// as a tail never primes them).
    public let predictions: Bool
    private var chains: [StrokeID: StrokeChain] = [:]
    /// The block of appends being written, reused so its columns keep their capacity.
    private var block = AppendBlock()
    private var packedBlock = PackedAppendBlock()

    /// An encoder for a board whose replicas hold `state` (e.g. after
    /// loading a journal, or when the first v2 subscriber arrives).
    public init(board: String, format: WireFormat = .v1, predictions: Bool = true, continuing state: BoardState = BoardState()) {
        precondition(predictions || format == .v2, "only v2 has a stream without predictions")
        self.board = board
        self.format = format
        self.predictions = predictions
        for stroke in state.orderedActiveStrokes { chains[stroke.id] = StrokeChain(stroke) }
    }

    /// An encoder of `stream`.
    public init(board: String, stream: PublishStream, continuing state: BoardState = BoardState()) {
        self.init(board: board, format: stream.format, predictions: stream.carriesPredictions, continuing: state)
    }

    /// The batch as a message (for tests and cold paths: the hub publishes
    /// `encodedBytes`).
    public mutating func encode(_ batch: DiffBatch) -> Touchsync_V1_DiffBatch {
        let bytes = encodedBytes(batch)
        do {
            return try WireCodec.decode(Touchsync_V1_DiffBatch.self, from: bytes)
        } catch {
            preconditionFailure("the diff stream encoder wrote a batch SwiftProtobuf cannot read: \(error)")
        }
    }

    /// The batch as an encoded `DiffBatch`, written in one pass straight
    /// from the diffs, byte for byte as SwiftProtobuf would serialize it
    /// (tested); a `PublishMessage` wraps it with `WireCodec.field(1, wrapping:)`.
    public mutating func encodedBytes(_ batch: DiffBatch) -> [UInt8] {
        var out = ProtoWriter(capacity: 64 + batch.diffs.count * 16)
        if format == .v1 { out.stringField(1, board) }  // v2: the topic names the board
        out.uint64Field(2, batch.sequence)
        out.sint64Field(3, batch.hubTime)
        let reference = Self.timeReference(of: batch.diffs)
        let packed = format == .v2
        if packed { packedBlock.reset() } else { block.reset() }

        func flush() {
            if packed {
                guard !packedBlock.isEmpty else { return }
                packedBlock.write(to: &out)
                packedBlock.reset()
            } else {
                guard !block.isEmpty else { return }
                block.write(to: &out)
                block.reset()
            }
        }
        func segment(_ id: StrokeID, samples: [Sample], predicted: [Sample]?) {
            if chains[id]?.block == (packed ? packedBlock.number : block.number) { flush() }
            if packed {
                packedBlock.add(
                    id, chain: &chains[id, default: StrokeChain()], samples: samples, predicted: predicted, timeReference: reference)
            } else {
                block.add(id, chain: &chains[id, default: StrokeChain()], samples: samples, predicted: predicted, timeReference: reference)
            }
        }
        /// One `Diff` of the batch whose `kind` is field `kind`.
        func diff(_ kind: UInt32, _ body: (inout ProtoWriter) -> Void) {
            out.lengthDelimited(4) { $0.lengthDelimited(kind, body) }
        }

        let diffs = batch.diffs
        var index = 0
        while index < diffs.count {
            let change = diffs[index]
            index += 1
            switch change {
            case .appended(let id, let offset, let samples):
                assert(offset == (chains[id]?.count ?? 0), "the encoder missed a batch of stroke \(id)")
                if index < diffs.count, case .predicted(id, let predicted) = diffs[index] {
                    index += 1
                    segment(id, samples: samples, predicted: predictions ? predicted : nil)
                } else {
                    segment(id, samples: samples, predicted: nil)
                }
            case .predicted(let id, let predicted):
                if predictions { segment(id, samples: [], predicted: predicted) }
            case .began(let id, let owner, let touch, let style):
                flush()
                chains[id] = StrokeChain()
                diff(1) { began in  // StrokeBegan
                    began.uint64Field(1, id.rawValue)
                    began.stringField(2, owner.rawValue)
                    began.uint64Field(3, touch)
                    began.lengthDelimited(4) { proto in
                        proto.fixed32Field(1, style.rgba)
                        proto.uint64Field(2, UInt64(style.width))
                    }
                }
            case .amended(let id, let offset, let sample) where packed:
                flush()
                PackedAmendment.write(id, offset: offset, sample, to: &out)
            case .amended(let id, let offset, let sample):
                flush()
                var amended = Touchsync_V1_SampleAmended()
                amended.strokeID = id.rawValue
                amended.offset = UInt32(offset)
                amended.sample = SampleRunCodec.encode([sample])
                out.lengthDelimited(4) { $0.bytesField(4, WireCodec.encode(amended)) }
            case .accepted(let id, let position):
                flush()
                chains[id] = nil
                diff(5) { accepted in  // StrokeAccepted
                    accepted.uint64Field(1, id.rawValue)
                    accepted.uint64Field(2, position)
                }
            case .cancelled(let id):
                flush()
                chains[id] = nil
                diff(6) { $0.uint64Field(1, id.rawValue) }  // StrokeCancelled
            case .cleared(let owner):
                flush()
                diff(7) { $0.stringField(1, owner?.rawValue ?? "") }  // Cleared
            case .removed(let id):
                flush()
                diff(9) { $0.uint64Field(1, id.rawValue) }  // StrokeRemoved
            case .restored(let stroke):
                flush()
                var restored = Touchsync_V1_StrokeRestored()
                restored.stroke = SnapshotCodec.record(stroke, packedSamples: false)
                out.lengthDelimited(4) { $0.bytesField(10, WireCodec.encode(restored)) }
            }
        }
        flush()
        out.sint64Field(5, reference)
        return out.bytes
    }

    /// The first sample time in the batch, so segments of new strokes have small times.
    static func timeReference(of diffs: [StrokeDiff]) -> Int64 {
        for diff in diffs {
            switch diff {
            case .appended(_, _, let samples), .predicted(_, let samples):
                if let first = samples.first { return first.time }
            default: continue
            }
        }
        return 0
    }
}

/// One `StrokeAppends` under construction.
struct AppendBlock: Sendable {
    var ids: [Int64] = [], offsets: [UInt32] = [], counts: [UInt32] = [], predicted: [UInt32] = []
    var writer = SampleColumnWriter(capacity: 64)
    var previousID: Int64 = 0
    /// This block's number, new at every reset (stroke chains remember the block they are in).
    private(set) var number: UInt64 = 1

    var isEmpty: Bool { ids.isEmpty }

    mutating func reset() {
        ids.removeAll(keepingCapacity: true)
        offsets.removeAll(keepingCapacity: true)
        counts.removeAll(keepingCapacity: true)
        predicted.removeAll(keepingCapacity: true)
        number &+= 1
        previousID = 0
        writer.reset()
    }

    /// A segment continuing `chain`, which moves on over `samples`.
    mutating func add(
        _ id: StrokeID, chain: inout StrokeChain, samples: [Sample], predicted tail: [Sample]?, timeReference: Int64
    ) {
        defer { chain.advance(over: samples) }
        chain.block = number
        ids.append(Int64(bitPattern: id.rawValue) &- previousID)
        previousID = Int64(bitPattern: id.rawValue)
        offsets.append(UInt32(chain.count))
        counts.append(UInt32(samples.count))
        predicted.append(tail.map { UInt32($0.count + 1) } ?? 0)
        writer.startSegment(after: chain.last, chain.beforeLast, timeReference: timeReference)
        for sample in samples { writer.append(sample) }
        for sample in tail ?? [] { writer.append(sample) }
    }

    /// The block as one `Diff` (field 4 of the batch) holding `StrokeAppends` (field 8).
    mutating func write(to out: inout ProtoWriter) {
        out.lengthDelimited(4) { diff in
            diff.lengthDelimited(8) { appends in
                appends.packed(1, ids) { zigZag($0) }
                appends.packed(2, offsets) { UInt64($0) }
                appends.packed(3, counts) { UInt64($0) }
                appends.packed(4, predicted) { UInt64($0) }
                appends.lengthDelimited(5) { writer.write(to: &$0) }
            }
        }
    }
}

/// Decoding a batch needs the replica it will be applied to: segments
/// continue the strokes' stored samples.
public enum DiffStreamDecoder {
    public static func decode(_ proto: Touchsync_V1_DiffBatch, against state: BoardState) throws(DiffStreamError)
        -> DiffBatch
    {
        var chains = StrokeChains(diffs: proto.diffs.count)
        var diffs: [StrokeDiff] = []
        diffs.reserveCapacity(proto.diffs.count)
        do {
            for diff in proto.diffs {
                switch diff.kind {
                case .began(let began):
                    let id = StrokeID(began.strokeID)
                    chains.began(id)
                    diffs.append(
                        .began(id, owner: UserNamespace(began.owner), touch: began.touchID, style: StrokeStyle(began.style)))
                case .appends(let appends):
                    guard appends.samples.predictedCount == 0 else {
                        throw DiffStreamError.wire(.malformed("stroke appends use per-segment predictions, not predicted_count"))
                    }
                    var reader = try SampleColumnReader(appends.samples)
                    var segments = DecodedSegmentColumns(appends)
                    try decodeSegments(
                        &segments, reader: &reader, timeReference: proto.timeReference, state: state, chains: &chains,
                        into: &diffs)
                case .packedAppends(let data):
                    try data.withUnsafeBytes { bytes in
                        try PackedAppendsReader.decode(
                            bytes, 0..<bytes.count, timeReference: proto.timeReference, state: state, chains: &chains, into: &diffs)
                    }
                case .packedAmended(let data):
                    let diff = try data.withUnsafeBytes { bytes in
                        try PackedAmendment.decode(bytes, 0..<bytes.count, state: state, decoded: diffs)
                    }
                    diffs.append(diff)
                case .amended(let amended):
                    diffs.append(try amendedDiff(amended.strokeID, amended.offset, SampleRunCodec.decodeSamples(amended.sample)))
                case .accepted(let accepted):
                    chains.ended(StrokeID(accepted.strokeID))
                    diffs.append(.accepted(StrokeID(accepted.strokeID), position: accepted.position))
                case .cancelled(let cancelled):
                    chains.ended(StrokeID(cancelled.strokeID))
                    diffs.append(.cancelled(StrokeID(cancelled.strokeID)))
                case .cleared(let cleared):
                    diffs.append(.cleared(owner: cleared.owner.isEmpty ? nil : UserNamespace(cleared.owner)))
                case .removed(let removed):
                    diffs.append(.removed(StrokeID(removed.strokeID)))
                case .restored(let restored):
                    let record = restored.stroke
                    let (samples, predicted) = try SampleRunCodec.decode(record.samples)
                    guard predicted.isEmpty, record.acceptedPosition > 0 else {
                        throw DiffStreamError.wire(.malformed("a restored stroke must be accepted, without a prediction"))
                    }
                    diffs.append(
                        .restored(
                            Stroke(
                                id: StrokeID(record.strokeID), owner: UserNamespace(record.owner), touch: record.touchID,
                                style: StrokeStyle(record.style), samples: samples, predicted: [],
                                acceptedPosition: record.acceptedPosition)))
                case nil:
                    throw DiffStreamError.wire(.malformed("a diff with no kind"))
                }
            }
        } catch let error as DiffStreamError {
            throw error
        } catch let error as WireError {
            throw .wire(error)
        } catch {
            throw .wire(.malformed("\(error)"))
        }
        return DiffBatch(sequence: proto.sequence, hubTime: proto.hubTime, diffs: diffs)
    }

    static func amendedDiff(_ strokeID: UInt64, _ offset: UInt32, _ samples: [Sample]) throws(DiffStreamError) -> StrokeDiff {
        guard samples.count == 1 else {
            throw DiffStreamError.wire(.malformed("an amendment carries \(samples.count) samples, not 1"))
        }
        return .amended(StrokeID(strokeID), offset: Int(offset), sample: samples[0])
    }

    /// The segments of one `StrokeAppends`, each continuing its stroke's chain.
    @inline(__always)
    static func decodeSegments<Segments: SegmentColumns, Columns: SampleColumns>(
        _ columns: inout Segments, reader: inout SampleColumnReader<Columns>, timeReference: Int64,
        state: BoardState, chains: inout StrokeChains, into diffs: inout [StrokeDiff]
    ) throws(DiffStreamError) {
        let (segments, offsets, counts, predicted) = columns.lengths
        guard offsets == segments, counts == segments, predicted == segments else {
            throw .wire(.malformed("stroke appends columns differ in length"))
        }
        var raw: Int64 = 0
        for _ in 0..<segments {
            let segment = columns.next()
            let (next, overflow) = raw.addingReportingOverflow(segment.idDelta)
            guard !overflow, next > 0 else { throw .wire(.malformed("stroke id delta out of range")) }
            raw = next
            let id = StrokeID(UInt64(raw))
            var current = try chains.chain(id, in: state)
            let offset = Int(segment.offset)
            guard offset == current.count else { throw .replica(.wrongOffset(id, expected: current.count, received: offset)) }
            let count = Int(segment.count)
            let tail = Int(segment.predicted) - 1
            guard count + max(tail, 0) <= reader.count else { throw .wire(.malformed("a segment is longer than the run")) }
            do throws(WireError) {
                try reader.startSegment(after: current.last, current.beforeLast, timeReference: timeReference)
                if count > 0 {
                    let samples = try reader.next(count)
                    current.advance(over: samples)
                    diffs.append(.appended(id, offset: offset, samples: samples))
                }
                if tail >= 0 { diffs.append(.predicted(id, samples: try reader.next(tail))) }
            } catch {
                throw .wire(error)
            }
            chains.set(id, current)
        }
        do { try reader.finish() } catch { throw .wire(error) }
    }
}

/// The per-segment columns of one `StrokeAppends` (stroke id deltas,
/// offsets, counts, predictions), read in step.
protocol SegmentColumns {
    var lengths: (ids: Int, offsets: Int, counts: Int, predicted: Int) { get }
    /// At most `lengths.ids` times, once the lengths are checked equal.
    mutating func next() -> (idDelta: Int64, offset: UInt32, count: UInt32, predicted: UInt32)
}

struct DecodedSegmentColumns: SegmentColumns {
    let appends: Touchsync_V1_StrokeAppends
    private var index = 0

    init(_ appends: Touchsync_V1_StrokeAppends) { self.appends = appends }

    var lengths: (ids: Int, offsets: Int, counts: Int, predicted: Int) {
        (appends.strokeID.count, appends.offset.count, appends.count.count, appends.predicted.count)
    }

    mutating func next() -> (idDelta: Int64, offset: UInt32, count: UInt32, predicted: UInt32) {
        defer { index += 1 }
        return (appends.strokeID[index], appends.offset[index], appends.count[index], appends.predicted[index])
    }
}

/// Where each stroke's chain stands while a batch is decoded: the strokes
/// the batch touched so far, else the replica's stored samples. A batch
/// usually touches a few strokes: they are kept in a list searched from its
/// end (no hashing, one allocation), indexed by a dictionary only once the
/// batch has touched more than `listed` (a tick of a busy board).
struct StrokeChains {
    private struct Entry {
        let id: StrokeID
        /// nil once the batch ended the stroke: later diffs see the replica's.
        var chain: StrokeChain?
    }

    private static let listed = 16
    private var entries: [Entry] = []
    private var index: [StrokeID: Int] = [:]

    /// `diffs`: the batch's diffs, which bound the strokes it touches.
    init(diffs: Int) {
        entries.reserveCapacity(Swift.min(diffs, 64))
    }

    private func position(of id: StrokeID) -> Int? {
        guard entries.count > Self.listed else { return entries.lastIndex { $0.id == id } }
        return index[id]
    }

    func chain(_ id: StrokeID, in state: BoardState) throws(DiffStreamError) -> StrokeChain {
        if let position = position(of: id), let chain = entries[position].chain { return chain }
        guard let stroke = state.activeStroke(id) else { throw .replica(.unknownStroke(id)) }
        return StrokeChain(stroke)
    }

    mutating func began(_ id: StrokeID) { put(id, StrokeChain()) }
    mutating func ended(_ id: StrokeID) { put(id, nil) }
    mutating func set(_ id: StrokeID, _ chain: StrokeChain) { put(id, chain) }

    private mutating func put(_ id: StrokeID, _ chain: StrokeChain?) {
        if let position = position(of: id) {
            entries[position].chain = chain
            return
        }
        entries.append(Entry(id: id, chain: chain))
        if entries.count == Self.listed + 1 {
            index.reserveCapacity(2 * entries.count)
            for (position, entry) in entries.enumerated() { index[entry.id] = position }
        } else if entries.count > Self.listed + 1 {
            index[id] = entries.count - 1
        }
    }
}

extension BoardState {
    /// Decodes an encoded batch against this replica and applies it; returns
    /// the diffs applied (for views that animate them).
    @discardableResult
    public mutating func apply(_ proto: Touchsync_V1_DiffBatch) throws(DiffStreamError) -> DiffBatch {
        guard proto.sequence == sequence &+ 1 else {
            throw .replica(.sequenceGap(expected: sequence &+ 1, received: proto.sequence))
        }
        let batch = try DiffStreamDecoder.decode(proto, against: self)
        do {
            try apply(batch)
        } catch {
            throw .replica(error)
        }
        return batch
    }

    /// Decodes a received `DiffBatch` (its bytes) against this replica and
    /// applies it: in one pass when it is in the hub's canonical encoding
    /// and follows this replica (`DiffBatchReader`), otherwise through
    /// SwiftProtobuf, which words any error. Returns the board it names and
    /// the diffs applied.
    @discardableResult
    public mutating func apply(encodedBatch bytes: UnsafeRawBufferPointer) throws(DiffStreamError) -> (
        board: String, batch: DiffBatch
    ) {
        if let (board, batch) = DiffBatchReader.decode(bytes, against: self) {
            do {
                try apply(batch)
            } catch {
                throw .replica(error)
            }
            return (board, batch)
        }
        let proto: Touchsync_V1_DiffBatch
        do {
            proto = try WireCodec.decode(Touchsync_V1_DiffBatch.self, from: bytes)
        } catch {
            throw .wire(error)
        }
        return (proto.board, try apply(proto))
    }

    /// The Clone-pattern rule on encoded batches: skip what the state already
    /// includes (without decoding it), apply the next one.
    @discardableResult
    public mutating func applyIfNew(_ proto: Touchsync_V1_DiffBatch) throws(DiffStreamError) -> Bool {
        if proto.sequence <= sequence { return false }
        try apply(proto)
        return true
    }
}
