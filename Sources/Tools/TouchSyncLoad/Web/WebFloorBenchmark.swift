import Foundation
import Synchronization
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// The browser path's physical limit, as the bare libzmq forwarder is the
/// hub's (issue 37): the fewest system calls and bytes a gateway could make
/// for the traffic `touchsync load --web` offers, measured on this machine.
///
/// One thread of this process plays the gateway with nothing but epoll and
/// sockets: it reads each tab's WebSocket messages (one masked binary frame a
/// pointer event, `upBytesPerSample` bytes of payload), unmasks them into
/// its board's pending bytes, and every `boardPeriod` writes each board's
/// pending bytes as one frame (`downBytesPerSample` a sample), the same
/// bytes to each tab of the board: one write per tab per period, no acks of
/// their own, no decoding, no hub. Another thread plays the tabs (each at
/// its own phase of the period, reading what it is sent). What the first
/// thread spends per sample is the floor of the gateway's CPU per sample for
/// that traffic on this kernel: on loopback a write's kernel time includes
/// the receiving socket's TCP work, as it does for the gateway.
public struct WebFloorBenchmark: Sendable {
    public var tabs = 300
    public var tabsPerBoard = 10
    public var hz = 60.0
    /// Payload of a tab's message (one sample): packed2 measured 11.0 bytes a sample from tab to gateway.
    public var upBytesPerSample = 11
    /// Payload to each tab per sample of its board: packed2 measured 7.3-7.7 with framing.
    public var downBytesPerSample = 6
    /// How often each board's pending samples are written to its tabs (the gateway writes one per hub batch,
    /// about one per `--hub-flush-ms`).
    public var boardPeriod: Duration = .milliseconds(8)
    public var duration: Duration = .seconds(10)
    /// Time before the measured window (connections settle, buffers grow).
    public var warmUp: Duration = .seconds(1)

    public init() {}

    public var boards: Int { (tabs + tabsPerBoard - 1) / tabsPerBoard }

    public struct Result: Sendable {
        public var samples: Int
        public var seconds: Double
        /// The gateway thread's CPU in the window, user and kernel (from /proc, 10 ms ticks).
        public var userSeconds: Double
        public var systemSeconds: Double
        public var reads: Int
        public var writes: Int
        public var wakeups: Int
        /// Writes that could not take a whole frame (a tab fell behind); 0 in a sound run.
        public var shortWrites: Int

        public var microsecondsPerSample: Double { (userSeconds + systemSeconds) * 1e6 / Double(max(samples, 1)) }
        public var systemMicrosecondsPerSample: Double { systemSeconds * 1e6 / Double(max(samples, 1)) }
        public var samplesPerSecond: Double { Double(samples) / max(seconds, 1e-9) }
        public var readsPerSample: Double { Double(reads) / Double(max(samples, 1)) }
        public var writesPerSample: Double { Double(writes) / Double(max(samples, 1)) }
        public var wakeupsPerSecond: Double { Double(wakeups) / max(seconds, 1e-9) }
    }

    public enum Failure: Error, CustomStringConvertible {
        case system(String, Int32)
        case noThreadStats

        public var description: String {
            switch self {
            case .system(let call, let code): "web floor: \(call) failed: \(String(cString: strerror(code)))"
            case .noThreadStats: "web floor: /proc/self/task cannot be read (the CPU figures need Linux's /proc)"
            }
        }
    }

    /// One run: connects the tabs, draws for `warmUp + duration`, and reports the window after the warm-up.
    public func run() async throws -> Result {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw Failure.system("socket", errno) }
        defer { close(listener) }
        guard let port = LoopbackTCP.bind(listener, listenBacklog: 1024) else { throw Failure.system("bind/listen", errno) }
        var tabSockets: [Int32] = []
        var gatewaySockets: [Int32] = []
        defer { for socket in tabSockets + gatewaySockets { close(socket) } }
        // Connect and accept one by one, so tab i is gateway socket i. Tab i draws on board i mod boards, as in
        // `touchsync load --web`, so a board's tabs are spread over the period (tab i's phase is i / tabs of it).
        for _ in 0..<tabs {
            let tab = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard tab >= 0 else { throw Failure.system("socket", errno) }
            tabSockets.append(tab)
            guard LoopbackTCP.connect(tab, port: port) else { throw Failure.system("connect", errno) }
            let accepted = accept(listener, nil, nil)
            guard accepted >= 0 else { throw Failure.system("accept", errno) }
            gatewaySockets.append(accepted)
        }
        for socket in tabSockets + gatewaySockets { try Self.prepare(socket) }

