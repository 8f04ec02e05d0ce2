import TouchSyncAccess
import Foundation
import Histogram
import Logging
import Synchronization
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncSimulation
import ZeroMQ

/// Where a load run stands, once a second.
public struct LoadProgress: Sendable {
    public var elapsed: Duration
    public var samplesPerSecond: Double
    public var liveTouches: Int
    public var latencyP50: UInt64
    public var latencyP99: UInt64
    public var samplesSent: Int
}

/// Asks a running load to stop drawing early (Ctrl-C): it then drains,
/// checks and reports what was drawn so far, marked as interrupted.
public final class LoadInterruption: Sendable {
    private let requested = Mutex(false)
    public init() {}
    public func request() { requested.withLock { $0 = true } }
    public var isRequested: Bool { requested.withLock { $0 } }
}

/// A load run: simulated users drawing in real time through their own agent
/// connections, subscribers measuring end-to-end latency as they apply the
/// hub's batches, then an exact check of what every subscriber shows
/// against what every user drew.
public struct LoadRun: Sendable {
    public let configuration: LoadConfiguration
    private let logger: Logger

    public init(configuration: LoadConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    public func run(
        interruption: LoadInterruption = LoadInterruption(), progress: @Sendable (LoadProgress) -> Void = { _ in }
    ) async throws -> LoadReport {
        let configuration = self.configuration
        raiseOpenFileLimit()
        // Every user's connection is a socket, plus the subscribers and the embedded hub's own;
        // twice that, as libzmq frees a closed socket's slot only later (reconnects).
        // A subscriber has four (SUB, snapshot DEALER, and a handshake monitor's two), one agent two more.
        let sockets = configuration.users + 2 + configuration.boards * (configuration.subscribers + 1) * 4 + 64
        let context = try ZMQContext(maxSockets: Int32(clamping: max(1023, 2 * sockets)))
        var embedded: TouchSyncHub? = nil
        let endpoints: HubEndpoints
        if let cluster = configuration.cluster {
            let first = cluster.hubs[0]
            endpoints = HubEndpoints(ingest: first.ingest, publish: first.publish, snapshot: first.snapshot)  // per board below
        } else if let hub = configuration.hub {
            endpoints = hub
        } else {
            // Its own context, so its I/O thread is its own, as a separate process's would be.
            var hubConfiguration = configuration.embeddedHub
            if let keys = configuration.keys, let hubPair = keys.hub {  // an embedded hub: prepare made the pair
                hubConfiguration.security = HubSecurity(serverKey: hubPair, accessListPath: keys.accessListPath)
            }
            let hub = try TouchSyncHub(
                configuration: hubConfiguration, logger: logger,
                context: ZMQContext(maxSockets: Int32(clamping: max(1023, 2 * sockets))))
            endpoints = try await hub.start()
            embedded = hub
        }
        let boards = (0..<configuration.boards).map { "load-\(configuration.seed)-\($0)" }
        /// Where a board lives: its cluster hub, or the one hub.
        func hubEndpoints(of board: String) -> HubEndpoints {
            guard let hub = configuration.cluster?.hub(for: board) else { return endpoints }
            return HubEndpoints(ingest: hub.ingest, publish: hub.publish, snapshot: hub.snapshot)
        }
        let latency = LatencyRecorder()

        func subscribe(_ board: String, counter: AppliedCounter?) throws -> BoardSubscriber {
            var settings = SubscriberConfiguration(
                board: board, publishEndpoint: hubEndpoints(of: board).publish, snapshotEndpoint: hubEndpoints(of: board).snapshot)
            if let keys = configuration.keys {
                settings.curve = CurveClientKeys(client: keys.watcher, serverPublicKey: keys.hubPublicKey)
            }
            settings.wireFormat = configuration.wireFormat
            settings.predictions = configuration.subscriberPredictions
            if let counter {
                settings.onApplied = { batch in
                    latency.record(batch)
                    counter.add(batch)
                }
            }
            let subscriber = try BoardSubscriber(configuration: settings, context: context, logger: logger)
            subscriber.start()
            return subscriber
        }
        var subscribers: [(board: Int, subscriber: BoardSubscriber, applied: AppliedCounter)] = []
        for (index, board) in boards.enumerated() {
            for _ in 0..<configuration.subscribers {
                let counter = AppliedCounter()
                subscribers.append((index, try subscribe(board, counter: counter), counter))
            }
        }
        for (_, subscriber, _) in subscribers {
            guard await subscriber.waitUntil(sequence: 0, timeout: .seconds(10)) else {
                throw LoadError.unreachable("no snapshot from \(endpoints.snapshot) within 10 s")
            }
        }
        // A board that already holds strokes (a run before this one, the same
        // names): only the strokes this run begins are checked (stroke ids only grow).
        var firstStrokeID = Array(repeating: StrokeID(1), count: boards.count)
        for (board, subscriber, _) in subscribers where firstStrokeID[board] == StrokeID(1) {
            guard let replica = await subscriber.replica(), replica.nextStrokeID > StrokeID(1) else { continue }
            firstStrokeID[board] = replica.nextStrokeID
            let held = replica.acceptedStrokes.count + replica.liveTouchCount
            if held > 0 {
                logger.notice(
                    "the board already holds strokes: only this run's are checked",
                    metadata: ["board": "\(boards[board])", "strokes": "\(held)", "from_stroke": "\(replica.nextStrokeID.rawValue)"])
            }
        }

        // Users are spread over the boards; each board has its own simulator.
        let step = 1 / configuration.hz
        var simulators: [SessionSimulator] = []
        var members: [[Int]] = Array(repeating: [], count: configuration.boards)
        for user in 0..<configuration.users { members[user % configuration.boards].append(user) }
        for (index, users) in members.enumerated() {
            var profile = SimulationProfile()
            profile.users = max(users.count, 1)
            profile.fingersPerUser = configuration.fingers
            profile.hz = configuration.hz
            profile.coalesced = configuration.coalesced...configuration.coalesced
            profile.predicted = configuration.predicted...configuration.predicted
            profile.cancelRate = configuration.cancelRate
            profile.vanishRate = configuration.vanishRate
            profile.clearRate = 0
            profile.withForce = false
            profile.strokeLength = 20...400
            simulators.append(
                SessionSimulator(
                    seed: configuration.seed &+ UInt64(index), profile: profile, userPrefix: "load-\(index)",
                    startTime: 0))
        }
        // Each user's board and index among that board's users, and its own connection.
        let placement = (0..<configuration.users).map { user in
            (board: user % configuration.boards, local: user / configuration.boards)
        }
        var drawn: [DrawnStrokes] = Array(repeating: DrawnStrokes(), count: configuration.users)
        let residentBeforeAgents = residentBytes()
        let agents = try AgentPool(
            configurations: placement.enumerated().map { user, place in
                let (board, local) = place
                var settings = AgentConfiguration(board: boards[board], hubEndpoint: hubEndpoints(of: boards[board]).ingest)
                settings.identity = simulators[board].users[local].rawValue
                settings.clientName = "touchsync load"
                settings.maxInFlight = configuration.maxInFlight
                settings.hubTimeout = configuration.hubTimeout
                settings.wireFormat = configuration.wireFormat
                // One agent watches its handshake (they all share the hub and the key setup): two sockets, not two per user.
                settings.monitorsHandshake = user == 0
                if let keys = configuration.keys, let pair = keys.users[settings.identity!] {
                    settings.curve = CurveClientKeys(client: pair, serverPublicKey: keys.hubPublicKey)
                }
                return settings
            }, threads: configuration.agentThreads, context: context, logger: logger)
        let connecting = ContinuousClock.now
        agents.start()
        // Drawing starts once every user is connected: a run measures carrying
        // strokes, and the connection storm is reported on its own.
        guard await agents.waitUntilWelcomed(timeout: .seconds(60)) else {
            await agents.stop()
            for (_, subscriber, _) in subscribers { await subscriber.stop() }
            if let embedded { await embedded.stop() }
            if let refusal = agents.helloRefusal { throw LoadError.refused(refusal) }
            throw LoadError.unreachable("not every agent was welcomed by \(endpoints.ingest) within 60 s")
        }
        let connectTime = ContinuousClock.now - connecting
        // What connected agents cost while idle: their sockets, threads' state
        // and queues, and (embedded) the hub's sessions and sockets for them.
        let residentPerAgent = Double(residentBytes() - residentBeforeAgents) / Double(max(configuration.users, 1))

        // Drive: every tick, each started user sends one input event, stamped with the real time.
        let clock = ContinuousClock()
        let start = clock.now
        let hubThreadsAtStart = hubThreads(embedded: embedded != nil)
        let tick = Duration(secondsValue: step)
        var nextTick = start
        var samplesSent = 0
        var framesSent = 0
        var lastReport = start
        var samplesAtLastReport = 0
        var behind: Duration = .zero
        var late: [BoardSubscriber] = []
        var ticksRun = 0
        while (clock.now - start < configuration.duration || ticksRun < configuration.minimumTicks) && !interruption.isRequested {
            if let limit = configuration.strokes, drawn.reduce(0, { $0 + $1.strokesBegun }) >= limit { break }
            try await Task.sleep(until: nextTick)
            if interruption.isRequested { break }
            behind = max(behind, clock.now - nextTick)
            ticksRun += 1
            let elapsed = clock.now - start
            for user in 0..<configuration.users {
                if configuration.rampUp > .zero,
                    elapsed < configuration.rampUp * (Double(user) / Double(configuration.users))
                {
                    continue
                }
                let (board, local) = placement[user]
                let frame = simulators[board].nextFrame(for: local, at: monotonicMicroseconds())
                guard !frame.changes.isEmpty || frame.aliveTouches != nil else { continue }
                drawn[user].record(frame)
                samplesSent += frame.changes.reduce(0) { $0 + $1.samples.count }
                framesSent += 1
                agents.send(agent: user, frame.changes, alive: frame.aliveTouches)
            }
            if configuration.lateSubscriber && late.isEmpty && elapsed >= configuration.duration / 2
                && ticksRun >= configuration.minimumTicks / 2
            {
                late = try boards.map { try subscribe($0, counter: nil) }
            }
            nextTick += tick
            if nextTick < clock.now - tick * 10 { nextTick = clock.now }  // fell far behind: do not burst to catch up
            if clock.now - lastReport >= .seconds(1) {
                let interval = clock.now - lastReport
                let (p50, p99) = latency.percentiles(50, 99)
                progress(
                    LoadProgress(
                        elapsed: clock.now - start,
                        samplesPerSecond: Double(samplesSent - samplesAtLastReport) / interval.seconds,
                        liveTouches: drawn.reduce(0) { $0 + $1.liveCount }, latencyP50: p50, latencyP99: p99,
                        samplesSent: samplesSent))
                lastReport = clock.now
                samplesAtLastReport = samplesSent
            }
        }
        // Every finger still down lifts (as people do when they stop drawing),
        // so the boards end with nothing in progress, whatever stopped the run.
        for user in 0..<configuration.users where drawn[user].liveCount > 0 {
            let lift = TouchFrame(changes: drawn[user].liveTouches.map { TouchChange(touch: $0, phase: .ended) }, aliveTouches: [])
            drawn[user].record(lift)
            framesSent += 1
            agents.send(agent: user, lift.changes, alive: lift.aliveTouches)
        }
        let drawingTime = clock.now - start

        // Drain: every frame acknowledged, every subscriber at the hub's sequence.
        let acknowledged = await agents.flush(timeout: configuration.drainTimeout)
        if !acknowledged {
            // Which agents, how far, and what they heard: a failed drain says where it stuck.
            logger.error(
                "not every frame was acknowledged within the drain time-out",
                metadata: [
                    "waiting": "\(agents.unacknowledged.map { "\($0.identity): \($0.acknowledged)/\($0.posted)" })",
                    "reconnects": "\(agents.reconnects)", "refusals": "\(agents.refusals)",
                ])
        }
        var finalSequence: [UInt64] = []
        var hubDigests: [BoardDigest?] = []
        for board in boards {
            if let embedded {
                let state = await embedded.boardState(board)
                finalSequence.append(state?.sequence ?? 0)
                hubDigests.append(state?.digest)
            } else {
                finalSequence.append(0)
                hubDigests.append(nil)
            }
        }
        var converged = acknowledged
        let measured = subscribers.map { ($0.board, $0.subscriber) } + late.enumerated().map { ($0.offset, $0.element) }
        var caughtUp = Array(repeating: true, count: measured.count)
        if embedded != nil {
            for (index, (board, subscriber)) in measured.enumerated() {
                caughtUp[index] = await subscriber.waitUntil(sequence: finalSequence[board], timeout: configuration.drainTimeout / 2)
            }
        } else {
            // An external hub: every frame is acknowledged, so published before
            // the acks. The hub's sequence for each board, asked once the drain
            // is over (a board list), is where its subscribers must get to; then
            // a heartbeat that agrees with a replica, received from now on, says
            // it holds the hub's final board. Agreeing heartbeats alone are not
            // enough: after an outage a subscriber's connection can deliver the
            // heartbeats queued during it, at the sequence it already holds,
            // seconds before the batches sent since (TCP's retransmission
            // back-off), and a run once ended on those with the replica behind.
            let curve = configuration.keys.map { CurveClientKeys(client: $0.watcher, serverPublicKey: $0.hubPublicKey) }
            var hubSequences: [String: UInt64] = [:]
            for name in Set(measured.map { boards[$0.0] }) {
                let listed = try? await BoardDirectory.list(
                    endpoint: hubEndpoints(of: name).snapshot, prefix: name, limit: 1, context: context, curve: curve)
                if let summary = listed?.boards.first(where: { $0.board == name }) {
                    hubSequences[name] = summary.sequence
                } else {
                    logger.notice("the hub did not list the board: its subscribers are judged by heartbeats alone", metadata: ["board": "\(name)"])
                }
            }
            let agreedBefore = measured.map { $0.1.status.agreeingHeartbeats }
            for (index, (board, subscriber)) in measured.enumerated() {
                let target = hubSequences[boards[board]] ?? 0
                caughtUp[index] = await waitFor(timeout: configuration.drainTimeout / 2) {
                    let status = subscriber.status
                    return status.sequence >= target && status.agreeingHeartbeats >= agreedBefore[index] + 2
                }
            }
        }
        let drainTime: Duration? = embedded != nil ? clock.now - start - drawingTime : nil
        let hubThreadsSpent = hubThreadsAtStart.flatMap { atStart in hubThreads(embedded: embedded != nil)?.since(atStart) }
        var lost = 0
        var duplicated = 0
        var boardDigests: [String: String] = [:]
        for (index, (board, subscriber)) in measured.enumerated() {
            guard caughtUp[index], let replica = await subscriber.replica() else {
                logger.error(
                    "a subscriber did not catch up within the drain time-out",
                    metadata: ["board": "\(boards[board])", "status": "\(subscriber.status)", "hub_sequence": "\(finalSequence[board])"])
                converged = false
                continue
            }
            if let digest = hubDigests[board], digest != replica.digest { converged = false }
            if index < subscribers.count { boardDigests[boards[board]] = "\(replica.digest)" }
            let shownByOwner = Dictionary(grouping: replica.orderedActiveStrokes + replica.acceptedStrokes, by: \.owner)
            for (local, user) in members[board].enumerated() {
                let shown = (shownByOwner[simulators[board].users[local]] ?? []).filter { $0.id >= firstStrokeID[board] }.sorted { $0.id < $1.id }
                    .map { Array($0.samples) }
                let (missing, extra) = drawn[user].compare(with: shown)
                lost += missing
                duplicated += extra
            }
        }
        if lost > 0 || duplicated > 0 {
            // Where each subscriber stood: a replica that missed batches without noticing, or a hub that lost them.
            for (board, subscriber) in measured {
                let status = subscriber.status
                let digest = await subscriber.replica()?.digest.description ?? "none"
                logger.error(
                    "a board differs from what its users drew",
                    metadata: [
                        "board": "\(boards[board])", "sequence": "\(status.sequence)", "live": "\(status.live)",
                        "batches_applied": "\(status.batchesApplied)", "heartbeats": "\(status.heartbeats)",
                        "agreeing_heartbeats": "\(status.agreeingHeartbeats)", "resyncs": "\(status.resyncs)",
                        "digest": "\(digest)",
                    ])
            }
        }
        let applied = subscribers.map { $0.applied.samples }

        let bytesIn = agents.bytesSent
        let bytesOut = subscribers.reduce(0) { $0 + $1.subscriber.status.bytesReceived }
        let resyncs = subscribers.reduce(0) { $0 + $1.subscriber.status.resyncs }
        let hubCPU = embedded != nil ? threadCPUSeconds(named: "touchsync-hub") : nil
        for (_, subscriber, _) in subscribers { await subscriber.stop() }
        for subscriber in late { await subscriber.stop() }
        let (refusals, reconnects, backpressure) = (agents.refusals, agents.reconnects, agents.backpressure)
        await agents.stop()
        if let embedded { await embedded.stop() }

        return LoadReport(
            configuration: configuration, drawingSeconds: drawingTime.seconds, samplesSent: samplesSent,
            framesSent: framesSent, samplesApplied: applied.min() ?? 0, lost: lost, duplicated: duplicated,
            converged: converged && lost == 0 && duplicated == 0, latency: latency.snapshot(),
            latencyOverTime: latency.timeline(), agentBytesPerSample: Double(bytesIn) / Double(max(samplesSent, 1)),
            subscriberBytesPerSample: Double(bytesOut) / Double(max(samplesSent, 1) * max(subscribers.count, 1)),
            generatorBehindMilliseconds: behind.seconds * 1000, resyncs: resyncs,
            ticksRun: ticksRun, ticksScheduled: Int((drawingTime.seconds * configuration.hz).rounded()),
            drainSeconds: drainTime?.seconds, connectSeconds: connectTime.seconds, boardDigests: boardDigests, refusals: refusals, reconnects: reconnects,
            coalescedFrames: Int(backpressure.coalesced), busyNotices: Int(backpressure.busyNotices), hubCPUSeconds: hubCPU,
            hubThreads: hubThreadsSpent, maxResidentBytes: maxResidentBytes(), residentBytesPerAgent: residentPerAgent, interrupted: interruption.isRequested)
    }
}

public enum LoadError: Error, CustomStringConvertible {
    case unreachable(String)
    /// The hub answered an agent's hello with a refusal (a limit, a bad board name).
    case refused(String)
    public var description: String {
        switch self {
        case .unreachable(let why): "the hub is unreachable: \(why)"
        case .refused(let why): "the hub refused to welcome the load's agents: \(why)"
        }
    }
}

/// End-to-end latency: from a sample's creation (its timestamp, the monotonic
/// clock) to its application in a subscriber's replica, recorded on the
/// subscriber's thread.
final class LatencyRecorder: Sendable {
    private struct State {
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        var applied: [ObjectIdentifier: Int] = [:]
        /// Per second of the run: samples applied and the worst latency.
        var timeline: [(second: Int, samples: Int, p99: UInt64)] = []
        var secondHistogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .two)
        var second = 0
        var secondSamples = 0
    }
    private let state = Mutex(State())
    private let origin = monotonicMicroseconds()

