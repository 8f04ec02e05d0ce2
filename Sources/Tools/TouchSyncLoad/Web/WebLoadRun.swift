import TouchSyncWaiting
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import TouchSyncClient
import TouchSyncCore
import TouchSyncSimulation
import TouchSyncWebWire

/// A load run through the browser path (`touchsync load --web URL`): how many tabs, how fast, against which gateway.
public struct WebLoadConfiguration: Sendable {
    /// The gateway, `http://HOST:PORT`.
    public var host = "127.0.0.1"
    public var port = 8080
    /// Simulated tabs, each its own WebSocket and, at the gateway, its own agent. Default 100.
    public var tabs = 100
    /// Tabs per board (boards named load-web-SEED-k). Default 10.
    public var tabsPerBoard = 10
    /// Fingers per tab. Default 1.
    public var fingers = 1
    /// Pointer events per second per finger. Default 60.
    public var hz: Double = 60
    /// Coalesced samples per pointer event. Default 1.
    public var coalesced = 1
    /// Predicted samples per pointer event. Default 1.
    public var predicted = 1
    /// How long the tabs draw. Default 10 s.
    public var duration: Duration = .seconds(10)
    /// How long every tab stays connected and idle before drawing, to measure what idle tabs cost. Default 5 s.
    public var idle: Duration = .seconds(5)
    /// Tabs per board that keep the whole board and measure latency (the others follow its sequence). Default 1.
    public var measuringTabsPerBoard = 1
    /// Event-loop threads carrying the tabs' connections. Default 2.
    public var clientThreads = 2
    /// Tabs connecting at once. Default 32.
    public var connectConcurrency = 32
    /// Chance per event that a touch is cancelled. Default 0.01.
    public var cancelRate = 0.01
    public var seed: UInt64 = 1
    /// The gateway's process (default: whichever listens on the port, if visible).
    public var gatewayPID: Int32? = nil
    /// The hub's process, to compare CPU per sample (optional).
    public var hubPID: Int32? = nil
    /// The wire the tabs ask for: "packed2" (as the page does; docs/protocol.md, "Packed frames"), "packed", "binary" or "json".
    public var browserWire = "packed2"

    public init() {}

    public var boards: Int { (tabs + tabsPerBoard - 1) / tabsPerBoard }
    public var offeredSamplesPerSecond: Double { Double(tabs * fingers * coalesced) * hz }
}

/// What a run through the browser path measured.
public struct WebLoadReport: Sendable {
    public var configuration: WebLoadConfiguration
    public var drawingSeconds: Double
    public var samplesSent: Int
    public var messagesSent: Int
    public var lost: Int
    public var duplicated: Int
    /// Every message acknowledged, every tab of a board at one sequence, measuring tabs' boards exactly what was drawn.
    public var converged: Bool
    public var acknowledged: Bool
    public var latency: LatencySummary
    public var latencyOverTime: [LatencySecond]
    /// Bytes per sample sent (frame payloads, in the run's wire): tabs to the gateway, and the gateway to each tab.
    /// The wire the gateway welcomed the tabs with: "packed2", "packed", "binary" or "json" (every tab), or "mixed".
    public var wireSpoken = "json"
    public var tabBytesPerSample: Double
    public var gatewayBytesPerSamplePerTab: Double
    public var gaps: Int
    public var reconnects: Int
    public var sessionsLost: Int
    public var busyNotices: Int
    public var refusals: [String: Int]
    public var errors: [String: Int]
    public var malformed: Int
    public var connectSeconds: Double
    public var drainSeconds: Double
    public var generatorBehindMilliseconds: Double
    public var ticksRun: Int
    public var ticksScheduled: Int
    /// The gateway, when its process could be read.
    public var gateway: GatewayFigures?
    /// The hub's CPU over the drawing and drain (with `hubPID`), and the kernel's part of it.
    public var hubCPUSeconds: Double?
    public var hubSystemSeconds: Double?
    /// The same, thread by thread (with `hubPID`): where the hub's time for browser samples goes.
    public var hubThreads: ThreadCPU? = nil