        // Each side is built on its own thread, which owns it (its epoll set, its buffers); the measuring
        // side reaches it only through its link.
        let (boards, downBytes, period, hz, upBytes) = (boards, downBytesPerSample, boardPeriod, hz, upBytesPerSample)
        let gatewayLink = try FloorThreadLink()
        let tabsLink = try FloorThreadLink()
        let gatewayThread = SocketThread(name: "touchsync-floor")
        let tabsThread = SocketThread(name: "touchsync-ftabs")
        try await gatewayThread.start { [gatewaySockets] in
            let gateway = try FloorGateway(sockets: gatewaySockets, boards: boards, downBytesPerSample: downBytes, period: period, link: gatewayLink)
            return ((), gateway.run)
        }
        do {
            try await tabsThread.start { [tabSockets] in
                let tabsSide = try FloorTabs(sockets: tabSockets, hz: hz, upBytes: upBytes, link: tabsLink)
                return ((), tabsSide.run)
            }
        } catch {
            gatewayLink.stop()
            await gatewayThread.finished()
            throw error
        }
        func stopBoth() async {
            tabsLink.stop()
            gatewayLink.stop()
            await gatewayThread.finished()
            await tabsThread.finished()
        }

        try? await Task.sleep(for: warmUp)
        guard let tid = gatewayThread.systemThreadID, let before = Self.threadStat(tid) else {
            await stopBoth()
            throw Failure.noThreadStats
        }
        let countsBefore = gatewayLink.counts.withLock { $0 }
        let started = ContinuousClock.now
        try? await Task.sleep(for: duration)
        let seconds = (ContinuousClock.now - started).seconds
        let after = Self.threadStat(tid)
        let countsAfter = gatewayLink.counts.withLock { $0 }
        await stopBoth()
        guard let after else { throw Failure.noThreadStats }
        return Result(
            samples: countsAfter.samples - countsBefore.samples, seconds: seconds,
            userSeconds: after.user - before.user, systemSeconds: after.system - before.system,
            reads: countsAfter.reads - countsBefore.reads, writes: countsAfter.writes - countsBefore.writes,
            wakeups: countsAfter.wakeups - countsBefore.wakeups, shortWrites: countsAfter.shortWrites)
    }

    /// User and system seconds of one thread of this process.
    static func threadStat(_ tid: Int32) -> (user: Double, system: Double)? {
        guard let stat = ProcStat.read("/proc/self/task/\(tid)/stat"), let total = stat.cpuSeconds, let system = stat.systemSeconds
        else { return nil }
        return (total - system, system)
    }

    /// Non-blocking, and no Nagle delay (NIO's and the browsers' setting for WebSockets).
    static func prepare(_ descriptor: Int32) throws {
        var on: Int32 = 1
        guard setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size)) == 0,
            fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) == 0
        else { throw Failure.system("setsockopt/fcntl", errno) }
    }
}

/// What the floor's gateway thread counted (read under the lock by the measuring thread).
struct FloorCounts: Sendable {
    var samples = 0
    var reads = 0
    var writes = 0
    var wakeups = 0
    var shortWrites = 0
}

/// What the measuring side shares with one of the floor's threads: a stop
/// signal (a pipe the thread watches) and what the thread counted.
final class FloorThreadLink: Sendable {
    let readEnd: Int32
    let writeEnd: Int32
    let counts = Mutex(FloorCounts())

    init() throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw WebFloorBenchmark.Failure.system("pipe", errno) }
        (readEnd, writeEnd) = (ends[0], ends[1])
    }

    func stop() {
        var one: UInt8 = 1
        _ = write(writeEnd, &one, 1)
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }
}

/// A floor thread's epoll set: its sockets, reported by index, and its link's stop pipe.
final class FloorPoller {
    private let readySet: ZMQReadySet
    private let stopToken = UInt64.max

    init(sockets: [Int32], link: FloorThreadLink) throws {
        readySet = try ZMQReadySet()
        for (index, socket) in sockets.enumerated() { try readySet.add(socket, token: UInt64(index)) }
        try readySet.add(link.readEnd, token: stopToken)
    }

    /// Waits until `deadline` (CLOCK_MONOTONIC nanoseconds, rounded up to a
    /// millisecond) or a socket is readable, and calls `ready` with each
    /// readable socket's index; false once the thread is told to stop.
    func wait(until deadline: Int64, _ ready: (Int) -> Void) -> Bool {
        let milliseconds = max(0, (deadline - Self.nanosecondsNow() + 999_999) / 1_000_000)
        var stopping = false
        try? readySet.wait(timeoutMilliseconds: Int(milliseconds)) { token in
            if token == stopToken { stopping = true } else { ready(Int(token)) }
        }
        return !stopping
    }

    static func nanosecondsNow() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}

/// The floor's gateway: reads, one write per tab per board period. Built and run on its thread.
final class FloorGateway {
    private let sockets: [Int32]
    private let boards: Int
    private let downBytesPerSample: Int
    private let periodNanoseconds: Int64
    private let link: FloorThreadLink
    private let poller: FloorPoller

    init(sockets: [Int32], boards: Int, downBytesPerSample: Int, period: Duration, link: FloorThreadLink) throws {
        self.sockets = sockets
        self.boards = boards
        self.downBytesPerSample = downBytesPerSample
        periodNanoseconds = Int64(period.components.seconds) * 1_000_000_000 + period.components.attoseconds / 1_000_000_000
        self.link = link
        poller = try FloorPoller(sockets: sockets, link: link)
    }

