import CoreMetrics
import Foundation
import Synchronization
import Logging
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncSimulation
import TouchSyncWire
import ZeroMQ

/// The journal's figures (issue #5): write throughput per fsync policy,
/// recovery time, replay at full speed, and how long a subscriber joining
/// late takes to load a large board's snapshot. Real files under `directory`,
/// real sockets on loopback.
public struct JournalBenchmark: Sendable {
    /// Samples on the large board (recovery, replay, late join). Default 1,000,000.
    public var boardSamples = 1_000_000
    /// Input events folded into one batch (8: a 66 ms tick with 4 users at 120 Hz). Default 8.
    public var eventsPerBatch = 8
    /// Batches written with fsync after every batch (each waits for the disk). Default 2,000.
    public var batchesWithFsyncEach = 2000
    /// Batches the group-commit run lets wait to be durable. Default 64.
    public var groupCommitWindow = 64
    /// Where the journals go (removed afterwards).
    public var directory = NSTemporaryDirectory() + "touchsync-journal-bench"
    public var seed: UInt64 = 5

    public init() {}

    public struct Figures: Sendable {
        public var samples: Int
        public var batches: Int
        public var journalBytes: Int
        /// Per policy: batches/s, samples/s, MB/s written.
        public var writes: [(policy: String, batches: Int, seconds: Double)]
        public var recoverySeconds: Double
        public var recoveredRecords: Int
        public var replaySeconds: Double
        public var lateJoinSeconds: [Double]
        /// The same, by v2 subscribers (packed snapshots), alternating with the v1 ones and starting first.
        public var lateJoinSecondsV2: [Double] = []
        /// Resident memory a board of this size holds, per stored sample: the
        /// RSS growth while a deep copy of the recorded board is kept.
        public var residentBytesPerSample: Double
    }

    /// A recorded board: every batch encoded as the hub publishes it.
    struct Recording {
        var batches: [(bytes: [UInt8], sequence: UInt64, time: Int64, samples: Int)] = []
        /// The board after the last batch.
        var finalState: BoardState
    }

    func record() throws -> Recording {
        var profile = SimulationProfile()
        profile.users = 4
        profile.fingersPerUser = 5
        profile.clearRate = 0
        profile.strokeLength = 40...400
        var simulator = SessionSimulator(seed: seed, profile: profile)
        var state = BoardState()
        var encoder = DiffStreamEncoder(board: "large")
        var coalescer = DiffCoalescer()
        var recording = Recording(finalState: state)
        var samples = 0
        var pendingSamples = 0
        var events = 0
        var diffs: [StrokeDiff] = []
        var time: Int64 = 1_700_000_000_000_000
        while samples < boardSamples {
            diffs.removeAll(keepingCapacity: true)
            switch simulator.next() {
            case .frame(let user, let frame, let style):
                try state.reduce(frame, from: user, style: style, into: &diffs)
                let count = frame.changes.reduce(0) { $0 + $1.samples.count }
                samples += count
                pendingSamples += count
            case .clear(let user, let scope): state.clear(scope, by: user, into: &diffs)
            }
            coalescer.add(contentsOf: diffs)
            events += 1
            if events % eventsPerBatch == 0 && !coalescer.isEmpty {
                time += 66_667
                let batch = encoder.encode(state.sealBatch(coalescer.take(), hubTime: time))
                recording.batches.append((WireCodec.encode(batch), batch.sequence, time, pendingSamples))
                pendingSamples = 0
            }
        }
        if !coalescer.isEmpty {
            time += 66_667
            let batch = encoder.encode(state.sealBatch(coalescer.take(), hubTime: time))
            recording.batches.append((WireCodec.encode(batch), batch.sequence, time, pendingSamples))
        }
        recording.finalState = state
        return recording
    }

