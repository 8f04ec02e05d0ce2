import Foundation

/// Another process's CPU time, resident memory and threads, read from /proc
/// (the same machine only), and which process listens on a TCP port.
public struct ProcessStats: Sendable, Equatable {
    public var cpuSeconds: Double
    /// The part of `cpuSeconds` spent in the kernel.
    public var systemSeconds: Double = 0
    public var residentBytes: Int
    public var threads: Int

    /// Reads /proc/PID/stat and /proc/PID/status; nil when the process is gone or not readable.
    public static func read(pid: Int32) -> ProcessStats? {
        guard let stat = ProcStat.read("/proc/\(pid)/stat"), let cpuSeconds = stat.cpuSeconds, let systemSeconds = stat.systemSeconds,
            let threads = stat.threads,
            let status = readWhole("/proc/\(pid)/status")
        else { return nil }
        var resident = 0
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            resident = (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }
        return ProcessStats(cpuSeconds: cpuSeconds, systemSeconds: systemSeconds, residentBytes: resident, threads: threads)
    }

    /// The process listening on TCP `port` (IPv4 or IPv6), found through the
    /// socket's inode in /proc/net/tcp* and the processes' descriptors; nil
    /// when none is visible (another machine, another user's process).
    public static func listener(onPort port: Int) -> Int32? {
        var inodes = Set<String>()
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = readWhole(table) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let columns = line.split(separator: " ")
                // local_address is HEXIP:HEXPORT, st 0A is LISTEN, inode the 10th column.
                guard columns.count > 9, columns[3] == "0A", let local = columns[1].split(separator: ":").last,
                    Int(local, radix: 16) == port
                else { continue }
                inodes.insert(String(columns[9]))
            }
        }
        guard !inodes.isEmpty, let processes = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        for process in processes {
            guard let pid = Int32(process), let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { continue }
            for descriptor in descriptors {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(descriptor)"),
                    target.hasPrefix("socket:[")
                else { continue }
                if inodes.contains(String(target.dropFirst(8).dropLast())) { return pid }
            }
        }
        return nil
    }

    /// A /proc file to its end. Its size reads as 0, and Foundation's
    /// `String(contentsOfFile:)` then stops after the first page: a busy
    /// machine's /proc/net/tcp (hundreds of sockets) lost the listener.
    static func readWhole(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let data: Data?
        do { data = try handle.readToEnd() } catch { return nil }
        return String(decoding: data ?? Data(), as: UTF8.self)  // nil: an empty file
    }
}
