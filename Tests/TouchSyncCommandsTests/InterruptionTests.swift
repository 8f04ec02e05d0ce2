import ProcessTestSupport
import Foundation
import TestSupport
import Testing
import TouchSyncWire

#if canImport(Glibc)
import Glibc
#endif

/// Ctrl-C and SIGTERM, and the errors a user meets first, through the real
/// binary (issue 21): every long command stops soon after a signal, ends its
/// touches and exits 130; refusals name what is wrong in words.
@Suite("Interruptions and plain errors", .timeLimit(.minutes(3)))
struct InterruptionTests {
    /// `draw --seconds 100`, signalled while its fingers are down: it stops
    /// long before its scene would end, its touches are cancelled on the hub
    /// (no stroke stays in progress), and it exits 130. (A 15 s scene ran out
    /// in a fresh-clone run whose other tests kept this one's tasks waiting.)
    @Test(arguments: [SIGINT, SIGTERM])
    func drawStopsOnASignalAndEndsItsTouches(signal: Int32) async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let endpoints = try await children.startPlainHub(ports: try TouchSyncProcess.freePorts(3))
        let board = "interrupted-\(signal)"
        let (draw, output) = try children.run(["draw", "--board", board, "--seconds", "100", "--hub", endpoints[0]], limit: 150)
        var text = ""
        await readUntil(output, into: &text) { $0.contains("drawing on board") }
        // Fingers down on the hub's board (strokes in progress) before the signal.
        let deadline = ContinuousClock.now + .seconds(10)
        while try await inProgress(endpoints[2], board) == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try await inProgress(endpoints[2], board) > 0, "no finger went down: \(text)")
        kill(draw.processIdentifier, signal)
        text += String(decoding: await output.readToEnd(), as: UTF8.self)
        await draw.exited()
        // Status 130 and "interrupted:" say it stopped on the signal: a signal ignored would run
        // the 100 s scene out and exit 0. (A wall-clock bound here failed in CI: 11.5 s to exit
        // on a machine running other suites.)
        #expect(draw.terminationReason == .exit && draw.terminationStatus == 130, "\(text)")
        #expect(text.contains("interrupted:") && text.contains("cancelled"), "\(text)")
        #expect(try await inProgress(endpoints[2], board) == 0, "a touch was left down on the hub")
    }

    /// Started with SIGINT and SIGTERM blocked (a parent thread's mask is
    /// inherited through exec; every libdispatch thread of a Swift program
    /// blocks them), the demo still stops on Ctrl-C: it finished its scene
    /// and then died of the pending signal before this was fixed.
    @Test func aCommandStartedWithSignalsBlockedStillStops() async throws {
        let folder = try temporaryFolder("blocked")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let script = "import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM}); os.execv(sys.argv[1], sys.argv[1:])"
        let output = try ChildOutput()
        let null = nullDevice()
        defer { close(null) }
        let demo = try Child.spawn(
            "/usr/bin/python3", ["-c", script, TouchSyncProcess.binary.path, "demo", "--steps", "3000", "--image", folder + "/board.svg"],
            output: output.writeEnd, errors: null)
        output.closeWriteEnd()
        var text = String(decoding: await output.readUntil("TouchSync demo:") { demo.interrupt() }, as: UTF8.self)
        await readUntil(output, into: &text) { _ in false }
        await demo.exited()
        #expect(demo.terminationReason == .exit && demo.terminationStatus == 130, "\(text)")
        #expect(text.contains("interrupted after event"), "\(text)")
    }

    /// `demo` signalled while drawing stops, says so, and exits 130; a
    /// `--steps` beyond the scene says how long the scene is and still
    /// converges (the spectator joins half-way through what is drawn).
    @Test func demoStopsOnCtrlCAndSaysHowLongItsSceneIs() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let folder = try temporaryFolder("demo-signal")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (demo, output) = try children.run(["demo", "--steps", "3000", "--image", folder + "/board.svg"])
        var text = String(decoding: await output.readUntil("TouchSync demo:") { demo.interrupt() }, as: UTF8.self)
        text += String(decoding: await output.readToEnd(), as: UTF8.self)
        await demo.exited()
        #expect(demo.terminationReason == .exit && demo.terminationStatus == 130, "\(text)")
        // It stopped drawing when told, not at the end of its 3,000 events (a time bound
        // here failed on a busy machine: 10.6 s to exit while other suites ran).
        let stoppedAt = text.firstMatch(of: /interrupted after event ([0-9]+) of 3000/).flatMap { Int($0.1) }
        #expect(stoppedAt.map { $0 < 3000 } == true, "\(text)")

        let long = try await touchsync(["demo", "--steps", "200000", "--image", folder + "/long.svg"])
        #expect(long.status == 0, "\(long.output) \(long.errors)")
        let length = try #require(
            long.output.firstMatch(of: /the scene is (\d+) input events long/).flatMap { Int($0.1) }, "\(long.output)")
        #expect(length > 1000 && length < 200_000)
        #expect(long.output.contains("drawing \(length), not 200000"))
        #expect(long.output.contains("[spectator] joined after event \(length / 2)"), "\(long.output)")
        #expect(long.output.contains("converged: the spectator shows exactly the hub's board"))
    }

    /// `spectate --from-beginning --speed 1` signalled during the replay stops there and exits 130.
    @Test func spectatorReplayStopsOnCtrlC() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let data = try temporaryFolder("replay-signal")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let ports = try TouchSyncProcess.freePorts(4)
        let endpoints = ports.map { "tcp://127.0.0.1:\($0)" }
        _ = try await children.startHub([
            "hub", "--data", data + "/journal", "--ingest", endpoints[0], "--publish", endpoints[1], "--snapshot", endpoints[2],
            "--history", endpoints[3],
        ])
        // Eight seconds of drawing at its real pace: a replay at speed 1 takes as long.
        let draw = try await touchsync(["draw", "--board", "replayed", "--seconds", "8", "--hub", endpoints[0]])
        #expect(draw.status == 0, "\(draw.errors)")
        let (spectator, output) = try children.run([
            "spectate", "--board", "replayed", "--from-beginning", "--speed", "1", "--publish", endpoints[1], "--snapshot", endpoints[2],
            "--history", endpoints[3],
        ])
        var text = String(decoding: await output.readUntil("replaying") { spectator.interrupt() }, as: UTF8.self)
        text += String(decoding: await output.readToEnd(), as: UTF8.self)
        await spectator.exited()
        // Status 130 and the words say the replay stopped on the signal; a replay that ran on
        // would end with 0 (no wall-clock bound: a busy machine stretches any).
        #expect(spectator.terminationReason == .exit && spectator.terminationStatus == 130, "\(text)")
        #expect(text.contains("interrupted during the replay"), "\(text)")
    }

    /// A gateway whose address is taken fails at once, in words, naming the address.
    @Test func webOnABusyPortFailsAtOnceInWords() async throws {
        let port = try TouchSyncProcess.freePorts(1)[0]
        let holder = try listeningSocket(port: UInt16(port))
        defer { close(holder) }
        // (It used to wait 10 s for a server that would never listen, then print NIO's
        // "bind(descriptor:ptr:bytes:)" text. No wall-clock bound here: on two busy
        // cores the binary alone took 9.7 s to start once; the words are the test.)
        let web = try await touchsync(["web", "--listen", "127.0.0.1:\(port)"], limit: 60)
        #expect(web.status == 1)
        #expect(web.errors.contains("cannot listen on 127.0.0.1:\(port): the address is already in use"), "\(web.errors)")
        #expect(!web.errors.contains("errno"), "\(web.errors)")
    }

    /// Cluster files are called cluster files; bad numbers are refused; options a command never used are gone.
    @Test func errorsNameTheRightThing() async throws {
        let folder = try temporaryFolder("cluster-errors")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let missing = try await touchsync(["cluster", "show", "--cluster", folder + "/nofile.json", "--board", "b"])
        #expect(missing.status == 1 && missing.errors.contains("cannot read the cluster file \(folder)/nofile.json"), "\(missing.errors)")
        try #"{"hubs": []}"#.write(toFile: folder + "/empty.json", atomically: true, encoding: .utf8)
        let empty = try await touchsync(["cluster", "show", "--cluster", folder + "/empty.json", "--board", "b"])
        #expect(empty.status == 1 && empty.errors.contains("invalid cluster file") && empty.errors.contains("at least one hub"), "\(empty.errors)")
        #expect(!(missing.errors + empty.errors).contains("access list"))
        #expect(try await touchsync(["cluster", "--help"]).output.contains("docs/protocol.md"))

        let negative = try await touchsync(["compact", "--data", folder, "--before", "-3"])
        #expect(negative.status == 64 && negative.errors.contains("--before must be"), "\(negative.errors)")
        let notANumber = try await touchsync(["render", "--board", "b", "--data", folder, "--at", "nan"])
        #expect(notANumber.status == 64 && notANumber.errors.contains("--at must be"), "\(notANumber.errors)")

        // Readers take the publish and snapshot endpoints only: --hub (the agents' endpoint) is not theirs.
        for command in ["relay", "health", "render"] {
            let outcome = try await touchsync([command, "--board", "b", "--hub", "tcp://127.0.0.1:5570"])
            #expect(outcome.status == 64 && outcome.errors.contains("--hub"), "\(command): \(outcome.errors)")
            #expect(try await !touchsync([command, "--help"]).output.contains("--hub "), "\(command) --help")
        }
    }

    /// The tests' hub start picks fresh ports when one it was given is taken
    /// by the time the hub binds it (what busy runs saw), and says which.
    @Test func aTestHubStartsAgainOnFreshPortsWhenOneIsTaken() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let given = try TouchSyncProcess.freePorts(3)
        let taken = try listeningSocket(port: UInt16(given[1]))
        defer { close(taken) }
        let endpoints = try await children.startPlainHub(ports: given)
        #expect(endpoints.count == 3 && !endpoints.contains("tcp://127.0.0.1:\(given[1])"), "\(endpoints)")
        #expect(try await inProgress(endpoints[2], "fresh-ports") == 0, "the hub answers on the ports it reports")
    }

    /// Strokes in progress on `board`, from the hub's snapshot.
    func inProgress(_ snapshot: String, _ board: String) async throws -> Int {
        guard let reply = try await snapshotReply(endpoint: snapshot, board: board) else { throw TestFailure("no snapshot from \(snapshot)") }
        return reply.chunk.strokes.filter { $0.acceptedPosition == 0 }.count
    }
}