    public struct GatewayFigures: Sendable {
        public var pid: Int32
        public var before: ProcessStats
        public var connected: ProcessStats
        public var afterIdle: ProcessStats
        public var afterDrawing: ProcessStats
        public var idleSeconds: Double
        public var cpuSecondsDrawing: Double { afterDrawing.cpuSeconds - afterIdle.cpuSeconds }
        /// The kernel's part of `cpuSecondsDrawing` (the tabs' reads and writes).
        public var systemSecondsDrawing: Double { afterDrawing.systemSeconds - afterIdle.systemSeconds }
        /// Share of one core the gateway used while every tab sat idle.
        public var idleCoreShare: Double { (afterIdle.cpuSeconds - connected.cpuSeconds) / max(idleSeconds, 1e-9) }
    }

    public var samplesPerSecond: Double { Double(samplesSent) / max(drawingSeconds, 1e-9) }
    public var passed: Bool { converged && lost == 0 && duplicated == 0 }
    /// The generator ran 99% of its ticks, the backlog drained within a second, and it converged.
    public var keptUp: Bool { Double(ticksRun) >= 0.99 * Double(ticksScheduled) && drainSeconds <= 1 && converged }

    /// Microseconds per sample sent, of `seconds` of CPU.
    private func perSample(_ seconds: Double) -> Double { 1e6 * seconds / Double(max(samplesSent, 1)) }

