import Foundation
import Testing
import TouchSyncLoad

/// CPU sets as `taskset -c` writes them, and pinning a real process to one.
@Suite("CPU sets")
struct CPUSetTests {
    @Test func listsAndRangesParseAsTasksetWritesThem() {
        #expect(CPUSet("0")?.cpus == [0])
        #expect(CPUSet("0-3,6")?.cpus == [0, 1, 2, 3, 6])
        #expect(CPUSet("3,1,1-2")?.cpus == [1, 2, 3])
        for bad in ["", "a", "3-1", "-1", "1,", "0-", "1-2-3", "5000"] { #expect(CPUSet(bad) == nil, "\(bad)") }
    }

    /// A child process pinned to CPU 0: the kernel reports exactly that set for each of its threads.
    @Test func aProcessIsPinnedThreadByThread() throws {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["5"]
        try child.run()
        defer { child.terminate() }
        let pinned = try #require(CPUSet("0")).pin(pid: child.processIdentifier)
        #expect(pinned >= 1)
        let status = try String(contentsOfFile: "/proc/\(child.processIdentifier)/status", encoding: .utf8)
        let allowed = status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }
        #expect(allowed?.split(separator: "\t").last == "0", "\(allowed ?? "")")
        #expect(throws: CPUSetError.self) { try CPUSet("0")!.pin(pid: 999_999_999) }
    }
}
