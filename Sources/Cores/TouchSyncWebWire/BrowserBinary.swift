import TouchSyncCore

/// The browser wire's binary frames (docs/protocol.md, "Binary frames"),
/// negotiated in the hello (`"wire": "binary"`): the same messages as the
/// JSON text frames they replace, with every integer a varint instead of
/// decimal text. Tab to gateway: `touch` (samples already in the hub's fixed
/// point). Gateway to tab: batches and acks. Everything else stays JSON text.
public enum BrowserBinary {
    /// What a binary frame is: its first byte.
    public enum Kind: UInt8, Sendable {
        /// Tab to gateway: a touch message. Gateway to tab: a batch.
        case touchOrBatch = 0x01
        /// Gateway to tab: an ack.
        case ack = 0x02
        /// Gateway to tab: several frames as one message, each as its varint length and its bytes.
        case bundle = 0x03
    }

    /// The phases in their wire order.
    public static let phases = ["began", "moved", "stationary", "ended", "cancelled"]

    // MARK: Gateway to tab

    /// A batch as one binary frame: `0x01`, seq, the diff count, each diff
    /// as its letter's byte and its integers (the JSON batch's, in order).
    /// Live batches only: the replay's hub times stay in JSON.
    public static func encode(_ batch: BrowserBatch) -> [UInt8] {
        var out = Writer()
        out.bytes.reserveCapacity(8 + batch.diffs.count * 12)
        out.byte(Kind.touchOrBatch.rawValue)
        out.varint(batch.seq)
        out.varint(UInt64(batch.diffs.count))
        for diff in batch.diffs { write(diff, to: &out) }
        return out.bytes
    }

    /// One diff: its letter's byte, then its fields as varints in the JSON diff's order.
    static func write(_ diff: BrowserDiff, to out: inout Writer) {
        switch diff {
        case .began(let id, let owner, let touch, let rgba, let width):
            out.byte(UInt8(ascii: "b"))
            out.varint(id)
            out.string(owner)
            out.varint(touch)
            out.varint(UInt64(rgba))
            out.varint(UInt64(width))
        case .appended(let id, let offset, let samples):
            out.byte(UInt8(ascii: "a"))
            out.varint(id)
            out.varint(UInt64(offset))
            out.samples(samples)
        case .predicted(let id, let samples):
            out.byte(UInt8(ascii: "p"))
            out.varint(id)
            out.samples(samples)
        case .amended(let id, let offset, let sample):
            out.byte(UInt8(ascii: "m"))
            out.varint(id)
            out.varint(UInt64(offset))
            out.samples(sample)
        case .accepted(let id, let position):
            out.byte(UInt8(ascii: "A"))
            out.varint(id)
            out.varint(UInt64(position))
        case .cancelled(let id):
            out.byte(UInt8(ascii: "c"))
            out.varint(id)
        case .cleared(let owner):
            out.byte(UInt8(ascii: "C"))
            if let owner {
                out.varint(UInt64(owner.utf8.count) + 1)
                out.bytes.append(contentsOf: owner.utf8)
            } else {
                out.varint(0)
            }
        case .removed(let id):
            out.byte(UInt8(ascii: "r"))
            out.varint(id)
        case .restored(let stroke):
            out.byte(UInt8(ascii: "R"))
            out.varint(stroke.id)
            out.string(stroke.owner)
            out.varint(stroke.touch)
            out.varint(UInt64(stroke.rgba))
            out.varint(UInt64(stroke.w))
            out.varint(stroke.pos.map { UInt64($0) + 1 } ?? 0)
            out.samples(stroke.s)
            out.samples(stroke.p)
        }
    }

    /// `value` as a varint (a bundle's frame lengths).
    public static func varint(_ value: UInt64) -> [UInt8] {
        var out = Writer()
        out.varint(value)
        return out.bytes
    }

    /// An ack as one binary frame: `0x02`, n.
    public static func ack(_ n: UInt64) -> [UInt8] {
        var out = Writer()
        out.byte(Kind.ack.rawValue)
        out.varint(n)
        return out.bytes
    }

    /// The gateway's frames in one message: each frame alone, or a bundle's frames in order.
    public static func framesFromGateway(_ bytes: some Collection<UInt8>) throws(BrowserWireError) -> [[UInt8]] {
        let all = Array(bytes)
        guard all.first == Kind.bundle.rawValue else { return [all] }
        var reader = Reader(all)
        _ = try reader.byte()
        var frames: [[UInt8]] = []
        while reader.at < all.count {
            let length = try reader.varint()
            guard length >= 1, length <= UInt64(all.count - reader.at) else { throw BrowserWireError("MALFORMED", "a bundled frame runs past the bundle") }
            frames.append(Array(all[reader.at..<(reader.at + Int(length))]))
            reader.at += Int(length)
        }
        return frames
    }

