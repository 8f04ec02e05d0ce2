import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A UDP address, socket or sender list that cannot be set up, in words
/// that name the option (the CLI shows it as is).
public struct UDPSetupError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// IPv4 senders a bridge takes datagrams from: `ADDRESS` or `ADDRESS/BITS`.
public struct SenderAllowList: Sendable {
    private let networks: [(address: UInt32, mask: UInt32)]

    public init(_ entries: [String]) throws(UDPSetupError) {
        networks = try entries.map { (entry) throws(UDPSetupError) -> (address: UInt32, mask: UInt32) in
            let parts = entry.split(separator: "/", maxSplits: 1)
            var address = in_addr()
            guard inet_pton(AF_INET, String(parts[0]), &address) == 1 else {
                throw UDPSetupError("--allow \(entry): an IPv4 address or ADDRESS/BITS, e.g. 192.168.1.0/24")
            }
            let bits = parts.count == 2 ? Int(parts[1]) : 32
            guard let bits, (0...32).contains(bits) else { throw UDPSetupError("--allow \(entry): BITS is 0 to 32") }
            let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << (32 - bits)
            return (UInt32(bigEndian: address.s_addr) & mask, mask)
        }
    }

    private init(networks: [(address: UInt32, mask: UInt32)]) { self.networks = networks }

    /// No list: every sender.
    public static let anyone = SenderAllowList(networks: [])

    /// Whether `sender` (`ADDRESS:PORT`) may send; everyone when the list is empty.
    public func allows(_ sender: String) -> Bool {
        guard !networks.isEmpty else { return true }
        var address = in_addr()
        guard let host = sender.split(separator: ":").first, inet_pton(AF_INET, String(host), &address) == 1 else { return false }
        let value = UInt32(bigEndian: address.s_addr)
        return networks.contains { value & $0.mask == $0.address }
    }
}

/// An IPv4 UDP address from `udp://ADDRESS:PORT`.
public struct UDPAddress: Sendable, CustomStringConvertible {
    public let host: String
    public let port: UInt16

    /// `option` names the command-line option in errors.
    public init(_ text: String, option: String) throws(UDPSetupError) {
        guard text.hasPrefix("udp://"), let colon = text.lastIndex(of: ":"), colon > text.index(text.startIndex, offsetBy: 6) else {
            throw UDPSetupError("\(option) \(text): expected udp://ADDRESS:PORT, e.g. udp://0.0.0.0:3333")
        }
        var host = String(text[text.index(text.startIndex, offsetBy: 6)..<colon])
        if host == "localhost" { host = "127.0.0.1" }
        var probe = in_addr()
        guard inet_pton(AF_INET, host, &probe) == 1 else { throw UDPSetupError("\(option) \(text): the address must be IPv4 (e.g. 0.0.0.0)") }
        guard let port = UInt16(text[text.index(after: colon)...]), port > 0 else {
            throw UDPSetupError("\(option) \(text): the port must be 1 to 65535")
        }
        self.host = host
        self.port = port
    }

    var sockaddr: sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    public var description: String { "udp://\(host):\(port)" }
}

/// A blocking UDP socket (datagrams up to 64 KiB). Only its descriptor is
/// shared: the kernel serialises concurrent calls on it.
public final class UDPSocket: Sendable {
    public let descriptor: Int32

    public init(binding address: UDPAddress?, receiveTimeout: Duration = .milliseconds(100)) throws(UDPSetupError) {
        descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw UDPSetupError("cannot make a UDP socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 0, tv_usec: Int(receiveTimeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer: Int32 = 1 << 20
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<Int32>.size))
        if let address {
            var socketAddress = address.sockaddr
            let bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw UDPSetupError("cannot listen on \(address): \(reason)")
            }
        }
    }

    deinit { close(descriptor) }

    /// The next datagram and its sender ("ADDRESS:PORT"), or nil after the
    /// receive time-out (`timeout` instead of the socket's, when given; at
    /// most a day, at least a millisecond) or after `stopReceiving()`.
    public func receive(into buffer: inout [UInt8], timeout: Duration? = nil) -> (count: Int, sender: String)? {
        if let timeout {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min(max(timeout, .milliseconds(1)), .seconds(86_400)) / .milliseconds(1))
            guard poll(&entry, 1, milliseconds) > 0 else { return nil }
            if entry.revents & Int16(POLLIN) == 0 { return nil }
        }
        var from = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let count = buffer.withUnsafeMutableBytes { bytes in
            withUnsafeMutablePointer(to: &from) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(descriptor, bytes.baseAddress, bytes.count, 0, $0, &length) }
            }
        }
        guard count > 0 || (count == 0 && length > 0 && from.sin_port != 0) else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        inet_ntop(AF_INET, &from.sin_addr, &text, socklen_t(INET_ADDRSTRLEN))
        let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (count, address + ":\(UInt16(bigEndian: from.sin_port))")
    }

    /// Ends every receive at once, now and later (`shutdown` of the reading side).
    public func stopReceiving() { shutdown(descriptor, Int32(SHUT_RD)) }

    /// Whether a datagram waits to be received (a receive can also come back
    /// empty-handed when interrupted, e.g. by SIGSTOP and SIGCONT).
    public var hasPending: Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0 && entry.revents & Int16(POLLIN) != 0
    }

    public func send(_ bytes: [UInt8], to address: UDPAddress) {
        var target = address.sockaddr
        _ = bytes.withUnsafeBytes { data in
            withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, data.baseAddress, data.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }
}
