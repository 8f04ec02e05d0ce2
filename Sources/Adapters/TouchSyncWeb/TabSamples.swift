import TouchSyncClient
import TouchSyncCore
import TouchSyncWebWire

/// A tab's samples as the agent takes them (docs/protocol.md, "The browser wire").
public enum TabSamples {
    /// The most samples (coalesced or predicted) one tab message may carry.
    static let maxSamples = BrowserMessage.maxSamplesPerList

    /// Samples as the agent API takes them: points (CSS pixels), seconds, radians.
    /// A sample is 3 to 6 numbers, `[x, y, t, force, azimuth, altitude]`
    /// (missing trailing ones are null); `t` in milliseconds becomes
    /// microseconds as `t × 1000` rounded to the nearest integer, halves away
    /// from zero (IEEE-754 double arithmetic), and force must be 0 to 1
    /// (pointer pressure). docs/protocol.md, "The browser wire".
    public static func points(_ raw: [[Double?]]?) throws(BrowserWireError) -> [TouchPoint] {
        guard let raw else { return [] }
        guard raw.count <= maxSamples else { throw BrowserWireError("TOO_MANY_SAMPLES", "at most \(maxSamples) samples per message") }
        var points: [TouchPoint] = []
        points.reserveCapacity(raw.count)
        for values in raw {
            guard (3...6).contains(values.count), let x = values[0], let y = values[1], let time = values[2] else {
                throw BrowserWireError("MALFORMED", "a sample is [x, y, t, force, azimuth, altitude]: 3 to 6 elements, x, y and t numbers")
            }
            let force = values.count > 3 ? values[3] : nil
            let azimuth = values.count > 4 ? values[4] : nil
            let altitude = values.count > 5 ? values[5] : nil
            if let force, !(force >= 0 && force <= 1) {
                throw BrowserWireError("INVALID_SAMPLE", "force is 0 to 1 (pointer pressure) or null, not \(force)")
            }
            guard time.isFinite else { throw BrowserWireError("INVALID_SAMPLE", "invalid sample: timestamp is NaN or infinite") }
            points.append(
                TouchPoint(
                    x: x, y: y, timestamp: microseconds(milliseconds: time) / 1e6, force: force, azimuth: azimuth,
                    altitude: azimuth == nil ? nil : altitude))
        }
        return points
    }

    /// A tab's samples in the hub's fixed point, exactly as the tab's agent
    /// sends them (docs/protocol.md, "The browser wire"; the vectors in
    /// proto/conformance/v1/browser-samples.json).
    public static func fixedPoint(_ raw: [[Double?]]) throws(BrowserWireError) -> [Sample] {
        var samples: [Sample] = []
        for point in try points(raw) {
            do {
                samples.append(
                    try Sample(
                        x: point.x, y: point.y, timestamp: point.timestamp, force: point.force, azimuth: point.azimuth,
                        altitude: point.altitude))
            } catch {
                throw BrowserWireError("INVALID_SAMPLE", error.description)
            }
        }
        return samples
    }

    /// Milliseconds to whole microseconds: `t × 1000` rounded, halves away
    /// from zero. (Dividing by 1e6 again for `TouchPoint` and multiplying back
    /// in `Sample` returns this integer exactly below 2^52 µs, 142 years.)
    static func microseconds(milliseconds: Double) -> Double {
        (milliseconds * 1000).rounded(.toNearestOrAwayFromZero)
    }
}