    /// A gateway's binary frame as the message it stands for (`.batch` or `.ack`; see `framesFromGateway` for bundles).
    public static func decodeFromGateway(_ bytes: some Collection<UInt8>) throws(BrowserWireError) -> BrowserMessage {
        var reader = Reader(Array(bytes))
        switch try reader.byte() {
        case Kind.ack.rawValue:
            let n = try reader.varint()
            try reader.end()
            return .ack(n: n)
        case Kind.touchOrBatch.rawValue:
            let seq = try reader.varint()
            let count = try reader.count(limit: bytes.count)
            var diffs: [BrowserDiff] = []
            diffs.reserveCapacity(count)
            for _ in 0..<count { diffs.append(try readDiff(from: &reader)) }
            try reader.end()
            return .batch(BrowserBatch(seq: seq, diffs: diffs))
        case let other:
            throw BrowserWireError("MALFORMED", "a gateway's binary frame is a batch (1) or an ack (2), not \(other)")
        }
    }

    /// One diff as `write(_:to:)` wrote it.
    static func readDiff(from reader: inout Reader) throws(BrowserWireError) -> BrowserDiff {
        let letter = try reader.byte()
        switch letter {
        case UInt8(ascii: "b"):
            return .began(
                id: try reader.varint(), owner: try reader.string(), touch: try reader.varint(), rgba: try reader.uint32(), width: try reader.uint32())
        case UInt8(ascii: "a"): return .appended(id: try reader.varint(), offset: try reader.int(), samples: try reader.samples())
        case UInt8(ascii: "p"): return .predicted(id: try reader.varint(), samples: try reader.samples())
        case UInt8(ascii: "m"): return .amended(id: try reader.varint(), offset: try reader.int(), sample: try reader.samples())
        case UInt8(ascii: "A"): return .accepted(id: try reader.varint(), position: try reader.int())
        case UInt8(ascii: "c"): return .cancelled(id: try reader.varint())
        case UInt8(ascii: "C"):
            let length = try reader.varint()
            return .cleared(owner: length == 0 ? nil : try reader.text(length: length - 1))
        case UInt8(ascii: "r"): return .removed(id: try reader.varint())
        case UInt8(ascii: "R"):
            let id = try reader.varint()
            let owner = try reader.string()
            let touch = try reader.varint()
            let rgba = try reader.uint32()
            let width = try reader.uint32()
            let position = try reader.varint()
            return .restored(
                BrowserStroke(
                    id: id, owner: owner, touch: touch, rgba: rgba, w: width, pos: position == 0 ? nil : Int(clamping: position - 1),
                    s: try reader.samples(), p: try reader.samples()))
        default:
            throw BrowserWireError("MALFORMED", "binary batch: unknown diff \(letter)")
        }
    }

    // MARK: Tab to gateway

    /// A touch message as one binary frame: `0x01`, n, the phase (0 began, 1
    /// moved, 2 stationary, 3 ended, 4 cancelled), the touch id, the counts of
    /// coalesced and predicted samples, a flags byte (1: samples carry a force
    /// field, 2: samples carry an angles field), then the samples in the hub's
    /// fixed point as one chain (coalesced, then predicted): x, y, t zigzag,
    /// the first absolute and each later one the difference from the one
    /// before; with flag 1 a varint, 0 for no force or force (1/1024) plus 1;
    /// with flag 2 a varint, 0 for no angles or zigzag(azimuth) plus 1 then
    /// zigzag(altitude) (1/4096 radian), absolute.
    /// The page's samples are quantized as the gateway quantizes JSON ones
    /// (halves away from zero); values out of the fixed point's range throw.
    public static func encode(_ touch: BrowserMessage.Touch) throws(BrowserWireError) -> [UInt8] {
        guard let phase = touch.phase.flatMap({ phases.firstIndex(of: $0) }), let id = touch.id else {
            throw BrowserWireError("MALFORMED", "a touch has a phase and an id")
        }
        let coalesced = try quantized(touch.s ?? [])
        let predicted = try quantized(touch.p ?? [])
        let all = coalesced + predicted
        let force = all.contains { $0.force != nil }
        let angles = all.contains { $0.azimuth != nil }
        var out = Writer()
        out.byte(Kind.touchOrBatch.rawValue)
        out.varint(touch.n)
        out.byte(UInt8(phase))
        out.varint(id)
        out.varint(UInt64(coalesced.count))
        out.varint(UInt64(predicted.count))
        out.byte((force ? 1 : 0) | (angles ? 2 : 0))
        var previous = (x: Int64(0), y: Int64(0), t: Int64(0))
        for sample in all {
            out.zigzag(sample.x - previous.x)
            out.zigzag(sample.y - previous.y)
            out.zigzag(sample.t - previous.t)
            previous = (sample.x, sample.y, sample.t)
            // Each sample says whether it has them: 0 none, else the value's code plus 1.
            if force { out.varint(sample.force.map { UInt64(clamping: $0) + 1 } ?? 0) }
            if angles {
                if let azimuth = sample.azimuth {
                    out.varint(UInt64(bitPattern: (azimuth << 1) ^ (azimuth >> 63)) + 1)
                    out.zigzag(sample.altitude ?? 0)
                } else {
                    out.varint(0)
                }
            }
        }
        return out.bytes
    }

