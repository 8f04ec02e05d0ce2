import Foundation

/// End-to-end latency percentiles, in microseconds.
public struct LatencySummary: Sendable, Equatable {
    public var count: Int
    public var p50: UInt64
    public var p90: UInt64
    public var p99: UInt64
    public var p999: UInt64
    public var max: UInt64
    public var mean: Double
}

/// One second of a run, as the measuring subscribers saw it.
public struct LatencySecond: Sendable, Equatable {
    public var second: Int
    /// Samples applied in that second, by all measuring subscribers together.
    public var samples: Int
    public var p99: UInt64
}

/// What a load run measured.
public struct LoadReport: Sendable {
    public var configuration: LoadConfiguration
    public var drawingSeconds: Double
    public var samplesSent: Int
    public var framesSent: Int
    /// The fewest samples any measuring subscriber applied through diffs.
    public var samplesApplied: Int
    /// Samples drawn that a subscriber does not show (over all subscribers).
    public var lost: Int
    /// Samples a subscriber shows more than once or that were never drawn.
    public var duplicated: Int
    /// Every frame acknowledged, every subscriber at the hub's digest, nothing lost or duplicated.
    public var converged: Bool
    public var latency: LatencySummary
    public var latencyOverTime: [LatencySecond]
    public var agentBytesPerSample: Double
    public var subscriberBytesPerSample: Double
    /// How far the load generator itself fell behind its schedule, at worst.
    public var generatorBehindMilliseconds: Double
    public var resyncs: Int
    /// Input ticks the generator ran, and how many its schedule had (duration × hz):
    /// fewer means the generator itself could not keep up and skipped ticks.
    public var ticksRun: Int
    public var ticksScheduled: Int
    /// From the end of drawing until every frame was acknowledged and every
    /// subscriber showed the hub's last batch: the backlog the hub still had
    /// (embedded hub only: an external hub's last sequence is not known here).
    public var drainSeconds: Double?
    /// From starting the agents until the hub had welcomed every one (before drawing began).
    public var connectSeconds: Double
    /// Each board's digest as its subscribers ended (hex), to compare with a hub's.
    public var boardDigests: [String: String]
    /// Messages the hub refused by error code, and agent reconnects (none in a healthy run).
    public var refusals: [String: Int]
    public var reconnects: Int
    /// Frames that went out merged into earlier ones because the hub was
    /// behind (agents' flow control), and BUSY notices the agents heard.
    public var coalescedFrames = 0
    public var busyNotices = 0
    /// CPU seconds of the embedded hub's thread (nil for an external hub).
    public var hubCPUSeconds: Double?
    /// The hub's threads' CPU from the first tick to the end of the drain,
    /// by thread name: the embedded hub's own threads, or every thread of an
    /// external hub given by its process id (nil: neither).
    public var hubThreads: ThreadCPU? = nil
    /// Peak resident memory of this whole process (generator, hub, subscribers).
    public var maxResidentBytes: Int
    /// Resident memory per connected agent before drawing: the growth from
    /// before the agents started until all were welcomed, over their count
    /// (agent side, and the hub's side when it is embedded).
    public var residentBytesPerAgent: Double = 0
    /// Stopped early (Ctrl-C): the figures cover the drawing until then.
    public var interrupted = false

    public var samplesPerSecond: Double { Double(samplesSent) / max(drawingSeconds, 1e-9) }
    public var framesPerSecond: Double { Double(framesSent) / max(drawingSeconds, 1e-9) }
    /// The generator ran at least 99% of its ticks and the hub's backlog
    /// drained within a second of the end: the offered load was carried in real time.
    public var keptUp: Bool {
        Double(ticksRun) >= 0.99 * Double(ticksScheduled) && (drainSeconds ?? 0) <= 1 && converged
    }
    /// Whether the run delivered everything exactly (the exit status of `touchsync load`).
    public var passed: Bool { converged && lost == 0 && duplicated == 0 }

