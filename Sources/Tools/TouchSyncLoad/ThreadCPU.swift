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
        var totals: [String: Double] = [:]
        for task in tasks {
            guard let stat = ProcStat.read("\(folder)/\(task)/stat"), names?.contains(stat.name) ?? true, let seconds = stat.cpuSeconds
            else { continue }
            totals[stat.name, default: 0] += seconds
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

    /// The threads as a report says them, each with its CPU per sample of
    /// `samples` (threads under a clock tick, 10 ms, are left out of the
    /// words, not of the JSON), then the whole.
    public func summary(perSampleOf samples: Int, over window: String) -> String {
        func number(_ value: Double) -> String { String(format: "%.2f", value) }
        let count = Double(max(samples, 1))
        let each = busiestFirst.filter { $0.seconds > 0 }.map { "\($0.name) \(number($0.seconds)) s (\(number(1e6 * $0.seconds / count)) µs a sample)" }
        return "\(each.joined(separator: ", ")); all \(number(totalSeconds)) s, \(number(1e6 * totalSeconds / count)) µs a sample (\(window))"
    }

    /// The threads of a hub embedded in this process (ZeroMQ's I/O threads
    /// are left out: the generator's sockets share them there).
    public static let embeddedHubThreads: Set<String> = ["touchsync-hub", "touchsync-jrnl", "touchsync-snap", "touchsync-zap", "touchsync-history"]
}

/// One /proc stat file of a process or thread: its name (between the first
/// "(" and the last ")": a name may hold spaces and parentheses) and the
/// fields after it (`fields[0]` is the state).
struct ProcStat {
    let name: String
    let fields: [Substring]

    init?(_ text: String) {
        guard let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")"), open < close else { return nil }
        name = String(text[text.index(after: open)..<close])
        fields = text[text.index(after: close)...].split(separator: " ")
    }

    static func read(_ path: String) -> ProcStat? { ProcessStats.readWhole(path).flatMap(ProcStat.init) }

    /// User plus system time (utime and stime, the 14th and 15th fields of the file).
    var cpuSeconds: Double? {
        guard let user = seconds(at: 11), let system = systemSeconds else { return nil }
        return user + system
    }

    /// System time alone: the kernel's work for the process (its syscalls;
    /// on loopback also the receiving side's TCP work its writes run).
    var systemSeconds: Double? { seconds(at: 12) }

    /// A field of clock ticks, in seconds.
    private func seconds(at index: Int) -> Double? {
        guard fields.count > index, let ticks = Double(fields[index]) else { return nil }
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Threads of the process (the 20th field).
    var threads: Int? { fields.count > 17 ? Int(fields[17]) : nil }
}

/// The /proc/self/task folders of this process's threads whose name passes
/// `matches`; nil when /proc cannot be read.
func selfTasks(named matches: (String) -> Bool) -> [String]? {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return nil }
    return tasks.map { "/proc/self/task/\($0)" }.filter { task in ProcStat.read(task + "/stat").map { matches($0.name) } ?? false }
}
