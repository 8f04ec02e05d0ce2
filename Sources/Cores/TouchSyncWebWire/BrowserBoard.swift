/// A board as the browser wire carries it: strokes and diffs with flat,
/// delta-coded sample lists (four integers per sample: x and y in 1/64 point,
/// t in microseconds, force in 1/1024), decoded as received. Turning the
/// deltas into samples needs the board (an append continues its stroke's
/// last sample): `BrowserReplica` does that.
public struct BrowserStroke: Sendable, Equatable, Codable {
    public var id: UInt64
    public var owner: String
    public var touch: UInt64
    public var rgba: UInt32
    /// Width in 1/64 point.
    public var w: UInt32
    /// Accept position (accepted strokes only).
    public var pos: Int?
    /// Samples, delta-coded from zero.
    public var s: [Int64]
    /// Predicted samples, delta-coded from the last of `s`.
    public var p: [Int64]

    public init(id: UInt64, owner: String, touch: UInt64, rgba: UInt32, w: UInt32, pos: Int?, s: [Int64], p: [Int64]) {
        self.id = id
        self.owner = owner
        self.touch = touch
        self.rgba = rgba
        self.w = w
        self.pos = pos
        self.s = s
        self.p = p
    }
}

public struct BrowserSnapshot: Sendable, Equatable, Codable {
    public var seq: UInt64
    public var accepted: [BrowserStroke]
    public var active: [BrowserStroke]

    public init(seq: UInt64, accepted: [BrowserStroke], active: [BrowserStroke]) {
        self.seq = seq
        self.accepted = accepted
        self.active = active
    }

    private enum Key: String, CodingKey { case t, seq, accepted, active }

    public init(from decoder: any Decoder) throws {
        let object = try decoder.container(keyedBy: Key.self)
        seq = try object.decode(UInt64.self, forKey: .seq)
        accepted = try object.decode([BrowserStroke].self, forKey: .accepted)
        active = try object.decode([BrowserStroke].self, forKey: .active)
    }

    public func encode(to encoder: any Encoder) throws {
        var object = encoder.container(keyedBy: Key.self)
        try object.encode("snapshot", forKey: .t)
        try object.encode(seq, forKey: .seq)
        try object.encode(accepted, forKey: .accepted)
        try object.encode(active, forKey: .active)
    }
}

/// One diff of a batch, as the wire has it (`["a", id, offset, samples]`…).
public enum BrowserDiff: Sendable, Equatable {
    case began(id: UInt64, owner: String, touch: UInt64, rgba: UInt32, width: UInt32)
    case appended(id: UInt64, offset: Int, samples: [Int64])
    case predicted(id: UInt64, samples: [Int64])
    case amended(id: UInt64, offset: Int, sample: [Int64])
    case accepted(id: UInt64, position: Int)
    case cancelled(id: UInt64)
    case cleared(owner: String?)
    case removed(id: UInt64)
    case restored(BrowserStroke)
}

/// `["b", seq, diffs]`, with the hub's time appended in a history.
public struct BrowserBatch: Sendable, Equatable {
    public var seq: UInt64
    public var diffs: [BrowserDiff]
    public var hubTime: Int64?

    public init(seq: UInt64, diffs: [BrowserDiff], hubTime: Int64? = nil) {
        self.seq = seq
        self.diffs = diffs
        self.hubTime = hubTime
    }

