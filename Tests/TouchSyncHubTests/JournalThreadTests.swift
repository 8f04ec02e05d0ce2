import Foundation
import Logging
import Metrics
import MetricsTestKit
import Synchronization
import Testing
import TouchSyncCore
@testable import TouchSyncHub
import TouchSyncHubCore
@testable import TouchSyncJournal
import TouchSyncSimulation
import TouchSyncWire

/// The journal on its own thread: a round carries out its jobs in order and
/// syncs the group once per board file; the thread reports every round.
@Suite("Journal thread: group commit")
struct JournalThreadTests {
    /// Encoded batches of one simulated board, as the core would hand them to the journal.
    struct Batches {
        let board: String
        private var state = BoardState()
        private var encoder: DiffStreamEncoder
        private var simulator: SessionSimulator
        private var time: Int64 = 1_000_000

        init(board: String, seed: UInt64) {
            self.board = board
            encoder = DiffStreamEncoder(board: board)
            var profile = SimulationProfile()
            profile.users = 2
            profile.clearRate = 0
            simulator = SessionSimulator(seed: seed, profile: profile)
        }

        mutating func next(ticket: UInt64) throws -> JournalAppend {
            var diffs: [StrokeDiff] = []
            while diffs.isEmpty {
                switch simulator.next() {
                case .frame(let user, let frame, let style): try state.reduce(frame, from: user, style: style, into: &diffs)
                case .clear(let user, let scope): state.clear(scope, by: user, into: &diffs)
                }
            }
            time += 16_667
            let batch = encoder.encode(state.sealBatch(diffs, hubTime: time))
            return JournalAppend(
                ticket: ticket, board: board, encodedBatch: WireCodec.encode(batch), sequence: batch.sequence, hubTime: time,
                agents: [AgentProgress(principal: UserNamespace("agent"), appliedThrough: state.sequence, style: .default)],
                state: state)
        }

        var digest: BoardDigest { state.digest }
    }

    static func folder(_ name: String) -> String {
        let path = NSTemporaryDirectory() + "touchsync-jthread-\(name)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func journal(_ directory: String, fsync: FsyncPolicy, syncMethod: JournalSyncMethod = .automatic) throws -> Journal {
        var configuration = JournalConfiguration(directory: directory)
        configuration.fsync = fsync
        configuration.syncMethod = syncMethod
        let journal = try Journal(configuration: configuration, logger: Logger(label: "test"))
        _ = try journal.recover()
        return journal
    }

    /// What a restarted hub would recover from `directory`.
    static func recovered(_ directory: String) throws -> [RecoveredBoard] {
        var configuration = JournalConfiguration(directory: directory)
        configuration.fsync = .never
        let journal = try Journal(configuration: configuration, logger: Logger(label: "test"))
        defer { journal.close() }
        return try journal.recover()
    }

    static func progress(_ events: [HubEvent]) -> [(written: UInt64, synced: UInt64)] {
        events.compactMap { event in
            if case .journalProgress(let written, let synced) = event { return (written, synced) }
            return nil
        }
    }

    /// `turns` turns of one batch per board, tickets counting from 1, with a
    /// sync asked after every turn or only after the last.
    static func jobs(_ boards: inout [Batches], turns: Int, syncEachTurn: Bool) throws -> [JournalThread.Job] {
        var jobs: [JournalThread.Job] = []
        var ticket: UInt64 = 0
        for turn in 1...turns {
            for index in boards.indices {
                ticket += 1
                jobs.append(.append(try boards[index].next(ticket: ticket)))
            }
            if syncEachTurn || turn == turns { jobs.append(.sync(through: ticket)) }
        }
        return jobs
    }

