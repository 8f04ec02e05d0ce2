import Foundation

/// CPU seconds (user + system) of a process's threads, added up by thread
/// name (several ZeroMQ I/O threads share theirs), from /proc/PID/task: the
/// same machine only. What a load run reports of the hub's threads (issue
/// 42: where the hub's time goes, thread by thread).
public struct ThreadCPU: Sendable, Equatable {
    public var secondsByName: [String: Double]

    public init(secondsByName: [String: Double] = [:]) { self.secondsByName = secondsByName }

    /// The threads of process `pid` (nil: this process), only those named
    /// in `names` when given; nil when /proc cannot be read.
    public static func read(pid: Int32? = nil, names: Set<String>? = nil) -> ThreadCPU? {
        let folder = "/proc/\(pid.map(String.init) ?? "self")/task"
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var totals: [String: Double] = [:]
        for task in tasks {
            // "(comm)" is the thread's name; it may hold spaces and parentheses: read up to the last ")".
            guard let stat = ProcessStats.readWhole("\(folder)/\(task)/stat"), let open = stat.firstIndex(of: "("),
                let close = stat.lastIndex(of: ")")
            else { continue }
            let name = String(stat[stat.index(after: open)..<close])
            if let names, !names.contains(name) { continue }
            // Fields after "(comm)": state is the 3rd field, utime the 14th, stime the 15th.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            totals[name, default: 0] += (user + system) / ticks
        }
        return ThreadCPU(secondsByName: totals)
    }

    /// The CPU spent since `earlier` (threads started since count from zero;
    /// those that ended in between are not counted).
    public func since(_ earlier: ThreadCPU) -> ThreadCPU {
        var spent: [String: Double] = [:]
        for (name, seconds) in secondsByName { spent[name] = max(seconds - (earlier.secondsByName[name] ?? 0), 0) }
        return ThreadCPU(secondsByName: spent)
    }

    public var totalSeconds: Double { secondsByName.values.reduce(0, +) }

    /// The threads busiest first (ties by name).
    public var busiestFirst: [(name: String, seconds: Double)] {
        secondsByName.map { ($0.key, $0.value) }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }
    }

    /// The threads of a hub embedded in this process (ZeroMQ's I/O threads
    /// are left out: the generator's sockets share them there).
    public static let embeddedHubThreads: Set<String> = ["touchsync-hub", "touchsync-jrnl", "touchsync-snap", "touchsync-zap", "touchsync-history"]
}