    /// Reads the rest of `["b", seq, diffs, time?]` after its letter.
    init(afterLetter array: inout any UnkeyedDecodingContainer) throws {
        do {
            seq = try array.decode(UInt64.self)
            var list = try array.nestedUnkeyedContainer()
            var diffs: [BrowserDiff] = []
            while !list.isAtEnd {
                var diff = try list.nestedUnkeyedContainer()
                let letter = try diff.decode(String.self)
                switch letter {
                case "b":
                    diffs.append(
                        .began(
                            id: try diff.decode(UInt64.self), owner: try diff.decode(String.self), touch: try diff.decode(UInt64.self),
                            rgba: try diff.decode(UInt32.self), width: try diff.decode(UInt32.self)))
                case "a":
                    diffs.append(.appended(id: try diff.decode(UInt64.self), offset: try diff.decode(Int.self), samples: try diff.decode([Int64].self)))
                case "p": diffs.append(.predicted(id: try diff.decode(UInt64.self), samples: try diff.decode([Int64].self)))
                case "m": diffs.append(.amended(id: try diff.decode(UInt64.self), offset: try diff.decode(Int.self), sample: try diff.decode([Int64].self)))
                case "A": diffs.append(.accepted(id: try diff.decode(UInt64.self), position: try diff.decode(Int.self)))
                case "c": diffs.append(.cancelled(id: try diff.decode(UInt64.self)))
                case "C": diffs.append(.cleared(owner: try diff.decode(String?.self)))
                case "r": diffs.append(.removed(id: try diff.decode(UInt64.self)))
                case "R": diffs.append(.restored(try diff.decode(BrowserStroke.self)))
                default: throw BrowserWireError("MALFORMED", "unknown diff \(letter)")
                }
            }
            self.diffs = diffs
            hubTime = array.isAtEnd ? nil : try array.decode(Int64.self)
        } catch let error as BrowserWireError {
            throw error
        } catch {
            throw BrowserWireError("MALFORMED", "a batch is [\"b\", seq, diffs]: \(error)")
        }
    }

    func encode(to encoder: any Encoder) throws {
        var array = encoder.unkeyedContainer()
        try array.encode("b")
        try array.encode(seq)
        var list = array.nestedUnkeyedContainer()
        for diff in diffs {
            var item = list.nestedUnkeyedContainer()
            switch diff {
            case .began(let id, let owner, let touch, let rgba, let width):
                try item.encode("b"); try item.encode(id); try item.encode(owner); try item.encode(touch); try item.encode(rgba); try item.encode(width)
            case .appended(let id, let offset, let samples):
                try item.encode("a"); try item.encode(id); try item.encode(offset); try item.encode(samples)
            case .predicted(let id, let samples):
                try item.encode("p"); try item.encode(id); try item.encode(samples)
            case .amended(let id, let offset, let sample):
                try item.encode("m"); try item.encode(id); try item.encode(offset); try item.encode(sample)
            case .accepted(let id, let position):
                try item.encode("A"); try item.encode(id); try item.encode(position)
            case .cancelled(let id):
                try item.encode("c"); try item.encode(id)
            case .cleared(let owner):
                try item.encode("C"); try item.encode(owner)
            case .removed(let id):
                try item.encode("r"); try item.encode(id)
            case .restored(let stroke):
                try item.encode("R"); try item.encode(stroke)
            }
        }
        if let hubTime { try array.encode(hubTime) }
    }
}

/// A sample as a page keeps it: x, y (1/64 point), t (µs), force (1/1024, 0: none).
public struct BrowserSample: Sendable, Hashable {
    public var x: Int64
    public var y: Int64
    public var t: Int64
    public var force: Int64
    public init(x: Int64, y: Int64, t: Int64, force: Int64) {
        self.x = x
        self.y = y
        self.t = t
        self.force = force
    }

    /// A delta-coded list (four integers per sample) from `base` (absolute without one).
    public static func decode(_ list: [Int64], from base: BrowserSample?) throws(BrowserWireError) -> [BrowserSample] {
        guard list.count % 4 == 0 else { throw BrowserWireError("MALFORMED", "a sample list has four integers per sample") }
        var samples: [BrowserSample] = []
        samples.reserveCapacity(list.count / 4)
        var (x, y, t) = (base?.x ?? 0, base?.y ?? 0, base?.t ?? 0)
        var index = 0
        while index < list.count {
            x &+= list[index]
            y &+= list[index + 1]
            t &+= list[index + 2]
            samples.append(BrowserSample(x: x, y: y, t: t, force: list[index + 3]))
            index += 4
        }
        return samples
    }
}

/// A board kept from the browser wire as the page keeps it: a snapshot, then
/// batches whose `seq` is one more; older ones skipped, a gap reported (the
/// client then sends `resync` and waits for a snapshot).
public struct BrowserReplica: Sendable {
    public struct Stroke: Sendable, Equatable {
        public var id: UInt64
        public var owner: String
        public var touch: UInt64
        public var rgba: UInt32
        public var width: UInt32
        public var samples: [BrowserSample]
        public var predicted: [BrowserSample]
        /// The accept position (a counter over the board's accepts, not an index).
        public var position: Int?
    }

