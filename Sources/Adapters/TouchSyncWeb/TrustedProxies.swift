import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The proxies whose `X-Forwarded-For` the gateway believes (`--trusted-proxy`,
/// addresses or ranges such as `10.0.0.0/8` or `fd00::/8`): behind a TLS
/// proxy every tab's connection comes from the proxy, so per-address limits
/// would count all tabs as one address. A tab whose connection comes from a
/// trusted proxy counts as the address that proxy appended last (the
/// header's rightmost entry: earlier ones the client could have written);
/// from anywhere else the header is ignored, so it cannot be spoofed.
public struct TrustedProxies: Sendable, Equatable {
    struct Range: Sendable, Equatable {
        var bytes: [UInt8]
        var prefixLength: Int
    }

    private var ranges: [Range] = []
    public var isEmpty: Bool { ranges.isEmpty }

    public struct InvalidRange: Error, CustomStringConvertible {
        public let text: String
        public var description: String {
            "--trusted-proxy \(text): an IPv4 or IPv6 address, or a range such as 10.0.0.0/8 or fd00::/8"
        }
    }

    public init() {}

    public init(_ specifications: [String]) throws(InvalidRange) {
        for text in specifications {
            let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard let bytes = Self.bytes(of: parts[0]) else { throw InvalidRange(text: text) }
            let length = parts.count == 2 ? Int(parts[1]) : bytes.count * 8
            guard let length, (0...bytes.count * 8).contains(length) else { throw InvalidRange(text: text) }
            ranges.append(Range(bytes: bytes, prefixLength: length))
        }
    }

    /// Whether `address` (as NIO prints a peer's IP) is one of the proxies.
    public func contains(_ address: String) -> Bool {
        guard !ranges.isEmpty, let bytes = Self.bytes(of: address) else { return false }
        return ranges.contains { range in
            guard range.bytes.count == bytes.count else { return false }
            let whole = range.prefixLength / 8, rest = range.prefixLength % 8
            guard bytes[..<whole] == range.bytes[..<whole] else { return false }
            guard rest > 0 else { return true }
            let mask = UInt8(0xFF) << (8 - rest)
            return bytes[whole] & mask == range.bytes[whole] & mask
        }
    }

    /// The address a tab counts as: from a trusted proxy, the last entry of
    /// its `X-Forwarded-For` when that is an IP address; else the peer's.
    public func clientAddress(peer: String, forwardedFor: String?) -> String {
        guard let forwardedFor, contains(peer),
            let last = forwardedFor.split(separator: ",").last?.trimmingCharacters(in: .whitespaces),
            Self.bytes(of: last) != nil
        else { return peer }
        return last
    }

    /// An IPv4 address's 4 bytes or an IPv6 address's 16, or nil.
    static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
