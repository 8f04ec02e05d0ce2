import CoreMetrics
import TouchSyncCore

/// What the hub counts, through the factory it was given (the global
/// `MetricsSystem` by default). Names follow Prometheus conventions.
struct HubMetrics {
    let factory: any MetricsFactory
    let messages: Counter
    let frames: Counter
    let samples: Counter
    let batches: Counter
    let duplicates: Counter
    let publishedBytes: Counter
    let agents: Gauge
    let subscriptions: Gauge
    let boards: Gauge
    let journalFailures: Counter
    /// How long the hub has been behind its input (0: caught up), updated with each BUSY notice.
    let behindSeconds: Gauge
    private var errors: [ErrorCode: Counter] = [:]
    private var liveTouches: [String: Gauge] = [:]
    /// Live touches per board with no board label: one gauge of their sum.
    private var liveTouchCounts: [String: Int] = [:]
    private var liveTouchTotal: Int = 0
    private let allLiveTouches: Gauge
    /// Board names as metric labels (`HubConfiguration.metricsBoardLabels`).
    let boardLabels: Bool

    init(factory: any MetricsFactory, boardLabels: Bool = false) {
        self.factory = factory
        self.boardLabels = boardLabels
        allLiveTouches = Gauge(label: "touchsync_hub_live_touches_all_boards", factory: factory)
        messages = Counter(label: "touchsync_hub_messages_total", factory: factory)
        frames = Counter(label: "touchsync_hub_frames_total", factory: factory)
        samples = Counter(label: "touchsync_hub_samples_total", factory: factory)
        batches = Counter(label: "touchsync_hub_batches_total", factory: factory)
        duplicates = Counter(label: "touchsync_hub_duplicate_messages_total", factory: factory)
        publishedBytes = Counter(label: "touchsync_hub_published_bytes_total", factory: factory)
        agents = Gauge(label: "touchsync_hub_agents", factory: factory)
        subscriptions = Gauge(label: "touchsync_hub_subscriptions", factory: factory)
        boards = Gauge(label: "touchsync_hub_boards", factory: factory)
        journalFailures = Counter(label: "touchsync_hub_journal_failures_total", factory: factory)
        behindSeconds = Gauge(label: "touchsync_hub_behind_seconds", factory: factory)
    }

    mutating func error(_ code: ErrorCode) {
        if errors[code] == nil {
            errors[code] = Counter(
                label: "touchsync_hub_errors_total", dimensions: [("code", "\(code)")], factory: factory)
        }
        errors[code]!.increment()
    }

    mutating func liveTouches(board: String, count: Int) {
        liveTouchTotal += count - (liveTouchCounts[board] ?? 0)
        liveTouchCounts[board] = count == 0 ? nil : count
        allLiveTouches.record(liveTouchTotal)
        // Board names are users' words: labels only when the operator asks (they reach whoever reads the metrics).
        guard boardLabels else { return }
        if liveTouches[board] == nil {
            liveTouches[board] = Gauge(label: "touchsync_hub_live_touches", dimensions: [("board", board)], factory: factory)
        }
        liveTouches[board]!.record(count)
    }
}