    /// A tab's binary touch frame as the JSON message it stands for (samples
    /// in CSS pixels and milliseconds, which the gateway's JSON path turns back
    /// into exactly these fixed-point values). A frame whose number was read
    /// but whose rest is broken throws `RefusedByNumber` (refused by that
    /// number); one without a readable number throws `BrowserWireError`.
    public static func decodeTouch(_ bytes: some Collection<UInt8>) throws -> BrowserMessage.Touch {
        var reader = Reader(Array(bytes))
        guard (try? reader.byte()) == Kind.touchOrBatch.rawValue, let n = try? reader.varint() else {
            throw BrowserWireError("MALFORMED", "a tab's binary frame is a touch: 0x01, then its number n")
        }
        do throws(BrowserWireError) {
            let phaseIndex = Int(try reader.byte())
            guard phaseIndex < phases.count else { throw BrowserWireError("MALFORMED", "phase \(phaseIndex) is not 0 to 4") }
            let id = try reader.varint()
            let coalescedCount = try reader.varint()
            let predictedCount = try reader.varint()
            let most = UInt64(BrowserMessage.maxSamplesPerList)
            guard coalescedCount <= most, predictedCount <= most else {
                throw BrowserWireError("TOO_MANY_SAMPLES", "at most \(most) samples per message")
            }
            let flags = try reader.byte()
            guard flags & ~3 == 0 else { throw BrowserWireError("MALFORMED", "sample flags are 1 (force) and 2 (angles), not \(flags)") }
            var previous = (x: Int64(0), y: Int64(0), t: Int64(0))
            var coalesced: [[Double?]] = []
            var predicted: [[Double?]] = []
            for index in 0..<Int(coalescedCount + predictedCount) {
                let x = previous.x &+ (try reader.zigzag())
                let y = previous.y &+ (try reader.zigzag())
                let t = previous.t &+ (try reader.zigzag())
                previous = (x, y, t)
                var sample: [Double?] = [Double(x) / 64, Double(y) / 64, Double(t) / 1000]
                let force = flags & 1 != 0 ? try reader.varint() : 0
                sample.append(force == 0 ? nil : Double(force - 1) / 1024)
                let azimuth = flags & 2 != 0 ? try reader.varint() : 0
                if azimuth != 0 {
                    let code = azimuth - 1
                    sample.append(Double(Int64(bitPattern: code >> 1) ^ -Int64(bitPattern: code & 1)) / 4096)
                    sample.append(Double(try reader.zigzag()) / 4096)
                }
                if index < coalescedCount { coalesced.append(sample) } else { predicted.append(sample) }
            }
            try reader.end()
            return BrowserMessage.Touch(n: n, phase: phases[phaseIndex], id: id, s: coalesced, p: predicted)
        } catch {
            throw BrowserMessage.RefusedByNumber(kind: "touch", number: n, code: error.code, message: "binary touch: \(error.message)")
        }
    }

    /// A sample in the hub's fixed point, as the gateway would make it of the JSON one.
    struct FixedSample {
        var x: Int64, y: Int64, t: Int64
        var force: Int64?, azimuth: Int64?, altitude: Int64?
    }

