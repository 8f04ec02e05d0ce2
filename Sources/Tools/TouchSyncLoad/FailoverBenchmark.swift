import Foundation
import Logging
import Synchronization
import TouchSyncWaiting
import TouchSyncClient
import TouchSyncCore
import TouchSyncStore
import ZeroMQ

/// The board store's failover time (issue 25): three hubs on one store, an
/// agent drawing without a pause on a board and given all three hubs; the
/// hub holding the board's lease is killed with SIGKILL, and the time from
/// the kill to the first acknowledgement of a message the dead hub had not
/// acknowledged is one failover. The killed hub is started again (under its
/// name; it does not take the board back) before the next kill.
///
/// Each failover is the lease running out (at most `leaseTimeout` after the
/// dead hub's last renewal), the next renewal of the successor adopting the
/// board (an eighth of the lease), and the agent finding the successor: its
/// silence time-out (`hubTimeout`) and the hubs' redirects.
public struct FailoverBenchmark: Sendable {
    public var address: StoreAddress
    /// The `touchsync` executable the hubs run.
    public var executable: String
    public var kills = 20
    public var leaseTimeout: Duration = .seconds(5)
    /// The agent's silence time-out (AgentConfiguration.hubTimeout).
    public var hubTimeout: Duration = .seconds(3)
    /// Input events per second, one finger.
    public var rate = 120
    /// How long a failover may take before the run gives up.
    public var giveUpAfter: Duration = .seconds(60)
    /// Boards drawn on, an agent each (spread over the three hubs): a kill's
    /// failover is that of the slowest of the boards the killed hub held.
    public var boards = 1

    public init(address: StoreAddress, executable: String) {
        self.address = address
        self.executable = executable
    }

    public struct Figures: Sendable {
        /// Kill to first acknowledgement on the new owner, per kill (the slowest board the killed hub held).
        public var failovers: [Duration]
        /// Kill to the first batch committed under the new lease epoch, as the store
        /// records it (the new holder's wall clock), per kill (the slowest board).
        public var storeFailovers: [Duration]
        /// Kill to the first batch a subscriber of the board (given all three
        /// hubs) applied from the new holder, per kill (the slowest board).
        public var subscriberFailovers: [Duration]
        /// Boards the killed hub held, per kill.
        public var boardsMoved: [Int]
        /// Messages posted and acknowledged at the end (all must be).
        public var posted: UInt64
        public var acknowledged: UInt64
        /// The lease's epoch at the end (1 + the number of moves).
        public var epoch: Int64
    }