    func record(_ batch: DiffBatch) {
        let now = monotonicMicroseconds()
        var latencies: [Int64] = []
        for diff in batch.diffs {
            guard case .appended(_, _, let samples) = diff else { continue }
            for sample in samples { latencies.append(now - sample.time) }
        }
        record(latencies: latencies)
    }

    /// Latencies measured elsewhere (µs), as one batch's samples.
    func record(latencies: [Int64]) {
        guard !latencies.isEmpty else { return }
        let now = monotonicMicroseconds()
        state.withLock { state in
            let second = Int((now - origin) / 1_000_000)
            if second != state.second {
                state.timeline.append((state.second, state.secondSamples, state.secondHistogram.valueAtPercentile(99)))
                state.second = second
                state.secondSamples = 0
                state.secondHistogram.reset()
            }
            for latency in latencies {
                _ = state.histogram.record(UInt64(max(0, latency)))
                _ = state.secondHistogram.record(UInt64(max(0, latency)))
            }
            state.secondSamples += latencies.count
        }
    }

    func percentiles(_ first: Double, _ second: Double) -> (UInt64, UInt64) {
        state.withLock { ($0.histogram.valueAtPercentile(first), $0.histogram.valueAtPercentile(second)) }
    }

    func snapshot() -> LatencySummary {
        state.withLock { state in
            let h = state.histogram
            return LatencySummary(
                count: Int(h.totalCount), p50: h.valueAtPercentile(50), p90: h.valueAtPercentile(90),
                p99: h.valueAtPercentile(99), p999: h.valueAtPercentile(99.9), max: h.max, mean: h.mean)
        }
    }

