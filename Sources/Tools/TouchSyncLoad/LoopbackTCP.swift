#if canImport(Glibc)
import Glibc
#endif

/// TCP sockets on 127.0.0.1 for the benchmarks (ports the kernel picks).
enum LoopbackTCP {
    /// Binds `descriptor` to 127.0.0.1 on a port the kernel picks, listening
    /// with `backlog` when given; the port, or nil when a call failed (errno says why).
    static func bind(_ descriptor: Int32, listenBacklog backlog: Int32? = nil) -> UInt16? {
        var address = address(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                Glibc.bind(descriptor, pointer, length) == 0 && (backlog.map { listen(descriptor, $0) == 0 } ?? true)
                    && getsockname(descriptor, pointer, &length) == 0
            }
        }
        return bound ? UInt16(bigEndian: address.sin_port) : nil
    }

    /// Connects `descriptor` to 127.0.0.1:`port`; whether it did (errno says why not).
    static func connect(_ descriptor: Int32, port: UInt16) -> Bool {
        var address = address(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    private static func address(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return address
    }
}
