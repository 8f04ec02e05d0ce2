import Foundation
import Synchronization
import TestSupport
import TouchSyncAccess
import TouchSyncWire
import ZeroMQ
#if canImport(Glibc)
import Glibc
#endif

/// The built `touchsync` binary, started as a child of the test.
public enum TouchSyncProcess {
    /// `.build/<triple>/debug/touchsync`, next to this test bundle.
    public static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("touchsync")
    }

    /// Free loopback ports for children to listen on (see `freeLoopbackPorts`).
    public static func freePorts(_ count: Int) throws -> [Int] { freeLoopbackPorts(count) }

    /// Starts the binary; a watchdog kills it after `limit` seconds, so a
    /// hung child fails the test instead of hanging it (reads of its output
    /// and waits for its exit then return).
    public static func run(_ arguments: [String], limit: Double = 60, namespace: String? = nil, fileLimit: Int? = nil) throws -> (Child, ChildOutput) {
        let output = try ChildOutput()
        // Standard error to a file of the output's: a child that fails at start-up says why in the test's failure.
        let null = open(output.errorLog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(null) }
        let child: Child
        if let fileLimit {
            // prlimit execs the binary in place with RLIMIT_NOFILE set (as `ulimit -n` would).
            child = try Child.spawn("/usr/bin/prlimit", ["--nofile=\(fileLimit)", "--", binary.path] + arguments, output: output.writeEnd, errors: null)
        } else if let namespace {
            // `ip netns exec` execs the binary in place: the pid is still the command's.
            child = try Child.spawn(
                "/usr/bin/env", ["ip", "netns", "exec", namespace, binary.path] + arguments, output: output.writeEnd, errors: null)
        } else {
            child = try Child.spawn(binary.path, arguments, output: output.writeEnd, errors: null)
        }
        output.closeWriteEnd()
        Thread.detachNewThread {
            let deadline = Date().addingTimeInterval(limit)
            while Date() < deadline {
                if !child.isRunning { return }  // exited (and reaped: its pid is not ours to signal any more)
                Thread.sleep(forTimeInterval: 0.1)
            }
            if child.isRunning { kill(child.processIdentifier, SIGKILL) }
        }
        return (child, output)
    }
}

/// The processes one test started, so that all of them end with it.
public final class ChildProcesses {
    public init() {}

    private var started: [Child] = []
    /// Kept open as long as the test runs: a child whose output nobody reads
    /// must not die of SIGPIPE (the pipe buffers what it writes).
    private var outputs: [ChildOutput] = []

    public func run(_ arguments: [String], limit: Double = 60, namespace: String? = nil, fileLimit: Int? = nil) throws -> (Child, ChildOutput) {
        let (process, output) = try TouchSyncProcess.run(arguments, limit: limit, namespace: namespace, fileLimit: fileLimit)
        started.append(process)
        outputs.append(output)
        return (process, output)
    }

