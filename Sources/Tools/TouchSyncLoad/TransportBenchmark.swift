import Foundation
import Histogram
import Logging
import Synchronization
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncSimulation
import TouchSyncWire
import ZeroMQ

/// The hub against the physical limit of its transport, in one process and
/// one run: (1) a bare libzmq forwarder (ROUTER in, PUB out, no processing)
/// and (2) the TouchSync hub, fed the same agent messages by the same raw
/// DEALER producers, read by the same number of SUB subscribers.
public struct TransportBenchmark: Sendable {
    public enum Target: String, Sendable, CaseIterable {
        case forwarder = "bare libzmq forwarder"
        case hub = "TouchSync hub"
    }

    /// Producer connections (agents). Default 20.
    public var agents = 20
    public var fingers = 5
    public var coalesced = 2
    /// Messages per agent in a saturation run. Default 2,000.
    public var messagesPerAgent = 2000
    /// Offered rate of the latency runs, samples per second. Default 100,000.
    public var latencyRate: Double = 100_000
    public var latencyDuration: Duration = .seconds(3)
    /// The hub's `ackInterval` (default 0, as the hub's own default).
    public var ackInterval: Duration = .zero
    public var seed: UInt64 = 3
    /// Boards the agents draw on (agent i on board i mod `boards`). Default 1.
    public var boards = 1
    /// The hub journals here (hub target only; nil: in memory, as a plain benchmark hub).
    public var journal: JournalConfiguration? = nil
    /// The hub's board threads (`HubConfiguration.boardThreads`; hub target only). Default 1.
    public var boardThreads = 1

    public init() {}

    /// Agent `agent`'s board.
    func board(of agent: Int) -> String { boards <= 1 ? "bench" : "bench-\(agent % boards)" }

    public struct Throughput: Sendable {
        public var target: Target
        public var subscribers: Int
        public var samples: Int
        public var seconds: Double
        /// CPU seconds of the target's own thread (the hub loop, or the forwarder) during the run.
        public var targetCPUSeconds: Double?
        /// The hub's batches over every board (each one journaled when it journals).
        public var batches: Int? = nil
        /// CPU seconds of the target's ZeroMQ I/O thread (its context's own) during the run.
        public var targetIOCPUSeconds: Double? = nil
        public var samplesPerSecond: Double { Double(samples) / seconds }
        /// The target thread's CPU per sample carried, in nanoseconds.
        public var cpuNanosecondsPerSample: Double? { targetCPUSeconds.map { $0 * 1e9 / Double(samples) } }
        /// The target's I/O thread's CPU per sample carried, in nanoseconds.
        public var ioNanosecondsPerSample: Double? { targetIOCPUSeconds.map { $0 * 1e9 / Double(samples) } }
    }

    public struct Latency: Sendable {
        public var target: Target
        public var subscribers: Int
        public var summary: LatencySummary
        public var targetCPUSeconds: Double?
        /// The target thread's wake-ups during the run (voluntary context switches) and the frames produced.
        public var targetWakeups: Int? = nil
        public var frames = 0
        public var seconds = 0.0
        /// The target thread's CPU per sample carried, in nanoseconds.
        public var cpuNanosecondsPerSample: Double? {
            targetCPUSeconds.map { $0 * 1e9 / Double(max(summary.count / max(subscribers, 1), 1)) }
        }
        /// CPU seconds of the target's ZeroMQ I/O thread during the run.
        public var targetIOCPUSeconds: Double? = nil
        /// The target's I/O thread's CPU per sample carried, in nanoseconds.
        public var ioNanosecondsPerSample: Double? {
            targetIOCPUSeconds.map { $0 * 1e9 / Double(max(summary.count / max(subscribers, 1), 1)) }
        }
        /// Wake-ups per second, and frames handled per wake-up.
        public var wakeupsPerSecond: Double? { targetWakeups.map { Double($0) / max(seconds, 1e-9) } }
        public var framesPerWakeup: Double? { targetWakeups.map { Double(frames) / Double(max($0, 1)) } }
    }

    // MARK: Saturation