    func run() {
        // Each board's samples since its last write (framed when written).
        var pending = [[UInt8]](repeating: [], count: boards)
        for board in 0..<boards { pending[board].reserveCapacity(4096) }
        var leftovers = [[UInt8]](repeating: [], count: sockets.count)
        var scratch = [UInt8](repeating: 0, count: 65536)
        var local = FloorCounts()
        var nextFlush = FloorPoller.nanosecondsNow() + periodNanoseconds
        while true {
            local.wakeups += 1
            let running = poller.wait(until: nextFlush) { tab in
                let count = scratch.withUnsafeMutableBytes { read(sockets[tab], $0.baseAddress, $0.count) }
                guard count > 0 else { return }
                local.reads += 1
                local.samples += consume(scratch[0..<count], leftover: &leftovers[tab], into: &pending[tab % boards])
            }
            guard running else { return }
            let now = FloorPoller.nanosecondsNow()
            guard now >= nextFlush else { continue }
            for board in 0..<boards where !pending[board].isEmpty {
                let frame = Self.frame(pending[board])
                pending[board].removeAll(keepingCapacity: true)
                for tab in stride(from: board, to: sockets.count, by: boards) {
                    let written = frame.withUnsafeBytes { write(sockets[tab], $0.baseAddress, $0.count) }
                    local.writes += 1
                    if written != frame.count { local.shortWrites += 1 }
                }
            }
            nextFlush += periodNanoseconds
            if nextFlush < now { nextFlush = now + periodNanoseconds }
            let snapshot = local
            link.counts.withLock { $0 = snapshot }
        }
    }

    /// Unmasks a read's whole frames into the board's pending bytes (the first `downBytesPerSample` of each
    /// payload); returns the messages read. A frame cut by the read waits in `leftover`.
    private func consume(_ bytes: ArraySlice<UInt8>, leftover: inout [UInt8], into pending: inout [UInt8]) -> Int {
        var input = bytes
        if !leftover.isEmpty {
            leftover.append(contentsOf: bytes)
            input = leftover[...]
        }
        var messages = 0
        var index = input.startIndex
        // A client frame: 0x82, 0x80 | length (under 126 here), a 4-byte mask, the masked payload.
        while input.endIndex - index >= 2 {
            let length = Int(input[index + 1] & 0x7F)
            guard input.endIndex - index >= 6 + length else { break }
            let mask = index + 2
            let payload = index + 6
            for offset in 0..<min(downBytesPerSample, length) { pending.append(input[payload + offset] ^ input[mask + offset % 4]) }
            index = payload + length
            messages += 1
        }
        if index == input.endIndex {
            leftover.removeAll(keepingCapacity: true)
        } else {
            leftover = Array(input[index...])  // rare: a read that cut a frame
        }
        return messages
    }

    /// A server frame (binary, unmasked) around `payload`.
    static func frame(_ payload: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = []
        frame.reserveCapacity(payload.count + 4)
        frame.append(0x82)
        if payload.count < 126 {
            frame.append(UInt8(payload.count))
        } else {
            frame.append(126)
            frame.append(UInt8(payload.count >> 8))
            frame.append(UInt8(payload.count & 0xFF))
        }
        frame.append(contentsOf: payload)
        return frame
    }
}

/// The floor's tabs: each sends a masked frame at its own phase of the period and reads what it is sent.
/// Built and run on its thread.
final class FloorTabs {
    private let sockets: [Int32]
    private let periodNanoseconds: Int64
    private let message: [UInt8]
    private let poller: FloorPoller

    init(sockets: [Int32], hz: Double, upBytes: Int, link: FloorThreadLink) throws {
        self.sockets = sockets
        periodNanoseconds = Int64(1e9 / hz)
        var message: [UInt8] = [0x82, 0x80 | UInt8(upBytes), 0x12, 0x34, 0x56, 0x78]
        for index in 0..<upBytes { message.append(UInt8(truncatingIfNeeded: index &* 37 &+ 5)) }
        self.message = message
        poller = try FloorPoller(sockets: sockets, link: link)
    }

    func run() {
        let start = FloorPoller.nanosecondsNow()
        var due = (0..<sockets.count).map { start + periodNanoseconds * Int64($0) / Int64(max(sockets.count, 1)) }
        var scratch = [UInt8](repeating: 0, count: 65536)
        while true {
            let now = FloorPoller.nanosecondsNow()
            var earliest = Int64.max
            for tab in sockets.indices {
                if due[tab] <= now {
                    _ = message.withUnsafeBytes { write(sockets[tab], $0.baseAddress, $0.count) }
                    due[tab] += periodNanoseconds
                    if due[tab] < now { due[tab] = now + periodNanoseconds }
                }
                earliest = min(earliest, due[tab])
            }
            let running = poller.wait(until: earliest) { tab in
                _ = scratch.withUnsafeMutableBytes { read(sockets[tab], $0.baseAddress, $0.count) }
            }
            guard running else { return }
        }
    }
}
