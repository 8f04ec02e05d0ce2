import TouchSyncCore
import TouchSyncWire

/// The packed wire's touch frames, tab to gateway (docs/protocol.md, "Packed
/// frames"): each sample coded against what the connection already carried,
/// the touch's own last two samples (second-order deltas, as the hub's runs),
/// a prediction against the finger's motion, the number and touch id against
/// the previous frame's. Both ends keep a `TouchChains` per connection, empty
/// at its start, so a frame sent again after a reconnect is coded afresh.
public enum PackedTouch {
    /// The first byte: `0x04`, plus 1 when samples carry a force field and 2
    /// when they carry an angles field.
    public static let kind: UInt8 = 0x04
    /// Whether a tab's binary frame is a chained touch.
    public static func isChained(_ first: UInt8) -> Bool { first & ~3 == kind }

    /// `touch` as a chained frame, advancing `chains` over it. The samples are
    /// quantized as the gateway quantizes JSON ones; a value the fixed point
    /// cannot hold or a list over the limit throws, and `chains` is then unchanged.
    public static func encode(_ touch: BrowserMessage.Touch, chains: inout TouchChains) throws(BrowserWireError) -> [UInt8] {
        guard let phase = touch.phase.flatMap({ BrowserBinary.phases.firstIndex(of: $0) }), let id = touch.id else {
            throw BrowserWireError("MALFORMED", "a touch has a phase and an id")
        }
        let coalesced = try BrowserBinary.quantized(touch.s ?? [])
        let predicted = try BrowserBinary.quantized(touch.p ?? [])
        let most = BrowserMessage.maxSamplesPerList
        guard coalesced.count <= most, predicted.count <= most else { throw BrowserWireError("TOO_MANY_SAMPLES", "at most \(most) samples per list") }
        guard touch.n >= 1, touch.n <= UInt64(Int64.max) else { throw BrowserWireError("MALFORMED", "numbers are 1 to 2^63 − 1") }
        let force = coalesced.contains { $0.force != nil } || predicted.contains { $0.force != nil }
        let angles = coalesced.contains { $0.azimuth != nil } || predicted.contains { $0.azimuth != nil }
        var out = BrowserBinary.Writer()
        out.byte(kind | (force ? 1 : 0) | (angles ? 2 : 0))
        out.zigzag(Int64(touch.n) - Int64(chains.number) - 1)
        let sameTouch = id == chains.touch
        out.byte(UInt8(phase) | (sameTouch ? 8 : 0) | UInt8(min(coalesced.count, 3)) << 4 | UInt8(min(predicted.count, 3)) << 6)
        if !sameTouch { out.zigzag(Int64(bitPattern: id &- chains.touch)) }
        if coalesced.count >= 3 { out.varint(UInt64(coalesced.count - 3)) }
        if predicted.count >= 3 { out.varint(UInt64(predicted.count - 3)) }

        var chain = chains.take(id)
        func attributes(_ sample: BrowserBinary.FixedSample) {
            if force {
                if let value = sample.force {
                    out.varint(zigZag(value &- chains.force) &+ 1)
                    chains.force = value
                } else {
                    out.varint(0)
                }
            }
            if angles {
                if let azimuth = sample.azimuth {
                    let altitude = sample.altitude ?? 0
                    out.varint(zigZag(azimuth &- chains.azimuth) &+ 1)
                    out.zigzag(altitude &- chains.altitude)
                    chains.azimuth = azimuth
                    chains.altitude = altitude
                } else {
                    out.varint(0)
                }
            }
        }
        for sample in coalesced {
            let point = TouchChains.Point(sample)
            let expected = chain.run.expected(from: chains.anchor)
            out.zigzag(point.x &- expected.x)
            out.zigzag(point.y &- expected.y)
            out.zigzag(point.t &- expected.t)
            attributes(sample)
            chain.run.advance(to: point)
            chains.anchor = point
        }
        var tail = chain.run
        for (index, sample) in predicted.enumerated() {
            let point = TouchChains.Point(sample)
            let expected: TouchChains.Point
            if index == 0, let last = chain.run.last {
                // Against the finger's motion: the gap from its last sample, and the point that far along its line.
                let gap = point.t &- last.t
                expected = chain.run.alongMotion(gap: gap)
                out.zigzag(point.x &- expected.x)
                out.zigzag(point.y &- expected.y)
                out.zigzag(gap &- chains.gap)
                chains.gap = gap
            } else {
                expected = tail.expected(from: chains.anchor)
                out.zigzag(point.x &- expected.x)
                out.zigzag(point.y &- expected.y)
                out.zigzag(point.t &- expected.t)
            }
            attributes(sample)
            tail.advance(to: point)
        }
        chains.finish(number: touch.n, touch: id, chain: chain, ended: phase >= 3)
        return out.bytes
    }

