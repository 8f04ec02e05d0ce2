import TouchSyncCore

/// A stroke's samples to a filled outline whose width follows pressure, in
/// the manner of perfect-freehand. The browser page draws the same outline
/// (Sources/Adapters/TouchSyncWeb/Page/ink.js: the same steps and constants, checked
/// against each other in Chromium), so an export looks like the screen; the
/// steps are in docs/protocol.md, "Drawing ink".
public enum InkOutline {
    public static let thinning = 0.6
    /// Centre-line points at most this far apart, in points.
    public static let step = 4.0
    public static let maxSubdivisions = 16
    /// Samples closer than this to the previous kept one are skipped, in points.
    public static let minDistance = 0.5
    static let capPoints = 6

    /// One input point: position in points, time in milliseconds, pressure 0…1 or nil.
    public struct Point: Sendable, Equatable {
        public var x: Double, y: Double, time: Double, pressure: Double?
        public init(x: Double, y: Double, time: Double, pressure: Double?) {
            self.x = x
            self.y = y
            self.time = time
            self.pressure = pressure
        }
    }

    /// A stroke's samples as ink points (force 0 is "no pressure").
    public static func points(_ samples: some Sequence<Sample>) -> [Point] {
        let unit = Double(Sample.unitsPerPoint)
        return samples.map { sample in
            Point(
                x: Double(sample.x) / unit, y: Double(sample.y) / unit, time: Double(sample.time) / 1000,
                pressure: sample.force > 0 ? Double(sample.force) / Sample.forceUnits : nil)
        }
    }

    static func simulatedPressures(_ points: [Point]) -> [Double] {
        var out = [Double](repeating: 0.5, count: points.count)
        var pressure = 0.5
        for index in points.indices.dropFirst() {
            let a = points[index - 1], b = points[index]
            let distance = hypot(b.x - a.x, b.y - a.y)
            let elapsed = max(1, b.time - a.time)
            let speed = distance / elapsed
            let target = max(0.15, 0.85 - speed * 0.18)
            pressure += (target - pressure) * 0.35
            out[index] = pressure
        }
        return out
    }

    /// The centre line: (x, y, pressure), through every kept sample, at most `step` apart.
    public static func centreLine(_ input: [Point]) -> (points: [(x: Double, y: Double, pressure: Double)], simulated: Bool) {
        var kept: [Point] = []
        kept.reserveCapacity(input.count)
        for point in input {
            if let last = kept.last, hypot(point.x - last.x, point.y - last.y) < minDistance { continue }
            kept.append(point)
        }
        guard let first = kept.first else { return ([], false) }
        let hasPressure = kept.contains { ($0.pressure ?? 0) > 0 }
        let pressures = hasPressure ? kept.map { min(1, max(0, $0.pressure ?? 0)) } : simulatedPressures(kept)
        var out: [(x: Double, y: Double, pressure: Double)] = [(first.x, first.y, pressures[0])]
        for i in 0..<(kept.count - 1) {
            // At the ends, the missing neighbour is the end sample itself.
            let p0 = kept[max(0, i - 1)], p1 = kept[i], p2 = kept[i + 1], p3 = kept[min(kept.count - 1, i + 2)]
            let length = hypot(p2.x - p1.x, p2.y - p1.y)
            let steps = min(maxSubdivisions, max(1, Int((length / step).rounded(.up))))
            for k in 1...steps {
                let t = Double(k) / Double(steps), t2 = t * t, t3 = t2 * t
                // Uniform Catmull-Rom: passes through p1 and p2.
                let x = 0.5 * (2 * p1.x + (p2.x - p0.x) * t + (2 * p0.x - 5 * p1.x + 4 * p2.x - p3.x) * t2 + (3 * p1.x - p0.x - 3 * p2.x + p3.x) * t3)
                let y = 0.5 * (2 * p1.y + (p2.y - p0.y) * t + (2 * p0.y - 5 * p1.y + 4 * p2.y - p3.y) * t2 + (3 * p1.y - p0.y - 3 * p2.y + p3.y) * t3)
                out.append((x, y, pressures[i] + (pressures[i + 1] - pressures[i]) * t))
            }
        }
        return (out, !hasPressure)
    }

