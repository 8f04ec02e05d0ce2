import Foundation

/// A set of CPUs as `taskset -c` writes it ("0-3,6"), and pinning a process
/// (every thread it has now; threads it starts later inherit their
/// creator's) to it: so that one command can put the load generator, the
/// gateway and the hub on cores of their own on a many-core machine.
public struct CPUSet: Sendable, Equatable, CustomStringConvertible {
    public let cpus: [Int]

    /// Parses "0-3,6"; nil for anything else (empty, reversed ranges, negative numbers).
    public init?(_ text: String) {
        var cpus: [Int] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(bounds.count), let low = Int(bounds[0]), low >= 0, low < 1024 else { return nil }
            let high = bounds.count == 2 ? Int(bounds[1]) : low
            guard let high, high >= low, high < 1024 else { return nil }
            cpus.append(contentsOf: low...high)
        }
        guard !cpus.isEmpty else { return nil }
        self.cpus = Array(Set(cpus)).sorted()
    }

    public var description: String { cpus.map(String.init).joined(separator: ",") }

    /// Pins every thread of process `pid` (0: this one) to these CPUs; the threads it could not pin, with why.
    @discardableResult
    public func pin(pid: Int32 = 0) throws -> Int {
        let process = pid == 0 ? getpid() : pid
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/task")).map { $0.compactMap { Int32($0) } } ?? [process]
        // glibc's cpu_set_t: 1,024 bits, CPU n at bit n.
        var mask = [UInt64](repeating: 0, count: 16)
        for cpu in cpus { mask[cpu / 64] |= 1 << UInt64(cpu % 64) }
        var pinned = 0
        var failure: Int32 = 0
        for task in tasks {
            let result = mask.withUnsafeBytes { linuxSchedSetAffinity(task, $0.count, $0.baseAddress!) }
            if result == 0 { pinned += 1 } else { failure = errno }
        }
        guard pinned > 0 else {
            throw CPUSetError(message: "cannot pin process \(process) to CPUs \(self): \(String(cString: strerror(failure)))")
        }
        return pinned
    }
}

/// sched_setaffinity(2) (glibc declares it only under _GNU_SOURCE, which Swift's Glibc module leaves out).
@_silgen_name("sched_setaffinity")
private func linuxSchedSetAffinity(_ pid: pid_t, _ size: Int, _ mask: UnsafeRawPointer) -> Int32

public struct CPUSetError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