    public var text: String {
        func number(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
        let c = configuration
        var lines = [
            "tabs                \(c.tabs) over \(c.boards) board(s), \(c.fingers) finger(s) each at \(Int(c.hz)) Hz through ws://\(c.host):\(c.port)/ws",
            "samples sent        \(samplesSent) in \(messagesSent) touch messages over \(number(drawingSeconds, 1)) s (\(number(samplesPerSecond)) samples/s)",
            "lost / duplicated   \(lost) / \(duplicated) (measuring tabs' boards against what every tab drew)",
            "acknowledged        \(acknowledged ? "every numbered message" : "NOT every numbered message within 60 s")",
            "converged           \(converged ? "yes: every tab of a board at one sequence, boards exactly as drawn" : "NO")",
            "latency (µs)        p50 \(latency.p50)  p90 \(latency.p90)  p99 \(latency.p99)  p99.9 \(latency.p999)  max \(latency.max)"
                + "  (\(latency.count) samples, from the pointer event to the measuring tab's board)",
            "\(wireSpoken) bytes/sample tab to gateway \(number(tabBytesPerSample, 1)), gateway to each tab \(number(gatewayBytesPerSamplePerTab, 1))",
            "gaps / reconnects   \(gaps) / \(reconnects)\(sessionsLost > 0 ? " (\(sessionsLost) sessions LOST)" : "")",
            "refused / errors    \(refusals.values.reduce(0, +)) / \(errors.values.reduce(0, +))"
                + ((refusals.merging(errors) { $0 + $1 }).isEmpty
                    ? "" : " (" + refusals.merging(errors) { $0 + $1 }.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")")
                + (malformed > 0 ? ", \(malformed) messages this client could not read" : ""),
            "hub busy notices    \(busyNotices)",
            "generator behind    at most \(number(generatorBehindMilliseconds, 1)) ms; ran \(ticksRun) of \(ticksScheduled) tab ticks",
            "connect all tabs    \(number(connectSeconds, 2)) s; drain after drawing \(number(drainSeconds, 2)) s",
            "kept up             \(keptUp ? "yes" : "NO") (99% of ticks run, drained within 1 s, converged)",
        ]
        if let gateway {
            let perTab = Double(gateway.connected.residentBytes - gateway.before.residentBytes) / Double(max(c.tabs, 1))
            lines += [
                "gateway CPU         \(number(gateway.cpuSecondsDrawing, 2)) s drawing and draining, \(number(perSample(gateway.cpuSecondsDrawing), 2)) µs per sample"
                    + " (\(number(perSample(gateway.systemSecondsDrawing), 2)) of them in the kernel)"
                    + (hubCPUSeconds.map {
                        " (hub \(number(perSample($0), 2)) µs per sample, \(number(perSample(hubSystemSeconds ?? 0), 2)) in the kernel; gateway/hub \(number(gateway.cpuSecondsDrawing / max($0, 1e-9), 2))x)"
                    } ?? ""),
                "gateway idle        \(number(100 * gateway.idleCoreShare, 1))% of a core with \(c.tabs) tabs connected and idle for \(number(gateway.idleSeconds, 1)) s",
                "gateway memory      \(number(perTab / 1024, 1)) KiB resident per tab (\(gateway.before.residentBytes >> 20) MiB before the tabs, \(gateway.connected.residentBytes >> 20) MiB with them, \(gateway.afterDrawing.residentBytes >> 20) MiB after drawing)",
                "gateway threads     \(gateway.before.threads) before the tabs, \(gateway.connected.threads) with \(c.tabs) tabs (pid \(gateway.pid))",
            ]
        } else {
            lines.append("gateway process     not visible from here (another machine or user): no CPU, memory or thread figures")
        }
        if let hubThreads, !hubThreads.secondsByName.isEmpty {
            lines.append("hub threads         " + hubThreads.summary(perSampleOf: samplesSent, over: "drawing and draining"))
        }
        return lines.joined(separator: "\n")
    }

    public var json: Data {
        var object: [String: Any] = [
            "tabs": configuration.tabs, "boards": configuration.boards, "fingers": configuration.fingers, "hz": configuration.hz,
            "samples_sent": samplesSent, "messages_sent": messagesSent, "lost": lost, "duplicated": duplicated,
            "converged": converged, "acknowledged": acknowledged, "kept_up": keptUp,
            "latency_us": ["p50": latency.p50, "p90": latency.p90, "p99": latency.p99, "p999": latency.p999, "max": latency.max, "count": latency.count]
                as [String: Any],
            "wire": wireSpoken,
            "bytes_per_sample": ["tab_to_gateway": tabBytesPerSample, "gateway_to_each_tab": gatewayBytesPerSamplePerTab],
            "gaps": gaps, "reconnects": reconnects, "sessions_lost": sessionsLost, "busy_notices": busyNotices,
            "refusals": refusals, "errors": errors, "connect_seconds": connectSeconds, "drain_seconds": drainSeconds,
            "drawing_seconds": drawingSeconds, "generator_behind_ms": generatorBehindMilliseconds,
            "ticks_run": ticksRun, "ticks_scheduled": ticksScheduled,
        ]
        if let gateway {
            object["gateway"] = [
                "pid": gateway.pid, "cpu_seconds_drawing": gateway.cpuSecondsDrawing,
                "cpu_us_per_sample": perSample(gateway.cpuSecondsDrawing),
                "system_us_per_sample": perSample(gateway.systemSecondsDrawing),
                "idle_core_share": gateway.idleCoreShare,
                "resident_bytes_per_tab": Double(gateway.connected.residentBytes - gateway.before.residentBytes) / Double(max(configuration.tabs, 1)),
                "threads_before": gateway.before.threads, "threads_connected": gateway.connected.threads,
            ] as [String: Any]
        }
        if let hubCPUSeconds { object["hub_cpu_us_per_sample"] = perSample(hubCPUSeconds) }
        if let hubSystemSeconds { object["hub_system_us_per_sample"] = perSample(hubSystemSeconds) }
        if let hubThreads { object["hub_threads_cpu_seconds"] = hubThreads.secondsByName }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])) ?? Data()
    }
}

public enum WebLoadError: Error, CustomStringConvertible {
    case unreachable(String)
    case notWelcomed(String)
    public var description: String {
        switch self {
        case .unreachable(let why): "the gateway is unreachable: \(why)"
        case .notWelcomed(let why): "the gateway did not welcome every tab: \(why)"
        }
    }
}