    /// A round over many boards' files (`JournalSyncMethod`): by default one
    /// `syncfs` from four files up, an `fdatasync` per file below; `each-file`
    /// always one per file, `filesystem` always one `syncfs`. Whichever way,
    /// the round leaves nothing unsynced and the journal recovers every batch.
    @Test(arguments: [
        (JournalSyncMethod.automatic, 6, 0, 1), (.automatic, 3, 3, 0), (.eachFile, 6, 6, 0), (.fileSystem, 2, 0, 1),
    ])
    func aRoundSyncsManyFilesWithOneSyncfs(method: JournalSyncMethod, boardCount: Int, fdatasyncs: Int, syncfsCalls: Int) throws {
        let directory = Self.folder("syncfs")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let journal = try Self.journal(directory, fsync: .everyBatch, syncMethod: method)
        var boards = (0..<boardCount).map { Batches(board: "many-\($0)", seed: UInt64($0) + 7) }
        let jobs = try Self.jobs(&boards, turns: 5, syncEachTurn: false)
        let ticket = UInt64(5 * boardCount)
        var round = JournalRound(journal: journal, metrics: JournalMetrics(factory: NOOPMetricsHandler.instance))
        let events = round.run(jobs)
        #expect(journal.fileSyncs == fdatasyncs && journal.fileSystemSyncs == syncfsCalls)
        #expect(journal.fileSystemSyncFailures == 0)
        #expect(round.fileSyncs == fdatasyncs + syncfsCalls && round.madeDurable && !journal.hasUnsyncedWrites)
        #expect(Self.progress(events).map(\.synced) == [ticket])
        // Nothing left to sync: a second round syncs no file.
        _ = round.run([.sync(through: ticket)])
        #expect(round.fileSyncs == 0)
        journal.close()
        let recovered = try Self.recovered(directory)
        #expect(recovered.count == boardCount)
        for board in boards {
            let found = try #require(recovered.first { $0.name == board.board })
            #expect(found.state.sequence == 5 && found.state.digest == board.digest)
        }
    }

    /// `syncfs` reports write errors only since Linux 5.8: on an older kernel
    /// the journal syncs each file on its own.
    @Test func kernelReleasesReadAsVersions() throws {
        #expect(KernelRelease("6.1.0-18-amd64") == KernelRelease(major: 6, minor: 1))
        #expect(KernelRelease("4.18.0-553.el8_10.x86_64").map { $0 < KernelRelease.syncfsReportsErrors } == true)
        #expect(KernelRelease("5.8.0") == KernelRelease.syncfsReportsErrors)
        #expect(KernelRelease("5.10.0").map { $0 < KernelRelease.syncfsReportsErrors } == false)
        #expect(KernelRelease("linux") == nil && KernelRelease("6") == nil)
        #expect(try #require(KernelRelease.current) >= KernelRelease(major: 3, minor: 0), "this machine's kernel reads")
    }

    /// A `syncfs` that fails (here its descriptor is closed under it: EBADF)
    /// makes nothing durable by itself: the round syncs each file on its own,
    /// which says which boards failed (none here), and the journal recovers
    /// every batch.
    @Test func aFailedSyncfsFallsBackToASyncPerFile() throws {
        let directory = Self.folder("syncfs-fails")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let journal = try Self.journal(directory, fsync: .everyBatch, syncMethod: .fileSystem)
        var boards = (0..<5).map { Batches(board: "fallback-\($0)", seed: UInt64($0) + 40) }
        let jobs = try Self.jobs(&boards, turns: 1, syncEachTurn: false)
        journal.breakFolderHandleForTesting()
        var round = JournalRound(journal: journal, metrics: JournalMetrics(factory: NOOPMetricsHandler.instance))
        let events = round.run(jobs)
        #expect(journal.fileSystemSyncFailures == 1 && journal.fileSystemSyncs == 0)
        #expect(journal.fileSyncs == boards.count, "each file synced on its own after the failed syncfs")
        #expect(!events.contains { if case .journalFailed = $0 { true } else { false } })
        #expect(Self.progress(events).map(\.synced) == [UInt64(boards.count)] && !journal.hasUnsyncedWrites)
        journal.close()
        let recovered = try Self.recovered(directory)
        for board in boards {
            let found = try #require(recovered.first { $0.name == board.board })
            #expect(found.state.sequence == 1 && found.state.digest == board.digest)
        }
    }