    /// A chained frame as the JSON `touch` it stands for (samples in CSS
    /// pixels and milliseconds, which the gateway's JSON path turns back into
    /// exactly these fixed-point values), advancing `chains` over it. A frame
    /// that cannot be read whole throws: the two ends no longer agree on the
    /// chain, so the gateway closes the connection (the tab then resends
    /// from its last acknowledged number on a fresh chain).
    public static func decode(_ bytes: some Collection<UInt8>, chains: inout TouchChains) throws(BrowserWireError) -> BrowserMessage.Touch {
        var reader = BrowserBinary.Reader(Array(bytes))
        let flags = try reader.byte()
        guard isChained(flags) else { throw BrowserWireError("MALFORMED", "a chained touch starts with 0x04 to 0x07, not \(flags)") }
        // n = N + 1 + delta, as integers: 1 to 2^63 − 1.
        let (sum, overflow) = Int64(bitPattern: chains.number).addingReportingOverflow(try reader.zigzag())
        let (number, overflowAgain) = sum.addingReportingOverflow(1)
        guard !overflow, !overflowAgain, number >= 1 else { throw BrowserWireError("MALFORMED", "a chained touch's number is 1 to 2^63 − 1") }
        let n = UInt64(number)
        let header = try reader.byte()
        let phase = Int(header & 7)
        guard phase < BrowserBinary.phases.count else { throw BrowserWireError("MALFORMED", "phase \(phase) is not 0 to 4") }
        let id = header & 8 != 0 ? chains.touch : chains.touch &+ UInt64(bitPattern: try reader.zigzag())
        func count(_ code: UInt8) throws(BrowserWireError) -> Int {
            guard code == 3 else { return Int(code) }
            let more = try reader.varint()
            guard more <= UInt64(BrowserMessage.maxSamplesPerList - 3) else {
                throw BrowserWireError("MALFORMED", "at most \(BrowserMessage.maxSamplesPerList) samples per list")
            }
            return 3 + Int(more)
        }
        let coalescedCount = try count(header >> 4 & 3)
        let predictedCount = try count(header >> 6)

        var chain = chains.take(id)
        func attributes(into sample: inout [Double?]) throws(BrowserWireError) {
            if flags & 1 != 0 {
                let code = try reader.varint()
                if code != 0 {
                    chains.force = chains.force &+ zigZagDecoded(code &- 1)
                    sample.append(Double(chains.force) / 1024)
                } else {
                    sample.append(nil)
                }
            } else {
                sample.append(nil)
            }
            if flags & 2 != 0 {
                let code = try reader.varint()
                if code != 0 {
                    chains.azimuth = chains.azimuth &+ zigZagDecoded(code &- 1)
                    chains.altitude = chains.altitude &+ (try reader.zigzag())
                    sample.append(Double(chains.azimuth) / 4096)
                    sample.append(Double(chains.altitude) / 4096)
                }
            }
            while sample.count > 3, sample.last! == nil { sample.removeLast() }
        }
        func values(_ point: TouchChains.Point) -> [Double?] { [Double(point.x) / 64, Double(point.y) / 64, Double(point.t) / 1000] }
        var coalesced: [[Double?]] = []
        coalesced.reserveCapacity(coalescedCount)
        for _ in 0..<coalescedCount {
            let expected = chain.run.expected(from: chains.anchor)
            let point = TouchChains.Point(
                x: expected.x &+ (try reader.zigzag()), y: expected.y &+ (try reader.zigzag()), t: expected.t &+ (try reader.zigzag()))
            var sample = values(point)
            try attributes(into: &sample)
            coalesced.append(sample)
            chain.run.advance(to: point)
            chains.anchor = point
        }
        var predicted: [[Double?]] = []
        predicted.reserveCapacity(predictedCount)
        var tail = chain.run
        for index in 0..<predictedCount {
            let point: TouchChains.Point
            if index == 0, let last = chain.run.last {
                let (rx, ry) = (try reader.zigzag(), try reader.zigzag())
                let gap = chains.gap &+ (try reader.zigzag())
                chains.gap = gap
                let expected = chain.run.alongMotion(gap: gap)
                point = TouchChains.Point(x: expected.x &+ rx, y: expected.y &+ ry, t: last.t &+ gap)
            } else {
                let expected = tail.expected(from: chains.anchor)
                point = TouchChains.Point(
                    x: expected.x &+ (try reader.zigzag()), y: expected.y &+ (try reader.zigzag()), t: expected.t &+ (try reader.zigzag()))
            }
            var sample = values(point)
            try attributes(into: &sample)
            predicted.append(sample)
            tail.advance(to: point)
        }
        try reader.end()
        chains.finish(number: n, touch: id, chain: chain, ended: phase >= 3)
        return BrowserMessage.Touch(
            n: n, phase: BrowserBinary.phases[phase], id: id, s: coalesced.isEmpty ? nil : coalesced, p: predicted.isEmpty ? nil : predicted)
    }
}

