/// The namespace a user's touches live in. The hub derives it from the
/// connection (routing id, later the authenticated key), never from a payload.
public struct UserNamespace: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String
    /// FNV-1a of the name, computed once: the hub looks a user up on every
    /// frame, and hashing one word is much cheaper than hashing the string.
    private let fingerprint: UInt64

    public init(_ rawValue: String) {
        self.rawValue = rawValue
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in rawValue.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        fingerprint = hash
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.fingerprint == rhs.fingerprint && lhs.rawValue == rhs.rawValue
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(fingerprint) }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { rawValue }
}

/// A touch as its agent names it: unique among that user's live touches and
/// reusable once the touch has ended (like UIKit reusing a UITouch address).
public typealias TouchID = UInt64

/// A stroke as the hub names it: assigned in begin order, never reused on a board.
public struct StrokeID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "s\(rawValue)" }

    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// Dictionaries keyed by stroke id sit on the hub's per-change path (the
    /// diff coalescer, the stream encoders' chains): SipHash's seeding and
    /// finalization were 6-9% of the hub thread in the 2,000-agent run. Ids are
    /// numbers the hub assigns in sequence, not values a client chooses, so a
    /// multiply-xorshift mix of the id and the table's seed spreads them as
    /// well (Hashable's customization point for a raw hash; equal ids hash equal).
    public func _rawHashValue(seed: Int) -> Int {
        let mixed = (rawValue ^ UInt64(UInt(bitPattern: seed))) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed ^ (mixed >> 29))
    }
}

/// How a stroke is drawn.
public struct StrokeStyle: Hashable, Sendable {
    /// 0xRRGGBBAA.
    public var rgba: UInt32
    /// Line width in fixed-point units (`Sample.unitsPerPoint` per point).
    public var width: UInt32

    public init(rgba: UInt32, width: UInt32) {
        self.rgba = rgba
        self.width = width
    }

    /// The seed app's look: purple, 4 points wide.
    public static let `default` = StrokeStyle(rgba: 0x6A1B_9AFF, width: 4 * UInt32(Sample.unitsPerPoint))

    public var widthInPoints: Double { Double(width) / Double(Sample.unitsPerPoint) }
}

/// UIKit's touch phases, as an agent reports them.
public enum TouchPhase: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case began = 1, moved, stationary, ended, cancelled

    public var description: String {
        switch self {
        case .began: "began"
        case .moved: "moved"
        case .stationary: "stationary"
        case .ended: "ended"
        case .cancelled: "cancelled"
        }
    }
}
