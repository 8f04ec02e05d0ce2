import TouchSyncCore

/// A message that cannot be decoded into the model.
public struct WireError: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: ErrorCode
    public let reason: String

    public init(_ code: ErrorCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public static func malformed(_ reason: String) -> WireError { WireError(.malformed, reason) }

    public var description: String { "\(code): \(reason)" }
}

/// The protocol versions this build speaks: 1, and 2 (wire format v2's agent frames).
public let touchSyncProtocolVersions: ClosedRange<UInt32> = 1...2
