/// One touch sample in fixed point, as stored and as sent.
///
/// Positions are in 1/64 point (`unitsPerPoint`), time in microseconds of the
/// agent's monotonic clock, force in 1/1024 (UIKit's force is 0…~6.7), angles
/// in 1/4096 radian. Fixed point makes NaN unrepresentable past the agent,
/// keeps every replica bit-identical, and delta-encodes to a few bytes.
public struct Sample: Hashable, Sendable {
    public static let unitsPerPoint: Int32 = 64
    public static let forceUnits: Double = 1024
    public static let angleUnits: Double = 4096

    public var x: Int32
    public var y: Int32
    /// Microseconds, agent clock (UIKit's `timestamp` × 1e6).
    public var time: Int64
    /// Valid when `flags.contains(.hasForce)`.
    public var force: UInt16
    /// Valid when `flags.contains(.hasAngles)` (stylus azimuth and altitude).
    public var azimuth: Int16
    public var altitude: Int16
    public var flags: SampleFlags
    /// UIKit's `estimationUpdateIndex`: 0 when the sample expects no update.
    public var estimationIndex: UInt32

    @inlinable
    public init(
        x: Int32, y: Int32, time: Int64, force: UInt16 = 0, azimuth: Int16 = 0, altitude: Int16 = 0,
        flags: SampleFlags = [], estimationIndex: UInt32 = 0
    ) {
        self.x = x
        self.y = y
        self.time = time
        self.force = force
        self.azimuth = azimuth
        self.altitude = altitude
        self.flags = flags
        self.estimationIndex = estimationIndex
    }

    public var xInPoints: Double { Double(x) / Double(Self.unitsPerPoint) }
    public var yInPoints: Double { Double(y) / Double(Self.unitsPerPoint) }
}

public struct SampleFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// One of the samples coalesced since the previous event (not the event's own sample).
    public static let coalesced = SampleFlags(rawValue: 1 << 0)
    /// Some values are estimates; an amendment with the same `estimationIndex` may follow.
    public static let estimated = SampleFlags(rawValue: 1 << 1)
    public static let hasForce = SampleFlags(rawValue: 1 << 2)
    public static let hasAngles = SampleFlags(rawValue: 1 << 3)

    public static let all: SampleFlags = [.coalesced, .estimated, .hasForce, .hasAngles]
}

/// What is wrong with a sample's values.
public enum SampleProblem: Hashable, Sendable, CustomStringConvertible {
    case notFinite(field: String)
    case outOfRange(field: String)
    /// A sample older than the one before it in the same stroke.
    case timeWentBackwards
    case unknownFlags(UInt8)
    /// A force or angle value on a sample whose flags do not say it has one:
    /// every value has exactly one representation, so replicas hash alike.
    case valueWithoutFlag(field: String)
    /// An amendment that moves a sample or changes its time: only force,
    /// angles and flags can be refined (stored positions and times never
    /// change, which lets the diff stream encode new samples against them).
    case amendmentChangesLocation

    public var description: String {
        switch self {
        case .notFinite(let field): "\(field) is NaN or infinite"
        case .outOfRange(let field): "\(field) is out of range"
        case .timeWentBackwards: "sample time goes backwards"
        case .unknownFlags(let bits): "unknown sample flags 0x\(String(bits, radix: 16))"
        case .valueWithoutFlag(let field): "\(field) is set but the sample's flags do not declare it"
        case .amendmentChangesLocation: "an amendment may refine force, angles and flags, not location or time"
        }
    }
}

extension Sample {
    /// Largest accepted |x| and |y| in points: far beyond any screen, well inside Int32.
    public static let maxCoordinatePoints: Double = 1_000_000
    public static let maxCoordinateUnits = Int32(maxCoordinatePoints) * unitsPerPoint
    public static let maxAngleUnits = Int16((2 * Double.pi * angleUnits).rounded(.up))

    /// Quantizes UIKit-style floating values (points, seconds, radians),
    /// refusing NaN, infinities and values out of range: the agent's gate.
    public init(
        x: Double, y: Double, timestamp: Double, force: Double? = nil, azimuth: Double? = nil,
        altitude: Double? = nil, coalesced: Bool = false, estimationIndex: UInt32? = nil
    ) throws(SampleError) {
        func fixed(_ value: Double, _ scale: Double, _ limit: Double, _ field: String) throws(SampleError) -> Double {
            guard value.isFinite else { throw SampleError(.notFinite(field: field)) }
            let scaled = (value * scale).rounded()
            guard abs(scaled) <= limit else { throw SampleError(.outOfRange(field: field)) }
            return scaled
        }
        let units = Double(Self.unitsPerPoint)
        let coordinateLimit = Double(Self.maxCoordinateUnits)
        var flags: SampleFlags = coalesced ? .coalesced : []
        self.init(
            x: Int32(try fixed(x, units, coordinateLimit, "x")),
            y: Int32(try fixed(y, units, coordinateLimit, "y")),
            time: Int64(try fixed(timestamp, 1e6, 9.0e15, "timestamp")),
        )
        guard timestamp >= 0 else { throw SampleError(.outOfRange(field: "timestamp")) }
        if let force {
            let value = try fixed(force, Self.forceUnits, Double(UInt16.max), "force")
            guard value >= 0 else { throw SampleError(.outOfRange(field: "force")) }
            self.force = UInt16(value)
            flags.insert(.hasForce)
        }
        if azimuth != nil || altitude != nil {
            self.azimuth = Int16(try fixed(azimuth ?? 0, Self.angleUnits, Double(Self.maxAngleUnits), "azimuth"))
            self.altitude = Int16(try fixed(altitude ?? 0, Self.angleUnits, Double(Self.maxAngleUnits), "altitude"))
            flags.insert(.hasAngles)
        }
        if let estimationIndex, estimationIndex != 0 {
            self.estimationIndex = estimationIndex
            flags.insert(.estimated)
        }
        self.flags = flags
    }

    /// Checks a decoded sample (any Int32 can arrive over the wire).
    @inlinable
    public func validate() -> SampleProblem? {
        if x < -Self.maxCoordinateUnits || x > Self.maxCoordinateUnits { return .outOfRange(field: "x") }
        if y < -Self.maxCoordinateUnits || y > Self.maxCoordinateUnits { return .outOfRange(field: "y") }
        if time < 0 { return .outOfRange(field: "timestamp") }
        if flags.rawValue & ~SampleFlags.all.rawValue != 0 { return .unknownFlags(flags.rawValue) }
        if abs(Int32(azimuth)) > Int32(Self.maxAngleUnits) { return .outOfRange(field: "azimuth") }
        if abs(Int32(altitude)) > Int32(Self.maxAngleUnits) { return .outOfRange(field: "altitude") }
        if force != 0 && !flags.contains(.hasForce) { return .valueWithoutFlag(field: "force") }
        if (azimuth != 0 || altitude != 0) && !flags.contains(.hasAngles) { return .valueWithoutFlag(field: "azimuth") }
        return nil
    }
}

/// A value an agent could not quantize.
public struct SampleError: Error, Hashable, Sendable, CustomStringConvertible {
    public let problem: SampleProblem
    public init(_ problem: SampleProblem) { self.problem = problem }
    public var description: String { "invalid sample: \(problem)" }
}
