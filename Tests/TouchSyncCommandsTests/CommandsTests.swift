import ProcessTestSupport
import Foundation
import TouchSyncAccess
import Logging
import Synchronization
import TestSupport
import Testing
@testable import TouchSyncCommands
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncLoad
import TouchSyncWire
import ZeroMQ

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
        #expect(report.figures.map(\.stage).count == 14)
        #expect(report.figures.contains { $0.stage == "board digests with and without predictions, one pass" })
        #expect(report.figures.contains { $0.stage == "decode and apply diff batches (v2 replica)" })
        #expect(report.figures.contains { $0.stage == "decode agent frames (v2)" })
        // Packed agent frames (decoded and checked against the model as they are measured) are smaller.
        #expect(report.agentBytesPerSampleV2 > 0 && report.agentBytesPerSampleV2 < report.agentBytesPerSample)
        // Every stage counts the session's samples, but the digests, which count the board's stored samples.
        #expect(report.figures.allSatisfy { $0.seconds > 0 && ($0.samples == report.samples || $0.stage.contains("digest")) })
        #expect(report.figures.filter { $0.stage.contains("digest") }.allSatisfy { $0.samples > 0 && $0.samples <= report.samples })
        #expect(report.samples > 400)
        // Coalescing per tick can only shrink the diff stream.
        #expect(report.tickBytesPerSample < report.publishBytesPerSample)
        #expect(report.agentBytesPerSample > 0 && report.snapshotBytesPerSample > 0)
        // The same ticks in wire format v2 (each checked against the hub's digest as it is measured) are smaller.
        #expect(report.bytesPerSampleByTickV2.map(\.eventsPerTick) == report.bytesPerSampleByTick.map(\.eventsPerTick))
        for (v1, v2) in zip(report.bytesPerSampleByTick, report.bytesPerSampleByTickV2) { #expect(v2.bytesPerSample < v1.bytesPerSample) }
        #expect(report.bytesPerSampleByTickV2WithoutPredictions.map(\.eventsPerTick) == report.bytesPerSampleByTick.map(\.eventsPerTick))
        for (v2, lean) in zip(report.bytesPerSampleByTickV2, report.bytesPerSampleByTickV2WithoutPredictions) {
            #expect(lean.bytesPerSample < v2.bytesPerSample)
        }
    }

    @Test func commandLineParsesAndRejectsBadOptions() throws {
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["demo", "--users", "0"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["bench", "--coalesced", "100"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["nonsense"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["render", "--board", "b", "--at", "3"]) }  // --at needs --data
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["render", "--board", "b", "-o", "x.jpg"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["replay", "--board", "b", "--speed", "0"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["replay", "--board", "b", "--from", "5", "--to", "2"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["hub", "--fsync", "sometimes"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["hub", "--advertise", "hub-a"]) }  // needs --store
        #expect(throws: (any Error).self) {
            try TouchSyncCommand.parseAsRoot(["hub", "--store", "postgres://u@h:5432/d", "--advertise", "tcp://hub-a:5570"])
        }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["relay", "--hub-feed", "tcp://b:5571"]) }  // PUBLISH,SNAPSHOT
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["bench", "--failover"]) }  // needs --store
        _ = try TouchSyncCommand.parseAsRoot(["hub", "--store", "postgres://u@h:5432/d", "--advertise", "hub-a", "--ingest", "tcp://*:5570", "--insecure"])
        _ = try TouchSyncCommand.parseAsRoot(["relay", "--hub-feed", "tcp://b:5571,tcp://b:5572"])
        _ = try TouchSyncCommand.parseAsRoot(["hub", "--fsync", "batch", "--data", "/tmp/x"])
        _ = try TouchSyncCommand.parseAsRoot(["hub", "--threads", "4"])
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["hub", "--threads", "0"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["hub", "--threads", "65"]) }
        #expect(throws: (any Error).self) { try TouchSyncCommand.parseAsRoot(["hub", "--threads", "many"]) }
        // auto: one board thread per four cores, at least one.
        #expect(BoardThreadCount(argument: "auto") == .automatic && BoardThreadCount(argument: "3") == .count(3))
        #expect([1, 2, 7, 8, 16, 300].map { BoardThreadCount.automatic.resolved(cores: $0) } == [1, 1, 1, 2, 4, 64])
        #expect(BoardThreadCount.count(3).resolved(cores: 16) == 3)
        _ = try TouchSyncCommand.parseAsRoot(["hub", "--threads", "2", "--store", "postgres://u@h:5432/d"])
        _ = try TouchSyncCommand.parseAsRoot(["replay", "--board", "b", "--speed", "max", "--from", "1.5"])
        _ = try TouchSyncCommand.parseAsRoot(["render", "--board", "b", "--data", "d", "--frames", "out", "--fps", "5"])
        _ = try TouchSyncCommand.parseAsRoot(["demo", "--steps", "10"])
        #expect(TouchSyncCommand.helpMessage().contains("demo"))
        #expect(TouchSyncCommand.helpMessage().contains("bench"))
    }
}

