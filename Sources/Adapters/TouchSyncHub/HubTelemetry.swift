import CoreMetrics
import Logging
import TouchSyncCore
import TouchSyncHubCore

/// The core's observations, as log lines.
final class LoggingHubObserver: HubObserver {
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    func observe(_ observation: HubObservation) {
        let level: Logger.Level =
            switch observation.level {
            case .debug: .debug
            case .info: .info
            case .notice: .notice
            case .error: .error
            }
        guard logger.logLevel <= level else { return }  // debug observations cost nothing more when not logged
        logger.log(level: level, "\(observation.message)", metadata: observation.metadata.mapValues { .string($0) })
    }
}

/// The core's counters, exported through the metrics factory the hub was
/// given (the global `MetricsSystem` by default) at the end of each turn.
/// Names follow Prometheus conventions.
struct HubMetricsExporter {
    private let factory: any MetricsFactory
    private let messages: Counter
    private let frames: Counter
    private let samples: Counter
    private let batches: Counter
    private let duplicates: Counter
    private let publishedBytes: Counter
    private let journalFailures: Counter
    private let agents: Gauge
    private let subscriptions: Gauge
    private let boards: Gauge
    /// How long the hub has been behind its input (0: caught up), updated with each BUSY notice.
    private let behindSeconds: Gauge
    private let allLiveTouches: Gauge
    private var errors: [ErrorCode: Counter] = [:]
    private var liveTouches: [String: Gauge] = [:]
    /// What was exported last (counters export the difference).
    private var exported = HubCounters()

    /// - Parameter boardThread: one board thread of several: its gauges carry
    ///   `thread="N"` (the hub's value is their sum); counters add up as they are.
    init(factory: any MetricsFactory, boardThread: Int? = nil) {
        self.factory = factory
        let thread = boardThread.map { [("thread", "\($0)")] } ?? []
        messages = Counter(label: "touchsync_hub_messages_total", factory: factory)
        frames = Counter(label: "touchsync_hub_frames_total", factory: factory)
        samples = Counter(label: "touchsync_hub_samples_total", factory: factory)
        batches = Counter(label: "touchsync_hub_batches_total", factory: factory)
        duplicates = Counter(label: "touchsync_hub_duplicate_messages_total", factory: factory)
        publishedBytes = Counter(label: "touchsync_hub_published_bytes_total", factory: factory)
        journalFailures = Counter(label: "touchsync_hub_journal_failures_total", factory: factory)
        agents = Gauge(label: "touchsync_hub_agents", dimensions: thread, factory: factory)
        subscriptions = Gauge(label: "touchsync_hub_subscriptions", dimensions: thread, factory: factory)
        boards = Gauge(label: "touchsync_hub_boards", dimensions: thread, factory: factory)
        behindSeconds = Gauge(label: "touchsync_hub_behind_seconds", dimensions: thread, factory: factory)
        allLiveTouches = Gauge(label: "touchsync_hub_live_touches_all_boards", dimensions: thread, factory: factory)
    }

    /// Exports what changed since the last call. `liveTouchChanges`: per-board
    /// counts (only when board names may be labels: they are users' words).
    mutating func export(_ counters: HubCounters, liveTouchChanges: [String: Int]) {
        func add(_ counter: Counter, _ now: Int, _ before: Int) { if now > before { counter.increment(by: Int64(now - before)) } }
        add(messages, counters.messages, exported.messages)
        add(frames, counters.frames, exported.frames)
        add(samples, counters.samples, exported.samples)
        add(batches, counters.batches, exported.batches)
        add(duplicates, counters.duplicates, exported.duplicates)
        add(publishedBytes, counters.publishedBytes, exported.publishedBytes)
        add(journalFailures, counters.journalFailures, exported.journalFailures)
        if counters.errors != exported.errors {
            for (code, count) in counters.errors where count > exported.errors[code] ?? 0 {
                if errors[code] == nil {
                    errors[code] = Counter(label: "touchsync_hub_errors_total", dimensions: [("code", "\(code)")], factory: factory)
                }
                errors[code]!.increment(by: Int64(count - (exported.errors[code] ?? 0)))
            }
        }
        if counters.agents != exported.agents { agents.record(counters.agents) }
        if counters.subscriptions != exported.subscriptions { subscriptions.record(counters.subscriptions) }
        if counters.boards != exported.boards { boards.record(counters.boards) }
        if counters.behindSeconds != exported.behindSeconds { behindSeconds.record(counters.behindSeconds) }
        if counters.liveTouches != exported.liveTouches { allLiveTouches.record(counters.liveTouches) }
        for (board, count) in liveTouchChanges {
            if liveTouches[board] == nil {
                liveTouches[board] = Gauge(label: "touchsync_hub_live_touches", dimensions: [("board", board)], factory: factory)
            }
            liveTouches[board]!.record(count)
        }
        exported = counters
    }
}
