import Logging
import Synchronization
import Testing
import TouchSyncCommands
import TouchSyncCore

@Suite("Commands")
struct CommandsTests {
    /// The embedded default, on real sockets: the spectator joins half-way and converges.
    @Test func demoSpectatorConvergesAndReports() async throws {
        var scene = DemoScene()
        scene.steps = 600
        let lines = Mutex<[String]>([])
        var logger = Logger(label: "demo")
        logger.logLevel = .critical
        let result = try await scene.run(logger: logger) { line in lines.withLock { $0.append(line) } }
        #expect(result.converged)
        #expect(result.samples > 500)
        #expect(result.spectatorJoinedAt > 0 && result.spectatorJoinedAt < result.hubSequence)
        let text = lines.withLock { $0 }
        #expect(text.contains { $0.contains("converged: the spectator shows exactly the hub's board") })
        #expect(text.contains { $0.contains("[spectator] joined after event 300") })
    }

    @Test func benchmarkMeasuresEveryStageAndChecksItsReplica() throws {
        var benchmark = CodecBenchmark()
        benchmark.frames = 400
        benchmark.repetitions = 1
        let report = try benchmark.run()
        #expect(report.figures.map(\.stage).count == 6)
        #expect(report.figures.allSatisfy { $0.seconds > 0 && $0.samples == report.samples })
        #expect(report.samples > 400)
        // Coalescing per tick can only shrink the diff stream.
        #expect(report.tickBytesPerSample < report.publishBytesPerSample)
        #expect(report.agentBytesPerSample > 0 && report.snapshotBytesPerSample > 0)
    }

    @Test func commandLineParsesAndRejectsBadOptions() throws {
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["demo", "--users", "0"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["bench", "--coalesced", "100"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["nonsense"]) }
        _ = try TouchSyncCommand.parseAsRoot(["demo", "--steps", "10"])
        #expect(TouchSyncCommand.helpMessage().contains("demo"))
        #expect(TouchSyncCommand.helpMessage().contains("bench"))
    }
}
