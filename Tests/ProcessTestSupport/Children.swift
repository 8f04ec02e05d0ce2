import Foundation
import Synchronization
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, for the process tests.
///
/// Foundation's `Process.run()` reads this process's descriptor table while
/// it spawns and crashed when another test opened and closed thousands of
/// sockets at that moment; `posix_spawn` reads nothing of the kind. Every
/// descriptor the tests create for a child is close-on-exec, so no child
/// inherits another's pipes.
/// Pipe creation (until its ends are close-on-exec) and spawning never
/// overlap, so no child inherits another child's pipe.
public let spawnGate = Mutex(())

/// Spawns every child on one thread that lives as long as the test process,
/// each under `setpriv --pdeathsig KILL`: the kernel kills the child when
/// that thread (so the test process) dies, so a test process that crashes or
/// is killed on a time-out leaves no hub behind (`ChildProcesses` kills them
/// on a test's normal end). The parent-death signal follows the spawning
/// *thread*: spawning from the cooperative pool, whose threads come and go,
/// would kill children early.
public final class SpawnerThread: Sendable {
    public static let shared = SpawnerThread()
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private let wake = DispatchSemaphore(value: 0)

    private init() {
        let thread = Thread { [self] in serve() }
        thread.name = "child spawner"
        thread.start()
    }

    private func serve() -> Never {
        while true {
            wake.wait()
            let job = jobs.withLock { $0.removeFirst() }
            job()
        }
    }

    /// Runs `body` on the spawner thread and returns its result.
    public func perform<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        jobs.withLock {
            $0.append {
                let value = body()
                result.withLock { $0 = value }
                done.signal()
            }
        }
        wake.signal()
        done.wait()
        return result.withLock { $0! }
    }
}

/// Names this test run's network namespaces carry (`make test` sets
/// TOUCHSYNC_TEST_RUN and removes whatever still carries it afterwards,
/// also after a crash; otherwise this process's id).
public let testRunTag = ProcessInfo.processInfo.environment["TOUCHSYNC_TEST_RUN"] ?? "p\(getpid())"

/// Where `setpriv` is (util-linux, on every Debian machine).
public let setprivPath = ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) }

public final class Child: Sendable {
    public enum TerminationReason: Equatable { case exit, uncaughtSignal }

    public let processIdentifier: Int32
    /// The raw wait status once reaped (nil: still running).
    private let reaped = Mutex<Int32?>(nil)

    private init(processIdentifier: Int32) { self.processIdentifier = processIdentifier }

    /// Spawns `executable` (a full path) with `arguments`; standard output
    /// and error go to the given descriptors (they are duplicated in the child).
    public static func spawn(_ executable: String, _ arguments: [String], output: Int32, errors: Int32) throws -> Child {
        // setpriv execs the command in place: the pid is the command's.
        let command = setprivPath.map { [$0, "--pdeathsig", "KILL", "--", executable] } ?? [executable]
        let (result, pid) = SpawnerThread.shared.perform { () -> (Int32, pid_t) in
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            // A child starts as from a shell: no signal blocked, SIGINT, SIGTERM
            // and SIGHUP at their defaults (a thread's mask is inherited, and the
            // test runner's threads may block signals: a child that never sees
            // its Ctrl-C).
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var none = sigset_t()
            sigemptyset(&none)
            posix_spawnattr_setsigmask(&attributes, &none)
            var defaults = sigset_t()
            sigemptyset(&defaults)
            for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&defaults, signal) }
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
            posix_spawn_file_actions_adddup2(&actions, output, 1)
            posix_spawn_file_actions_adddup2(&actions, errors, 2)
            let argv = (command + arguments).map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            var pid: pid_t = 0
            let result = spawnGate.withLock { _ in
                argv.withUnsafeBufferPointer { buffer in
                    posix_spawn(&pid, command[0], &actions, &attributes, UnsafeMutablePointer(mutating: buffer.baseAddress!), environ)
                }
            }
            return (result, pid)
        }
        guard result == 0 else { throw ChildError("posix_spawn \(executable): \(String(cString: strerror(result)))") }
        return Child(processIdentifier: pid)
    }

    /// Reaps the child if it has exited (never blocks).
    private func poll() -> Int32? {
        reaped.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            if waitpid(processIdentifier, &raw, WNOHANG) == processIdentifier { status = raw }
            return status
        }
    }

    public var isRunning: Bool { poll() == nil }

    /// Waits for the child to end, polling on a thread of its own (never a cooperative one).
    public func exited() async {
        try? await offThePool { while self.poll() == nil { usleep(10_000) } }
    }

    public func interrupt() { kill(processIdentifier, SIGINT) }

    private var status: Int32 { poll() ?? 0 }
    public var terminationReason: TerminationReason { status & 0x7F == 0 ? .exit : .uncaughtSignal }
    /// The exit code, or the signal that ended it.
    public var terminationStatus: Int32 { status & 0x7F == 0 ? (status >> 8) & 0xFF : status & 0x7F }
}

