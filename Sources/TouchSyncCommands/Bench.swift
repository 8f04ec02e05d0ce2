import ArgumentParser
import Foundation
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncLoad
import TouchSyncSimulation
import TouchSyncWire

/// One measured stage.
public struct BenchFigure: Sendable {
    public var stage: String
    public var samples: Int
    /// Best of the repetitions, in seconds.
    public var seconds: Double
    public var samplesPerSecond: Double { Double(samples) / seconds }
}

/// The model and codec micro benchmark: the same pre-generated session
/// through every stage, best of `repetitions`, plus bytes per sample.
public struct CodecBenchmark: Sendable {
    public var frames = 200_000
    public var users = 4
    public var fingers = 5
    public var coalesced = 2
    public var withForce = false
    public var repetitions = 5
    public var seed: UInt64 = 1
    /// Run only the reduce stage (for profilers).
    public var reduceOnly = false
    /// After encoding, run only the replica's decode-and-apply stage, ten
    /// times as often (for profilers).
    public var applyOnly = false

    public init() {}

    public struct Report: Sendable {
        public var figures: [BenchFigure]
        public var samples: Int
        public var agentBytesPerSample: Double
        public var publishBytesPerSample: Double
        /// The diff stream when the hub publishes one coalesced batch per tick
        /// of `eventsPerTick` input events per user (2 at 120 Hz: 16.7 ms).
        public var tickBytesPerSample: Double
        public var eventsPerTick: Int
        /// Bytes per sample of the diff stream for ticks of 1, 2, 4 and 8 events per user.
        public var bytesPerSampleByTick: [(eventsPerTick: Int, bytesPerSample: Double)]
        public var snapshotBytesPerSample: Double
        public var digest: BoardDigest
    }

