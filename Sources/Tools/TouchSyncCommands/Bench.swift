import TouchSyncHubCore
import ArgumentParser
import Foundation
import TouchSyncLoad
import TouchSyncJournal
import TouchSyncStore

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmarks: the model and codecs (default), the hub against bare libzmq (--transport), the journal (--journal), the board store (--store URL), the browser path's floor (--web-floor).",
        discussion: "Build with -c release for meaningful figures (make bench does). Figures go to docs/performance.md.")

    @Option(parsing: .unconditional, help: "Input events (frames) in the workload.") var frames = 200_000
    @Option(parsing: .unconditional, help: "Simulated users.") var users = 4
    @Option(parsing: .unconditional, help: "Fingers per user.") var fingers = 5
    @Option(parsing: .unconditional, help: "Samples per input event (2: 240 Hz digitizer at 120 Hz events); also of the --hub-journal run.") var coalesced = 2
    @Flag(help: "Samples carry force (Pencil, 3D Touch).") var force = false
    @Option(parsing: .unconditional, help: "Repetitions per stage; the best is reported.") var repetitions = 5
    @Flag(help: ArgumentHelp("Run only the reduce stage (for perf or callgrind).", visibility: .hidden)) var reduceOnly = false
    @Flag(help: ArgumentHelp("After encoding, run only the replica's decode-and-apply stage (for perf).", visibility: .hidden))
    var applyOnly = false
    @Flag(help: ArgumentHelp("After reducing, run only the board digests (for perf).", visibility: .hidden))
    var digestOnly = false
    @Flag(help: "Instead: the hub against a bare libzmq forwarder over loopback TCP (throughput and latency, 1 and 10 subscribers).")
    var transport = false
    @Option(parsing: .unconditional, help: "With --transport: messages per agent in the throughput runs.") var messagesPerAgent = 2000
    @Option(parsing: .unconditional, help: "With --transport or --hub-journal: the hub's --ack-interval-ms.") var ackIntervalMs = 0
    @Flag(help: ArgumentHelp("Instead: the hub's core alone, turn by turn, 1 and 2 frames a turn, then the tabs' shape (for perf).", visibility: .hidden))
    var coreTurns = false
    @Flag(help: ArgumentHelp("With --transport: only the latency runs, one subscriber (for perf).", visibility: .hidden))
    var latencyOnly = false
    @Flag(help: "Instead: one hub journaling at saturation: the batches and samples per second it makes durable, per fsync policy (--fsync-policies).")
    var hubJournal = false
    @Option(parsing: .unconditional, help: "With --hub-journal: agents (producer connections), each drawing with 5 fingers.") var agents = 20
    @Option(parsing: .unconditional, help: "With --hub-journal: boards the agents draw on (agent i on board i mod N).") var boards = 20
    @Option(parsing: .unconditional, help: "With --hub-journal: the fsync policies to run, comma-separated (batch, 20ms, never; memory: no journal).")
    var fsyncPolicies = "batch"
    @Option(
        parsing: .unconditional,
        help: "With --hub-journal: the hub's board threads (hub --threads), comma-separated, each run in turn with each policy (1,2: one thread, then two).")
    var hubThreads = "1"
    @Flag(help: "Instead: the journal (write throughput per fsync policy, recovery, replay at full speed, late-join snapshot).")
    var journal = false
    @Option(parsing: .unconditional, help: "With --journal: samples on the large board.") var boardSamples = 1_000_000
    @OptionGroup(title: "The board store") var stored: BoardStoreOptions
    @Option(parsing: .unconditional, help: "With --store: boards written at once.") var storeBoards = 20
    @Option(parsing: .unconditional, help: "With --store: uncommitted batches the producer allows itself (as agents' windows bound a hub).")
    var storeWindow = 4096
    @Flag(help: "With --store: the failover time instead (three hub processes; the board's holder killed with SIGKILL --kills times).")
    var failover = false
    @Option(parsing: .unconditional, help: "With --failover: hubs killed, one after another.") var kills = 20
    @Option(parsing: .unconditional, help: "With --failover: the hubs' --lease-timeout in seconds.") var leaseTimeout = 5.0
    @Option(parsing: .unconditional, help: "With --failover: the agent's silence time-out in seconds (its hubTimeout).") var hubTimeout = 3.0
    @Option(parsing: .unconditional, help: "With --failover: boards drawn on, an agent each, spread over the hubs (a kill's figure is the slowest board the killed hub held).")
    var failoverBoards = 1
    @Flag(help: "Instead: fan-out: one board to 10, 100 and 300 subscribers, on the hub itself, through 1 relay, through 4 (the hub's CPU per batch).")
    var fanout = false
    @Flag(help: "Instead: the browser path's physical limit: a bare epoll WebSocket fan-out over loopback TCP (one read per tab message, one write per tab per board period), the gateway's CPU floor per sample.")
    var webFloor = false
    @Option(parsing: .unconditional, help: "With --web-floor: tabs, ten a board, one message a tab at 60 Hz (as `touchsync load --web`).") var tabs = 300
    @Option(parsing: .unconditional, help: "With --web-floor: how often a board's samples are written to its tabs, in ms, comma-separated (8: one write a hub batch at the gateway's --hub-flush-ms 8; 16.7: the display's rate).")
    var boardPeriodsMs = "8,16.7,33.3"
    @Option(parsing: .unconditional, help: "With --web-floor: seconds measured per period.") var floorSeconds = 10.0
    @Flag(help: ArgumentHelp("Moved: the browser benchmark is its own tool, touchsync-browser-bench.", visibility: .hidden))
    var browser = false
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (1...1000).contains(storeBoards) else { throw ValidationError("--store-boards must be 1 to 1000") }
        guard (1...1_000_000).contains(storeWindow) else { throw ValidationError("--store-window must be 1 to 1000000") }
        guard !failover || stored.store != nil else { throw ValidationError("--failover needs --store URL") }
        guard (1...1000).contains(kills) else { throw ValidationError("--kills must be 1 to 1000") }
        guard (1...200).contains(failoverBoards) else { throw ValidationError("--failover-boards must be 1 to 200") }
        guard (1...600).contains(leaseTimeout) else { throw ValidationError("--lease-timeout must be 1 to 600 seconds") }
        guard (0.2...60).contains(hubTimeout) else { throw ValidationError("--hub-timeout must be 0.2 to 60 seconds") }
        guard !browser else {
            throw ValidationError(
                "the browser benchmark drives Chromium, which the touchsync CLI does not carry: run `swift run -c release touchsync-browser-bench` (--help for its options)")
        }
        guard frames >= 100 else { throw ValidationError("--frames must be at least 100") }
        guard (1...64).contains(coalesced) else { throw ValidationError("--coalesced must be 1 to 64") }
        guard repetitions >= 1 else { throw ValidationError("--repetitions must be at least 1") }
        guard (0...1000).contains(ackIntervalMs) else { throw ValidationError("--ack-interval-ms must be 0 to 1000") }
        guard (1...1000).contains(boards) else { throw ValidationError("--boards must be 1 to 1000") }
        _ = try threadCounts()
        guard (1...1000).contains(agents) else { throw ValidationError("--agents must be 1 to 1000") }
        _ = try policies()
        guard (10...20_000).contains(tabs) else { throw ValidationError("--tabs must be 10 to 20000") }
        _ = try boardPeriods()
        guard (1...600).contains(floorSeconds) else { throw ValidationError("--floor-seconds must be 1 to 600") }
    }

    /// `--board-periods-ms`, parsed.
    func boardPeriods() throws -> [Duration] {
        try boardPeriodsMs.split(separator: ",").map { text in
            guard let milliseconds = Double(text), (1...1000).contains(milliseconds) else {
                throw ValidationError("--board-periods-ms: '\(text)' is not 1 to 1000 milliseconds")
            }
            return .microseconds(Int64(milliseconds * 1000))
        }
    }

    /// `--fsync-policies`, parsed.
    func threadCounts() throws -> [Int] {
        try hubThreads.split(separator: ",").map { text in
            guard let count = Int(text), (1...64).contains(count) else { throw ValidationError("--hub-threads: '\(text)' is not 1 to 64") }
            return count
        }
    }

    /// `--fsync-policies`, parsed; nil is "memory" (the hub without a journal).
    func policies() throws -> [FsyncPolicy?] {
        try fsyncPolicies.split(separator: ",").map { text in
            if text == "memory" { return nil }
            guard let policy = FsyncPolicy(argument: String(text)) else {
                throw ValidationError("--fsync-policies: '\(text)' is not an fsync policy (batch, never, an interval such as 20ms, or memory for no journal)")
            }
            return policy
        }
    }

    func run() async throws {
        if coreTurns {
            warnIfDebugBuild()
            for frames in [1, 2] {
                var benchmark = CoreTurnBenchmark()
                benchmark.framesPerTurn = frames
                let figures = try benchmark.run()
                emit(
                    String(
                        format: "core turns, %d frame(s) a turn (%d turns, %.1f samples a frame): decode %.0f ns, handle %.0f ns, end of turn %.0f ns a turn; %.2f actions a turn",
                        frames, figures.turns, Double(figures.samples) / Double(figures.frames), figures.decodeNanoseconds,
                        figures.handleNanoseconds, figures.turnEndNanoseconds, figures.actionsPerTurn))
            }
            let tabs = try CoreTurnBenchmark.tabsShape().run()
            emit(
                String(
                    format: "core turns, the tabs' shape (300 agents of one finger on 30 boards, v2, journaled; %d frames a turn, %.1f samples a frame): "
                        + "decode %.0f ns, handle %.0f ns, end of turn %.0f ns a turn: %.0f ns a frame; %d batches, %d acks, %d refused",
                    tabs.frames / tabs.turns, Double(tabs.samples) / Double(tabs.frames), tabs.decodeNanoseconds, tabs.handleNanoseconds,
                    tabs.turnEndNanoseconds, tabs.nanosecondsPerFrame, tabs.batches, tabs.acks, tabs.refusals))
            return
        }
        if transport {
            try await runTransport()
            return
        }
        if webFloor {
            try await runWebFloor()
            return
        }
        if journal {
            try await runJournal()
            return
        }
        if hubJournal {
            try await runHubJournal()
            return
        }
        if let address = try stored.address() {
            if failover {
                try await runFailover(address)
                return
            }
            try await runStore(address)
            return
        }
        if fanout {
            warnIfDebugBuild()
            emit("subscribers  relays  batches  hub CPU/batch  relay CPU/batch (each)  converged")
            try await FanoutBenchmark().run(logger: logging.logger("touchsync.bench")) { row in
                emit(
                    String(
                        format: "%11d  %6d  %7llu  %10.1f µs  %19.1f µs  %@", row.subscribers, row.relays, row.batches,
                        row.hubMicrosecondsPerBatch, row.relayMicrosecondsPerBatch, row.converged ? "yes" : "NO"))
            }
            return
        }
        var benchmark = CodecBenchmark()
        benchmark.frames = frames
        benchmark.users = users
        benchmark.fingers = fingers
        benchmark.coalesced = coalesced
        benchmark.withForce = force
        benchmark.repetitions = repetitions
        benchmark.reduceOnly = reduceOnly
        benchmark.applyOnly = applyOnly
        benchmark.digestOnly = digestOnly
        warnIfDebugBuild()
        let report = try benchmark.run { print($0) }
        if reduceOnly || applyOnly || digestOnly { return }
        print("")
        // The label column is as wide as the longest stage name: no label is cut.
        let width = max(42, report.figures.map(\.stage.count).max() ?? 0)
        print("stage".padding(toLength: width, withPad: " ", startingAt: 0), "   samples/s   (best of \(repetitions))")
        for figure in report.figures {
            print(figure.stage.padding(toLength: width, withPad: " ", startingAt: 0), String(format: "%12.0f", figure.samplesPerSecond))
        }
        print("")
        print("bytes per sample (predicted tails included in the stream, counted against real samples only):")
        print("  agent to hub, one message per input event".padding(toLength: 74, withPad: " ", startingAt: 0), String(format: "%6.2f", report.agentBytesPerSample))
        print("  agent to hub, one message per input event (v2)".padding(toLength: 74, withPad: " ", startingAt: 0), String(format: "%6.2f", report.agentBytesPerSampleV2))
        for (events, bytes) in report.bytesPerSampleByTick {
            let label = "  hub to subscribers, tick of \(events) event(s) per user (\(String(format: "%.1f", Double(events) * 1000 / 120)) ms at 120 Hz)"
            print(label.padding(toLength: 74, withPad: " ", startingAt: 0), String(format: "%6.2f", bytes))
        }
        for (events, bytes) in report.bytesPerSampleByTickV2 {
            let label = "  the same in wire format v2, tick of \(events) event(s) per user"
            print(label.padding(toLength: 74, withPad: " ", startingAt: 0), String(format: "%6.2f", bytes))
        }
        for (events, bytes) in report.bytesPerSampleByTickV2WithoutPredictions {
            let label = "  v2 without predictions, tick of \(events) event(s) per user"
            print(label.padding(toLength: 74, withPad: " ", startingAt: 0), String(format: "%6.2f", bytes))
        }
        print("  snapshot (stored strokes, no per-tick framing)".padding(toLength: 74, withPad: " ", startingAt: 0), String(format: "%6.2f", report.snapshotBytesPerSample))
        print("reference: Yjs (Yrs via pycrdt) merges ~870,000 samples/s in-process at 21 bytes/sample on this machine class")
    }

    /// The hub and a bare forwarder, one after the other in this process, same input.
    func runTransport() async throws {
        warnIfDebugBuild()
        var benchmark = TransportBenchmark()
        benchmark.messagesPerAgent = messagesPerAgent
        benchmark.ackInterval = .milliseconds(ackIntervalMs)
        let logger = logging.logger("touchsync.bench")
        emit("transport: \(benchmark.agents) agents x \(benchmark.fingers) fingers, \(benchmark.coalesced) samples per event, loopback TCP")
        emit("")
        emit("throughput at saturation (\(benchmark.messagesPerAgent) messages per agent)")
        for subscribers in latencyOnly ? [] : [1, 10] {
            let bare = try await benchmark.throughput(.forwarder, subscribers: subscribers, logger: logger)
            let hub = try await benchmark.throughput(.hub, subscribers: subscribers, logger: logger)
            emit(String(
                format: "  %2d subscriber(s): forwarder %10.0f samples/s   hub %10.0f samples/s   hub/forwarder %.2f",
                subscribers, bare.samplesPerSecond, hub.samplesPerSecond, hub.samplesPerSecond / bare.samplesPerSecond))
            emit("                    CPU per sample of the target's thread: forwarder \(nanoseconds(bare.cpuNanosecondsPerSample))   hub \(nanoseconds(hub.cpuNanosecondsPerSample))")
            emit("                    and of its ZeroMQ I/O thread:          forwarder \(nanoseconds(bare.ioNanosecondsPerSample))   hub \(nanoseconds(hub.ioNanosecondsPerSample))")
        }
        emit("")
        emit("latency at \(Int(benchmark.latencyRate)) samples/s (µs, sample creation to decoded in a subscriber; the hub's subscribers also apply; the producer sleeps between frames)")
        for subscribers in latencyOnly ? [1] : [1, 10] {
            let bare = try await benchmark.latency(.forwarder, subscribers: subscribers, logger: logger)
            let hub = try await benchmark.latency(.hub, subscribers: subscribers, logger: logger)
            for result in [bare, hub] {
                let s = result.summary
                emit("  \(String(format: "%2d", subscribers)) subscriber(s) \(result.target.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0)) p50 \(s.p50)  p90 \(s.p90)  p99 \(s.p99)  p99.9 \(s.p999)  max \(s.max)  (\(s.count) samples)")
            }
            emit(String(format: "     hub p99 / forwarder p99: %.2f", Double(hub.summary.p99) / Double(max(bare.summary.p99, 1))))
            emit("     CPU per sample of the target's thread: forwarder \(nanoseconds(bare.cpuNanosecondsPerSample))   hub \(nanoseconds(hub.cpuNanosecondsPerSample))")
            emit("     and of its ZeroMQ I/O thread:          forwarder \(nanoseconds(bare.ioNanosecondsPerSample))   hub \(nanoseconds(hub.ioNanosecondsPerSample))")
            func wakeups(_ result: TransportBenchmark.Latency) -> String {
                guard let perSecond = result.wakeupsPerSecond, let frames = result.framesPerWakeup else { return "n/a" }
                return String(format: "%.0f/s, %.2f frames each", perSecond, frames)
            }
            emit("     wake-ups of the target's thread while producing: forwarder \(wakeups(bare))   hub \(wakeups(hub))")
        }
    }

    /// The browser path's floor, one board period after another.
    func runWebFloor() async throws {
        warnIfDebugBuild()
        var benchmark = WebFloorBenchmark()
        benchmark.tabs = tabs
        benchmark.duration = .milliseconds(Int64(floorSeconds * 1000))
        emit(
            "web floor: \(benchmark.tabs) tabs on \(benchmark.boards) boards, one \(benchmark.upBytesPerSample)-byte message a tab at \(Int(benchmark.hz)) Hz; "
                + "each board's samples (\(benchmark.downBytesPerSample) bytes each) written to its tabs once a period; loopback TCP, epoll, one thread")
        for period in try boardPeriods() {
            benchmark.boardPeriod = period
            let result = try await benchmark.run()
            emit(
                String(
                    format: "  period %5.1f ms: %6.0f samples/s, %5.2f µs of CPU a sample (%5.2f in the kernel); %.2f reads and %.2f writes a sample, %.0f wake-ups/s%@",
                    Double(period.components.attoseconds) / 1e15 + Double(period.components.seconds) * 1000, result.samplesPerSecond,
                    result.microsecondsPerSample, result.systemMicrosecondsPerSample, result.readsPerSample, result.writesPerSample,
                    result.wakeupsPerSecond, result.shortWrites == 0 ? "" : "; \(result.shortWrites) short writes (a tab fell behind)"))
        }
    }

    /// Figures from a debug build mean little: say so before any.
    private func warnIfDebugBuild() {
        #if DEBUG
        emit("warning: this is a debug build; run it from a release build (`make bench`) for real figures")
        #endif
    }

    /// A CPU figure from /proc (10 ms ticks), or why there is none.
    private func nanoseconds(_ value: Double?) -> String {
        guard let value else { return "n/a (thread not found)" }
        return String(format: "%.0f ns", value)
    }

    /// One hub journaling at saturation: producers send every frame without
    /// waiting, the run ends when every agent's last frame is acknowledged
    /// (durable under the policy); every batch of every board is journaled.
    func runHubJournal() async throws {
        warnIfDebugBuild()
        var benchmark = TransportBenchmark()
        benchmark.messagesPerAgent = messagesPerAgent
        benchmark.boards = boards
        benchmark.agents = agents
        benchmark.coalesced = coalesced
        benchmark.ackInterval = .milliseconds(ackIntervalMs)
        let logger = logging.logger("touchsync.bench")
        emit("hub journaling at saturation: \(benchmark.agents) agents x \(benchmark.fingers) fingers on \(boards) board(s), \(messagesPerAgent) messages per agent, loopback TCP, no subscriber")
        var oneThread: [String: Double] = [:]
        for threads in try threadCounts() {
            for policy in try policies() {
                let directory = FileManager.default.temporaryDirectory.path + "/touchsync-bench-hub-journal-\(getpid())"
                try? FileManager.default.removeItem(atPath: directory)
                defer { try? FileManager.default.removeItem(atPath: directory) }
                var journal = JournalConfiguration(directory: directory)
                if let policy { journal.fsync = policy }
                benchmark.journal = policy == nil ? nil : journal
                benchmark.boardThreads = threads
                let result = try await benchmark.throughput(.hub, subscribers: 0, logger: logger)
                let batches = result.batches ?? 0
                let name = policy?.description ?? "memory (no journal)"
                if threads == 1 { oneThread[name] = result.samplesPerSecond }
                let ratio = threads > 1 ? oneThread[name].map { String(format: ", %.2fx one thread", result.samplesPerSecond / $0) } ?? "" : ""
                emit(
                    String(
                        format: "  %d board thread(s), fsync %@: %d batches in %.3f s = %.0f batches/s, %.0f samples/s%@; the hub's loop threads' CPU per sample %@",
                        threads, name, batches, result.seconds, Double(batches) / result.seconds, result.samplesPerSecond, ratio,
                        nanoseconds(result.cpuNanosecondsPerSample)))
            }
        }
    }

    func runJournal() async throws {
        var benchmark = JournalBenchmark()
        benchmark.boardSamples = boardSamples
        let figures = try await benchmark.run(logger: logging.logger("touchsync.bench")) { emit("  " + $0) }
        func rate(_ value: Double) -> String { String(format: "%.0f", value) }
        emit(
            "journal: a board of \(figures.samples) samples in \(figures.batches) batches (\(figures.journalBytes) bytes of batches,"
                + String(format: " %.2f bytes/sample)", Double(figures.journalBytes) / Double(figures.samples)))
        let samplesPerBatch = Double(figures.samples) / Double(figures.batches)
        for write in figures.writes {
            emit(
                "  write, fsync \(write.policy): \(write.batches) batches in \(String(format: "%.3f", write.seconds)) s = "
                    + "\(rate(Double(write.batches) / write.seconds)) batches/s, \(rate(Double(write.batches) * samplesPerBatch / write.seconds)) samples/s")
        }
        emit(String(format: "  memory: %.1f resident bytes per stored sample (a copy of the board held in the model)", figures.residentBytesPerSample))
        emit(
            "  recovery of the whole board: \(String(format: "%.3f", figures.recoverySeconds)) s (\(figures.recoveredRecords) records, "
                + "\(rate(Double(figures.samples) / figures.recoverySeconds)) samples/s)")
        emit(
            "  replay at full speed to a subscriber: \(String(format: "%.3f", figures.replaySeconds)) s = "
                + "\(rate(Double(figures.samples) / figures.replaySeconds)) samples/s")
        emit(
            "  late join (snapshot of the whole board from a hub; 6 subscribers one after another, v2 first, alternating):")
        emit("    v2 (packed snapshots): " + figures.lateJoinSecondsV2.map { String(format: "%.1f ms", $0 * 1000) }.joined(separator: ", "))
        emit("    v1:                    " + figures.lateJoinSeconds.map { String(format: "%.1f ms", $0 * 1000) }.joined(separator: ", "))
    }

    func runFailover(_ address: StoreAddress) async throws {
        warnIfDebugBuild()
        var benchmark = FailoverBenchmark(address: address, executable: try selfExecutable())
        benchmark.kills = kills
        benchmark.leaseTimeout = .seconds(leaseTimeout)
        benchmark.hubTimeout = .seconds(hubTimeout)
        benchmark.boards = failoverBoards
        emit(
            "failover on \(address): 3 hubs, lease \(leaseTimeout) s, agent silence time-out \(hubTimeout) s, \(failoverBoards) board(s), "
                + "\(kills) kills of the first board's holder (SIGKILL)")
        let figures = try await benchmark.run(logger: logging.logger("touchsync.bench")) { emit("  " + $0) }
        for (what, durations) in [("the first commit under the new lease, from the store", figures.storeFailovers),
                                  ("the first acknowledgement on the new holder", figures.failovers),
                                  ("each subscriber's first batch from the new holder", figures.subscriberFailovers)] {
            let seconds = durations.map(\.seconds).sorted()
            func percentile(_ p: Double) -> Double { seconds[min(seconds.count - 1, Int((Double(seconds.count) * p).rounded(.up)) - 1)] }
            emit(
                String(
                    format: "  failover (SIGKILL to %@): p50 %.2f s, p99 %.2f s, min %.2f s, max %.2f s over %d kills",
                    what, percentile(0.5), percentile(0.99), seconds.first ?? 0, seconds.last ?? 0, seconds.count))
        }
        if failoverBoards > 1 {
            let moved = figures.boardsMoved
            emit("  boards the killed hub held: \(moved.min() ?? 0) to \(moved.max() ?? 0), mean \(String(format: "%.1f", Double(moved.reduce(0, +)) / Double(max(moved.count, 1))))")
        }
        emit("  messages posted \(figures.posted), acknowledged \(figures.acknowledged); the highest lease epoch at the end \(figures.epoch)")
        guard figures.acknowledged >= figures.posted else { throw CommandFailure("\(figures.posted - figures.acknowledged) message(s) never acknowledged") }
    }

    /// This program's own executable (the hubs it starts run it).
    private func selfExecutable() throws -> String {
        guard let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else {
            throw CommandFailure("cannot find this program's executable (/proc/self/exe)")
        }
        return path
    }

    func runStore(_ address: StoreAddress) async throws {
        warnIfDebugBuild()
        var benchmark = StoreBenchmark(address: address)
        benchmark.boards = storeBoards
        benchmark.window = storeWindow
        benchmark.samplesPerBoard = max(1000, boardSamples / 10)
        let figures: StoreBenchmark.Figures
        do {
            figures = try await benchmark.run(logger: logging.logger("touchsync.bench")) { emit("  " + $0) }
        } catch let error as StoreError {
            throw CommandFailure(error.description)
        }
        emit("board store \(address): \(figures.samples) samples in \(figures.batches) batches over \(storeBoards) boards, window \(storeWindow)")
        for write in figures.writes {
            emit(
                String(
                    format: "  %@: %d batches in %.3f s = %.0f batches/s, %.0f samples/s, %d commits (%.1f batches each)",
                    write.target, write.batches, write.seconds, Double(write.batches) / write.seconds,
                    Double(write.samples) / write.seconds, write.commits, Double(write.batches) / Double(max(write.commits, 1))))
        }
        emit(
            String(
                format: "  kept: %.2f bytes per sample in the store's batch rows, %.2f in the journal's batch records",
                figures.storeBytesPerSample, figures.journalBytesPerSample))
    }
}