    public var text: String {
        func number(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
        var lines = interrupted ? ["INTERRUPTED after \(number(drawingSeconds, 1)) s of drawing: the figures below cover that part"] : []
        lines += [
            "samples sent        \(samplesSent) in \(framesSent) frames over \(number(drawingSeconds, 1)) s"
                + " (\(number(samplesPerSecond)) samples/s, \(number(framesPerSecond)) frames/s)",
            "samples applied     \(samplesApplied) (the fewest of \(configuration.subscribers * configuration.boards) subscriber(s))",
            "lost / duplicated   \(lost) / \(duplicated)",
            "converged           \(converged ? "yes: every subscriber shows exactly what was drawn" + (configuration.hub == nil ? ", at the hub's digest" : "") : "NO")",
            "latency (µs)        p50 \(latency.p50)  p90 \(latency.p90)  p99 \(latency.p99)  p99.9 \(latency.p999)  max \(latency.max)"
                + "  (\(latency.count) samples, creation to application in a subscriber)",
            "wire bytes/sample   agent to hub \(number(agentBytesPerSample, 2)), hub to each subscriber \(number(subscriberBytesPerSample, 2))",
            "resyncs             \(resyncs)",
            "generator behind    at most \(number(generatorBehindMilliseconds, 1)) ms; ran \(ticksRun) of \(ticksScheduled) ticks",
            "connect all agents  \(number(connectSeconds, 2)) s (before drawing)",
            "drain after drawing \(drainSeconds.map { number($0, 2) + " s" } ?? "not measured (external hub)")",
            "refused / reconnects \(refusals.values.reduce(0, +)) / \(reconnects)"
                + (refusals.isEmpty ? "" : " (" + refusals.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"),
            "backpressure        \(coalescedFrames) frames coalesced, \(busyNotices) BUSY notices (the hub was behind; nothing is lost)",
            "kept up             \(keptUp ? "yes" : "NO") (99% of ticks run, backlog drained within 1 s, converged)",
        ]
        if let hubCPUSeconds {
            lines.append(
                "hub CPU             \(number(hubCPUSeconds, 2)) s (\(number(100 * hubCPUSeconds / max(drawingSeconds + (drainSeconds ?? 0), 1e-9)))% of one core while drawing and draining)")
        }
        if let hubThreads, !hubThreads.secondsByName.isEmpty {
            lines.append("hub threads         " + hubThreads.summary(perSampleOf: samplesSent, over: "first tick to drained"))
        }
        lines.append(
            "memory per agent    \(number(residentBytesPerAgent / 1024, 1)) KiB resident per connected agent before drawing "
                + (configuration.hub == nil ? "(agent and hub sides)" : "(agent side)"))
        lines.append(
            "process peak RSS    \(maxResidentBytes / (1 << 20)) MiB "
                + (configuration.hub == nil ? "(generator, hub and subscribers together)" : "(generator and subscribers; the hub is another process)"))
        return lines.joined(separator: "\n")
    }

    /// The report as JSON (`touchsync load --json FILE`).
    public var json: Data {
        var object: [String: Any] = [
            "samples_sent": samplesSent,
            "frames_sent": framesSent,
            "samples_applied": samplesApplied,
            "lost": lost,
            "duplicated": duplicated,
            "converged": converged,
            "latency_us": [
                "p50": latency.p50, "p90": latency.p90, "p99": latency.p99, "p999": latency.p999, "max": latency.max,
                "mean": latency.mean, "count": latency.count,
            ] as [String: Any],
            "samples_per_second": samplesPerSecond,
            "frames_per_second": framesPerSecond,
            "wire_bytes_per_sample": ["agent_to_hub": agentBytesPerSample, "hub_to_subscriber": subscriberBytesPerSample],
            "resyncs": resyncs,
            "ticks_run": ticksRun,
            "board_digests": boardDigests,
            "connect_seconds": connectSeconds,
            "resident_bytes_per_agent": residentBytesPerAgent,
            "ticks_scheduled": ticksScheduled,
            "refusals": refusals,
            "reconnects": reconnects,
            "coalesced_frames": coalescedFrames,
            "busy_notices": busyNotices,
            "kept_up": keptUp,
            "generator_behind_ms": generatorBehindMilliseconds,
            "drawing_seconds": drawingSeconds,
            "interrupted": interrupted,
            "max_resident_bytes": maxResidentBytes,
            "configuration": [
                "users": configuration.users, "fingers": configuration.fingers, "hz": configuration.hz,
                "coalesced": configuration.coalesced, "predicted": configuration.predicted,
                "boards": configuration.boards, "subscribers": configuration.subscribers,
                "cancel_rate": configuration.cancelRate, "seed": configuration.seed,
                "agent_threads": configuration.agentThreads,
                "hub": configuration.hub == nil ? "embedded" : "external",
            ] as [String: Any],
            "latency_over_time": latencyOverTime.map { ["second": $0.second, "samples": $0.samples, "p99_us": $0.p99] },
        ]
        if let hubCPUSeconds { object["hub_cpu_seconds"] = hubCPUSeconds }
        if let hubThreads {
            object["hub_threads_cpu_seconds"] = hubThreads.secondsByName
            object["hub_cpu_us_per_sample"] = 1e6 * hubThreads.totalSeconds / Double(max(samplesSent, 1))
        }
        if let drainSeconds { object["drain_seconds"] = drainSeconds }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])) ?? Data()
    }

    /// Latency (p99 per second) and throughput (samples applied per second) over the run, as SVG.
    public var svg: String {
        let width = 760.0, height = 420.0, left = 70.0, right = 70.0, top = 40.0, bottom = 50.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        // Whole seconds only: the last entry is the second still under way
        // when the run ended, and its few samples would read as a collapse.
        let points = latencyOverTime.count > 1 ? Array(latencyOverTime.dropLast()) : latencyOverTime
        let seconds = Double(max(points.last?.second ?? 1, 1))
        let maxLatency = Double(max(points.map(\.p99).max() ?? 1, 1))
        let maxSamples = Double(max(points.map(\.samples).max() ?? 1, 1))
        func x(_ second: Int) -> Double { left + plotWidth * Double(second) / seconds }
        func polyline(_ values: [Double], top ceiling: Double) -> String {
            zip(points, values).map { point, value in
                String(format: "%.1f,%.1f", x(point.second), top + plotHeight * (1 - value / ceiling))
            }.joined(separator: " ")
        }
        let latencyLine = polyline(points.map { Double($0.p99) }, top: maxLatency)
        let throughputLine = polyline(points.map { Double($0.samples) }, top: maxSamples)
        func tidy(_ value: Double) -> String { value >= 10 ? String(format: "%.0f", value) : String(format: "%.1f", value) }
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="22" font-size="14">TouchSync load: \(configuration.users) users x \(configuration.fingers) fingers at \(Int(configuration.hz)) Hz, p99 latency and throughput per second</text>
            <line x1="\(left)" y1="\(top + plotHeight)" x2="\(left + plotWidth)" y2="\(top + plotHeight)" stroke="black"/>
            <line x1="\(left)" y1="\(top)" x2="\(left)" y2="\(top + plotHeight)" stroke="#c62828"/>
            <line x1="\(left + plotWidth)" y1="\(top)" x2="\(left + plotWidth)" y2="\(top + plotHeight)" stroke="#1565c0"/>
            <text x="\(left - 8)" y="\(top + 4)" text-anchor="end" fill="#c62828">\(tidy(maxLatency / 1000)) ms</text>
            <text x="\(left - 8)" y="\(top + plotHeight)" text-anchor="end" fill="#c62828">0</text>
            <text x="\(left + plotWidth + 8)" y="\(top + 4)" fill="#1565c0">\(tidy(maxSamples)) /s</text>
            <text x="\(left + plotWidth + 8)" y="\(top + plotHeight)" fill="#1565c0">0</text>
            <text x="\(left + plotWidth / 2)" y="\(height - 15)" text-anchor="middle">seconds (0 to \(Int(seconds)))</text>
            <polyline fill="none" stroke="#c62828" stroke-width="2" points="\(latencyLine)"/>
            <polyline fill="none" stroke="#1565c0" stroke-width="2" points="\(throughputLine)"/>
            <text x="\(left + 10)" y="\(top + 16)" fill="#c62828">p99 latency</text>
            <text x="\(left + 10)" y="\(top + 32)" fill="#1565c0">samples applied per second</text>
            </svg>
            """
    }
}