    public func run(logger: Logger, progress: @escaping @Sendable (String) -> Void) async throws -> Figures {
        let directory = NSTemporaryDirectory() + "touchsync-failover-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { if ProcessInfo.processInfo.environment["TOUCHSYNC_KEEP_LOGS"] == nil { try? FileManager.default.removeItem(atPath: directory) } }
        let run = UUID().uuidString.prefix(6).lowercased()
        let names = ["a", "b", "c"].map { "failover-\(run)-\($0)" }
        let hubs = try names.map { name in try BenchHub(name: name, executable: executable, address: address, leaseTimeout: leaseTimeout, directory: directory) }
        defer { for hub in hubs { hub.kill() } }
        for hub in hubs { try await hub.start() }
        // Every hub knows the others live before the board is first claimed.
        try await Task.sleep(for: leaseTimeout / 4)

        let boardNames = (0..<max(1, boards)).map { boards == 1 ? "failover-\(run)" : "failover-\(run)-\($0)" }
        let context = try ZMQContext()
        var drawers: [(board: String, agent: TouchAgent, acknowledgements: ProgressTimes)] = []
        var tasks: [Task<Void, Never>] = []
        defer { for task in tasks { task.cancel() } }
        for board in boardNames {
            var configuration = AgentConfiguration(board: board, hubEndpoint: hubs.map(\.ingest).joined(separator: ","))
            configuration.clientName = "touchsync-bench-failover"
            configuration.hubTimeout = hubTimeout
            configuration.reconnectDelay = .milliseconds(50) ... .milliseconds(500)
            let agent = try TouchAgent(configuration: configuration, context: context, logger: logger)
            let acknowledgements = ProgressTimes()
            agent.start()
            tasks.append(Task {
                for await event in agent.events {
                    if case .acknowledged(let through) = event { acknowledgements.heard(through, at: .now) }
                }
            })
            drawers.append((board, agent, acknowledgements))
        }
        // A subscriber per board, given every hub (as `spectate --publish A,B,C --snapshot A,B,C`).
        var watchers: [(subscriber: BoardSubscriber, applied: ProgressTimes)] = []
        for board in boardNames {
            let applied = ProgressTimes()
            var settings = SubscriberConfiguration(
                board: board, publishEndpoint: hubs.map(\.publish).joined(separator: ","),
                snapshotEndpoint: hubs.map(\.snapshot).joined(separator: ","))
            settings.wireFormat = .v2
            settings.reportsEvents = false
            settings.onApplied = { batch in applied.heard(batch.sequence, at: .now) }
            settings.onSynced = { state in applied.heard(state.sequence, at: .now) }
            let subscriber = try BoardSubscriber(configuration: settings, context: context, logger: logger)
            subscriber.start()
            watchers.append((subscriber, applied))
        }
        let drawing = drawers.map { drawer in Task { await draw(drawer.agent) } }
        defer { for task in drawing { task.cancel() } }
        let admin = BoardStoreAdmin(address: address, logger: logger)
        for drawer in drawers { try await drawer.acknowledgements.waitBeyond(0, within: giveUpAfter) }
        for watcher in watchers { try await watcher.applied.waitBeyond(0, within: giveUpAfter) }

        var failovers: [Duration] = []
        var storeFailovers: [Duration] = []
        var subscriberFailovers: [Duration] = []
        var boardsMoved: [Int] = []
        for kill in 1...kills {
            guard let holder = try await admin.lease(of: boardNames[0])?.hub, let victim = hubs.first(where: { $0.name == holder }) else {
                throw BenchmarkFailure("no hub holds the first board's lease")
            }
            var held: [Int] = []
            for (index, board) in boardNames.enumerated() where try await admin.lease(of: board)?.hub == holder { held.append(index) }
            // The acknowledgements the victim sent may still be on their way: a board's
            // failover is over at one beyond what was acknowledged a moment after the kill.
            victim.kill()
            let killed = ContinuousClock.now
            let killedAt = Int64(Date().timeIntervalSince1970 * 1e6)
            try await Task.sleep(for: .milliseconds(20))
            let before = held.map { drawers[$0].acknowledgements.through }
            let seen = held.map { watchers[$0].applied.through }
            var slowest: Duration = .zero
            for (index, through) in zip(held, before) {
                let after = try await drawers[index].acknowledgements.waitBeyond(through, within: giveUpAfter)
                slowest = max(slowest, after - killed)
            }
            failovers.append(slowest)
            boardsMoved.append(held.count)
            // The subscribers: live again once they apply a batch beyond what they had at the kill.
            var slowestWatcher: Duration = .zero
            for (index, sequence) in zip(held, seen) {
                let after = try await watchers[index].applied.waitBeyond(sequence, within: giveUpAfter)
                slowestWatcher = max(slowestWatcher, after - killed)
            }
            subscriberFailovers.append(slowestWatcher)
            // The same from the store: the first commit under each board's new epoch.
            var slowestCommit: Duration = .zero
            for index in held {
                guard let lease = try await admin.lease(of: boardNames[index]),
                    let first = try await admin.firstBatchTime(of: boardNames[index], epoch: lease.epoch)
                else { throw BenchmarkFailure("\(boardNames[index]) has no batch under its new lease yet") }
                slowestCommit = max(slowestCommit, .microseconds(first - killedAt))
            }
            storeFailovers.append(slowestCommit)
            let newHolder = try await admin.lease(of: boardNames[0])?.hub ?? "?"
            progress(
                String(format: "kill %2d: %@ killed holding %d board(s), %@ committing the slowest after %.2f s, acknowledging it after %.2f s; subscribers live after %.2f s",
                    kill, holder, held.count, newHolder, slowestCommit.seconds, slowest.seconds, slowestWatcher.seconds))
            try await victim.start()
            // The restarted hub is live for the others before the next kill.
            try await Task.sleep(for: leaseTimeout / 4 + .milliseconds(500))
        }
        for task in drawing { task.cancel() }
        for task in drawing { _ = await task.result }
        var posted: UInt64 = 0
        var acknowledged: UInt64 = 0
        for drawer in drawers {
            let count = drawer.agent.postedCount
            try await drawer.acknowledgements.waitBeyond(count - 1, within: giveUpAfter)
            posted += count
            acknowledged += drawer.agent.acknowledged.through
        }
        var epochs: Int64 = 0
        for board in boardNames { epochs = max(epochs, try await admin.lease(of: board)?.epoch ?? 0) }
        for drawer in drawers { await drawer.agent.stop() }
        for watcher in watchers { await watcher.subscriber.stop() }
        return Figures(
            failovers: failovers, storeFailovers: storeFailovers, subscriberFailovers: subscriberFailovers, boardsMoved: boardsMoved, posted: posted, acknowledged: acknowledged, epoch: epochs)
    }