/// The README's three shells, as three real processes of the built binary.
@Suite("touchsync processes", .timeLimit(.minutes(4)))
struct ProcessTests {
    @Test func hubDrawAndSpectateWorkTogether() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }  // none outlives the test, whatever fails
        try #require(FileManager.default.isExecutableFile(atPath: TouchSyncProcess.binary.path), "build the touchsync product first (make test does)")
        let ports = try TouchSyncProcess.freePorts(3)
        let hubAddress = ["--hub", "tcp://127.0.0.1:\(ports[0])"]
        let subscriberAddress = ["--publish", "tcp://127.0.0.1:\(ports[1])", "--snapshot", "tcp://127.0.0.1:\(ports[2])"]
        let data = NSTemporaryDirectory() + "touchsync-processes-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: data) }
        let (hub, hubOutput, hubStart) = try await children.startHub([
            "hub", "--ingest", "tcp://127.0.0.1:\(ports[0])", "--publish", "tcp://127.0.0.1:\(ports[1])",
            "--snapshot", "tcp://127.0.0.1:\(ports[2])", "--data", data,
        ])
        // The spectator runs until Ctrl-C, which comes once it has printed the whole
        // scene (a fixed --duration ran out before the batches on a busy machine).
        let (spectator, spectatorOutput) = try children.run(["spectate", "--board", "wall", "--json"] + subscriberAddress)
        // A second spectator follows the board in wire format v2: the same scene.
        let (packed, packedOutput) = try children.run(["spectate", "--board", "wall", "--json", "--wire", "v2"] + subscriberAddress)
        // Draw only once the spectators have synced (their first line), so they see every batch.
        var spectatorText = "", packedText = ""
        await readUntil(spectatorOutput, into: &spectatorText) { $0.contains("\n") }
        await readUntil(packedOutput, into: &packedText) { $0.contains("\n") }
        let (draw, drawOutput) = try children.run(["draw", "--board", "wall", "--fast", "--identity", "tester"] + hubAddress)
        await draw.exited()
        #expect(draw.terminationStatus == 0)
        let drawText = String(decoding: await drawOutput.readToEnd(), as: UTF8.self)
        #expect(drawText.contains("every message acknowledged"))

        // Three strokes accepted and the palm cancelled: the whole scene.
        func diffs(_ kind: String, in text: String) -> Int {
            text.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]).flatMap { ($0["diffs"] as? [String: Int])?[kind] }
            }.reduce(0, +)
        }
        await readUntil(spectatorOutput, into: &spectatorText) { diffs("accepted", in: $0) >= 3 && diffs("cancelled", in: $0) >= 1 }
        await readUntil(packedOutput, into: &packedText) { diffs("accepted", in: $0) >= 3 && diffs("cancelled", in: $0) >= 1 }
        spectator.interrupt()
        packed.interrupt()
        await readUntil(spectatorOutput, into: &spectatorText) { _ in false }  // to its end: the pipe must not fill up
        await readUntil(packedOutput, into: &packedText) { _ in false }
        let lines = spectatorText.split(separator: "\n")
        await spectator.exited()
        await packed.exited()
        #expect(spectator.terminationStatus == 0 && packed.terminationStatus == 0)
        // The v2 spectator saw the same batches (sequences and diff counts) as the v1 one.
        func batchLines(_ text: String) -> [String] {
            text.split(separator: "\n").map(String.init).filter { $0.contains("\"event\":\"batch\"") }
        }
        #expect(!batchLines(packedText).isEmpty && batchLines(packedText) == batchLines(spectatorText))
        let events = try lines.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        #expect(events.first?["event"] as? String == "synced")
        let batches = events.filter { $0["event"] as? String == "batch" }
        #expect(batches.count > 0)
        // Consecutive sequence numbers: nothing was missed.
        let sequences = batches.compactMap { $0["sequence"] as? Int }
        #expect(sequences == Array(1..<(max(1, (sequences.last ?? 0) + 1))))  // (a range that cannot trap when none came)
        let accepted = batches.compactMap { ($0["diffs"] as? [String: Int])?["accepted"] }.reduce(0, +)
        let cancelled = batches.compactMap { ($0["diffs"] as? [String: Int])?["cancelled"] }.reduce(0, +)
        #expect(accepted == 3)  // three fingers
        #expect(cancelled == 1)  // the palm

        hub.interrupt()  // SIGINT: graceful shutdown
        await hub.exited()
        #expect(hub.terminationStatus == 0)
        let hubText = hubStart + String(decoding: await hubOutput.readToEnd(), as: UTF8.self)
        #expect(hubText.contains("TouchSync hub listening") && hubText.contains("hub stopped"))
    }

    /// SIGKILL the hub (a real child process) in the middle of a load run and
    /// start it again on the same journal: the load run (another process, its
    /// agents reconnecting and resending) ends with nothing lost and nothing
    /// duplicated, and a hub killed once more recovers exactly the digest the
    /// subscribers ended with.
    /// A second `load` with the same seed on a journaling hub (issue 39: it
    /// reported "duplicated 861, converged NO", counting the first run's
    /// strokes on the same boards): it checks only the strokes it began,
    /// finds nothing lost or duplicated, and says the board held strokes.
    @Test func aSecondLoadOnTheSameBoardsChecksOnlyItsOwnStrokes() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let data = try temporaryFolder("second-load")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let (ports, _, _, _) = try await children.startHub(ports: try TouchSyncProcess.freePorts(4)) { ports in
            ["hub", "--data", data] + zip(["--ingest", "--publish", "--snapshot", "--history"], ports).flatMap { [$0, "tcp://127.0.0.1:\($1)"] }
        }
        let load = [
            "load", "--hub", "tcp://127.0.0.1:\(ports[0])", "--publish", "tcp://127.0.0.1:\(ports[1])", "--snapshot", "tcp://127.0.0.1:\(ports[2])",
            "--users", "3", "--fingers", "2", "--duration", "1", "--seed", "7",
        ]
        let first = try await touchsync(load, limit: 60)
        #expect(first.status == 0 && first.output.contains("lost / duplicated   0 / 0"), "\(first.output) \(first.errors)")
        let second = try await touchsync(load, limit: 60)
        #expect(second.status == 0, "\(second.output) \(second.errors)")
        #expect(second.output.contains("lost / duplicated   0 / 0") && second.output.contains("converged           yes"), "\(second.output)")
        #expect(second.errors.contains("the board already holds strokes: only this run's are checked"), "\(second.errors)")
    }

    /// `load --hub-pid` (issue 42): the external hub's CPU thread by
    /// thread, in words and in the JSON report, here a hub with two ZeroMQ
    /// I/O threads (`--io-threads 2`: both carry connections); refused without --hub.
    @Test func loadReportsAnExternalHubsThreads() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let (ports, hub, _, _) = try await children.startHub(ports: try TouchSyncProcess.freePorts(3)) { ports in
            ["hub", "--no-journal", "--io-threads", "2"] + zip(["--ingest", "--publish", "--snapshot"], ports).flatMap { [$0, "tcp://127.0.0.1:\($1)"] }
        }
        let report = try temporaryFolder("hub-threads") + "/report.json"
        defer { try? FileManager.default.removeItem(atPath: (report as NSString).deletingLastPathComponent) }
        let load = try await touchsync(
            [
                "load", "--hub", "tcp://127.0.0.1:\(ports[0])", "--publish", "tcp://127.0.0.1:\(ports[1])", "--snapshot",
                "tcp://127.0.0.1:\(ports[2])", "--users", "4", "--fingers", "3", "--duration", "2", "--hub-pid", "\(hub.processIdentifier)",
                "--json", report,
            ], limit: 60)
        #expect(load.status == 0, "\(load.output) \(load.errors)")
        #expect(load.output.contains("hub threads         touchsync-hub "), "\(load.output)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any])
        let threads = try #require(object["hub_threads_cpu_seconds"] as? [String: Double], "\(object.keys.sorted())")
        #expect((threads["touchsync-hub"] ?? 0) > 0 && threads["ZMQbg/IO/0"] != nil && threads["ZMQbg/IO/1"] != nil, "\(threads)")
        #expect((object["hub_cpu_us_per_sample"] as? Double ?? 0) > 0)
        let without = try await touchsync(["load", "--hub-pid", "\(hub.processIdentifier)"])
        #expect(without.status == 64 && without.errors.contains("give its --hub too"), "\(without.errors)")
        let noIO = try await touchsync(["hub", "--io-threads", "0"])
        #expect(noIO.status == 64 && noIO.errors.contains("--io-threads must be 1 to 64"), "\(noIO.errors)")
    }

    /// `hub --threads 3` (boards spread over board threads behind one
    /// front), SIGKILLed mid-run: the load loses and duplicates nothing on
    /// six boards of every thread, and after a second SIGKILL a hub with
    /// another thread count (the boards fall to other threads) recovers every
    /// board at the digest the load saw.
    @Test(.timeLimit(.minutes(4)))
    func aHubWithBoardThreadsKilledMidRunLosesNothing() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let ports = try TouchSyncProcess.freePorts(4)
        let data = try temporaryFolder("threads-kill")
        let report = data + "/report.json"
        defer { try? FileManager.default.removeItem(atPath: data) }
        let endpoints = ["--publish", "tcp://127.0.0.1:\(ports[1])", "--snapshot", "tcp://127.0.0.1:\(ports[2])"]
        func hubArguments(threads: Int) -> [String] {
            ["hub", "--threads", "\(threads)", "--ingest", "tcp://127.0.0.1:\(ports[0])"] + endpoints
                + ["--history", "tcp://127.0.0.1:\(ports[3])", "--data", data + "/journal", "--fsync", "batch"]
        }
        var (hub, _, _) = try await children.startHub(hubArguments(threads: 3))
        let (load, loadOutput) = try children.run(
            ["load", "--hub", "tcp://127.0.0.1:\(ports[0])"] + endpoints + [
                "--users", "6", "--fingers", "2", "--boards", "6", "--duration", "4", "--seed", "23", "--json", report,
                "--drain-timeout", "30",
            ])
        let killedMidRun = await killMidRun(hub, whileRunning: load) { directoryBytes(data + "/journal") >= 16 << 10 }
        #expect(killedMidRun, "the load run ended before the hub was killed")
        await hub.exited()
        (hub, _, _) = try await children.startHub(hubArguments(threads: 3))
        await load.exited()
        let loadText = String(decoding: await loadOutput.readToEnd(), as: UTF8.self)
        #expect(load.terminationStatus == 0, "load run failed:\n\(loadText)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any])
        #expect(object["lost"] as? Int == 0 && object["duplicated"] as? Int == 0 && object["converged"] as? Bool == true, "\(loadText)")
        let digests = try #require(object["board_digests"] as? [String: String])
        #expect(digests.count == 6)
        let threads = BoardThreads(count: 3)
        #expect(Set(digests.keys.map(threads.thread(of:))).count == 3, "the load's boards fall on every thread")

        kill(hub.processIdentifier, SIGKILL)
        await hub.exited()
        let (restarted, restartedOutput, restartedStart) = try await children.startHub(hubArguments(threads: 2))
        restarted.interrupt()
        await restarted.exited()
        let restartText = restartedStart + String(decoding: await restartedOutput.readToEnd(), as: UTF8.self)
        #expect(restartText.contains("6 board(s) recovered") && !restartText.contains("DAMAGE"), "\(restartText)")
        for (board, digest) in digests {
            #expect(restartText.contains("\(board): batch ") && restartText.contains("digest \(digest)"), "\(board) \(digest): \(restartText)")
        }
    }

    @Test(.timeLimit(.minutes(4)))
    func hubKilledMidRunRecoversEveryAcknowledgedSample() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }  // none outlives the test, whatever fails
        try #require(FileManager.default.isExecutableFile(atPath: TouchSyncProcess.binary.path), "build the touchsync product first (make test does)")
        let ports = try TouchSyncProcess.freePorts(4)
        let data = NSTemporaryDirectory() + "touchsync-kill-\(UUID().uuidString.prefix(8))"
        let report = data + "-report.json"
        defer {
            try? FileManager.default.removeItem(atPath: data)
            try? FileManager.default.removeItem(atPath: report)
        }
        let endpoints = [
            "--publish", "tcp://127.0.0.1:\(ports[1])", "--snapshot", "tcp://127.0.0.1:\(ports[2])",
        ]
        let history = ["--history", "tcp://127.0.0.1:\(ports[3])"]
        let hubArguments = ["hub", "--ingest", "tcp://127.0.0.1:\(ports[0])"] + endpoints + history + ["--data", data, "--fsync", "batch"]
        var (hub, _, _) = try await children.startHub(hubArguments)
        let (load, loadOutput) = try children.run(
            ["load", "--hub", "tcp://127.0.0.1:\(ports[0])"] + endpoints + [
                "--users", "4", "--fingers", "3", "--duration", "4", "--seed", "21", "--json", report,
                "--drain-timeout", "30",  // within the run's 60 s limit: a stuck drain says where it stuck
            ])
        // Killed mid-run: once the journal holds a good part of the drawing (the run lasts 4 s).
        let killedMidRun = await killMidRun(hub, whileRunning: load) { directoryBytes(data) >= 12 << 10 }
        #expect(killedMidRun, "the load run ended before the hub was killed")
        await hub.exited()
        #expect(hub.terminationReason == .uncaughtSignal)
        (hub, _, _) = try await children.startHub(hubArguments)

        await load.exited()
        let loadText = String(decoding: await loadOutput.readToEnd(), as: UTF8.self)
        #expect(load.terminationStatus == 0, "load run failed:\n\(loadText)")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any])
        #expect(object["lost"] as? Int == 0)
        #expect(object["duplicated"] as? Int == 0)
        #expect(object["converged"] as? Bool == true)
        #expect((object["samples_sent"] as? Int ?? 0) > 500)
        let digest = try #require((object["board_digests"] as? [String: String])?["load-21-0"])

        // A spectator joining now from the beginning: the history over the
        // network ends at that digest, then it follows live.
        let (spectator, spectatorOutput) = try children.run(
            ["spectate", "--board", "load-21-0", "--from-beginning", "--json", "--duration", "1"] + endpoints + history)
        // Read to the end first: a replay prints more than a pipe holds.
        let spectatorText = String(decoding: await spectatorOutput.readToEnd(), as: UTF8.self)
        await spectator.exited()
        #expect(spectator.terminationStatus == 0)
        let events = spectatorText
            .split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let replayed = events.filter { $0["event"] as? String == "replayed" }.compactMap { $0["sequence"] as? Int }
        #expect(!replayed.isEmpty && replayed == Array(1...replayed.count))
        let done = try #require(events.first { $0["event"] as? String == "replay_done" })
        #expect(done["digest"] as? String == digest)
        #expect(events.contains { $0["event"] as? String == "synced" && $0["digest"] as? String == digest })

        // Kill it again with everything acknowledged: it must come back at exactly that board.
        kill(hub.processIdentifier, SIGKILL)
        await hub.exited()
        let (restarted, restartedOutput, restartedStart) = try await children.startHub(hubArguments)
        restarted.interrupt()
        await restarted.exited()
        let restartText = restartedStart + String(decoding: await restartedOutput.readToEnd(), as: UTF8.self)
        #expect(restartText.contains("1 board(s) recovered"))
        #expect(restartText.contains("load-21-0: batch ") && restartText.contains("digest \(digest)"), "\(restartText)")
        #expect(!restartText.contains("DAMAGE"))

        // The same journal, through the other commands (real processes): a
        // replay at full speed ends at that digest, a picture at a moment,
        // a time-lapse, compaction.
        let replayPorts = try TouchSyncProcess.freePorts(2)
        let (replay, replayOutput) = try children.run([
            "replay", "--data", data, "--board", "load-21-0", "--speed", "max", "--now", "--exit-at-end",
            "--publish", "tcp://127.0.0.1:\(replayPorts[0])", "--snapshot", "tcp://127.0.0.1:\(replayPorts[1])",
        ])
        await replay.exited()
        let replayText = String(decoding: await replayOutput.readToEnd(), as: UTF8.self)
        #expect(replay.terminationStatus == 0)
        #expect(replayText.contains("replay done:") && replayText.contains("digest \(digest)"), "\(replayText)")

        // Without --exit-at-end it keeps serving the final board until Ctrl-C.
        let (serving, servingOutput) = try children.run([
            "replay", "--data", data, "--board", "load-21-0", "--speed", "max", "--now",
            "--publish", "tcp://127.0.0.1:\(replayPorts[0])", "--snapshot", "tcp://127.0.0.1:\(replayPorts[1])",
        ])
        var servingText = ""
        while !servingText.contains("serving the final board until Ctrl-C") {
            let chunk = await servingOutput.nextChunk()
            if chunk.isEmpty { break }  // exited (or killed by the watchdog)
            servingText += String(decoding: chunk, as: UTF8.self)
        }
        // Still answering after it said so: a snapshot request round trip.
        let reply = try await snapshotReply(endpoint: "tcp://127.0.0.1:\(replayPorts[1])", board: "load-21-0")
        #expect(reply?.requestID == 1 && reply?.chunk.sequence ?? 0 > 0, "no snapshot from the serving replay")
        #expect(serving.isRunning, "the replay did not keep serving: \(servingText)")
        serving.interrupt()
        await serving.exited()
        #expect(serving.terminationReason == .exit && serving.terminationStatus == 0)

        let picture = data + "-at.svg"
        let frames = data + "-frames"
        defer {
            try? FileManager.default.removeItem(atPath: picture)
            try? FileManager.default.removeItem(atPath: frames)
        }
        let (render, _) = try children.run(["render", "--data", data, "--board", "load-21-0", "--at", "2", "-o", picture])
        await render.exited()
        #expect(render.terminationStatus == 0)
        let svg = try String(contentsOfFile: picture, encoding: .utf8)
        #expect(svg.hasPrefix("<svg") && svg.contains("<path"))
        let (lapse, _) = try children.run(["render", "--data", data, "--board", "load-21-0", "--frames", frames, "--fps", "4"])
        await lapse.exited()
        #expect(lapse.terminationStatus == 0)
        let written = try FileManager.default.contentsOfDirectory(atPath: frames).filter { $0.hasSuffix(".svg") }
        #expect(written.count >= 15)  // 4 s of drawing at 4 frames per second
        #expect(written.contains("frame-000001.svg"))

        let (unknown, _) = try children.run(["render", "--data", data, "--board", "nope", "-o", picture])
        await unknown.exited()
        #expect(unknown.terminationStatus != 0)  // a clear error, not an empty picture

        let (compact, compactOutput) = try children.run(["compact", "--data", data])
        await compact.exited()
        #expect(compact.terminationStatus == 0)
        #expect(String(decoding: await compactOutput.readToEnd(), as: UTF8.self).contains("load-21-0:"))
    }
}