    public func throughput(_ target: Target, subscribers: Int, logger: Logger) async throws -> Throughput {
        let context = try ZMQContext()
        let messages = workload()
        let samples = messages.reduce(0) { $0 + $1.samples }
        let bench = try await Bench.start(target, ackInterval: ackInterval, journal: journal, boardThreads: boardThreads, logger: logger)
        let board = "bench"
        // Subscribers: the forwarder's count agent messages; the hub's apply batches to a replica.
        let expected = messages.count
        let done = Locked<[ContinuousClock.Instant]>([])
        let ready = Locked(0)
        let threads = (0..<subscribers).map { _ in SocketThread(name: "bench-subscriber") }
        let finalSequence = Locked<UInt64?>(nil)
        var hubBatches: Int? = nil
        for thread in threads {
            thread.start {
                do {
                    try Bench.subscribe(context: context, endpoint: bench.publish, board: board, ready: ready) { reader in
                        var count = 0
                        var replica = BoardState(limits: Bench.limits)
                        var finished = ContinuousClock.now
                        reading: while true {
                            // The hub's heartbeats (every second) wake a reader that already has everything.
                            let payload = try reader.next(timeoutMilliseconds: 100)
                            switch target {
                            case .forwarder:
                                guard payload != nil else { continue reading }
                                count += 1
                                if count == expected {
                                    finished = ContinuousClock.now
                                    break reading
                                }
                            case .hub:
                                // As a TouchSync subscriber reads live batches (the one-pass reader).
                                if let payload {
                                    try payload.withUnsafeBytes { bytes in
                                        if let (_, batch) = PublishedBatch.find(in: bytes) {
                                            try replica.apply(encodedBatch: batch)
                                            finished = ContinuousClock.now
                                        }
                                    }
                                }
                                if let last = finalSequence.withLock({ $0 }), replica.sequence >= last { break reading }
                            }
                        }
                        done.withLock { $0.append(finished) }
                    }
                } catch {
                    logger.error("benchmark subscriber failed", metadata: ["error": "\(error)"])
                    done.withLock { $0.append(ContinuousClock.now) }
                }
            }
        }
        while ready.withLock({ $0 }) < subscribers { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(200))  // subscriptions reach the publisher

        let cpuBefore = bench.targetCPUSeconds(), ioBefore = bench.targetIOCPUSeconds()
        let start = ContinuousClock.now
        try await Bench.produce(
            messages, target: target, context: context, endpoint: bench.ingest, paced: nil, board: { self.board(of: $0) })
        if target == .hub, let hub = bench.hub {
            var batches: UInt64 = 0
            for board in Set((0..<agents).map { self.board(of: $0) }) { batches += await hub.boardState(board)?.sequence ?? 0 }
            hubBatches = Int(batches)
            // Every frame is acknowledged: the board's last sequence is final.
            let sequence = await hub.boardState(board)?.sequence ?? 0
            finalSequence.withLock { $0 = sequence }
        }
        for thread in threads { await thread.finished() }
        let end = done.withLock { $0.max() ?? ContinuousClock.now }
        let cpu = cpuBefore.flatMap { before in bench.targetCPUSeconds().map { $0 - before } }
        let io = ioBefore.flatMap { before in bench.targetIOCPUSeconds().map { $0 - before } }
        await bench.stop()
        return Throughput(
            target: target, subscribers: subscribers, samples: samples, seconds: (end - start).seconds, targetCPUSeconds: cpu,
            batches: hubBatches, targetIOCPUSeconds: io)
    }

    // MARK: Latency at a fixed rate