/// What one connection's chained touch frames carry from frame to frame
/// (docs/protocol.md, "Packed frames"): the previous frame's number and
/// touch, the last real sample of any touch (the anchor a new touch starts
/// from), the previous prediction's gap, force and angles, and each touch's
/// last two real samples (at most `maxTouches`, the least recently named
/// forgotten first; a touch that ends or is cancelled is forgotten).
public struct TouchChains: Sendable {
    public static let maxTouches = 32

    struct Point: Sendable, Equatable {
        var x: Int64
        var y: Int64
        var t: Int64
        init(x: Int64, y: Int64, t: Int64) {
            self.x = x
            self.y = y
            self.t = t
        }
        init(_ sample: BrowserBinary.FixedSample) { self.init(x: sample.x, y: sample.y, t: sample.t) }
    }

    /// A run's last two samples and where its next one is expected.
    struct Run: Sendable {
        var last: Point? = nil
        var beforeLast: Point? = nil
        /// The sample before `beforeLast` (the period of packed2's blocks).
        var third: Point? = nil

        /// No sample yet: the anchor; one: that sample; two or more: along the line of the last two (second-order deltas).
        func expected(from anchor: Point) -> Point {
            guard let last else { return anchor }
            guard let beforeLast else { return last }
            return Point(x: last.x &* 2 &- beforeLast.x, y: last.y &* 2 &- beforeLast.y, t: last.t &* 2 &- beforeLast.t)
        }

        /// A prediction `gap` after the last sample, on the line through the last two (wire format v2's rule).
        func alongMotion(gap: Int64) -> Point {
            guard let last else { return Point(x: 0, y: 0, t: 0) }
            func along(_ value: KeyPath<Point, Int64>) -> Int64 {
                predictedPosition(
                    last: last[keyPath: value], beforeLast: beforeLast?[keyPath: value], lastTime: last.t, beforeLastTime: beforeLast?.t, gap: gap)
            }
            return Point(x: along(\.x), y: along(\.y), t: last.t &+ gap)
        }

        /// The time between the last two samples (0 with fewer).
        var interval: Int64 {
            guard let last, let beforeLast else { return 0 }
            return last.t &- beforeLast.t
        }

        /// packed2's period: the shorter of the last two intervals with three
        /// samples (a skipped event doubles one interval, not the period), the
        /// last interval with two, 0 with fewer.
        var period: Int64 {
            guard let last, let beforeLast else { return 0 }
            let latest = last.t &- beforeLast.t
            guard let third else { return latest }
            return min(latest, beforeLast.t &- third.t)
        }

        /// packed2's expectation: x and y along the last two samples, t a period after the last.
        func expectedByPeriod(from anchor: Point) -> Point {
            guard let last, beforeLast != nil else { return expected(from: anchor) }
            let second = expected(from: anchor)
            return Point(x: second.x, y: second.y, t: last.t &+ period)
        }

        /// packed2's prediction: `gap` after the last sample, the last motion scaled by gap / period.
        func alongMotionByPeriod(gap: Int64) -> Point {
            guard let last else { return Point(x: 0, y: 0, t: 0) }
            let period = self.period
            func along(_ value: KeyPath<Point, Int64>) -> Int64 {
                predictedPosition(
                    last: last[keyPath: value], beforeLast: beforeLast?[keyPath: value], lastTime: last.t,
                    beforeLastTime: beforeLast.map { _ in last.t &- period }, gap: gap)
            }
            return Point(x: along(\.x), y: along(\.y), t: last.t &+ gap)
        }

        mutating func advance(to point: Point) {
            third = beforeLast
            beforeLast = last
            last = point
        }
    }

    struct Chain: Sendable {
        var touch: UInt64
        var run = Run()
    }

    var number: UInt64 = 0
    var touch: UInt64 = 0
    var anchor = Point(x: 0, y: 0, t: 0)
    var gap: Int64 = 0
    var force: Int64 = 0
    var azimuth: Int64 = 0
    var altitude: Int64 = 0
    /// Least recently named first.
    private var chains: [Chain] = []

    public init() {}

    /// The touch's chain, taken out (a fresh one for a touch not held; past
    /// the limit the least recently named is forgotten to make room).
    mutating func take(_ touch: UInt64) -> Chain {
        if let index = chains.firstIndex(where: { $0.touch == touch }) { return chains.remove(at: index) }
        if chains.count >= Self.maxTouches { chains.removeFirst() }
        return Chain(touch: touch)
    }

    /// After a frame: its number and touch, and the touch's chain put back as the most recently named unless it ended.
    mutating func finish(number: UInt64, touch: UInt64, chain: Chain, ended: Bool) {
        self.number = number
        self.touch = touch
        if !ended { chains.append(chain) }
    }

    /// Touches whose chains are held (the limit bounds what a connection can make the gateway keep).
    public var touchCount: Int { chains.count }
}
