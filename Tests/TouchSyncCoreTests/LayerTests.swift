import Foundation
import Testing

/// The cores are pure (docs/architecture.md, "Layers"): Package.swift refuses
/// a core that depends on anything but cores; this reads their sources for
/// what a dependency check cannot see: a clock or the wall time read, a
/// file, socket, thread or sleep.
@Suite("Layers")
struct LayerTests {
    /// What a core must not call, and why it is there when it is (none are).
    static let forbidden: [(pattern: String, what: String)] = [
        ("ContinuousClock.now", "reads the monotonic clock"), ("ContinuousClock()", "makes a clock"),
        ("SuspendingClock", "reads a clock"), ("Date()", "reads the wall clock"), (".now()", "reads a clock"),
        ("DispatchTime", "reads a clock"), ("clock_gettime", "reads a clock"), ("gettimeofday", "reads the wall clock"),
        ("FileManager", "touches files"), ("FileHandle", "touches files"), ("fopen(", "touches files"),
        ("Thread(", "starts a thread"), ("Task.sleep", "sleeps"), ("usleep(", "sleeps"), ("socket(", "opens a socket"),
        ("ProcessInfo", "reads the process's environment"),
    ]

    @Test func coresReadNoClockAndDoNoIO() throws {
        let cores = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/Cores")
        let files = try #require(FileManager.default.enumerator(at: cores, includingPropertiesForKeys: nil)).compactMap { $0 as? URL }
            .filter { $0.pathExtension == "swift" && !$0.path.contains("/Generated/") }
        #expect(files.count > 50, "the cores' sources were found (\(files.count) files)")
        var found: [String] = []
        for file in files {
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            for (number, line) in lines.enumerated() {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                for (pattern, what) in Self.forbidden where code.contains(pattern) {
                    found.append("\(file.lastPathComponent):\(number + 1) \(what): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }
}
