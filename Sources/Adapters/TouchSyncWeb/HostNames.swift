import Foundation

/// The names the gateway answers to in a request's `Host` (against DNS
/// rebinding: a site whose name an attacker points at 127.0.0.1 would
/// otherwise make visitors' browsers read and draw on a local gateway as
/// "their own origin"). Always: IP addresses (a rebinding needs a name),
/// `localhost` and `*.localhost`, the `--listen` name and this machine's
/// name; and the names the operator lists (`--allow-host`, `*` for any).
struct HostNames: Sendable {
    private let names: Set<String>
    private let anyName: Bool

    init(listening: String, allowed: [String]) {
        var names = Set(allowed.map { Self.normalized($0) })
        names.insert(Self.normalized(listening))
        var buffer = [CChar](repeating: 0, count: 256)
        if gethostname(&buffer, buffer.count) == 0 {
            let machine = Self.normalized(String(decoding: buffer.prefix { $0 != 0 }.map(UInt8.init(bitPattern:)), as: UTF8.self))
            names.insert(machine)
            if let short = machine.split(separator: ".").first { names.insert(String(short)) }
        }
        anyName = allowed.contains("*")
        self.names = names
    }

    /// Whether a request with `Host: host` (a name or address, with or without a port) is answered.
    func allows(_ host: String) -> Bool {
        if anyName { return true }
        let name = Self.name(of: host)
        if name.isEmpty || Self.isAddress(name) { return true }
        return name == "localhost" || name.hasSuffix(".localhost") || names.contains(name)
    }

    /// The name of a Host value: lower case, without port, brackets or trailing dot.
    static func name(of host: String) -> String {
        var text = host.trimmingCharacters(in: .whitespaces).lowercased()
        if text.hasPrefix("[") {
            return String(text.dropFirst().prefix { $0 != "]" })
        }
        if let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon { text = String(text[..<colon]) }
        return normalized(text)
    }

    private static func normalized(_ name: String) -> String {
        var text = name.lowercased()
        while text.hasSuffix(".") { text.removeLast() }
        return text
    }

    /// An IPv4 or IPv6 address (not a name).
    static func isAddress(_ name: String) -> Bool { TrustedProxies.bytes(of: name) != nil }
}
