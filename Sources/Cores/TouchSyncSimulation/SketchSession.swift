import Foundation
import TouchSyncCore

/// Simulated people drawing recognisable things: words in a stroke font, a
/// spiral, a house with a sun, a star, a wave, a heart. Each user has its
/// own figures and several fingers; a finger follows its stroke's path at a
/// hand's speed (coalesced samples at 240 Hz, one predicted sample ahead),
/// lifts at its end and starts the user's next stroke. The seed chooses the
/// words, where each figure goes and the order the users move in, so one
/// seed is one picture. For the demo, whose board should look like people
/// drawing together.
public struct SketchSession: Sendable {
    public let users: [UserNamespace]
    private var random: SplitMix64
    private var strokes: [[[Point]]]   // per user, the paths still to draw
    private var fingers: [[Finger]]    // per user
    private var clocks: [Int64]
    private var nextTouch: [TouchID]
    private var speeds: [Double]  // points per event, per user
    private let hz: Double

    struct Point { var x: Double; var y: Double }
    struct Finger {
        var touch: TouchID? = nil
        var path: [Point] = []
        var position = 0.0  // arc length drawn so far
        var pause = 0       // events to wait before the next stroke
    }

    /// - Parameters:
    ///   - fingers: strokes a user draws at once (different strokes of its figures).
    ///   - events: about how many input events the whole session will have:
    ///     each hand's pace is set so that its figures are nearly done by
    ///     then, with its last strokes still in progress. Nil: a brisk
    ///     900 points per second.
    public init(seed: UInt64, users: Int, fingers: Int, events: Int? = nil, hz: Double = 120, userPrefix: String = "user") {
        self.hz = hz
        random = SplitMix64(seed: seed)
        self.users = (0..<users).map { UserNamespace("\(userPrefix)-\($0)") }
        self.fingers = Array(repeating: Array(repeating: Finger(), count: max(1, fingers)), count: users)
        clocks = Array(repeating: 1_000_000, count: users)
        nextTouch = Array(repeating: 1, count: users)
        strokes = []
        // Users share a 1200 x 900 board, each in its own region.
        let columns = max(1, Int(Double(users).squareRoot().rounded(.up)))
        let rows = (users + columns - 1) / columns
        for user in 0..<users {
            let cell = (x: Double(user % columns) * 1200 / Double(columns), y: Double(user / columns) * 900 / Double(rows))
            let size = (width: 1200 / Double(columns), height: 900 / Double(rows))
            strokes.append(Self.figures(for: user, in: cell, size: size, random: &random))
        }
        let fingerCount = Double(max(1, fingers))
        speeds = strokes.map { paths in
            guard let events else { return 900 / hz }
            let total = paths.reduce(0) { $0 + Self.length(of: $1) }
            let perUser = Double(events) / Double(max(1, users))
            // Pauses between strokes take about 7 events each.
            let drawing = max(1, perUser - Double(paths.count) * 7 / fingerCount)
            return max(1, total / (drawing * fingerCount) * 1.08)
        }
    }

    /// The next input event, from a user picked at random: every finger of it that moved.
    public mutating func next() -> SimulatedInput {
        let user = Int.random(in: 0..<users.count, using: &random)
        return .frame(users[user], nextFrame(for: user), SessionSimulator.style(forUser: user))
    }

    /// Strokes not yet begun, over all users (0: every figure is drawn or under way).
    public var strokesLeft: Int { strokes.reduce(0) { $0 + $1.count } }

    /// Every figure is drawn and every finger lifted: later events would be empty.
    public var isComplete: Bool { strokesLeft == 0 && fingers.allSatisfy { $0.allSatisfy { $0.touch == nil } } }

    public mutating func nextFrame(for user: Int) -> TouchFrame {
        let step = Int64(1_000_000 / hz)
        clocks[user] += step
        let now = clocks[user]
        var changes: [TouchChange] = []
        let speed = speeds[user]
        for index in fingers[user].indices {
            var finger = fingers[user][index]
            defer { fingers[user][index] = finger }
            if finger.touch == nil {
                if finger.pause > 0 {
                    finger.pause -= 1
                    continue
                }
                guard !strokes[user].isEmpty else { continue }
                finger.path = strokes[user].removeFirst()
                finger.position = 0
                finger.touch = nextTouch[user]
                nextTouch[user] += 1
                changes.append(TouchChange(touch: finger.touch!, phase: .began, samples: [sample(finger.path, at: 0, time: now)]))
                continue
            }
            let length = Self.length(of: finger.path)
            // Two coalesced samples per event (a 240 Hz digitizer at 120 Hz events).
            let from = finger.position
            finger.position = min(length, finger.position + speed)
            let samples = [
                sample(finger.path, at: (from + finger.position) / 2, time: now - step / 2, coalesced: true),
                sample(finger.path, at: finger.position, time: now),
            ]
            if finger.position >= length {
                changes.append(TouchChange(touch: finger.touch!, phase: .ended, samples: samples))
                finger.touch = nil
                finger.pause = Int.random(in: 2...12, using: &random)
            } else {
                let predicted = [sample(finger.path, at: min(length, finger.position + speed), time: now + step)]
                changes.append(TouchChange(touch: finger.touch!, phase: .moved, samples: samples, predicted: predicted))
            }
        }
        return TouchFrame(changes: changes)
    }