    /// Thirty turns' appends over three boards, each turn asking for a sync
    /// (as the core does under `batch`), queued while the thread was busy:
    /// one round writes them all and syncs each board's file once.
    @Test func aGroupOfTurnsSharesOneSyncPerBoardFile() throws {
        let directory = Self.folder("group")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let journal = try Self.journal(directory, fsync: .everyBatch)
        var boards = (0..<3).map { Batches(board: "board-\($0)", seed: UInt64($0) + 1) }
        let jobs = try Self.jobs(&boards, turns: 10, syncEachTurn: true)
        var round = JournalRound(journal: journal, metrics: JournalMetrics(factory: NOOPMetricsHandler.instance))
        let events = round.run(jobs)
        #expect(round.appended == 30)
        #expect(round.fileSyncs == 3)
        #expect(round.madeDurable)
        #expect(!journal.hasUnsyncedWrites)
        let progress = Self.progress(events)
        #expect(progress.count == 1 && progress[0].written == 30 && progress[0].synced == 30)
        // The next group: only the board written in it is synced.
        let more = round.run([.append(try boards[1].next(ticket: 31)), .sync(through: 31)])
        #expect(round.fileSyncs == 1 && Self.progress(more).map(\.synced) == [31])
        journal.close()

        let recovered = try Self.recovered(directory)
        #expect(recovered.count == 3)
        for board in boards {
            let found = try #require(recovered.first { $0.name == board.board })
            #expect(found.state.sequence == (board.board == "board-1" ? 11 : 10))
            #expect(found.state.digest == board.digest)
        }
    }

    /// Without a sync asked for (an interval policy between syncs), a round
    /// writes and reports written, not synced: nothing claims durability.
    @Test func writtenIsNotSyncedUntilASyncIsAsked() throws {
        let directory = Self.folder("interval")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let journal = try Self.journal(directory, fsync: .interval(.seconds(60)))
        defer { journal.close() }
        var board = Batches(board: "b", seed: 7)
        var round = JournalRound(journal: journal, metrics: JournalMetrics(factory: NOOPMetricsHandler.instance))
        var events = round.run([.append(try board.next(ticket: 1)), .append(try board.next(ticket: 2))])
        #expect(Self.progress(events).map(\.written) == [2])
        #expect(Self.progress(events).map(\.synced) == [0])
        #expect(!round.madeDurable && journal.hasUnsyncedWrites)
        events = round.run([.append(try board.next(ticket: 3)), .sync(through: 3)])
        #expect(Self.progress(events).map(\.synced) == [3])
        #expect(round.fileSyncs == 1 && !journal.hasUnsyncedWrites)
    }

    /// A board that cannot be written is reported failed before the round's
    /// progress (so the core never acknowledges its agents); the others are synced.
    @Test func aFailedBoardIsReportedBeforeTheProgress() throws {
        let directory = Self.folder("failed")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let journal = try Self.journal(directory, fsync: .everyBatch)
        // A file where the board's folder would go: its first append cannot make the folder.
        #expect(FileManager.default.createFile(atPath: directory + "/" + BoardFolderName.encode("blocked"), contents: Data("x".utf8)))
        defer { journal.close() }
        var blocked = Batches(board: "blocked", seed: 1)
        var open = Batches(board: "open", seed: 2)
        var round = JournalRound(journal: journal, metrics: JournalMetrics(factory: NOOPMetricsHandler.instance))
        let events = round.run([.append(try open.next(ticket: 1)), .append(try blocked.next(ticket: 2)), .sync(through: 2)])
        let failedAt = events.firstIndex { if case .journalFailed(let board, _) = $0 { board == "blocked" } else { false } }
        let progressAt = events.firstIndex { if case .journalProgress = $0 { true } else { false } }
        #expect(failedAt != nil && progressAt != nil && failedAt! < progressAt!)
        #expect(journal.isBroken("blocked") && !journal.isBroken("open"))
        #expect(round.fileSyncs == 1)
    }