    static func quantized(_ samples: [[Double?]]) throws(BrowserWireError) -> [FixedSample] {
        try samples.map { (values: [Double?]) throws(BrowserWireError) -> FixedSample in
            guard (3...6).contains(values.count), let x = values[0], let y = values[1], let t = values[2] else {
                throw BrowserWireError("MALFORMED", "a sample is [x, y, t, force, azimuth, altitude]: 3 to 6 elements, x, y and t numbers")
            }
            func fixed(_ value: Double, _ scale: Double) throws(BrowserWireError) -> Int64 {
                let scaled = (value * scale).rounded(.toNearestOrAwayFromZero)
                guard scaled.isFinite, abs(scaled) < 9.0e15 else { throw BrowserWireError("INVALID_SAMPLE", "\(value) is out of range") }
                return Int64(scaled)
            }
            let force = values.count > 3 ? values[3] : nil
            if let force, !(force >= 0) { throw BrowserWireError("INVALID_SAMPLE", "force is 0 to 1 (pointer pressure) or null, not \(force)") }
            let azimuth = values.count > 4 ? values[4] : nil
            let altitude = values.count > 5 ? values[5] : nil
            return FixedSample(
                x: try fixed(x, 64), y: try fixed(y, 64), t: try fixed(t, 1000), force: try force.map { (f: Double) throws(BrowserWireError) in try fixed(f, 1024) },
                azimuth: try azimuth.map { (a: Double) throws(BrowserWireError) in try fixed(a, 4096) },
                altitude: azimuth == nil ? nil : try fixed(altitude ?? 0, 4096))
        }
    }

    // MARK: Varints

    struct Writer {
        var bytes: [UInt8] = []

        mutating func byte(_ value: UInt8) { bytes.append(value) }

        mutating func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }

        mutating func zigzag(_ value: Int64) { varint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }

        mutating func string(_ text: String) {
            varint(UInt64(text.utf8.count))
            bytes.append(contentsOf: text.utf8)
        }

        /// A JSON sample list (4 integers a sample: x, y, t deltas and force) as its sample count, then zigzag, zigzag, zigzag, varint.
        mutating func samples(_ flat: [Int64]) {
            varint(UInt64(flat.count / 4))
            var index = 0
            while index + 3 < flat.count {
                zigzag(flat[index])
                zigzag(flat[index + 1])
                zigzag(flat[index + 2])
                varint(UInt64(clamping: flat[index + 3]))
                index += 4
            }
        }
    }

    struct Reader {
        let bytes: [UInt8]
        var at = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        mutating func byte() throws(BrowserWireError) -> UInt8 {
            guard at < bytes.count else { throw BrowserWireError("MALFORMED", "binary frame cut short") }
            at += 1
            return bytes[at - 1]
        }

        mutating func varint() throws(BrowserWireError) -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let next = try byte()
                guard shift < 64 else { throw BrowserWireError("MALFORMED", "a varint longer than 10 bytes") }
                value |= UInt64(next & 0x7F) << shift
                if next < 0x80 { return value }
                shift += 7
            }
        }

        mutating func zigzag() throws(BrowserWireError) -> Int64 {
            let raw = try varint()
            return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
        }

        mutating func int() throws(BrowserWireError) -> Int {
            let value = try varint()
            guard value <= UInt64(Int.max) else { throw BrowserWireError("MALFORMED", "an integer out of range") }
            return Int(value)
        }

        mutating func uint32() throws(BrowserWireError) -> UInt32 {
            let value = try varint()
            guard value <= UInt64(UInt32.max) else { throw BrowserWireError("MALFORMED", "an integer beyond 32 bits") }
            return UInt32(value)
        }

        /// A count no larger than the frame could hold (one byte each at least): refused before allocating.
        mutating func count(limit: Int) throws(BrowserWireError) -> Int {
            let value = try varint()
            guard value <= UInt64(limit) else { throw BrowserWireError("MALFORMED", "a count of \(value) in a frame of \(limit) bytes") }
            return Int(value)
        }

        mutating func text(length: UInt64) throws(BrowserWireError) -> String {
            guard length <= UInt64(bytes.count - at) else { throw BrowserWireError("MALFORMED", "a string runs past the frame") }
            let slice = bytes[at..<(at + Int(length))]
            at += Int(length)
            guard let text = String(validating: slice, as: UTF8.self) else { throw BrowserWireError("MALFORMED", "a string that is not UTF-8") }
            return text
        }

        mutating func string() throws(BrowserWireError) -> String { try text(length: try varint()) }

        mutating func samples() throws(BrowserWireError) -> [Int64] {
            let count = try self.count(limit: (bytes.count - at) / 4)
            var flat: [Int64] = []
            flat.reserveCapacity(count * 4)
            for _ in 0..<count {
                flat.append(try zigzag())
                flat.append(try zigzag())
                flat.append(try zigzag())
                let force = try varint()
                guard force <= UInt64(UInt16.max) else { throw BrowserWireError("MALFORMED", "a force beyond 65,535") }
                flat.append(Int64(force))
            }
            return flat
        }

        func end() throws(BrowserWireError) {
            guard at == bytes.count else { throw BrowserWireError("MALFORMED", "\(bytes.count - at) bytes after the message") }
        }
    }
}
