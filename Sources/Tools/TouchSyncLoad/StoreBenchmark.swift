import TouchSyncHubCore
import Foundation
import Logging
import Synchronization
import TouchSyncWaiting
import TouchSyncCore
import TouchSyncJournal
import TouchSyncStore

/// The board store's write figures (issue 25): how many samples one hub's
/// writer commits per second into PostgreSQL with group commit, beside the
/// file journal with fsync per batch and per 20 ms on the same batches in the
/// same run, and the bytes the store keeps per sample.
///
/// The producer stands in for a hub at saturation: each turn it hands one
/// batch per board to the writer, and it keeps at most `window` batches
/// uncommitted (agents stop sending when their window is full of
/// unacknowledged frames).
public struct StoreBenchmark: Sendable {
    public var address: StoreAddress
    /// Samples in the recording written to each board. Default 100,000.
    public var samplesPerBoard = 100_000
    /// Boards written at once (each turn has a batch of each). Default 20.
    public var boards = 20
    /// Uncommitted batches the producer allows itself. Default 4,096.
    public var window = 4096
    /// Batches the fsync-per-batch journal writes (each waits for the disk). Default 2,000.
    public var batchesWithFsyncEach = 2000
    public var directory = NSTemporaryDirectory() + "touchsync-store-bench"

    public init(address: StoreAddress) { self.address = address }

    public struct Figures: Sendable {
        public var samples: Int
        public var batches: Int
        /// Per target: what it wrote and how long it took.
        public var writes: [(target: String, batches: Int, samples: Int, seconds: Double, commits: Int)]
        /// The store's batch rows per stored sample (`pg_column_size` of each
        /// row: its columns and tuple header; not the index or page overhead).
        public var storeBytesPerSample: Double
        /// The journal's batch records per sample.
        public var journalBytesPerSample: Double
    }