    /// The thread itself: appends and syncs posted one by one as a busy hub
    /// would; every report is in order, the last says everything is synced,
    /// the groups are at most the syncs asked for, and the files hold every batch.
    @Test func theThreadReportsEveryRoundAndStopFinishesTheQueue() throws {
        let directory = Self.folder("thread")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reported = Mutex<[HubEvent]>([])
        let thread = try JournalThread(
            journal: try Self.journal(directory, fsync: .everyBatch), logger: Logger(label: "test"),
            metricsFactory: NOOPMetricsHandler.instance
        ) { events in reported.withLock { $0 += events } }
        var board = Batches(board: "b", seed: 11)
        let total: UInt64 = 300
        for ticket in 1...total {
            #expect(thread.post(.append(try board.next(ticket: ticket))))
            #expect(thread.post(.sync(through: ticket)))
        }
        let last = thread.stop()
        let events = reported.withLock { $0 } + last
        let progress = Self.progress(events)
        #expect(progress.last?.written == total && progress.last?.synced == total)
        #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.written <= $1.written && $0.synced <= $1.synced })
        let counts = thread.counts
        #expect(counts.appends == Int(total))
        #expect(counts.groups >= 1 && counts.groups <= Int(total))  // a group needs one new append at least
        #expect(counts.fileSyncs == counts.groups)  // one board: one file per group
        #expect(!thread.post(.sync(through: 1)))  // stopped: nothing is queued any more

        let recovered = try Self.recovered(directory)
        #expect(recovered.first?.state.sequence == total)
        #expect(recovered.first?.state.digest == board.digest)
    }
}

/// What the hub loop holds until storage has the batches before it.
@Suite("Held publications and snapshots")
struct HeldPublicationsTests {
    static func publication(_ board: String, _ sequence: UInt64) -> Publication {
        Publication(board: board, kind: .batch(sequence: sequence), topic: Array(board.utf8) + [0], bytes: [])
    }

    static func describe(_ outputs: [HeldOutput]) -> [String] {
        outputs.map { output in
            switch output {
            case .publication(let publication): "\(publication.board) batch"
            case .snapshot(_, let requestID, let board, _, _): "\(board) snapshot \(requestID)"
            }
        }
    }

    @Test func snapshotsWaitLikeBatchesAndGoOutInOrder() {
        var held = HeldPublications()
        #expect(!held.waiting)
        held.appended(1)
        #expect(held.waiting)
        held.hold(.publication(Self.publication("a", 1)))
        held.hold(.snapshot(to: PeerID([1]), requestID: 9, board: "a", state: BoardState(), digest: BoardState().digest))
        held.appended(2)
        held.hold(.publication(Self.publication("b", 1)))
        #expect(Self.describe(held.release(through: 1)) == ["a batch", "a snapshot 9"])
        #expect(held.waiting)
        held.broken.insert("b")  // the store failed b's commit: its batch is never published
        #expect(Self.describe(held.release(through: 2)).isEmpty)
        #expect(!held.waiting)
    }
}

/// The core's counters reach swift-metrics as they were counted: each
/// export adds what changed since the last, gauges take the value now.
@Suite("Hub metrics export")
struct HubMetricsExportTests {
    @Test func countersAreExportedOnceAndGaugesAsTheyStand() throws {
        let metrics = TestMetrics()
        var exporter = HubMetricsExporter(factory: metrics)
        var counters = HubCounters()
        counters.frames = 5
        counters.samples = 40
        counters.agents = 3
        counters.errors[.rateLimited] = 2
        exporter.export(counters, liveTouchChanges: [:])
        exporter.export(counters, liveTouchChanges: [:])  // nothing new: nothing added
        counters.frames = 8
        counters.errors[.rateLimited] = 3
        counters.errors[.forbidden] = 1
        counters.agents = 1
        exporter.export(counters, liveTouchChanges: ["b": 4])
        #expect(try metrics.expectCounter("touchsync_hub_frames_total").totalValue == 8)
        #expect(try metrics.expectCounter("touchsync_hub_samples_total").totalValue == 40)
        #expect(try metrics.expectCounter("touchsync_hub_errors_total", [("code", "rateLimited")]).totalValue == 3)
        #expect(try metrics.expectCounter("touchsync_hub_errors_total", [("code", "forbidden")]).totalValue == 1)
        #expect(try metrics.expectGauge("touchsync_hub_agents").lastValue == 1)
        #expect(try metrics.expectGauge("touchsync_hub_live_touches", [("board", "b")]).lastValue == 4)
    }
}
