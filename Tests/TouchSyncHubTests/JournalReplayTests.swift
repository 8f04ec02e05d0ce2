import TestSupport
import Foundation
import MetricsTestKit
import Testing
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncSimulation
import ZeroMQ

/// A hub with a journal: a simulated session of `events` input events drawn
/// by real agents, paced in real time, then the hub stopped. Returns the
/// live board's final state.
func recordSession(into directory: String, board: String, events: Int, seed: UInt64) async throws -> BoardState {
    let test = try await TestHub.start { configuration in
        var journal = JournalConfiguration(directory: directory)
        journal.fsync = .never
        journal.segmentBytes = 8 << 10  // several segments, so seeking has checkpoints to choose from
        configuration.journal = journal
    }
    var profile = SimulationProfile()
    profile.users = 2
    profile.clearRate = 0
    var simulator = SessionSimulator(seed: seed, profile: profile)
    var agents: [UserNamespace: TouchAgent] = [:]
    for user in simulator.users { agents[user] = try test.agent(board: board, identity: user.rawValue) }
    // Drawn on a thread of its own, with real timing for the replay to keep: in a full run on two
    // cores the cooperative pool was so busy that 250 `Task.sleep`s of 4 ms took 94 s.
    try await offThePool { [agents] in
        for step in 1...events {
            switch simulator.next() {
            case .frame(let user, let frame, _): agents[user]!.send(frame.changes, alive: frame.aliveTouches)
            case .clear(let user, let scope): agents[user]!.clear(scope)
            }
            if step % 4 == 0 { usleep(4_000) }
        }
    }
    for agent in agents.values { #expect(await agent.flush(timeout: .seconds(10))) }
    let state = try await test.board(board)
    // Gone without a goodbye, as in a crash: strokes still in progress stay in the recording.
    for agent in agents.values { await agent.stop(goodbye: false) }
    await test.hub.stop()
    return state
}

@Suite("Journal through the hub, and replay", .timeLimit(.minutes(4)))
struct JournalReplayTests {
    @Test func restartedHubRecoversBoardsAndAgentsProgress() async throws {
        let directory = NSTemporaryDirectory() + "touchsync-hubjournal-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let live = try await recordSession(into: directory, board: "wall", events: 300, seed: 4)
        // Several batches (a busy hub gathers many frames into one: 8 in a full run under load).
        #expect(live.sequence > 1)

        let again = try await TestHub.start {
            $0.journal = JournalConfiguration(directory: directory)
            // The recorded drawers' touches stay down however slow this machine is (not a liveness test).
            $0.timing.livenessTimeout = .seconds(3600)
            $0.timing.abandonTimeout = .seconds(3600)
        }
        defer { Task { await again.hub.stop() } }
        let recovered = try #require(again.hub.recovered.first)
        #expect(recovered.board == "wall" && recovered.sequence == live.sequence && recovered.digest == live.digest)
        #expect(recovered.damage.isEmpty)
        // A subscriber sees the recovered board; an agent of the session is
        // welcomed with what the journal says it applied, not from zero.
        let subscriber = try again.subscriber(board: "wall")
        #expect(await subscriber.waitUntil(sequence: live.sequence, timeout: .seconds(5)))
        #expect(await subscriber.replica()?.digest == live.digest)
        await subscriber.stop()
        // Its history over the network (replay then follow): from the empty board, every batch, to the same digest.
        let historyEndpoint = try #require(again.endpoints.history)
        let history = try await HistoryClient.fetch(board: "wall", endpoint: historyEndpoint, context: again.context, logger: testLogger("history"))
        #expect(history.start.sequence == 0)
        #expect(history.batches.map(\.sequence) == Array(1..<(live.sequence + 1)))
        #expect(history.end.digest == live.digest)
        let nobody = try await HistoryClient.fetch(board: "never-drawn", endpoint: historyEndpoint, context: again.context, logger: testLogger("history"))
        #expect(nobody.batches.isEmpty && nobody.end.sequence == 0)

        // A new agent of a user whose strokes were in progress is a new session:
        // welcomed at 0 (its numbering is its own), and the session before the
        // restart, which will not come back, has its touches cancelled at once.
        let owner = try #require(live.orderedActiveStrokes.first?.owner)
        let agent = try again.agent(board: "wall", identity: owner.rawValue)
        var welcomedAt: UInt64? = nil
        for await event in agent.events {
            if case .welcomed(_, let appliedThrough) = event {
                welcomedAt = appliedThrough
                break
            }
        }
        #expect(welcomedAt == 0)
        #expect(try await eventually { try await again.board("wall").touches[owner]?.isEmpty ?? true })
        #expect(try await again.board("wall").orderedActiveStrokes.contains { $0.owner != owner } == live.orderedActiveStrokes.contains { $0.owner != owner })
        await agent.stop()
    }

    /// A hub that comes back with fewer batches than its subscribers saw (the
    /// tail of its journal lost, as unsynced writes are in a power cut): a
    /// subscriber that kept running notices it went back and resyncs to it.
    @Test func subscriberResyncsWhenTheHubComesBackBehindIt() async throws {
        let directory = NSTemporaryDirectory() + "touchsync-behind-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = HubConfiguration.loopbackEphemeral()
        configuration.timing.heartbeatInterval = .milliseconds(200)
        configuration.journal = JournalConfiguration(directory: directory)
        // It comes back on the same ports.
        let ports = restartableEndpoints(3)
        (configuration.ingestEndpoint, configuration.publishEndpoint, configuration.snapshotEndpoint) = (ports[0], ports[1], ports[2])
        let context = try ZMQContext()
        let first = try TouchSyncHub(configuration: configuration, logger: testLogger("hub"), context: context)
        let endpoints = try await first.start()
        var settings = SubscriberConfiguration(board: "b", publishEndpoint: endpoints.publish, snapshotEndpoint: endpoints.snapshot)
        settings.snapshotTimeout = .milliseconds(500)
        let subscriber = try BoardSubscriber(configuration: settings, context: context, logger: testLogger("subscriber"))
        subscriber.start()
        var agentSettings = AgentConfiguration(board: "b", hubEndpoint: endpoints.ingest)
        agentSettings.identity = "writer"
        let agent = try TouchAgent(configuration: agentSettings, context: context, logger: testLogger("agent"))
        agent.start()
        try agent.touchesBegan([TouchInput(id: 1, coalesced: [point(1, 1, 1)])])
        for index in 1...60 {
            try agent.touchesMoved([TouchInput(id: 1, coalesced: [point(1 + Double(index), 1, 1 + Double(index) / 120)])])
            try await Task.sleep(for: .milliseconds(1))
        }
        try agent.touchesEnded([TouchInput(id: 1, coalesced: [point(100, 1, 2)])])
        #expect(await agent.flush())
        await agent.stop()
        let before = try #require(await first.boardState("b"))
        #expect(await subscriber.waitUntil(sequence: before.sequence, timeout: .seconds(5)))
        await first.stop()

        // Lose the last third of the journal, as a power cut loses unsynced writes.
        let folder = directory + "/b"
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".tsj") }.first)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + segment))
        try bytes.prefix(bytes.count * 2 / 3).write(to: URL(fileURLWithPath: folder + "/" + segment))

        let second = try await startAgain {
            let again = try TouchSyncHub(configuration: configuration, logger: testLogger("hub"), context: context)
            _ = try await again.start()
            return again
        }
        let recovered = try #require(second.recovered.first)
        #expect(recovered.sequence < before.sequence)
        let resynced = await eventually(timeout: .seconds(10)) {
            await subscriber.replica()?.digest == recovered.digest && subscriber.status.resyncs >= 1
        }
        #expect(resynced, "the subscriber kept the board the hub no longer has")
        await subscriber.stop()
        await second.stop()
    }

    /// With fsync per batch, an ack means the frame's batch is on disk: the
    /// journal's bytes and syncs are counted, and an unwritable data folder is
    /// refused at start with a typed error.
    @Test func journalIsCountedAndAnUnusableFolderIsRefused() async throws {
        let directory = NSTemporaryDirectory() + "touchsync-metrics-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let metrics = TestMetrics()
        let test = try await TestHub.start({ configuration in
            var journal = JournalConfiguration(directory: directory)
            journal.fsync = .everyBatch
            configuration.journal = journal
        }, metrics: metrics)
        let agent = try test.agent(board: "b", identity: "durable")
        try agent.touchesBegan([TouchInput(id: 1, coalesced: [point(1, 1, 1), point(2, 2, 1.1)])])
        try agent.touchesEnded([TouchInput(id: 1, coalesced: [point(3, 3, 1.2)])])
        #expect(await agent.flush())
        #expect(try metrics.expectCounter("touchsync_hub_journal_bytes_total").totalValue > 0)
        #expect(try metrics.expectCounter("touchsync_hub_journal_syncs_total").totalValue >= 1)
        #expect(try metrics.expectTimer("touchsync_hub_journal_sync_seconds").values.count >= 1)
        await agent.stop()
        await test.hub.stop()
        let history = try BoardHistory.open(dataDirectory: directory, board: "b").load()
        #expect(history.endState.acceptedStrokes.count == 1 && history.endState.storedSampleCount == 3)
        // A hub without a journal serves no history.
        #expect(test.endpoints.history != nil)
        let memoryOnly = try await TestHub.start()
        #expect(memoryOnly.endpoints.history == nil)
        await memoryOnly.hub.stop()

        // A data folder that is a file: the hub does not start, and says why.
        let file = directory + "/not-a-folder"
        #expect(FileManager.default.createFile(atPath: file, contents: Data([1])))
        var configuration = HubConfiguration.loopbackEphemeral()
        configuration.journal = JournalConfiguration(directory: file)
        let hub = try TouchSyncHub(configuration: configuration, logger: testLogger("hub"))
        await #expect(throws: JournalError.self) { try await hub.start() }
    }

    /// Histories fetched while the hub is appending to the same journal hold
    /// together (a record being written is simply not served yet), and grow.
    @Test func historyWhileDrawingIsAlwaysConsistent() async throws {
        let directory = NSTemporaryDirectory() + "touchsync-history-live-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let test = try await TestHub.start { configuration in
            var journal = JournalConfiguration(directory: directory)
            journal.fsync = .never
            configuration.journal = journal
        }
        let agent = try test.agent(board: "busy", identity: "drawer")
        let drawing = Task {
            var simulator = SessionSimulator(seed: 12, profile: SimulationProfile())
            for step in 1...1500 {
                let frame = simulator.nextFrame(for: 0)
                if !frame.changes.isEmpty || frame.aliveTouches != nil { agent.send(frame.changes, alive: frame.aliveTouches) }
                if step % 10 == 0 { try? await Task.sleep(for: .milliseconds(2)) }
            }
        }
        _ = try await test.board("busy")
        var sequences: [UInt64] = []
        for _ in 0..<6 {
            let history = try await HistoryClient.fetch(
                board: "busy", endpoint: try #require(test.endpoints.history), context: test.context, logger: testLogger("history"))
            sequences.append(history.end.sequence)
            // The next fetch once the board has moved on (or the drawing is over).
            _ = try await eventually(timeout: .seconds(1)) { try await test.board("busy").sequence > history.end.sequence }
        }
        _ = await drawing.result
        #expect(await agent.flush(timeout: .seconds(10)))
        #expect(sequences == sequences.sorted())
        #expect(sequences.last! > 0)
        let final = try await HistoryClient.fetch(
            board: "busy", endpoint: try #require(test.endpoints.history), context: test.context, logger: testLogger("history"))
        #expect(final.end.digest == (try await test.board("busy")).digest)
        await agent.stop()
        await test.hub.stop()
    }

    /// Replay at speed 1 keeps the recorded timing (never early; how late is
    /// measured and printed), and a whole replay ends at the live board's digest,
    /// seen by a real subscriber; speed max and a seek land there too.
    @Test func replayKeepsTimingAndEndsAtTheLiveDigest() async throws {
        let directory = NSTemporaryDirectory() + "touchsync-replay-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let recording = ContinuousClock.now
        let live = try await recordSession(into: directory, board: "session", events: 1000, seed: 8)
        let recordingTook = ContinuousClock.now - recording
        let recorded = try BoardHistory.open(dataDirectory: directory, board: "session")
        #expect(recorded.segments.count >= 2)
        let history = try recorded.load()
        #expect(history.start.sequence == 0)
        #expect(history.endState.digest == live.digest)
        // The span is what a replay at speed 1 has to keep (printed, so that a long run says why).
        let span = Double(history.endTime - history.firstTime) / 1e6
        print("recorded \(history.batches.count) batches spanning \(span) s of hub time in \(recordingTook) of this machine's")

        for speed in [1.0, nil] as [Double?] {
            var configuration = ReplayConfiguration()
            configuration.publishEndpoint = "tcp://127.0.0.1:*"
            configuration.snapshotEndpoint = "tcp://127.0.0.1:*"
            configuration.speed = speed
            configuration.heartbeatInterval = .milliseconds(200)
            let replay = try BoardReplay(board: "session", history: history, configuration: configuration, logger: testLogger("replay"))
            let endpoints = try await replay.start()
            var settings = SubscriberConfiguration(board: "session", publishEndpoint: endpoints.publish, snapshotEndpoint: endpoints.snapshot)
            settings.snapshotTimeout = .milliseconds(500)
            let subscriber = try BoardSubscriber(configuration: settings, logger: testLogger("subscriber"))
            subscriber.start()
            // Bounded, so that a replay that never ends says where it stands.
            let allowed = Duration.seconds((speed.map { span / $0 } ?? 0) + 30)
            let ended = await eventually(timeout: allowed) { replay.progress.published == replay.total }
            guard ended else {
                let pace = speed.map { "\($0)" } ?? "max"
                let standing = "clock started \(replay.clockStarted), \(replay.progress.published) of \(replay.total) batches out"
                Issue.record("the replay at speed \(pace) did not end within \(allowed): \(standing); subscriber \(subscriber.status)")
                await subscriber.stop()
                await replay.stop()
                return
            }
            let result = try #require(await replay.finished())
            #expect(result.batches == history.batches.count)
            #expect(result.sequence == live.sequence && result.digest == live.digest)
            #expect(await subscriber.waitUntil(sequence: live.sequence, timeout: .seconds(10)))
            #expect(await subscriber.replica()?.digest == live.digest)
            if speed != nil {
                // The scheduler never sends a batch before its scaled time...
                #expect(result.earliest >= 0)
                #expect(result.wallSeconds >= result.recordedSeconds * 0.999)
                // ...and how late it was is a measurement, reported here and in docs/performance.md.
                print(
                    "replay at speed 1: \(result.batches) batches over \(result.recordedSeconds) s recorded took \(result.wallSeconds) s;"
                        + " lateness p50 \(result.latenessP50) µs, p99 \(result.latenessP99) µs, max \(result.latenessMax) µs")
            }
            await subscriber.stop()
            await replay.stop()
        }

        // Seek half-way: it starts from a checkpoint at or before that moment and ends the same. Half-way,
        // or just past the second segment's checkpoint when later: a hub starved in a full run packed the
        // session into 41 large batches, and its first segment held more than half of them.
        let afterCheckpoint = try #require(
            history.batches.firstIndex { $0.sequence > recorded.segments[1].firstSequence }, "a batch after the second segment's checkpoint")
        let middle = history.batches[max(history.batches.count / 2, afterCheckpoint)].hubTime
        let seeked = try recorded.load(from: middle)
        #expect(seeked.start.sequence > 0 && seeked.startTime <= middle)
        var configuration = ReplayConfiguration()
        configuration.publishEndpoint = "tcp://127.0.0.1:*"
        configuration.snapshotEndpoint = "tcp://127.0.0.1:*"
        configuration.speed = nil
        configuration.waitForSubscriber = false
        configuration.from = .microseconds(middle - seeked.firstTime)
        let replay = try BoardReplay(board: "session", history: seeked, configuration: configuration, logger: testLogger("replay"))
        _ = try await replay.start()
        let result = try #require(await replay.finished())
        #expect(result.digest == live.digest)
        #expect(result.batches < history.batches.count)
        await replay.stop()
    }
}