    func timeline() -> [LatencySecond] {
        state.withLock { state in
            state.timeline.map { LatencySecond(second: $0.second, samples: $0.samples, p99: $0.p99) }
                + [LatencySecond(second: state.second, samples: state.secondSamples, p99: state.secondHistogram.valueAtPercentile(99))]
        }
    }
}

/// Samples one subscriber applied through diffs.
final class AppliedCounter: Sendable {
    private let count = Mutex(0)

    func add(_ batch: DiffBatch) {
        var samples = 0
        for diff in batch.diffs {
            if case .appended(_, _, let appended) = diff { samples += appended.count }
        }
        count.withLock { $0 += samples }
    }

    var samples: Int { count.withLock { $0 } }
}

extension Duration {
    public var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }

    public init(secondsValue: Double) { self = .nanoseconds(Int64(secondsValue * 1e9)) }
}

/// Microseconds of the monotonic clock: the agent clock of a load run.
func monotonicMicroseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
}

extension LoadRun {
    /// The hub's threads' CPU so far: an embedded hub's own threads, or an external one's by `hubPID`.
    func hubThreads(embedded: Bool) -> ThreadCPU? {
        embedded ? ThreadCPU.read(names: ThreadCPU.embeddedHubThreads) : configuration.hubPID.flatMap { ThreadCPU.read(pid: $0) }
    }
}