    private func sample(_ path: [Point], at distance: Double, time: Int64, coalesced: Bool = false) -> Sample {
        let point = Self.point(on: path, at: distance)
        var sample = Sample(x: Int32((point.x * 64).rounded()), y: Int32((point.y * 64).rounded()), time: time)
        if coalesced { sample.flags.insert(.coalesced) }
        return sample
    }

    // MARK: Paths

    static func length(of path: [Point]) -> Double {
        zip(path, path.dropFirst()).reduce(0) { $0 + hypot($1.1.x - $1.0.x, $1.1.y - $1.0.y) }
    }

    static func point(on path: [Point], at distance: Double) -> Point {
        var left = distance
        for (a, b) in zip(path, path.dropFirst()) {
            let segment = hypot(b.x - a.x, b.y - a.y)
            if left <= segment, segment > 0 {
                let t = left / segment
                return Point(x: a.x + (b.x - a.x) * t, y: a.y + (b.y - a.y) * t)
            }
            left -= segment
        }
        return path.last ?? Point(x: 0, y: 0)
    }

    static func arc(cx: Double, cy: Double, rx: Double, ry: Double, from: Double, to: Double, steps: Int = 24) -> [Point] {
        (0...steps).map { k in
            let angle = from + (to - from) * Double(k) / Double(steps)
            return Point(x: cx + rx * cos(angle), y: cy + ry * sin(angle))
        }
    }

    /// A user's figures, as strokes (paths of points), in drawing order.
    static func figures(for user: Int, in cell: (x: Double, y: Double), size: (width: Double, height: Double), random: inout SplitMix64)
        -> [[Point]]
    {
        let jitter = { (random: inout SplitMix64) in Double.random(in: -0.04...0.04, using: &random) }
        let ox = cell.x + size.width * (0.08 + jitter(&random))
        let oy = cell.y + size.height * (0.1 + jitter(&random))
        let w = size.width * 0.84
        let h = size.height * 0.8
        switch user % 3 {
        case 0:
            // A word across the top, a wave under it.
            let words = ["HELLO", "TOUCH", "SYNC", "HI THERE", "DRAW"]
            let word = words[Int.random(in: 0..<words.count, using: &random)]
            var paths = text(word, x: ox, y: oy, height: h * 0.35, width: w)
            paths.append((0...60).map { k in Point(x: ox + w * Double(k) / 60, y: oy + h * 0.7 + h * 0.08 * sin(Double(k) / 4)) })
            return paths
        case 1:
            // A spiral and a star.
            let r = min(w, h) * 0.3
            let spiral = (0...140).map { k -> Point in
                let angle = Double(k) * 0.18
                return Point(x: ox + r + 0.11 * r * angle * cos(angle) / 2.5, y: oy + r + 0.11 * r * angle * sin(angle) / 2.5)
            }
            let star = (0...5).map { k -> Point in
                let angle = -Double.pi / 2 + Double(k) * 4 * Double.pi / 5
                return Point(x: ox + w * 0.75 + r * 0.8 * cos(angle), y: oy + h * 0.35 + r * 0.8 * sin(angle))
            }
            let heart = (0...40).map { k -> Point in
                let t = Double(k) / 40 * 2 * Double.pi
                return Point(x: ox + w * 0.5 + r * 0.04 * 16 * pow(sin(t), 3),
                             y: oy + h * 0.82 - r * 0.04 * (13 * cos(t) - 5 * cos(2 * t) - 2 * cos(3 * t) - cos(4 * t)))
            }
            return [spiral, star, heart]
        default:
            // A house with a door, a sun with rays.
            let base = oy + h * 0.9
            let left = ox + w * 0.1
            let right = ox + w * 0.5
            let top = oy + h * 0.5
            var paths: [[Point]] = [
                [Point(x: left, y: top), Point(x: left, y: base), Point(x: right, y: base), Point(x: right, y: top), Point(x: left, y: top)],
                [Point(x: left - 10, y: top), Point(x: (left + right) / 2, y: oy + h * 0.25), Point(x: right + 10, y: top)],
                [Point(x: left + (right - left) * 0.4, y: base), Point(x: left + (right - left) * 0.4, y: base - h * 0.2),
                 Point(x: left + (right - left) * 0.6, y: base - h * 0.2), Point(x: left + (right - left) * 0.6, y: base)],
            ]
            let sun = (cx: ox + w * 0.8, cy: oy + h * 0.2, r: min(w, h) * 0.1)
            paths.append(arc(cx: sun.cx, cy: sun.cy, rx: sun.r, ry: sun.r, from: 0, to: 2 * Double.pi, steps: 32))
            for ray in 0..<8 {
                let angle = Double(ray) * Double.pi / 4
                paths.append([
                    Point(x: sun.cx + sun.r * 1.3 * cos(angle), y: sun.cy + sun.r * 1.3 * sin(angle)),
                    Point(x: sun.cx + sun.r * 1.8 * cos(angle), y: sun.cy + sun.r * 1.8 * sin(angle)),
                ])
            }
            return paths
        }
    }