    public func latency(_ target: Target, subscribers: Int, logger: Logger) async throws -> Latency {
        let context = try ZMQContext()
        let bench = try await Bench.start(target, ackInterval: ackInterval, logger: logger)
        let board = "bench"
        let histogram = Locked(Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three))
        let ready = Locked(0)
        let stop = Locked(false)
        let threads = (0..<subscribers).map { _ in SocketThread(name: "bench-subscriber") }
        for thread in threads {
            thread.start {
                do {
                    try Bench.subscribe(context: context, endpoint: bench.publish, board: board, ready: ready) { reader in
                        var replica = BoardState(limits: Bench.limits)
                        var times: [Int64] = []
                        while !stop.withLock({ $0 }) {
                            guard let payload = try reader.next(timeoutMilliseconds: 100) else { continue }
                            times.removeAll(keepingCapacity: true)
                            // Both read with the one-pass readers, as the hub and its subscribers do.
                            switch target {
                            case .forwarder:
                                guard let frame = payload.withUnsafeBytes({ AgentFrameDecoder.decode($0) }) else { continue }
                                for change in frame.changes { times += change.samples.map(\.time) }
                            case .hub:
                                let applied = try payload.withUnsafeBytes { bytes -> DiffBatch? in
                                    guard let (_, batch) = PublishedBatch.find(in: bytes) else { return nil }
                                    return try replica.apply(encodedBatch: batch).batch
                                }
                                for diff in applied?.diffs ?? [] {
                                    if case .appended(_, _, let samples) = diff { times += samples.map(\.time) }
                                }
                            }
                            let now = monotonicMicroseconds()
                            histogram.withLock { histogram in
                                for time in times { _ = histogram.record(UInt64(max(0, now - time))) }
                            }
                        }
                    }
                } catch {
                    logger.error("benchmark subscriber failed", metadata: ["error": "\(error)"])
                }
            }
        }
        while ready.withLock({ $0 }) < subscribers { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(200))
        let perMessage = Double(fingers * coalesced) * 0.8  // about 80% of fingers are down at a time
        let count = Int(latencyRate / perMessage * latencyDuration.seconds)
        let cpuBefore = bench.targetCPUSeconds(), wakeupsBefore = bench.targetWakeups(), ioBefore = bench.targetIOCPUSeconds()
        let messages = workload(messages: max(count / agents, 1), live: true)
        let started = ContinuousClock.now
        try await Bench.produce(messages, target: target, context: context, endpoint: bench.ingest, paced: latencyRate)
        let produced = ContinuousClock.now
        let wakeups = wakeupsBefore.flatMap { before in bench.targetWakeups().map { $0 - before } }
        try await Task.sleep(for: .milliseconds(500))
        stop.withLock { $0 = true }
        for thread in threads { await thread.finished() }
        let cpu = cpuBefore.flatMap { before in bench.targetCPUSeconds().map { $0 - before } }
        let io = ioBefore.flatMap { before in bench.targetIOCPUSeconds().map { $0 - before } }
        await bench.stop()
        let h = histogram.withLock { $0 }
        return Latency(
            target: target, subscribers: subscribers,
            summary: LatencySummary(
                count: Int(h.totalCount), p50: h.valueAtPercentile(50), p90: h.valueAtPercentile(90),
                p99: h.valueAtPercentile(99), p999: h.valueAtPercentile(99.9), max: h.max, mean: h.mean),
            targetCPUSeconds: cpu, targetWakeups: wakeups, frames: messages.count, seconds: (produced - started).seconds, targetIOCPUSeconds: io)
    }

    // MARK: Workload

    struct Message: Sendable {
        var agent: Int
        /// Encoded `AgentMessage`, or empty to encode at send time with the current clock (`live`).
        var bytes: [UInt8]
        var frame: TouchFrame
        var samples: Int
    }

    /// Frames of `agents` users, interleaved, numbered per agent from 1.
    func workload(messages perAgent: Int? = nil, live: Bool = false) -> [Message] {
        var profile = SimulationProfile()
        profile.users = agents
        profile.fingersPerUser = fingers
        profile.coalesced = coalesced...coalesced
        profile.predicted = 1...1
        profile.withForce = false
        profile.clearRate = 0
        profile.idleRate = 0.02
        profile.estimateRate = 0
        profile.strokeLength = 60...600
        var simulator = SessionSimulator(seed: seed, profile: profile, userPrefix: "bench")
        var messages: [Message] = []
        var sequences = Array(repeating: UInt64(0), count: agents)
        for _ in 0..<(perAgent ?? messagesPerAgent) {
            for agent in 0..<agents {
                let frame = simulator.nextFrame(for: agent)
                sequences[agent] += 1
                var message = Touchsync_V1_AgentMessage()
                message.sequence = sequences[agent]
                message.frame = frame.proto
                messages.append(
                    Message(
                        agent: agent, bytes: live ? [] : WireCodec.encode(message), frame: frame,
                        samples: frame.changes.reduce(0) { $0 + $1.samples.count }))
            }
        }
        return messages
    }
}

/// One target under test: its endpoints, and the hub when it is one.
struct Bench: Sendable {
    static let limits: BoardLimits = {
        var limits = BoardLimits()
        limits.maxSamplesPerStroke = .max
        return limits
    }()

    let ingest: String
    let publish: String
    let hub: TouchSyncHub?
    let forwarder: (SocketThread, Mailbox<Bool>)?
    /// The target's ZeroMQ I/O thread in /proc: the target has a context of
    /// its own (as a hub process has), whose I/O thread is the one that
    /// appeared when its first socket was made (nil: not found).
    var ioTasks: [String]? = nil

    /// The /proc task folders of this process's ZeroMQ I/O threads now.
    static func ioThreadTasks() -> Set<String> { Set(selfTasks(named: { $0.hasPrefix("ZMQbg/IO/") }) ?? []) }

    /// CPU seconds so far of the target's I/O thread.
    func targetIOCPUSeconds() -> Double? { ioTasks.flatMap(cpuSeconds(ofTasks:)) }