/// CPU seconds (user + system) of this process's threads with that name, from /proc.
func threadCPUSeconds(named name: String) -> Double? { selfTasks(named: { $0 == name }).flatMap(cpuSeconds(ofTasks:)) }

/// The /proc/self/task folder of thread `id` (a kernel thread id).
func threadTask(_ id: Int32) -> String { "/proc/self/task/\(id)" }

/// CPU seconds (user + system) of these /proc task folders; nil when none can be read.
func cpuSeconds(ofTasks tasks: [String]) -> Double? {
    let seconds = tasks.compactMap { ProcStat.read($0 + "/stat")?.cpuSeconds }
    return seconds.isEmpty ? nil : seconds.reduce(0, +)
}

/// How often these threads went to sleep and were woken so far (their
/// voluntary context switches: each wait in `zmq_poll` that found nothing);
/// nil when none can be read.
func wakeups(ofTasks tasks: [String]) -> Int? {
    var total = 0
    var found = false
    for task in tasks {
        guard let status = try? String(contentsOfFile: task + "/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("voluntary_ctxt_switches:") }),
            let count = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces))
        else { continue }
        total += count
        found = true
    }
    return found ? total : nil
}

/// Thousands of connections need thousands of descriptors (each socket has
/// its TCP connection and a wake-up descriptor, on both ends for an embedded
/// hub): lift the soft limit to the hard one.
public func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

/// The process's peak resident memory, in bytes.
func maxResidentBytes() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Int(usage.ru_maxrss) * 1024
}

/// Polls `condition` until it holds (true) or `timeout` passes (false).
func waitFor(timeout: Duration, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}