    public func run(logger: Logger, progress: (String) -> Void) async throws -> Figures {
        var journalBenchmark = JournalBenchmark()
        journalBenchmark.boardSamples = samplesPerBoard
        progress("recording a board of \(samplesPerBoard) samples (written to each of \(boards) boards)")
        let recording = try journalBenchmark.record()
        let samplesPerBatch = recording.batches.map(\.samples)
        let agents = [AgentProgress(principal: UserNamespace("bench"), appliedThrough: 1, style: .default)]
        let names = (0..<boards).map { "bench-\(UUID().uuidString.prefix(8))-\($0)" }
        var writes: [(String, Int, Int, Double, Int)] = []
        let clock = ContinuousClock()

        // The store: a writer as the hub runs it, fed in turns of one batch per board.
        var configuration = BoardStoreConfiguration(address: address, hubName: "bench-\(getpid())", endpoints: "bench")
        configuration.snapshotEveryBytes = 64 << 20  // measure batches, not snapshots
        let loaded = try await BoardStoreLoader.load(configuration: configuration, limits: BoardLimits(), logger: logger)
        let committed = CommitCounter()
        let writer = BoardStoreWriter(configuration: configuration, logger: logger) { reports in committed.take(reports) }
        progress("writing \(recording.batches.count * boards) batches into the store (\(boards) boards)")
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await writer.run(startingWith: loaded) }
            // Each board claimed first, as a hub does at its first hello.
            for name in names { writer.claim(name) }
            try await committed.wait(adopted: names.count)
            var ticket: UInt64 = 0
            for (index, batch) in recording.batches.enumerated() {
                for name in names {
                    ticket += 1
                    writer.append(
                        ticket: ticket, board: name, encodedBatch: batch.bytes, sequence: batch.sequence, hubTime: batch.time,
                        agents: agents, state: recording.finalState)
                }
                if ticket > UInt64(window) || index == recording.batches.count - 1 {
                    try await committed.wait(through: index == recording.batches.count - 1 ? ticket : ticket - UInt64(window))
                }
            }
            writer.stop()
            try await group.waitForAll()
        }
        let storeSeconds = (clock.now - start).seconds
        let totalSamples = samplesPerBatch.reduce(0, +) * boards
        writes.append(("store (group commit)", recording.batches.count * boards, totalSamples, storeSeconds, committed.commits))

        // The same boards through the file journal, in this run.
        try? FileManager.default.removeItem(atPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for policy in [FsyncPolicy.interval(.milliseconds(20)), .everyBatch] {
            var journalConfiguration = JournalConfiguration(directory: directory + "/\(policy)")
            journalConfiguration.fsync = policy
            journalConfiguration.segmentBytes = 1 << 30
            let journal = try Journal(configuration: journalConfiguration, logger: logger)
            let turns = policy == .everyBatch ? max(1, batchesWithFsyncEach / boards) : recording.batches.count
            progress("writing \(turns * boards) batches into the journal with fsync \(policy)")
            let start = clock.now
            var syncs = 0
            for batch in recording.batches[..<min(turns, recording.batches.count)] {
                for name in names {
                    try journal.append(
                        board: name, encodedBatch: batch.bytes, sequence: batch.sequence, hubTime: batch.time, agents: agents,
                        state: recording.finalState)
                }
                // `batch`: the turn's batches, one per board, synced together (one fdatasync per board file).
                if policy == .everyBatch { try journal.sync() }
                if try journal.syncIfDue(now: clock.now) { syncs += 1 }
            }
            try journal.sync()
            let written = min(turns, recording.batches.count)
            writes.append(
                ("journal, fsync \(policy)", written * boards, samplesPerBatch[..<written].reduce(0, +) * boards, (clock.now - start).seconds,
                    policy == .everyBatch ? written * boards : syncs + 1))
            journal.close()
        }

        // What it costs to keep, and that it reads back as written.
        let storeBytes = try await BoardStoreHistory.batchRowBytes(address: address, boards: names, logger: logger)
        let history = try await BoardStoreHistory.load(address: address, board: names[0], logger: logger)
        guard history.endState.digest == recording.finalState.digest else { throw JournalBenchmarkError("the store's board differs") }
        progress("removing the benchmark's boards")
        try await BoardStoreHistory.remove(address: address, boards: names, logger: logger)
        let journalBytes = recording.batches.reduce(0) { $0 + $1.bytes.count + 8 + 4 }
        return Figures(
            samples: totalSamples, batches: recording.batches.count * boards,
            writes: writes.map { (target: $0.0, batches: $0.1, samples: $0.2, seconds: $0.3, commits: $0.4) },
            storeBytesPerSample: Double(storeBytes) / Double(totalSamples),
            journalBytesPerSample: Double(journalBytes) / Double(samplesPerBatch.reduce(0, +)))
    }
}

/// Commits reported by the writer, and a wait for one through a ticket.
final class CommitCounter: Sendable {
    private struct State {
        var through: UInt64 = 0
        var commits = 0
        var adopted = 0
        var failure: String? = nil
    }
    private let state = Mutex(State())
    private let waiters = ConditionWaiters()

    var commits: Int { state.withLock { $0.commits } }

    func take(_ reports: [BoardStoreReport]) {
        state.withLock { state in
            for report in reports {
                switch report {
                case .committed(let through):
                    state.through = max(state.through, through)
                    state.commits += 1
                case .failed(let board, let reason): state.failure = "board \(board): \(reason)"
                case .moved(let board, let owner): state.failure = "board \(board) moved to \(owner)"
                case .adopted: state.adopted += 1
                case .restored, .membership, .absent: break
                }
            }
        }
        waiters.signal()
    }

    func wait(through ticket: UInt64) async throws { try await wait { through, _ in through >= ticket } }

    func wait(adopted boards: Int) async throws { try await wait { _, adopted in adopted >= boards } }

    /// Until `done` holds or a board fails (thrown); a benchmark's waits have no time limit but cancellation.
    private func wait(until done: @escaping @Sendable (UInt64, Int) -> Bool) async throws {
        let outcome = await waiters.wait(timeout: .seconds(86_400)) { [self] () -> String?? in
            self.state.withLock { state in
                if let failure = state.failure { return .some(failure) }
                return done(state.through, state.adopted) ? .some(nil) : nil
            }
        }
        switch outcome {
        case .some(.some(let failure)): throw JournalBenchmarkError(failure)
        case .some(.none): return
        case .none: throw CancellationError()
        }
    }
}