    /// Capital letters in a simple stroke font (each letter in a 0...1 box), laid out along a line.
    static func text(_ word: String, x: Double, y: Double, height: Double, width: Double) -> [[Point]] {
        let advance = width / Double(max(1, word.count))
        let letterWidth = min(height * 0.7, advance * 0.72)
        var paths: [[Point]] = []
        for (index, letter) in word.enumerated() {
            let left = x + Double(index) * advance
            for stroke in glyph(letter) {
                paths.append(stroke.map { Point(x: left + $0.x * letterWidth, y: y + $0.y * height) })
            }
        }
        return paths
    }

    static func glyph(_ letter: Character) -> [[Point]] {
        func p(_ x: Double, _ y: Double) -> Point { Point(x: x, y: y) }
        switch letter {
        case "A": return [[p(0, 1), p(0.5, 0), p(1, 1)], [p(0.25, 0.55), p(0.75, 0.55)]]
        case "C": return [arc(cx: 0.55, cy: 0.5, rx: 0.5, ry: 0.5, from: -0.25 * .pi, to: -1.75 * .pi)]
        case "D": return [[p(0, 0), p(0, 1)], [p(0, 0)] + arc(cx: 0.4, cy: 0.5, rx: 0.6, ry: 0.5, from: -0.5 * .pi, to: 0.5 * .pi) + [p(0, 1)]]
        case "E": return [[p(1, 0), p(0, 0), p(0, 1), p(1, 1)], [p(0, 0.5), p(0.7, 0.5)]]
        case "H": return [[p(0, 0), p(0, 1)], [p(1, 0), p(1, 1)], [p(0, 0.5), p(1, 0.5)]]
        case "I": return [[p(0.5, 0), p(0.5, 1)]]
        case "L": return [[p(0, 0), p(0, 1), p(1, 1)]]
        case "N": return [[p(0, 1), p(0, 0), p(1, 1), p(1, 0)]]
        case "O": return [arc(cx: 0.5, cy: 0.5, rx: 0.5, ry: 0.5, from: -0.5 * .pi, to: 1.5 * .pi, steps: 32)]
        case "R": return [[p(0, 1), p(0, 0)] + arc(cx: 0.45, cy: 0.27, rx: 0.45, ry: 0.27, from: -0.5 * .pi, to: 0.5 * .pi) + [p(0, 0.54), p(1, 1)]]
        case "S":
            return [arc(cx: 0.5, cy: 0.25, rx: 0.45, ry: 0.25, from: -0.1 * .pi, to: -1.5 * .pi, steps: 14)
                + arc(cx: 0.5, cy: 0.75, rx: 0.45, ry: 0.25, from: -0.5 * .pi, to: 0.9 * .pi, steps: 14)]
        case "T": return [[p(0, 0), p(1, 0)], [p(0.5, 0), p(0.5, 1)]]
        case "U": return [[p(0, 0), p(0, 0.6)] + arc(cx: 0.5, cy: 0.6, rx: 0.5, ry: 0.4, from: .pi, to: 0, steps: 16).dropFirst() + [p(1, 0)]]
        case "W": return [[p(0, 0), p(0.25, 1), p(0.5, 0.4), p(0.75, 1), p(1, 0)]]
        case "Y": return [[p(0, 0), p(0.5, 0.5), p(1, 0)], [p(0.5, 0.5), p(0.5, 1)]]
        default: return []
        }
    }
}
