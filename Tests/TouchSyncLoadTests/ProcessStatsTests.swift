import Foundation
import Synchronization
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

/// The hub's CPU thread by thread (issue 42): threads added up by name from
/// /proc/PID/task, and what they spent between two readings.
@Suite("Thread CPU from /proc")
struct ThreadCPUTests {
    /// A thread of this process named `ts-busy-test` that spins until told
    /// to stop: its CPU shows under its name, between two readings, and only
    /// the names asked for are read.
    @Test func aBusyThreadsCPUShowsUnderItsName() async throws {
        let stop = Atomic<Bool>(false)
        let named = Atomic<Bool>(false)
        let thread = Thread {
            // Named through /proc itself: Foundation's `Thread.name`, set before
            // `start()` has recorded the pthread, can leave the OS thread unnamed.
            let comm = open("/proc/thread-self/comm", O_WRONLY)
            if comm >= 0 {
                _ = "ts-busy-test".withCString { write(comm, $0, strlen($0)) }
                close(comm)
            }
            named.store(true, ordering: .releasing)
            var spin: UInt64 = 0
            while !stop.load(ordering: .relaxed) { spin &+= 1 }
            _ = spin
        }
        thread.start()
        while !named.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(1)) }
        let before = try #require(ThreadCPU.read(names: ["ts-busy-test"]))
        #expect(before.secondsByName.keys.sorted() == ["ts-busy-test"], "\(before.secondsByName)")
        // Some scheduler ticks of spinning (CPU time counts in ticks of 10 ms).
        var spent = 0.0
        for _ in 0..<200 where spent < 0.05 {
            try await Task.sleep(for: .milliseconds(10))
            spent = ThreadCPU.read(names: ["ts-busy-test"])?.since(before).secondsByName["ts-busy-test"] ?? 0
        }
        let all = try #require(ThreadCPU.read())  // while it still runs
        stop.store(true, ordering: .relaxed)
        #expect(spent >= 0.05, "the spinning thread's CPU did not show: \(spent) s")
        #expect(all.secondsByName["ts-busy-test"] != nil && all.secondsByName.count > 1, "\(all.secondsByName.keys.sorted())")
        #expect(all.totalSeconds >= all.secondsByName["ts-busy-test"]!)
        #expect(ThreadCPU.read(pid: Int32.max) == nil, "a process that does not exist")
        // A thread that started after the first reading counts from zero; a name's seconds never go below zero.
        let later = ThreadCPU(secondsByName: ["a": 1.5, "b": 0.25]).since(ThreadCPU(secondsByName: ["a": 1.0, "c": 3.0]))
        #expect(later == ThreadCPU(secondsByName: ["a": 0.5, "b": 0.25]))
        #expect(later.busiestFirst.map(\.name) == ["a", "b"])
    }
}