    public func run(logger: Logger, progress: (String) -> Void) async throws -> Figures {
        try? FileManager.default.removeItem(atPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        progress("recording a board of \(boardSamples) samples in memory")
        let recording = try record()
        let samples = recording.batches.reduce(0) { $0 + $1.samples }
        let bytes = recording.batches.reduce(0) { $0 + $1.bytes.count }
        let residentBytesPerSample = try Self.residentBytesPerSample(of: recording.finalState)
        let progressEntry = [AgentProgress(principal: UserNamespace("bench"), appliedThrough: 1, style: .default)]
        var writes: [(String, Int, Double)] = []
        let clock = ContinuousClock()
        // The whole board with each policy but fsync-per-batch, which writes a bounded prefix.
        for policy in [FsyncPolicy.never, .interval(.milliseconds(20)), .everyBatch] {
            let folder = directory + "/\(policy)"
            var configuration = JournalConfiguration(directory: folder)
            configuration.fsync = policy
            // One segment: no checkpoint is written mid-run, so the state passed
            // below (needed only when a segment starts) is never used.
            configuration.segmentBytes = 1 << 30
            let journal = try Journal(configuration: configuration, logger: logger)
            let count = policy == .everyBatch ? min(batchesWithFsyncEach, recording.batches.count) : recording.batches.count
            progress("writing \(count) batches with fsync \(policy)")
            let start = clock.now
            for batch in recording.batches[..<count] {
                try journal.append(
                    board: "large", encodedBatch: batch.bytes, sequence: batch.sequence, hubTime: batch.time,
                    agents: progressEntry, state: recording.finalState)
                // `batch`: one fdatasync per batch, as a hub whose every group holds one batch.
                if policy == .everyBatch { try journal.sync() }
                _ = try journal.syncIfDue(now: clock.now)
            }
            try journal.sync()
            writes.append(("\(policy)", count, (clock.now - start).seconds))
            journal.close()
        }

        // The hub's way: the journal on its own thread, a sync asked after every
        // batch (one batch per turn, the worst case), the batches that queue while
        // it syncs sharing the next fdatasync (group commit). At most
        // `groupCommitWindow` batches wait to be durable (as agents' windows
        // bound what a hub holds unacknowledged).
        do {
            let folder = directory + "/group-commit"
            var configuration = JournalConfiguration(directory: folder)
            configuration.fsync = .everyBatch
            configuration.segmentBytes = 1 << 30
            let journal = try Journal(configuration: configuration, logger: logger)
            let count = recording.batches.count
            progress("writing \(count) batches through the journal thread with fsync batch (group commit, \(groupCommitWindow) in flight)")
            let durable = Mutex<UInt64>(0)
            let reported = DispatchSemaphore(value: 0)
            let thread = try JournalThread(journal: journal, logger: logger, metricsFactory: NOOPMetricsHandler.instance) { events in
                for case .journalProgress(_, let synced) in events { durable.withLock { $0 = max($0, synced) } }
                reported.signal()
            }
            let start = clock.now
            for (index, batch) in recording.batches.enumerated() {
                let ticket = UInt64(index + 1)
                while ticket > durable.withLock({ $0 }) + UInt64(groupCommitWindow) { reported.wait() }
                thread.post(
                    .append(
                        JournalAppend(
                            ticket: ticket, board: "large", encodedBatch: batch.bytes, sequence: batch.sequence, hubTime: batch.time,
                            agents: progressEntry, state: recording.finalState)))
                thread.post(.sync(through: ticket))
            }
            _ = thread.stop()  // returns once every batch is synced and the journal closed
            let seconds = (clock.now - start).seconds
            let groups = thread.counts.groups
            // Every batch made it: the journal reads back as the recorded board.
            let check = try Journal(configuration: configuration, logger: logger)
            let readBack = try check.recover(limits: recording.finalState.limits)
            check.close()
            guard readBack.first?.state.digest == recording.finalState.digest else {
                throw JournalBenchmarkError("the journal written through its thread does not read back as the recorded board")
            }
            writes.append(("batch, on the journal thread (\(groups) group commits, \(count / max(groups, 1)) batches each)", count, seconds))
        }

        // Recovery of the whole board (the "never" journal holds all of it; one segment of up to 16 MiB).
        var recovery = JournalConfiguration(directory: directory + "/never")
        recovery.segmentBytes = 1 << 30
        progress("recovering the \(samples)-sample board")
        let start = clock.now
        let recovered = try Journal(configuration: recovery, logger: logger).recover()
        let recoverySeconds = (clock.now - start).seconds
        guard let board = recovered.first, board.state.digest == recording.finalState.digest else {
            throw JournalBenchmarkError("recovery did not reproduce the board")
        }

        // Replay at full speed to a real subscriber, until it shows the last batch.
        progress("replaying it at full speed to a subscriber")
        let history = try BoardHistory.open(dataDirectory: directory + "/never", board: "large").load()
        var replayConfiguration = ReplayConfiguration()
        replayConfiguration.publishEndpoint = "tcp://127.0.0.1:*"
        replayConfiguration.snapshotEndpoint = "tcp://127.0.0.1:*"
        replayConfiguration.speed = nil
        let context = try ZMQContext()
        let replay = try BoardReplay(board: "large", history: history, configuration: replayConfiguration, logger: logger, context: context)
        let endpoints = try await replay.start()
        let settings = SubscriberConfiguration(board: "large", publishEndpoint: endpoints.publish, snapshotEndpoint: endpoints.snapshot)
        let subscriber = try BoardSubscriber(configuration: settings, context: context, logger: logger)
        let replayStart = clock.now
        subscriber.start()
        guard await subscriber.waitUntil(sequence: board.state.sequence, timeout: .seconds(300)) else {
            throw JournalBenchmarkError("the replay subscriber never reached the end")
        }
        let replaySeconds = (clock.now - replayStart).seconds
        guard await Self.replicaDigest(subscriber) == recording.finalState.digest else {
            throw JournalBenchmarkError("the replayed board differs")
        }
        await subscriber.stop()
        await replay.stop()

        // A hub holding the large board (recovered from the journal); subscribers join late.
        progress("late joins: snapshots of the \(samples)-sample board from a hub")
        var hubConfiguration = HubConfiguration.loopbackEphemeral()
        hubConfiguration.journal = recovery
        // The recorded drawers never come back: their touches stay down while
        // the late joins are measured, however long a loaded machine takes.
        hubConfiguration.timing.livenessTimeout = .seconds(3600)
        hubConfiguration.timing.abandonTimeout = .seconds(3600)
        let hub = try TouchSyncHub(configuration: hubConfiguration, logger: logger, context: context)
        let hubEndpoints = try await hub.start()
        var lateJoins: [Double] = [], lateJoinsV2: [Double] = []
        for join in 0..<6 {
            // v2 first (the first join of all is the goal's "first join included"), then alternating.
            let format: WireFormat = join % 2 == 0 ? .v2 : .v1
            var settings = SubscriberConfiguration(
                board: "large", publishEndpoint: hubEndpoints.publish, snapshotEndpoint: hubEndpoints.snapshot)
            settings.snapshotTimeout = .seconds(30)
            settings.wireFormat = format
            let late = try BoardSubscriber(configuration: settings, context: context, logger: logger)
            let joinStart = clock.now
            late.start()
            guard await late.waitUntil(sequence: board.state.sequence, timeout: .seconds(60)) else {
                throw JournalBenchmarkError("a late subscriber never synced")
            }
            if format == .v2 { lateJoinsV2.append((clock.now - joinStart).seconds) } else { lateJoins.append((clock.now - joinStart).seconds) }
            guard await Self.replicaDigest(late) == recording.finalState.digest else {
                throw JournalBenchmarkError("a late subscriber's board differs")
            }
            await late.stop()
        }
        await hub.stop()

        return Figures(
            samples: samples, batches: recording.batches.count, journalBytes: bytes,
            writes: writes.map { (policy: $0.0, batches: $0.1, seconds: $0.2) },
            recoverySeconds: recoverySeconds, recoveredRecords: board.recordsApplied, replaySeconds: replaySeconds,
            lateJoinSeconds: lateJoins, lateJoinSecondsV2: lateJoinsV2, residentBytesPerSample: residentBytesPerSample)
    }

    /// The RSS growth per stored sample of a board like `state`, held in the
    /// model as the hub holds it: a copy with freshly allocated stroke
    /// storage (copy-on-write would share the original's), grown as the
    /// hub's appends grow it and packed when accepted as the hub packs it,
    /// is built and kept while the resident size is read.
    static func residentBytesPerSample(of state: BoardState) throws -> Double {
        let snapshot = state.snapshot()
        let before = residentBytes()
        func copied(_ strokes: [Stroke]) -> [Stroke] {
            strokes.map { stroke in
                var copy = stroke
                copy.samples = StrokeSamples(stroke.samples)
                if !stroke.isActive { copy.samples.pack() }
                copy.predicted = stroke.predicted.map { $0 }
                return copy
            }
        }
        let copy = try BoardState(
            snapshot: BoardSnapshot(
                sequence: snapshot.sequence, nextStrokeID: snapshot.nextStrokeID, nextAcceptPosition: snapshot.nextAcceptPosition,
                activeStrokes: copied(snapshot.activeStrokes), acceptedStrokes: copied(snapshot.acceptedStrokes)),
            limits: state.limits)
        let growth = residentBytes() - before
        return withExtendedLifetime(copy) { Double(growth) / Double(max(copy.storedSampleCount, 1)) }
    }
}

/// The process's resident memory now, in bytes (/proc/self/statm).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

extension JournalBenchmark {
    /// The subscriber's board digest; a subscriber in the middle of a resync
    /// (a starved machine can make it think the hub went quiet) has no
    /// replica for a moment, so this waits for one, for up to 10 s.
    static func replicaDigest(_ subscriber: BoardSubscriber) async -> BoardDigest? {
        for _ in 0..<1000 {
            if let replica = await subscriber.replica() { return replica.digest }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }
}

struct JournalBenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