    public private(set) var sequence: UInt64? = nil
    public private(set) var active: [UInt64: Stroke] = [:]
    public private(set) var accepted: [Stroke] = []

    public init() {}

    public enum Outcome: Sendable, Equatable {
        case applied
        /// Already applied (or before the snapshot): nothing changed.
        case skipped
        /// A batch is missing before this one (or no snapshot yet): resync.
        case gap
    }

    public mutating func apply(_ snapshot: BrowserSnapshot) throws(BrowserWireError) {
        func stroke(_ wire: BrowserStroke) throws(BrowserWireError) -> Stroke {
            let samples = try BrowserSample.decode(wire.s, from: nil)
            return Stroke(
                id: wire.id, owner: wire.owner, touch: wire.touch, rgba: wire.rgba, width: wire.w, samples: samples,
                predicted: try BrowserSample.decode(wire.p, from: samples.last), position: wire.pos)
        }
        var accepted: [Stroke] = []
        for wire in snapshot.accepted { accepted.append(try stroke(wire)) }
        var active: [UInt64: Stroke] = [:]
        for wire in snapshot.active { active[wire.id] = try stroke(wire) }
        self.accepted = accepted
        self.active = active
        sequence = snapshot.seq
    }

    public mutating func apply(_ batch: BrowserBatch) throws(BrowserWireError) -> Outcome {
        guard let sequence else { return .gap }
        if batch.seq <= sequence { return .skipped }
        guard batch.seq == sequence + 1 else { return .gap }
        for diff in batch.diffs {
            switch diff {
            case .began(let id, let owner, let touch, let rgba, let width):
                active[id] = Stroke(id: id, owner: owner, touch: touch, rgba: rgba, width: width, samples: [], predicted: [], position: nil)
            case .appended(let id, let offset, let list):
                guard var stroke = active[id] else { throw BrowserWireError("MALFORMED", "samples for stroke \(id), not in progress") }
                guard offset == stroke.samples.count else {
                    throw BrowserWireError("MALFORMED", "stroke \(id) has \(stroke.samples.count) samples, the append is at \(offset)")
                }
                stroke.samples += try BrowserSample.decode(list, from: offset > 0 ? stroke.samples.last : nil)
                stroke.predicted = []
                active[id] = stroke
            case .predicted(let id, let list):
                guard var stroke = active[id] else { continue }
                stroke.predicted = try BrowserSample.decode(list, from: stroke.samples.last)
                active[id] = stroke
            case .amended(let id, let offset, let list):
                guard var stroke = active[id], stroke.samples.indices.contains(offset), let sample = try BrowserSample.decode(list, from: nil).first
                else { continue }
                stroke.samples[offset] = sample
                active[id] = stroke
            case .accepted(let id, let position):
                guard var stroke = active.removeValue(forKey: id) else { continue }
                stroke.predicted = []
                stroke.position = position
                accepted.append(stroke)
            case .cancelled(let id):
                active[id] = nil
            case .cleared(let owner):
                accepted.removeAll { owner == nil || $0.owner == owner }
            case .removed(let id):
                accepted.removeAll { $0.id == id }
            case .restored(let wire):
                let samples = try BrowserSample.decode(wire.s, from: nil)
                let stroke = Stroke(
                    id: wire.id, owner: wire.owner, touch: wire.touch, rgba: wire.rgba, width: wire.w, samples: samples, predicted: [],
                    position: wire.pos)
                // In accept order: before the first stroke accepted after it.
                let index = accepted.firstIndex { ($0.position ?? 0) > (wire.pos ?? 0) } ?? accepted.count
                accepted.insert(stroke, at: index)
            }
        }
        self.sequence = batch.seq
        return .applied
    }

    /// Every stroke, accepted in their order then those in progress by id.
    public var strokes: [Stroke] { accepted + active.values.sorted { $0.id < $1.id } }
}