/// The read end of a pipe from a child (close-on-exec; closed when dropped).
public final class ChildOutput: Sendable {
    public let descriptor: Int32
    /// The write end, handed to the child, closed here once it is spawned.
    public let writeEnd: Int32
    /// A file the child's standard error goes to (for failure messages), removed with this object.
    public let errorLog = NSTemporaryDirectory() + "touchsync-child-errors-\(UUID().uuidString.prefix(12))"

    /// What the child wrote to standard error so far.
    public var errors: String { (try? String(contentsOfFile: errorLog, encoding: .utf8)) ?? "" }

    public init() throws {
        var ends: [Int32] = [0, 0]
        let created = spawnGate.withLock { _ in
            guard pipe(&ends) == 0 else { return false }
            // Close-on-exec before any spawn (no pipe2 in Swift's Glibc): only the child that dup2s an end gets it.
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            return true
        }
        guard created else { throw ChildError("pipe: \(String(cString: strerror(errno)))") }
        descriptor = ends[0]
        writeEnd = ends[1]
    }

    public func closeWriteEnd() { close(writeEnd) }

    deinit {
        close(descriptor)
        unlink(errorLog)
    }

    /// The next bytes the child writes (empty: it closed its end), read on a thread of its own.
    public func nextChunk() async -> Data {
        await withCheckedContinuation { (continuation: CheckedContinuation<Data, Never>) in
            Thread.detachNewThread { continuation.resume(returning: self.readOnce()) }
        }
    }

    /// Reads until what was read contains `marker` (or the child closes its
    /// end), then runs `action` at once on the reading thread: a signal sent
    /// from there is not held up by a busy test process's cooperative threads
    /// (seen: seconds late, after the child had finished what it was to be
    /// interrupted in). Returns what was read.
    public func readUntil(_ marker: String, then action: @escaping @Sendable () -> Void) async -> Data {
        await withCheckedContinuation { (continuation: CheckedContinuation<Data, Never>) in
            Thread.detachNewThread {
                var data = Data()
                while !String(decoding: data, as: UTF8.self).contains(marker) {
                    let chunk = self.readOnce()
                    if chunk.isEmpty { break }
                    data += chunk
                }
                action()
                continuation.resume(returning: data)
            }
        }
    }

    /// Everything the child writes until it closes its end.
    public func readToEnd() async -> Data {
        await withCheckedContinuation { (continuation: CheckedContinuation<Data, Never>) in
            Thread.detachNewThread {
                var data = Data()
                while true {
                    let chunk = self.readOnce()
                    if chunk.isEmpty { break }
                    data += chunk
                }
                continuation.resume(returning: data)
            }
        }
    }

    private func readOnce() -> Data {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count >= 0 { return Data(buffer[0..<count]) }
            if errno != EINTR { return Data() }
        }
    }
}

public struct ChildError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// /dev/null for writing, close-on-exec.
public func nullDevice() -> Int32 { open("/dev/null", O_WRONLY | O_CLOEXEC) }