    /// The target's own threads (the hub loop, or with board threads each
    /// of them and the front; or the forwarder) in /proc: these only,
    /// whatever other hubs the process runs (tests run many).
    private func targetTask() -> [String]? {
        if let hub { return hub.loopThreadIDs.isEmpty ? nil : hub.loopThreadIDs.map(threadTask) }
        return forwarder?.0.systemThreadID.map { [threadTask($0)] }
    }

    /// CPU seconds so far of the target's own thread.
    func targetCPUSeconds() -> Double? { targetTask().flatMap(cpuSeconds(ofTasks:)) }

    /// Wake-ups so far of the target's own thread.
    func targetWakeups() -> Int? { targetTask().flatMap(wakeups(ofTasks:)) }

    static func start(
        _ target: TransportBenchmark.Target, ackInterval: Duration = .zero, journal: JournalConfiguration? = nil, boardThreads: Int = 1,
        logger: Logger
    ) async throws -> Bench {
        switch target {
        case .hub:
            var configuration = HubConfiguration.loopbackEphemeral()
            configuration.limits.maxMessagesPerSecond = 10_000_000  // producers here send as fast as they can
            configuration.limits.boardLimits = limits
            configuration.sockets.ingestHighWaterMark = 100_000
            configuration.sockets.publishHighWaterMark = 100_000
            configuration.timing.ackInterval = ackInterval
            configuration.journal = journal
            configuration.boardThreads = boardThreads
            let ioBefore = ioThreadTasks()
            let hub = try TouchSyncHub(configuration: configuration, logger: logger, context: try ZMQContext())
            let endpoints = try await hub.start()
            var bench = Bench(ingest: endpoints.ingest, publish: endpoints.publish, hub: hub, forwarder: nil)
            bench.ioTasks = ownIOTasks(since: ioBefore)
            return bench
        case .forwarder:
            let thread = SocketThread(name: "bench-forwarder")
            let mailbox = try Mailbox<Bool>()
            let ioBefore = ioThreadTasks()
            let context = try ZMQContext()  // its own, as the hub has (and a hub process)
            let endpoints: (String, String) = try await withCheckedThrowingContinuation { continuation in
                thread.start {
                    do {
                        let input = try ZMQSocket(context, type: .router)
                        try input.setReceiveHighWaterMark(100_000)
                        try input.bind("tcp://127.0.0.1:*")
                        let output = try ZMQSocket(context, type: .pub)
                        try output.setSendHighWaterMark(100_000)
                        try output.bind("tcp://127.0.0.1:*")
                        continuation.resume(returning: (try input.lastEndpoint, try output.lastEndpoint))
                        // The physical limit: receive a message, publish its payload, nothing else.
                        let routing = ZMQMessage()
                        let payload = ZMQMessage()
                        let topic = publishTopic(board: "bench")
                        var poller = ZMQPoller()
                        let inputIndex = try poller.add(input)
                        let mailboxIndex = poller.add(fileDescriptor: mailbox.fileDescriptor)
                        while true {
                            try poller.poll(timeoutMilliseconds: -1)
                            if poller.isReadable(mailboxIndex) { break }
                            guard poller.isReadable(inputIndex) else { continue }
                            while try input.receive(into: routing, dontWait: true) {
                                guard try input.receive(into: payload, dontWait: true) else { break }
                                try topic.withUnsafeBytes { _ = try output.send($0, more: true) }
                                try payload.withUnsafeBytes { _ = try output.send($0) }
                            }
                        }
                        _ = mailbox.close()
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
            }
            var bench = Bench(ingest: endpoints.0, publish: endpoints.1, hub: nil, forwarder: (thread, mailbox))
            bench.ioTasks = ownIOTasks(since: ioBefore)
            return bench
        }
    }

    /// The one I/O thread that appeared since `before` (nil when none or
    /// several did: another context started meanwhile, as in parallel tests).
    static func ownIOTasks(since before: Set<String>) -> [String]? {
        let appeared = ioThreadTasks().subtracting(before)
        return appeared.count == 1 ? Array(appeared) : nil
    }

    func stop() async {
        if let hub { await hub.stop() }
        if let (thread, mailbox) = forwarder {
            mailbox.post(true)
            await thread.finished()
        }
    }

    /// A SUB on `board`'s topic, reading payload frames.
    struct Reader {
        let socket: ZMQSocket
        let part = ZMQMessage()

        /// The next payload (the topic frame skipped), or nil on time-out.
        func next(timeoutMilliseconds: Int = -1) throws -> [UInt8]? {
            if timeoutMilliseconds >= 0 { guard try socket.waitReadable(timeoutMilliseconds: timeoutMilliseconds) else { return nil } }
            guard try socket.receive(into: part) else { return nil }
            guard part.hasMore, try socket.receive(into: part) else { return nil }
            return part.bytes
        }
    }

    static func subscribe(
        context: ZMQContext, endpoint: String, board: String, ready: Locked<Int>, _ body: (Reader) throws -> Void
    ) throws {
        let socket = try ZMQSocket(context, type: .sub)
        try socket.setReceiveHighWaterMark(1_000_000)
        try socket.connect(endpoint)
        try socket.subscribe(publishTopic(board: board))
        ready.withLock { $0 += 1 }
        defer { socket.close() }
        try body(Reader(socket: socket))
    }

    /// Sends `messages` from one DEALER per agent: as fast as possible, or at
    /// `paced` samples per second with each frame's samples stamped at send time.
    /// For the hub it says hello first and waits until everything is acknowledged.
    static func produce(
        _ messages: [TransportBenchmark.Message], target: TransportBenchmark.Target, context: ZMQContext,
        endpoint: String, paced: Double?, board: @escaping @Sendable (Int) -> String = { _ in "bench" }
    ) async throws {
        let agents = (messages.map(\.agent).max() ?? 0) + 1
        let thread = SocketThread(name: "bench-producer")
        let failure = Locked<(any Error)?>(nil)
        thread.start {
            do {
                let sockets = try (0..<agents).map { agent in
                    let socket = try ZMQSocket(context, type: .dealer)
                    try socket.setRoutingID(Array("bench-\(agent)".utf8))
                    try socket.setSendHighWaterMark(100_000)
                    // Closing must deliver what is queued (the binding's default LINGER 0 would drop it).
                    try socket.setLinger(milliseconds: 10_000)
                    try socket.connect(endpoint)
                    return socket
                }
                if target == .hub {
                    for (agent, socket) in sockets.enumerated() {
                        var hello = Touchsync_V1_AgentMessage()
                        hello.hello.protocolVersion = 1  // its frames are v1
                        hello.hello.board = board(agent)
                        hello.hello.sessionID = Data((0..<16).map { _ in UInt8.random(in: 0...255) })
                        try socket.send(WireCodec.encode(hello))
                        _ = try socket.receiveMultipart(timeoutMilliseconds: 5000)
                    }
                }
                let clock = ContinuousClock()
                let start = clock.now
                var sent = 0.0
                var lastSequence = Array(repeating: UInt64(0), count: agents)
                for message in messages {
                    if let paced {
                        // Sleep until due (no spinning: a spinning producer takes a core from
                        // what it measures); woken late, what is due by then goes at once,
                        // each frame stamped when sent.
                        let due = start + .nanoseconds(Int64(sent / paced * 1e9))
                        let wait = due - clock.now
                        if wait > .zero {
                            let (seconds, attoseconds) = wait.components
                            var pause = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
                            nanosleep(&pause, nil)
                        }
                    }
                    var bytes = message.bytes
                    if bytes.isEmpty {
                        // Stamp every sample with now, as if just made (its latency starts here).
                        let now = monotonicMicroseconds()
                        var frame = message.frame
                        for change in frame.changes.indices {
                            for sample in frame.changes[change].samples.indices { frame.changes[change].samples[sample].time = now }
                            for sample in frame.changes[change].predicted.indices {
                                frame.changes[change].predicted[sample].time = now + 8000
                            }
                        }
                        lastSequence[message.agent] += 1
                        var proto = Touchsync_V1_AgentMessage()
                        proto.sequence = lastSequence[message.agent]
                        proto.frame = frame.proto
                        bytes = WireCodec.encode(proto)
                    } else {
                        lastSequence[message.agent] += 1
                    }
                    try sockets[message.agent].send(bytes)
                    sent += Double(message.samples)
                }
                if target == .hub {
                    // Done when every agent's last message is acknowledged.
                    for (agent, socket) in sockets.enumerated() {
                        while true {
                            guard let parts = try socket.receiveMultipart(timeoutMilliseconds: 30_000) else { break }
                            let reply = try WireCodec.decode(Touchsync_V1_HubReply.self, from: parts[0].bytes)
                            if case .ack(let ack) = reply.body, ack.through >= lastSequence[agent] { break }
                        }
                    }
                }
                for socket in sockets { socket.close() }
            } catch {
                failure.withLock { $0 = error }
            }
        }
        await thread.finished()
        if let error = failure.withLock({ $0 }) { throw error }
    }
}

/// A value shared between threads behind a lock (a `Mutex` cannot be
/// captured by the escaping closures that threads run).
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try mutex.withLock { try body(&$0) }
    }
}
