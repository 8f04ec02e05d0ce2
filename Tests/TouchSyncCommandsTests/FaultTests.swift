import Foundation
import Testing

/// Root can mount a read-only file system for a test; others cannot.
let isRoot = getuid() == 0

/// Faults a user meets with real processes (issue 11): the data folder.
@Suite("Faults: the data folder", .timeLimit(.minutes(2)))
struct DataFolderFaultTests {
    /// Two hubs on one data folder: the second refuses to start, naming the
    /// folder and the first one's pid; the first keeps serving.
    @Test func aSecondHubOnTheSameDataFolderRefusesToStart() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let folder = try temporaryFolder("twohubs")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let ports = try ProcessTests.freePorts(8)
        func endpoints(_ base: Int) -> [String] {
            ["--ingest", "tcp://127.0.0.1:\(ports[base])", "--publish", "tcp://127.0.0.1:\(ports[base + 1])",
             "--snapshot", "tcp://127.0.0.1:\(ports[base + 2])", "--history", "tcp://127.0.0.1:\(ports[base + 3])"]
        }
        let (first, _, _) = try await children.startHub(["hub", "--data", folder] + endpoints(0), port: ports[0])
        let second = try touchsync(["hub", "--data", folder] + endpoints(4))
        #expect(second.status == 1)
        #expect(second.errors.contains("\(folder) is in use by another hub (pid \(first.processIdentifier))"), "\(second.errors)")
        #expect(first.isRunning)
        let draw = try touchsync(["draw", "--board", "b", "--fast", "--hub", "tcp://127.0.0.1:\(ports[0])"])
        #expect(draw.status == 0, "the first hub stopped serving: \(draw.errors)")
        // Once the first is gone (even killed), the folder is free again.
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let (third, _, text) = try await children.startHub(["hub", "--data", folder] + endpoints(4), port: ports[4])
        #expect(text.contains("1 board(s) recovered"))
        third.interrupt()
        third.waitUntilExit()
    }

    /// A folder that takes no writes (a read-only mount) is refused at start,
    /// not discovered at the first frame.
    @Test(.enabled(if: isRoot, "mounting a read-only file system needs root"))
    func aReadOnlyDataFolderIsRefusedAtStart() throws {
        let mountPoint = try temporaryFolder("readonly")
        defer { try? FileManager.default.removeItem(atPath: mountPoint) }
        let mount = try touchsyncShell(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", mountPoint])
        try #require(mount == 0, "could not mount a read-only tmpfs")
        defer { _ = try? touchsyncShell(["umount", mountPoint]) }
        let ports = try ProcessTests.freePorts(4)
        let hub = try touchsync([
            "hub", "--data", mountPoint + "/data", "--ingest", "tcp://127.0.0.1:\(ports[0])",
            "--publish", "tcp://127.0.0.1:\(ports[1])", "--snapshot", "tcp://127.0.0.1:\(ports[2])",
            "--history", "tcp://127.0.0.1:\(ports[3])",
        ], limit: 20)
        #expect(hub.status == 1)
        #expect(hub.errors.contains("cannot open the journal in \(mountPoint)/data") && hub.errors.contains("Read-only file system"), "\(hub.errors)")
        #expect(!hub.output.contains("Ctrl-C stops it."))
    }
}

/// Runs a system command (mount, ip, tc) and returns its exit status.
@discardableResult
func touchsyncShell(_ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    _ = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return process.terminationStatus
}
