import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Free loopback ports for servers the tests start (in this process or in a
/// child): below the kernel's ephemeral range (32768 up), so neither an
/// outgoing connection of another test nor a client reconnecting to a
/// stopped server (a TCP self-connect) can take one meanwhile. Each is
/// checked by binding it with a plain socket (closed at once, so the port is
/// free again on return; a ZeroMQ socket would release it later, on its I/O
/// thread) and close-on-exec (a child spawned by another test in that
/// moment would otherwise keep it bound for its whole life, and the hub
/// given the port later fails with "Address already in use": seen in CI),
/// and none is handed out twice in this test process: every test
/// target picks from this one registry (two registries once handed the same
/// port to a relay test and to a child hub).
public func freeLoopbackPorts(_ count: Int) -> [Int] {
    var ports: [Int] = []
    while ports.count < count {
        let port = UInt16.random(in: 20_000..<32_000)
        guard handedOutPorts.withLock({ $0.insert(port).inserted }), canBind(port: port) else { continue }
        ports.append(Int(port))
    }
    return ports
}

private let handedOutPorts = Mutex<Set<UInt16>>([])

private func canBind(port: UInt16) -> Bool {
    #if canImport(Glibc)
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    #else
    let descriptor = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    return withLoopbackAddress(port: port) { bind(descriptor, $0, $1) == 0 }
}

/// Runs `body` with 127.0.0.1:`port` as a socket address.
public func withLoopbackAddress<Result>(port: UInt16, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}
