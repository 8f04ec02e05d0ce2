import CoreMetrics
import Logging
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal

/// What a hub starts from: its journal opened and recovered (when it
/// journals), and a `HubCore` holding the recovered boards.
struct HubStartup {
    let journal: Journal?
    let core: HubCore
    let summaries: [RecoveredBoardSummary]

    init(configuration: HubConfiguration, logger: Logger, metricsFactory: any MetricsFactory) throws {
        let clock = ContinuousClock()
        var recovered: [RecoveredBoard] = []
        var summaries: [RecoveredBoardSummary] = []
        if let journalConfiguration = configuration.journal {
            let journal = try Journal(configuration: journalConfiguration, logger: logger)
            let started = clock.now
            recovered = try journal.recover(limits: configuration.boardLimits)
            for board in recovered {
                summaries.append(
                    RecoveredBoardSummary(
                        board: board.name, sequence: board.state.sequence, digest: board.state.digest,
                        samples: board.state.storedSampleCount, damage: board.damage))
                logger.info(
                    "board recovered",
                    metadata: [
                        "board": "\(board.name)", "sequence": "\(board.state.sequence)", "records": "\(board.recordsApplied)",
                        "damage": "\(board.damage.count)", "milliseconds": "\(microseconds(clock.now - started) / 1000)",
                    ])
            }
            self.journal = journal
        } else {
            journal = nil
        }
        core = HubCore(
            configuration: configuration, recovered: recovered, now: clock.now, wallClockMicroseconds: wallClockMicroseconds(),
            logger: logger, metricsFactory: metricsFactory)
        self.summaries = summaries
    }
}