    public func run(progress: (String) -> Void = { _ in }) throws -> Report {
        var profile = SimulationProfile()
        profile.users = users
        profile.fingersPerUser = fingers
        profile.coalesced = coalesced...coalesced
        profile.predicted = 1...1
        profile.withForce = withForce
        profile.clearRate = 0
        profile.strokeLength = 60...600
        // Drawing fingers move continuously while down; an occasional pause (a skipped
        // event, the finger frozen) still happens.
        profile.idleRate = 0.02
        var simulator = SessionSimulator(seed: seed, profile: profile)
        var inputs: [(UserNamespace, TouchFrame, StrokeStyle)] = []
        inputs.reserveCapacity(frames)
        while inputs.count < frames {
            if case .frame(let user, let frame, let style) = simulator.next() { inputs.append((user, frame, style)) }
        }
        let samples = inputs.reduce(0) { $0 + $1.1.changes.reduce(0) { $0 + $1.samples.count } }
        progress("workload: \(frames) frames, \(samples) samples (\(users) users x \(fingers) fingers, \(coalesced) samples per event, 1 predicted)")

        var limits = BoardLimits()
        limits.maxSamplesPerStroke = .max
        let clock = ContinuousClock()
        func best(_ stage: String, _ body: () throws -> Void) rethrows -> BenchFigure {
            var fastest = Double.infinity
            for _ in 0..<repetitions {
                let start = clock.now
                try body()
                let elapsed = clock.now - start
                fastest = min(fastest, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
            }
            let figure = BenchFigure(stage: stage, samples: samples, seconds: fastest)
            progress("  \(stage): \(Int(figure.samplesPerSecond)) samples/s")
            return figure
        }

        var figures: [BenchFigure] = []
        var hub = BoardState(limits: limits)
        var batches: [DiffBatch] = []
        figures.append(try best("reduce (hub model, frames to diffs)") {
            hub = BoardState(limits: limits)
            batches.removeAll(keepingCapacity: true)
            var diffs: [StrokeDiff] = []
            for (index, (user, frame, style)) in inputs.enumerated() {
                diffs.removeAll(keepingCapacity: true)
                try hub.reduce(frame, from: user, style: style, into: &diffs)
                if !diffs.isEmpty { batches.append(hub.sealBatch(diffs, hubTime: Int64(index))) }
            }
        })

        if reduceOnly {
            return Report(
                figures: figures, samples: samples, agentBytesPerSample: 0, publishBytesPerSample: 0,
                tickBytesPerSample: 0, eventsPerTick: 0, bytesPerSampleByTick: [], snapshotBytesPerSample: 0,
                digest: hub.digest)
        }

        var agentMessages: [[UInt8]] = []
        figures.append(best("encode agent frames") {
            agentMessages = inputs.map { _, frame, _ in
                var message = Touchsync_V1_AgentMessage()
                message.sequence = frame.sequence
                message.frame = frame.proto
                return WireCodec.encode(message)
            }
        })
        // The hub's own decoding (AgentRequest.decode: the one-pass frame reader).
        figures.append(try best("decode agent frames") {
            for bytes in agentMessages {
                let request = try bytes.withUnsafeBytes { try AgentRequest.decode($0).get() }
                guard case .numbered(_, .frame) = request else { throw ValidationError("a frame decoded as \(request)") }
            }
        })
        figures.append(try best("decode agent frames (SwiftProtobuf, for comparison)") {
            for bytes in agentMessages {
                let message = try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: bytes)
                _ = try TouchFrame(message.frame, sequence: message.sequence)
            }
        })

        var published: [[UInt8]] = []
        // As the hub encodes them: written in one pass, wrapped as a PublishMessage.
        figures.append(best("encode diff batches") {
            var encoder = DiffStreamEncoder(board: "bench")
            published = batches.map { batch in WireCodec.field(1, wrapping: encoder.encodedBytes(batch)) }
        })

        // As a subscriber applies them (the one-pass reader).
        func applyPublished(to replica: inout BoardState) throws {
            for bytes in published {
                try bytes.withUnsafeBytes { bytes in
                    guard let (_, batch) = PublishedBatch.find(in: bytes) else { throw ValidationError("not a batch") }
                    try replica.apply(encodedBatch: batch)
                }
            }
        }
        if applyOnly {
            for _ in 0..<(10 * repetitions) {
                var replica = BoardState(limits: limits)
                try applyPublished(to: &replica)
                guard replica.digest == hub.digest else { throw ValidationError("benchmark replica diverged from the hub") }
            }
            return Report(
                figures: figures, samples: samples, agentBytesPerSample: 0, publishBytesPerSample: 0,
                tickBytesPerSample: 0, eventsPerTick: 0, bytesPerSampleByTick: [], snapshotBytesPerSample: 0,
                digest: hub.digest)
        }

        var replica = BoardState(limits: limits)
        // Each repetition's replica is kept until all have run: freeing the
        // previous one is not part of decoding and applying.
        var finished: [BoardState] = []
        figures.append(try best("decode and apply diff batches (replica)") {
            finished.append(replica)
            replica = BoardState(limits: limits)
            try applyPublished(to: &replica)
        })
        finished.removeAll()
        guard replica.digest == hub.digest else { throw ValidationError("benchmark replica diverged from the hub") }
        var protobufReplica = BoardState(limits: limits)
        figures.append(try best("decode and apply diff batches (SwiftProtobuf, for comparison)") {
            protobufReplica = BoardState(limits: limits)
            for bytes in published {
                try protobufReplica.apply(WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes).batch)
            }
        })
        guard protobufReplica.digest == hub.digest else { throw ValidationError("the SwiftProtobuf replica diverged from the hub") }