    /// Starts a hub and waits until it is ready: it has printed its start-up
    /// lines, which it does after binding every socket ("listening"), and
    /// "Ctrl-C stops it.", which comes once SIGINT and SIGTERM reach its
    /// handlers; returns what it printed so far. Fails with that text if it
    /// exits first.
    /// `limit`: the watchdog's seconds. A hub lives as long as its test, and
    /// in a full run on two cores tests take 80 s where they take 20 alone:
    /// with the 60 s other children get, the full-disk test's hub was killed
    /// under it (a zombie when the next agent came, looking stalled). The
    /// test's own time limit and `killAll` still end it.
    public func startHub(_ arguments: [String], fileLimit: Int? = nil, namespace: String? = nil, limit: Double = 240) async throws -> (Child, ChildOutput, String) {
        let (hub, output) = try run(arguments, limit: limit, namespace: namespace, fileLimit: fileLimit)
        var text = ""
        // Blocks until the hub writes or exits (the watchdog bounds a hang).
        while !text.contains("Ctrl-C stops it.") {
            let chunk = await output.nextChunk()
            if chunk.isEmpty { throw TestFailure("the hub exited before it was ready: \(text) \(output.errors)") }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard text.contains("TouchSync hub listening") else { throw TestFailure("the hub did not say it listens: \(text)") }
        return (hub, output, text)
    }

    /// A hub without a journal on loopback `ports` (ingest, publish, snapshot), ready; its three endpoints.
    public func startPlainHub(ports: [Int]) async throws -> [String] {
        let (ports, _, _, _) = try await startHub(ports: Array(ports.prefix(3))) { ports in
            ["hub", "--no-journal"] + zip(["--ingest", "--publish", "--snapshot"], ports).flatMap { [$0, "tcp://127.0.0.1:\($1)"] }
        }
        return ports.map { "tcp://127.0.0.1:\($0)" }
    }

    /// A hub whose command line `arguments` builds from loopback `ports`,
    /// ready; the ports it listens on. Ports picked in advance can still be
    /// taken by another process before the hub binds them (busy runs saw it;
    /// one cause, a probing socket inherited by a child, is closed now):
    /// then it starts again on as many fresh ones.
    public func startHub(ports: [Int], _ arguments: ([Int]) -> [String]) async throws -> (ports: [Int], hub: Child, output: ChildOutput, text: String) {
        var ports = ports
        for attempt in 1...3 {
            do {
                let (hub, output, text) = try await startHub(arguments(ports))
                return (ports, hub, output, text)
            } catch let failure as TestFailure where failure.description.contains("Address already in use") && attempt < 3 {
                ports = try TouchSyncProcess.freePorts(ports.count)
            }
        }
        throw TestFailure("unreachable: the last attempt throws")
    }

    public func killAll() {
        for process in started where process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// SIGKILLs `victim` once `ready` holds, while `witness` still runs; true
/// when the witness was running at the kill. Polled and killed on a thread
/// of its own: in a full run the cooperative pool was busy for seconds, a
/// 4 s load ended between two of its polls, and the kill came after it.
public func killMidRun(_ victim: Child, whileRunning witness: Child, within limit: Duration = .seconds(20), when ready: @escaping @Sendable () -> Bool) async -> Bool {
    (try? await offThePool {
        let deadline = ContinuousClock.now + limit
        while witness.isRunning && !ready() && ContinuousClock.now < deadline { usleep(10_000) }
        let running = witness.isRunning
        kill(victim.processIdentifier, SIGKILL)
        return running
    }) ?? false
}

/// Each thread of process `pid` as /proc shows it now: name, state (R
/// running, S sleeping, D in the disk), CPU ticks, the kernel function it
/// waits in and its system call: tells a busy loop from a thread blocked,
/// and where, for a failure's message.
public func threadStates(of pid: Int32) -> String {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return "(no /proc/\(pid)/task)" }
    func read(_ path: String) -> String {
        (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
    }
    return tasks.sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }.map { task in
        let folder = "/proc/\(pid)/task/\(task)"
        let stat = read(folder + "/stat")
        // After the name's closing parenthesis: state, then (13th and 14th fields on) utime and stime.
        let fields = stat.split(separator: ")").last.map { $0.split(separator: " ") } ?? []
        let state = fields.first.map(String.init) ?? "?"
        let ticks = fields.count > 12 ? "\(fields[11])+\(fields[12]) ticks" : "?"
        let syscall = read(folder + "/syscall").split(separator: " ").prefix(2).joined(separator: " ")
        return "\(task) \(read(folder + "/comm")) \(state) \(ticks) wchan=\(read(folder + "/wchan")) syscall=\(syscall)"
    }.joined(separator: "\n")
}

/// The bytes of every file below `path`.
public func directoryBytes(_ path: String) -> Int {
    guard let files = FileManager.default.enumerator(atPath: path) else { return 0 }
    var total = 0
    for case let file as String in files {
        total += (try? FileManager.default.attributesOfItem(atPath: path + "/" + file)[.size] as? Int) ?? 0
    }
    return total
}

/// Asks a snapshot endpoint for a board; the first reply, or nil within 5 s
/// (waited for on a thread of its own, not the cooperative pool's).
public func snapshotReply(endpoint: String, board: String, curve: CurveClientKeys? = nil) async throws -> Touchsync_V1_SnapshotReply? {
    try await offThePool { try blockingSnapshotReply(endpoint: endpoint, board: board, curve: curve) }
}

private func blockingSnapshotReply(endpoint: String, board: String, curve: CurveClientKeys?) throws -> Touchsync_V1_SnapshotReply? {
    let context = try ZMQContext()
    let socket = try ZMQSocket(context, type: .dealer)
    defer { socket.close() }
    try socket.setLinger(milliseconds: 0)
    if let curve {
        try socket.setCurvePublicKey(curve.client.publicKey)
        try socket.setCurveSecretKey(curve.client.secretKey)
        try socket.setCurveServerKey(curve.serverPublicKey)
    }
    try socket.connect(endpoint)
    var request = Touchsync_V1_SnapshotRequest()
    request.board = board
    request.requestID = 1
    try socket.send(WireCodec.encode(request))
    guard let parts = try socket.receiveBytes(timeoutMilliseconds: 5000) else { return nil }
    return try WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: parts[0])
}

/// The board's snapshot reply, asked again every 100 ms until `done` holds
/// for it or `limit` has passed (then the last one).
public func snapshotReply(
    endpoint: String, board: String, within limit: Duration, until done: (Touchsync_V1_SnapshotReply?) -> Bool
) async throws -> Touchsync_V1_SnapshotReply? {
    let deadline = ContinuousClock.now + limit
    var reply = try await snapshotReply(endpoint: endpoint, board: board)
    while !done(reply), ContinuousClock.now < deadline {
        try await Task.sleep(for: .milliseconds(100))
        reply = try await snapshotReply(endpoint: endpoint, board: board)
    }
    return reply
}

/// What a command printed and how it ended.
public struct Outcome: Sendable {
    public var status: Int32
    public var output: String
    public var errors: String

