import Foundation
import Testing
import TouchSyncLoad

#if canImport(Glibc)
    import Glibc
#endif

/// `load --web` finds the gateway's process by its port and reads it from /proc.
@Suite("Process figures from /proc")
struct ProcessStatsTests {
    /// A TCP socket listening on 127.0.0.1, on a port the kernel picks.
    static func listener() throws -> Int32 {
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0, listen(descriptor, 16) == 0 else { close(descriptor); throw POSIXError(.EADDRINUSE) }
        return descriptor
    }

    static func port(of descriptor: Int32) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    /// On a busy machine /proc/net/tcp runs to many pages (listeners come
    /// first); the listener is found wherever it sits (reading only the first
    /// page missed it in CI, where parallel tests held many ports).
    @Test func theListenerIsFoundAmongManySockets() throws {
        var descriptors = [Int32]()
        defer { descriptors.forEach { _ = close($0) } }
        for _ in 0..<60 { descriptors.append(try Self.listener()) }
        let listener = try Self.listener()
        descriptors.append(listener)
        for _ in 0..<60 { descriptors.append(try Self.listener()) }
        let handle = try #require(FileHandle(forReadingAtPath: "/proc/net/tcp"))
        let table = try #require(try handle.readToEnd())
        try handle.close()
        #expect(table.count > 4096 * 2, "the table spans several pages")

        #expect(ProcessStats.listener(onPort: Int(Self.port(of: listener))) == getpid())
        let stats = try #require(ProcessStats.read(pid: getpid()))
        #expect(stats.threads >= 1 && stats.residentBytes > 0)
        #expect(ProcessStats.listener(onPort: 1) == nil, "nothing listens on port 1")
    }
}