/// Simulated users as browser tabs: WebSocket clients speaking the page's
/// wire to a gateway (docs/protocol.md, "The browser wire"), drawing in real
/// time, then an exact check of every measuring tab's board against what
/// every tab drew; the gateway's CPU, memory and threads from /proc.
public struct WebLoadRun: Sendable {
    public let configuration: WebLoadConfiguration
    private let logger: Logger

    public init(configuration: WebLoadConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    public func run(
        interruption: LoadInterruption = LoadInterruption(), progress: @Sendable (String) -> Void = { _ in }
    ) async throws -> WebLoadReport {
        let c = configuration
        raiseOpenFileLimit()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: c.clientThreads)
        do {
            let report = try await run(on: group, interruption: interruption, progress: progress)
            try? await group.shutdownGracefully()
            return report
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private func run(
        on group: MultiThreadedEventLoopGroup, interruption: LoadInterruption, progress: @Sendable (String) -> Void
    ) async throws -> WebLoadReport {
        let c = configuration
        let latency = LatencyRecorder()
        let signal = ConditionWaiters()  // woken when any tab changed (a welcome, an ack, a batch)
        let gatewayPID = c.gatewayPID ?? ProcessStats.listener(onPort: c.port)
        let before = gatewayPID.flatMap { ProcessStats.read(pid: $0) }

        var profile = SimulationProfile()
        profile.users = 1
        profile.fingersPerUser = c.fingers
        profile.hz = c.hz
        profile.coalesced = c.coalesced...c.coalesced
        profile.predicted = c.predicted...c.predicted
        profile.cancelRate = c.cancelRate
        profile.vanishRate = 0
        profile.aliveSetRate = 0
        profile.estimateRate = 0
        profile.clearRate = 0
        profile.withForce = false
        profile.strokeLength = 20...400
        let tabs = (0..<c.tabs).map { index in
            let board = index % c.boards
            return WebTab(
                index: index, board: "load-web-\(c.seed)-\(board)", measuring: index / c.boards < c.measuringTabsPerBoard, wire: c.browserWire,
                simulator: SessionSimulator(seed: c.seed &+ UInt64(index), profile: profile, userPrefix: "tab-\(index)", startTime: 0),
                latency: index / c.boards < c.measuringTabsPerBoard ? latency : nil, changed: { signal.signal() })
        }

        // Connect every tab (a few at a time, as a crowd opening a link would), then wait for every welcome.
        let connecting = ContinuousClock.now
        progress("connecting \(c.tabs) tabs to ws://\(c.host):\(c.port)/ws")
        do {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                var next = 0
                for _ in 0..<min(c.connectConcurrency, tabs.count) {
                    let tab = tabs[next]
                    next += 1
                    tasks.addTask { try await tab.connect(host: c.host, port: c.port, group: group) }
                }
                while try await tasks.next() != nil, next < tabs.count {
                    let tab = tabs[next]
                    next += 1
                    tasks.addTask { try await tab.connect(host: c.host, port: c.port, group: group) }
                }
            }
        } catch {
            for tab in tabs { await tab.close() }
            throw WebLoadError.unreachable("\(error)")
        }
        // Done when every tab has its board, or was refused for good (a full gateway, a limit).
        let finalRefusals: Set<String> = ["GATEWAY_FULL", "TOO_MANY_TABS", "UNAUTHORIZED", "FORBIDDEN", "UNKNOWN_BOARD"]
        let allHeard = await signal.wait(timeout: .seconds(60)) {
            tabs.allSatisfy { tab in
                (tab.isWelcomed && tab.sequence != nil) || tab.state.withLock { !finalRefusals.isDisjoint(with: $0.errors.keys) }
            } ? true : nil
        }
        guard allHeard != nil, tabs.allSatisfy({ $0.isWelcomed && $0.sequence != nil }) else {
            let missing = tabs.filter { !$0.isWelcomed }.count
            let errors = tabs.reduce(into: [String: Int]()) { all, tab in all.merge(tab.state.withLock { $0.errors }) { $0 + $1 } }
            for tab in tabs { await tab.close() }
            throw WebLoadError.notWelcomed(
                "\(missing) of \(c.tabs) tabs not welcomed (or without the board's snapshot) within 60 s"
                    + (errors.isEmpty ? "" : "; errors: " + errors.map { "\($0.key) \($0.value)" }.sorted().joined(separator: ", "))
                    + (errors["TOO_MANY_TABS"] != nil || errors["GATEWAY_FULL"] != nil
                        ? " (a gateway seats a quarter of --max-tabs per address, at least 16: for a load test start it with a --max-tabs above --users and --max-tabs-per-address 0)"
                        : ""))
        }
        let connectTime = ContinuousClock.now - connecting
        let connected = gatewayPID.flatMap { ProcessStats.read(pid: $0) }
        progress(String(format: "%d tabs welcomed in %.2f s; idle for %.0f s", c.tabs, connectTime.seconds, c.idle.seconds))
        let idleStart = ContinuousClock.now
        try? await Task.sleep(for: c.idle)  // the idle window is what is measured, not a wait for a condition
        let idleTime = ContinuousClock.now - idleStart
        let afterIdle = gatewayPID.flatMap { ProcessStats.read(pid: $0) }
        let hubBefore = c.hubPID.flatMap { ProcessStats.read(pid: $0) }
        let hubThreadsBefore = c.hubPID.flatMap { ThreadCPU.read(pid: $0) }

        // Draw: every tab ticks on its connection's event loop at its own phase of the period.
        for tab in tabs { tab.startDrawing() }
        let period = Int64(1_000_000 / c.hz)
        let start = monotonicMicroseconds() + 20_000
        let drawingUntil = DrawingEnd(start + Int64(c.duration.seconds * 1e6))
        for (index, tab) in tabs.enumerated() {
            let loop = group.next()
            let offset = period * Int64(index) / Int64(max(tabs.count, 1))
            scheduleTicks(tab, on: loop, first: start + offset, period: period, until: drawingUntil)
        }
        var lastReport = ContinuousClock.now
        var sentAtLastReport = 0
        while monotonicMicroseconds() < drawingUntil.value {
            if interruption.isRequested { drawingUntil.value = monotonicMicroseconds() }
            try? await Task.sleep(for: .milliseconds(250))
            if ContinuousClock.now - lastReport >= .seconds(1) {
                let sent = tabs.reduce(0) { $0 + $1.state.withLock { $0.samplesSent } }
                let (p50, p99) = latency.percentiles(50, 99)
                progress(
                    String(
                        format: "  %5.1f s  %9.0f samples/s  latency p50 %6d µs  p99 %7d µs", Double(monotonicMicroseconds() - start) / 1e6,
                        Double(sent - sentAtLastReport) / (ContinuousClock.now - lastReport).seconds, p50, p99))
                sentAtLastReport = sent
                lastReport = ContinuousClock.now
            }
            await reconnectDropped(tabs, group: group)
        }
        let drawingEnd = min(monotonicMicroseconds(), drawingUntil.value)
        // Let the last scheduled ticks run out, then every finger lifts.
        try? await Task.sleep(for: .milliseconds(Int64(2 * period / 1000) + 5))
        for tab in tabs { tab.stopDrawing() }
        let drawingSeconds = Double(drawingEnd - start) / 1e6

        // Drain: every message acknowledged, then every tab of a board at one sequence that stays put.
        let draining = ContinuousClock.now
        var acknowledged = false
        let ackDeadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < ackDeadline {
            await reconnectDropped(tabs, group: group)
            if await signal.wait(timeout: .seconds(1), until: { tabs.allSatisfy(\.allAcknowledged) ? true : nil }) != nil {
                acknowledged = true
                break
            }
        }
        // Settled: every tab of a board at one sequence for 500 ms, and the
        // measuring tabs show exactly what was drawn. A still sequence alone
        // is not enough: acknowledgements and batches reach the gateway on
        // different sockets, and a starved gateway held the last batches for
        // longer than 500 ms after every acknowledgement.
        var settled = false
        var judgement = Judgement()
        let settleDeadline = ContinuousClock.now + .seconds(30)
        var lastSequences: [UInt64?] = []
        var stableSince = ContinuousClock.now
        while ContinuousClock.now < settleDeadline {
            let sequences = tabs.map(\.sequence)
            var agreeing = true
            for board in 0..<c.boards {
                let onBoard = Set(stride(from: board, to: tabs.count, by: c.boards).map { sequences[$0] })
                if onBoard.count != 1 || onBoard.first! == nil { agreeing = false }
            }
            if sequences != lastSequences {
                lastSequences = sequences
                stableSince = ContinuousClock.now
            } else if agreeing, ContinuousClock.now - stableSince >= .milliseconds(500) {
                judgement = judge(tabs, boards: c.boards)
                if judgement.exact {
                    settled = true
                    break
                }
                stableSince = ContinuousClock.now  // judged again after another still 500 ms
            }
            try? await Task.sleep(for: .milliseconds(100))  // "stays put" is a span of time: looked at 10 times a second
        }
        let drainSeconds = (ContinuousClock.now - draining).seconds - (settled ? 0.5 : 0)
        let afterDrawing = gatewayPID.flatMap { ProcessStats.read(pid: $0) }
        let hubAfter = c.hubPID.flatMap { ProcessStats.read(pid: $0) }
        let hubThreadsAfter = c.hubPID.flatMap { ThreadCPU.read(pid: $0) }
        if !settled { judgement = judge(tabs, boards: c.boards) }
        let (lost, duplicated, exact) = (judgement.lost, judgement.duplicated, judgement.exact)
        let totals = tabs.map { $0.state.withLock { $0 } }
        let bytes = tabs.map(\.bytes)
        let wires = Set(tabs.map(\.spoken))
        for tab in tabs { await tab.close() }

        let samplesSent = totals.reduce(0) { $0 + $1.samplesSent }
        var refusals: [String: Int] = [:]
        var errors: [String: Int] = [:]
        for state in totals {
            refusals.merge(state.refusals) { $0 + $1 }
            errors.merge(state.errors) { $0 + $1 }
        }
        var gateway: WebLoadReport.GatewayFigures? = nil
        if let gatewayPID, let before, let connected, let afterIdle, let afterDrawing {
            gateway = .init(
                pid: gatewayPID, before: before, connected: connected, afterIdle: afterIdle, afterDrawing: afterDrawing,
                idleSeconds: idleTime.seconds)
        }
        let hubCPU = hubBefore.flatMap { before in hubAfter.map { $0.cpuSeconds - before.cpuSeconds } }
        let hubSystem = hubBefore.flatMap { before in hubAfter.map { $0.systemSeconds - before.systemSeconds } }
        var report = WebLoadReport(
            configuration: c, drawingSeconds: drawingSeconds, samplesSent: samplesSent,
            messagesSent: totals.reduce(0) { $0 + $1.messagesSent }, lost: lost, duplicated: duplicated,
            converged: acknowledged && settled && exact && lost == 0 && duplicated == 0, acknowledged: acknowledged,
            latency: latency.snapshot(), latencyOverTime: latency.timeline(),
            tabBytesPerSample: Double(bytes.reduce(0) { $0 + $1.sent }) / Double(max(samplesSent, 1)),
            gatewayBytesPerSamplePerTab: Double(bytes.reduce(0) { $0 + $1.received }) / Double(max(samplesSent, 1)) / Double(c.tabsPerBoard),
            gaps: totals.reduce(0) { $0 + $1.gaps }, reconnects: totals.reduce(0) { $0 + $1.reconnects },
            sessionsLost: totals.reduce(0) { $0 + $1.sessionsLost }, busyNotices: totals.reduce(0) { $0 + $1.busyNotices },
            refusals: refusals, errors: errors, malformed: totals.reduce(0) { $0 + $1.malformed },
            connectSeconds: connectTime.seconds, drainSeconds: max(drainSeconds, 0),
            generatorBehindMilliseconds: Double(totals.map(\.worstLateness).max() ?? 0) / 1000,
            ticksRun: totals.reduce(0) { $0 + $1.ticksRun }, ticksScheduled: Int(drawingSeconds * c.hz) * c.tabs,
            gateway: gateway, hubCPUSeconds: hubCPU, hubSystemSeconds: hubSystem)
        report.wireSpoken = wires.count == 1 ? wires.first! : "mixed"
        report.hubThreads = hubThreadsBefore.flatMap { before in hubThreadsAfter?.since(before) }
        return report
    }

    /// Each measuring tab's board against what every tab on it drew.
    struct Judgement {
        var lost = 0
        var duplicated = 0
        /// Nothing lost or duplicated, and nothing left in progress (every finger lifted).
        var exact = false
    }

    private func judge(_ tabs: [WebTab], boards: Int) -> Judgement {
        var judgement = Judgement()
        var unfinished = false
        for board in 0..<boards {
            let onBoard = stride(from: board, to: tabs.count, by: boards).map { tabs[$0] }
            for measuring in onBoard where measuring.measuring {
                let replica = measuring.state.withLock { $0.replica }
                let byOwner = Dictionary(grouping: replica.strokes, by: \.owner)
                for tab in onBoard {
                    let (user, drawn) = tab.state.withLock { ($0.user, $0.drawn) }
                    let shown = (byOwner[user ?? ""] ?? []).sorted { $0.id < $1.id }.map { stroke in
                        stroke.samples.map { Sample(x: Int32(truncatingIfNeeded: $0.x), y: Int32(truncatingIfNeeded: $0.y), time: $0.t) }
                    }
                    let (missing, extra) = drawn.compare(with: shown)
                    judgement.lost += missing
                    judgement.duplicated += extra
                }
                if !replica.active.isEmpty { unfinished = true }
            }
        }
        judgement.exact = judgement.lost == 0 && judgement.duplicated == 0 && !unfinished
        return judgement
    }

    /// Ticks `tab` at `first`, `first + period`… on `loop` until the drawing ends (absolute deadlines: no drift).
    private func scheduleTicks(_ tab: WebTab, on loop: any EventLoop, first: Int64, period: Int64, until: DrawingEnd) {
        @Sendable func schedule(_ due: Int64) {
            let delay = max(due - monotonicMicroseconds(), 0)
            loop.scheduleTask(in: .microseconds(delay)) {
                let now = monotonicMicroseconds()
                guard now < until.value else { return }
                // The samples are stamped when the input happened (`due`), as a digitizer stamps them, however
                // late the tick runs: a late delivery shows in the latency, not as an irregular finger.
                tab.tick(at: due, lateness: now - due)
                // A tick that fell far behind skips to now instead of bursting to catch up.
                var next = due + period
                if next < now - 10 * period { next = now }
                schedule(next)
            }
        }
        schedule(first)
    }

    /// Tabs whose connection dropped come back with their resume token, as the page does.
    private func reconnectDropped(_ tabs: [WebTab], group: any EventLoopGroup) async {
        for tab in tabs where tab.needsReconnect {
            tab.state.withLock {
                $0.dropped = false
                $0.reconnects += 1
            }
            do { try await tab.connect(host: configuration.host, port: configuration.port, group: group) } catch {
                tab.state.withLock { $0.dropped = true }
                logger.debug("tab reconnect failed", metadata: ["tab": "\(tab.index)", "error": "\(error)"])
            }
        }
    }
}

/// When the drawing ends (µs, the run's clock): moved earlier by Ctrl-C.
final class DrawingEnd: Sendable {
    private let end: Mutex<Int64>
    init(_ end: Int64) { self.end = Mutex(end) }
    var value: Int64 {
        get { end.withLock { $0 } }
        set { end.withLock { $0 = newValue } }
    }
}