        // The hub's pipeline, as its loop runs it: reduce every frame into the
        // board's channel, which folds a tick's diffs and encodes one batch.
        func tickStream(eventsPerTick: Int) throws -> [[UInt8]] {
            var channel = BoardChannel(name: "bench", limits: limits)
            var batches: [[UInt8]] = []
            for (index, (user, frame, style)) in inputs.enumerated() {
                try channel.reduce(frame, from: user, style: style)
                if (index + 1) % (users * eventsPerTick) == 0 || index == inputs.count - 1,
                    let batch = channel.sealBatch(hubTime: Int64(index))
                {
                    batches.append(WireCodec.field(1, wrapping: batch.encoded))  // PublishMessage.batch
                }
            }
            return batches
        }
        let eventsPerTick = 2
        var tickBatches: [[UInt8]] = []
        figures.append(try best("hub pipeline: reduce, coalesce per tick, encode") {
            tickBatches = try tickStream(eventsPerTick: eventsPerTick)
        })
        let tickBytes = tickBatches.reduce(0) { $0 + $1.count }
        var tickReplica = BoardState(limits: limits)
        for bytes in tickBatches {
            try tickReplica.apply(WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes).batch)
        }
        guard tickReplica.digest == hub.digest else { throw ValidationError("tick-coalesced replica diverged from the hub") }

        // The size side of the tick-length trade-off (latency grows with the tick).
        var byTick: [(Int, Double)] = []
        for events in [1, 2, 4, 8] {
            let bytes = try tickStream(eventsPerTick: events).reduce(0) { $0 + $1.count }
            byTick.append((events, Double(bytes) / Double(samples)))
        }

        let snapshotBytes = SnapshotCodec.chunks(of: hub.snapshot(), board: "bench", digest: hub.digest)
            .reduce(0) { $0 + WireCodec.encode($1).count }
        let stored = hub.storedSampleCount
        return Report(
            figures: figures, samples: samples,
            agentBytesPerSample: Double(agentMessages.reduce(0) { $0 + $1.count }) / Double(samples),
            publishBytesPerSample: Double(published.reduce(0) { $0 + $1.count }) / Double(samples),
            tickBytesPerSample: Double(tickBytes) / Double(samples), eventsPerTick: eventsPerTick,
            bytesPerSampleByTick: byTick,
            snapshotBytesPerSample: Double(snapshotBytes) / Double(max(stored, 1)), digest: hub.digest)
    }
}

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmarks: the model and codecs (default), the hub against bare libzmq (--transport), the journal (--journal).",
        discussion: "Build with -c release for meaningful figures (make bench does). Figures go to docs/performance.md.")

    @Option(parsing: .unconditional, help: "Input events (frames) in the workload.") var frames = 200_000
    @Option(parsing: .unconditional, help: "Simulated users.") var users = 4
    @Option(parsing: .unconditional, help: "Fingers per user.") var fingers = 5
    @Option(parsing: .unconditional, help: "Samples per input event (2: 240 Hz digitizer at 120 Hz events).") var coalesced = 2
    @Flag(help: "Samples carry force (Pencil, 3D Touch).") var force = false
    @Option(parsing: .unconditional, help: "Repetitions per stage; the best is reported.") var repetitions = 5
    @Flag(help: ArgumentHelp("Run only the reduce stage (for perf or callgrind).", visibility: .hidden)) var reduceOnly = false
    @Flag(help: ArgumentHelp("After encoding, run only the replica's decode-and-apply stage (for perf).", visibility: .hidden))
    var applyOnly = false
    @Flag(help: "Instead: the hub against a bare libzmq forwarder over loopback TCP (throughput and latency, 1 and 10 subscribers).")
    var transport = false
    @Option(parsing: .unconditional, help: "With --transport: messages per agent in the throughput runs.") var messagesPerAgent = 2000
    @Option(parsing: .unconditional, help: "With --transport: the hub's --ack-interval-ms.") var ackIntervalMs = 0
    @Flag(help: "Instead: the journal (write throughput per fsync policy, recovery, replay at full speed, late-join snapshot).")
    var journal = false
    @Option(parsing: .unconditional, help: "With --journal: samples on the large board.") var boardSamples = 1_000_000
    @Flag(help: "Instead: fan-out: one board to 10, 100 and 300 subscribers, on the hub itself, through 1 relay, through 4 (the hub's CPU per batch).")
    var fanout = false
    @Flag(help: "Instead: the browser whiteboard end to end (hub, gateway, headless Chromium): touch-to-pixels latency, frame times, bytes per sample, on an empty board and on one of --browser-strokes strokes.")
    var browser = false
    @Option(parsing: .unconditional, help: "With --browser: accepted strokes on the seeded board.") var browserStrokes = 10_000
    @Option(parsing: .unconditional, help: "With --browser: strokes page A draws while page B watches.") var browserDraws = 300
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard frames >= 100 else { throw ValidationError("--frames must be at least 100") }
        guard (1...64).contains(coalesced) else { throw ValidationError("--coalesced must be 1 to 64") }
        guard repetitions >= 1 else { throw ValidationError("--repetitions must be at least 1") }
        guard (0...1000).contains(ackIntervalMs) else { throw ValidationError("--ack-interval-ms must be 0 to 1000") }
    }

    func run() async throws {
        if transport {
            try await runTransport()
            return
        }
        if journal {
            try await runJournal()
            return
        }
        if browser {
            try await runBrowser()
            return
        }
        if fanout {
            #if DEBUG
            emit("warning: this is a debug build; run it from a release build for real figures")
            #endif
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
        #if DEBUG
        print("warning: this is a debug build; run `make bench` (release) for real figures")
        #endif
        let report = try benchmark.run { print($0) }
        if reduceOnly || applyOnly { return }
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
        for (events, bytes) in report.bytesPerSampleByTick {
            let label = "  hub to subscribers, tick of \(events) event(s) per user (\(String(format: "%.1f", Double(events) * 1000 / 120)) ms at 120 Hz)"
            print(label.padding(toLength: 74, withPad: " ", startingAt: 0), String(format: "%6.2f", bytes))
        }
        print("  snapshot (stored strokes, no per-tick framing)".padding(toLength: 74, withPad: " ", startingAt: 0), String(format: "%6.2f", report.snapshotBytesPerSample))
        print("reference: Yjs (Yrs via pycrdt) merges ~870,000 samples/s in-process at 21 bytes/sample on this machine class")
    }

    /// The hub and a bare forwarder, one after the other in this process, same input.
    func runBrowser() async throws {
        #if DEBUG
        emit("warning: this is a debug build; run it from a release build for real figures")
        #endif
        emit("board strokes  round trip  late join  snapshot  drawn  own ink p50/p99/max      remote ink p50/p99/max    render p50/p99/max     frame interval p50/p99  bytes/sample")
        let benchmark = BrowserBenchmark(seededStrokes: browserStrokes, drawnStrokes: browserDraws)
        var motions: [(String, BrowserBenchmark.Motion)] = []
        try await benchmark.run(logger: logging.logger("touchsync.bench")) { row in
            emit(
                String(
                    format: "%13d  %7d ms  %6.0f ms  %5.1f MB  %5d  %5.1f / %5.1f / %5.1f ms  %6.1f / %5.1f / %5.1f ms  %5.2f / %5.2f / %5.1f ms  %6.1f / %5.1f ms  %8.1f",
                    row.seededStrokes, row.roundTripMilliseconds, row.lateJoinMilliseconds, row.snapshotBytes / 1e6, row.strokesDrawn,
                    percentile(row.ownInk, 50), percentile(row.ownInk, 99), row.ownInk.max() ?? .nan,
                    percentile(row.latency, 50), percentile(row.latency, 99), row.latency.max() ?? .nan,
                    percentile(row.renderMilliseconds, 50), percentile(row.renderMilliseconds, 99), row.renderMilliseconds.max() ?? .nan,
                    percentile(row.frameIntervals, 50), percentile(row.frameIntervals, 99), row.bytesPerSample))
            if let pan = row.pan { motions.append(("panning a \(row.seededStrokes)-stroke board (wheel, 120 events)", pan)) }
            if let zoom = row.zoom { motions.append(("zooming a \(row.seededStrokes)-stroke board (Ctrl-wheel, 60 events)", zoom)) }
        }
        emit("")
        emit("own ink: the drawing page's pointer event to the end of the frame that drew it; remote ink: its first sample to the viewer's frame")
        for (label, motion) in motions {
            emit(
                String(
                    format: "%@: render p50/p99/max %.2f / %.2f / %.1f ms, frame interval p50/p99 %.1f / %.1f ms (%d frames)",
                    label, percentile(motion.renderMilliseconds, 50), percentile(motion.renderMilliseconds, 99),
                    motion.renderMilliseconds.max() ?? .nan, percentile(motion.frameIntervals, 50), percentile(motion.frameIntervals, 99),
                    motion.renderMilliseconds.count))
        }
    }

    func runTransport() async throws {
        #if DEBUG
        emit("warning: this is a debug build; run `make bench` (release) for real figures")
        #endif
        var benchmark = TransportBenchmark()
        benchmark.messagesPerAgent = messagesPerAgent
        benchmark.ackInterval = .milliseconds(ackIntervalMs)
        let logger = logging.logger("touchsync.bench")
        emit("transport: \(benchmark.agents) agents x \(benchmark.fingers) fingers, \(benchmark.coalesced) samples per event, loopback TCP")
        emit("")
        emit("throughput at saturation (\(benchmark.messagesPerAgent) messages per agent)")
        for subscribers in [1, 10] {
            let bare = try await benchmark.throughput(.forwarder, subscribers: subscribers, logger: logger)
            let hub = try await benchmark.throughput(.hub, subscribers: subscribers, logger: logger)
            emit(String(
                format: "  %2d subscriber(s): forwarder %10.0f samples/s   hub %10.0f samples/s   hub/forwarder %.2f",
                subscribers, bare.samplesPerSecond, hub.samplesPerSecond, hub.samplesPerSecond / bare.samplesPerSecond))
            emit("                    CPU per sample of the target's thread: forwarder \(nanoseconds(bare.cpuNanosecondsPerSample))   hub \(nanoseconds(hub.cpuNanosecondsPerSample))")
        }
        emit("")
        emit("latency at \(Int(benchmark.latencyRate)) samples/s (µs, sample creation to decoded in a subscriber; the hub's subscribers also apply; the producer sleeps between frames)")
        for subscribers in [1, 10] {
            let bare = try await benchmark.latency(.forwarder, subscribers: subscribers, logger: logger)
            let hub = try await benchmark.latency(.hub, subscribers: subscribers, logger: logger)
            for result in [bare, hub] {
                let s = result.summary
                emit("  \(String(format: "%2d", subscribers)) subscriber(s) \(result.target.rawValue.padding(toLength: 22, withPad: " ", startingAt: 0)) p50 \(s.p50)  p90 \(s.p90)  p99 \(s.p99)  p99.9 \(s.p999)  max \(s.max)  (\(s.count) samples)")
            }
            emit(String(format: "     hub p99 / forwarder p99: %.2f", Double(hub.summary.p99) / Double(max(bare.summary.p99, 1))))
            emit("     CPU per sample of the target's thread: forwarder \(nanoseconds(bare.cpuNanosecondsPerSample))   hub \(nanoseconds(hub.cpuNanosecondsPerSample))")
        }
    }

    /// A CPU figure from /proc (10 ms ticks), or why there is none.
    private func nanoseconds(_ value: Double?) -> String {
        guard let value else { return "n/a (thread not found)" }
        return String(format: "%.0f ns", value)
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
            "  late join (snapshot of the whole board from a hub, 3 subscribers one after another): "
                + figures.lateJoinSeconds.map { String(format: "%.1f ms", $0 * 1000) }.joined(separator: ", "))
    }
}