    public init(status: Int32, output: String, errors: String) {
        self.status = status
        self.output = output
        self.errors = errors
    }
}

/// Runs the built `touchsync` to its end (killed after `limit` seconds), in
/// `folder`. The waiting happens on threads of their own (see `exited()`).
public func touchsync(_ arguments: [String], in folder: String? = nil, limit: Double = 60) async throws -> Outcome {
    if let folder { return try await runToEnd("/usr/bin/env", ["-C", folder, TouchSyncProcess.binary.path] + arguments, limit: limit) }
    return try await runToEnd(TouchSyncProcess.binary.path, arguments, limit: limit)
}

/// `touchsync` run to its end inside network namespace `namespace` (a test host).
public func touchsync(_ arguments: [String], inNamespace namespace: String, limit: Double = 60) async throws -> Outcome {
    try await runToEnd("/usr/bin/env", ["ip", "netns", "exec", namespace, TouchSyncProcess.binary.path] + arguments, limit: limit)
}

/// Runs `executable` to its end (killed after `limit` seconds), reading both its outputs.
public func runToEnd(_ executable: String, _ arguments: [String], limit: Double = 60) async throws -> Outcome {
    let output = try ChildOutput()
    let errors = try ChildOutput()
    let child = try Child.spawn(executable, arguments, output: output.writeEnd, errors: errors.writeEnd)
    output.closeWriteEnd()
    errors.closeWriteEnd()
    let watchdog = Task {
        try await Task.sleep(for: .seconds(limit))
        kill(child.processIdentifier, SIGKILL)
    }
    // Both pipes are read while it runs, so neither fills up and blocks it.
    async let out = output.readToEnd()
    async let err = errors.readToEnd()
    let (outData, errData) = await (out, err)
    await child.exited()
    watchdog.cancel()
    return Outcome(
        status: child.terminationStatus, output: String(decoding: outData, as: UTF8.self),
        errors: String(decoding: errData, as: UTF8.self))
}



/// The last digest a `touchsync spectate` printed ("… digest 0123456789abcdef …").
public func spectatedDigest(_ text: String) -> String? {
    text.split(separator: "\n").reversed().lazy.compactMap { line -> String? in
        guard let range = line.range(of: "digest ") else { return nil }
        let digest = line[range.upperBound...].prefix { $0 != " " }
        return digest.count == 16 ? String(digest) : nil
    }.first
}