    /// The outline polygon of a stroke `width` points wide; `complete` tapers the end of a simulated-pressure stroke.
    public static func outline(_ input: [Point], width: Double, complete: Bool) -> [(x: Double, y: Double)] {
        let (points, simulated) = centreLine(input)
        guard !points.isEmpty else { return [] }
        var radii = points.map { max(0.25, width / 2 * (1 - thinning + 2 * thinning * $0.pressure)) }
        if points.count == 1 {
            let (x, y, _) = points[0]
            let r = radii[0]
            return (0..<16).map { k in (x + r * cos(Double(k) * .pi / 8), y + r * sin(Double(k) * .pi / 8)) }
        }
        var along = [0.0]
        for i in 1..<points.count { along.append(along[i - 1] + hypot(points[i].x - points[i - 1].x, points[i].y - points[i - 1].y)) }
        let total = along[along.count - 1]
        if simulated {
            let taper = min(width * 2, total / 3)
            if taper > 0 {
                for i in points.indices {
                    let fromStart = along[i] / taper, fromEnd = (total - along[i]) / taper
                    var scale = 1.0
                    if fromStart < 1 { scale = min(scale, 0.25 + 0.75 * fromStart * (2 - fromStart)) }
                    if complete && fromEnd < 1 { scale = min(scale, 0.25 + 0.75 * fromEnd * (2 - fromEnd)) }
                    radii[i] = max(0.25, radii[i] * scale)
                }
            }
        }
        let last = points.count - 1
        var left: [(x: Double, y: Double)] = [], right: [(x: Double, y: Double)] = []
        left.reserveCapacity(points.count)
        right.reserveCapacity(points.count)
        var d0 = (x: 0.0, y: 0.0), dn = (x: 0.0, y: 0.0)
        for i in 0...last {
            let a = points[max(0, i - 1)], b = points[min(last, i + 1)]
            var dx = b.x - a.x, dy = b.y - a.y
            var length = hypot(dx, dy)
            if length == 0 { length = 1 }
            dx /= length
            dy /= length
            if i == 0 { d0 = (dx, dy) }
            if i == last { dn = (dx, dy) }
            let r = radii[i]
            left.append((points[i].x - dy * r, points[i].y + dx * r))
            right.append((points[i].x + dy * r, points[i].y - dx * r))
        }
        var out = left
        out.reserveCapacity(left.count * 2 + 2 * capPoints)
        let end = points[last], rn = radii[last]
        for k in 1...capPoints {
            let angle = Double.pi * Double(k) / Double(capPoints + 1)
            let c = cos(angle), s = sin(angle)
            out.append((end.x + rn * (-dn.y * c + dn.x * s), end.y + rn * (dn.x * c + dn.y * s)))
        }
        out.append(contentsOf: right.reversed())
        let start = points[0], r0 = radii[0]
        for k in 1...capPoints {
            let angle = Double.pi * Double(k) / Double(capPoints + 1)
            let c = cos(angle), s = sin(angle)
            out.append((start.x + r0 * (d0.y * c - d0.x * s), start.y + r0 * (-d0.x * c - d0.y * s)))
        }
        return out
    }

    /// SVG path data through the outline: quadratic curves through its points
    /// to the midpoints of the next, closed (the string the page builds too).
    public static func pathData(_ polygon: [(x: Double, y: Double)]) -> String {
        let n = polygon.count
        guard n > 0 else { return "" }
        func mid(_ a: (x: Double, y: Double), _ b: (x: Double, y: Double)) -> (Double, Double) { ((a.x + b.x) / 2, (a.y + b.y) / 2) }
        let m0 = mid(polygon[0], polygon[1 % n])
        var d = "M\(number(m0.0)) \(number(m0.1))"
        d.reserveCapacity(n * 28)
        for i in 1...n {
            let p = polygon[i % n]
            let m = mid(p, polygon[(i + 1) % n])
            d += " Q\(number(p.x)) \(number(p.y)) \(number(m.0)) \(number(m.1))"
        }
        return d + " Z"
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