    /// One finger drawing strokes of a second each at `rate` events a second.
    private func draw(_ agent: TouchAgent) async {
        let start = ContinuousClock.now
        var event = 0
        var stroke: UInt64 = 0
        while !Task.isCancelled {
            let seconds = (ContinuousClock.now - start).seconds
            let phase = event % rate
            let point = TouchPoint(x: 100 + Double(phase) * 4, y: 100 + Double(stroke % 50) * 10, timestamp: seconds)
            let input = TouchInput(id: stroke + 1, coalesced: [point])
            if phase == 0 {
                try? agent.touchesBegan([input])
            } else if phase == rate - 1 {
                try? agent.touchesEnded([input])
                stroke += 1
            } else {
                try? agent.touchesMoved([input])
            }
            event += 1
            try? await Task.sleep(until: start + .seconds(Double(event) / Double(rate)), clock: .continuous)
        }
        let point = TouchPoint(x: 0, y: 0, timestamp: (ContinuousClock.now - start).seconds)
        try? agent.touchesEnded([TouchInput(id: stroke + 1, coalesced: [point])])
    }
}

public struct BenchmarkFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// When each acknowledgement (or a subscriber's applied sequence) came, and waits for one beyond a number.
private final class ProgressTimes: Sendable {
    /// Each cumulative acknowledgement that went further, with when it came (in order).
    private let heardAt = Mutex<[(through: UInt64, at: ContinuousClock.Instant)]>([])
    private let waiters = ConditionWaiters()

    var through: UInt64 { heardAt.withLock { $0.last?.through ?? 0 } }

    func heard(_ through: UInt64, at time: ContinuousClock.Instant) {
        heardAt.withLock { heard in
            if through > (heard.last?.through ?? 0) { heard.append((through, time)) }
        }
        waiters.signal()
    }

    /// When the acknowledgements first went beyond `beyond`.
    @discardableResult
    func waitBeyond(_ beyond: UInt64, within limit: Duration) async throws -> ContinuousClock.Instant {
        let time = await waiters.wait(timeout: limit) { [self] in
            self.heardAt.withLock { heard in
                // Ordered by `through`: the first beyond, by bisection (checked on every acknowledgement).
                var (low, high) = (0, heard.count)
                while low < high {
                    let middle = (low + high) / 2
                    if heard[middle].through > beyond { high = middle } else { low = middle + 1 }
                }
                return low < heard.count ? heard[low].at : nil
            }
        }
        guard let time else { throw BenchmarkFailure("nothing acknowledged beyond message \(beyond) within \(limit)") }
        return time
    }
}

/// A hub process on the store, on loopback ports of its own.
private final class BenchHub: Sendable {
    let name: String
    let ingest: String
    let publish: String
    let snapshot: String
    private let arguments: [String]
    private let executable: String
    private let log: String
    private let process = Mutex<Process?>(nil)

    init(name: String, executable: String, address: StoreAddress, leaseTimeout: Duration, directory: String) throws {
        self.name = name
        self.executable = executable
        let ports = try freeLoopbackPorts(4)
        let endpoints = ports.map { "tcp://127.0.0.1:\($0)" }
        ingest = endpoints[0]
        publish = endpoints[1]
        snapshot = endpoints[2]
        log = directory + "/\(name).log"
        arguments = [
            "hub", "--store", address.description, "--name", name, "--ingest", endpoints[0], "--publish", endpoints[1],
            "--snapshot", endpoints[2], "--history", endpoints[3], "--lease-timeout", "\(leaseTimeout.seconds)", "--journal-retry", "1",
        ] + (ProcessInfo.processInfo.environment["TOUCHSYNC_KEEP_LOGS"] == nil ? [] : ["--log-level", ProcessInfo.processInfo.environment["TOUCHSYNC_KEEP_LOGS"]!])
    }

    /// Starts the hub and returns once it says it serves.
    func start() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        if !FileManager.default.fileExists(atPath: log) { _ = FileManager.default.createFile(atPath: log, contents: nil) }
        let errors = FileHandle(forWritingAtPath: log)
        _ = try? errors?.seekToEnd()  // a restarted hub's log follows its first life's
        process.standardError = errors
        try process.run()
        self.process.withLock { $0 = process }
        let serving = await Task.detached {
            var text = ""
            while case let chunk = output.fileHandleForReading.availableData, !chunk.isEmpty {
                text += String(decoding: chunk, as: UTF8.self)
                if text.contains("Ctrl-C stops it.") { return true }
            }
            return false
        }.value
        guard serving else {
            let errors = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            throw BenchmarkFailure("hub \(name) did not start: \(errors.suffix(2000))")
        }
    }

    func kill() {
        guard let process = process.withLock({ $0.take() }), process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// Ports the kernel hands out now (closed again: a race, harmless for a benchmark).
private func freeLoopbackPorts(_ count: Int) throws -> [Int] {
    var sockets: [Int32] = []
    defer { for descriptor in sockets { close(descriptor) } }
    return try (0..<count).map { _ in
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw BenchmarkFailure("no socket for a port") }
        sockets.append(descriptor)
        guard let port = LoopbackTCP.bind(descriptor) else { throw BenchmarkFailure("no free port") }
        return Int(port)
    }
}
