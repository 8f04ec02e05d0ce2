import ProcessTestSupport
import TestSupport
import Foundation
import Synchronization
import Testing
import TouchSyncCommands

/// The command line as a careful user meets it (issue 16): every rough edge
/// found by trying the commands by hand, through the real binary.
@Suite("Command line edges", .timeLimit(.minutes(3)))
struct CommandLineTests {
    /// `bench --hub-journal --hub-threads 1,2`: the same saturating load on a
    /// hub with one board thread, then two, every frame acknowledged, the
    /// second compared with the first and the loop threads' CPU read; also
    /// without a journal (`memory`), with the frames' size and acks as asked.
    @Test func theHubBenchmarkComparesBoardThreadCounts() async throws {
        let run = try await touchsync(
            [
                "bench", "--hub-journal", "--hub-threads", "1,2", "--agents", "4", "--boards", "8", "--messages-per-agent", "100",
                "--fsync-policies", "never,memory", "--coalesced", "4", "--ack-interval-ms", "5",
            ],
            limit: 90)
        #expect(run.status == 0, "\(run.output) \(run.errors)")
        let lines = run.output.split(separator: "\n").map(String.init)
        let one = try #require(lines.first { $0.contains("1 board thread(s), fsync never:") }, "\(run.output)")
        let two = try #require(lines.first { $0.contains("2 board thread(s), fsync never:") }, "\(run.output)")
        #expect(!one.contains("one thread;") && two.contains("x one thread;"), "\(two)")
        #expect(!one.contains("n/a") && !two.contains("n/a"), "the loop threads' CPU was not read")
        let inMemory = try #require(lines.first { $0.contains("2 board thread(s), fsync memory (no journal):") }, "\(run.output)")
        #expect(inMemory.contains("x one thread;"), "\(inMemory)")
    }

    @Test func negativeNumbersReachTheRangeCheckAndEveryErrorNamesItsOption() async throws {
        let users = try await touchsync(["load", "--users", "-1"])
        #expect(users.status == 64)
        #expect(users.errors.contains("--users must be 1 to 5000"), "\(users.errors)")
        let seconds = try await touchsync(["draw", "--board", "b", "--seconds", "-2"])
        #expect(seconds.status == 64 && seconds.errors.contains("--seconds must be above 0"), "\(seconds.errors)")
        let heartbeat = try await touchsync(["hub", "--heartbeat", "0"])
        #expect(heartbeat.status == 64 && heartbeat.errors.contains("--heartbeat must be above 0"), "\(heartbeat.errors)")
        let drain = try await touchsync(["load", "--drain-timeout", "0"])
        #expect(drain.status == 64 && drain.errors.contains("--drain-timeout must be 1 to 3600 seconds"), "\(drain.errors)")
        let boards = try await touchsync(["bench", "--hub-journal", "--boards", "0"])
        #expect(boards.status == 64 && boards.errors.contains("--boards must be 1 to 1000"), "\(boards.errors)")
        let threads = try await touchsync(["bench", "--hub-journal", "--hub-threads", "1,0"])
        #expect(threads.status == 64 && threads.errors.contains("--hub-threads: '0' is not 1 to 64"), "\(threads.errors)")
        let policies = try await touchsync(["bench", "--hub-journal", "--fsync-policies", "batch,often"])
        #expect(policies.status == 64 && policies.errors.contains("'often' is not an fsync policy"), "\(policies.errors)")
        let liveness = try await touchsync(["hub", "--liveness-timeout", "-1"])
        #expect(liveness.status == 64 && liveness.errors.contains("--liveness-timeout"), "\(liveness.errors)")
        let wire = try await touchsync(["spectate", "--board", "b", "--wire", "v3"])
        #expect(wire.status == 64 && wire.errors.contains("--wire") && wire.errors.contains("'v2'"), "\(wire.errors)")
        #expect(try await touchsync(["spectate", "--help"]).output.contains("v2"))
        let browserWire = try await touchsync(["load", "--web", "http://127.0.0.1:1", "--browser-wire", "packed3"])
        #expect(browserWire.status == 64 && browserWire.errors.contains("--browser-wire is packed2, packed, binary or json, not packed3"), "\(browserWire.errors)")
        let loadWire = try await touchsync(["load", "--wire", "2.5"])
        #expect(loadWire.status == 64 && loadWire.errors.contains("--wire") && loadWire.errors.contains("'v2'"), "\(loadWire.errors)")
        // The stream without predictions is a v2 stream: asked for in v1, a usage error that says so.
        for command in [["spectate", "--board", "b", "--no-predictions"], ["load", "--no-predictions", "--wire", "v1"]] {
            let lean = try await touchsync(command)
            #expect(lean.status == 64 && lean.errors.contains("--no-predictions needs --wire v2"), "\(command): \(lean.errors)")
        }
        // --history belongs to spectate only; compact takes --log-level like every command.
        #expect(try await !touchsync(["draw", "--help"]).output.contains("--history"))
        #expect(try await !touchsync(["render", "--help"]).output.contains("--history"))
        #expect(try await touchsync(["spectate", "--help"]).output.contains("--history"))
        #expect(try await touchsync(["compact", "--help"]).output.contains("--log-level"))
        // The browser benchmark moved out of the CLI (it drives Chromium): the old spelling says where.
        let browser = try await touchsync(["bench", "--browser"])
        #expect(browser.status == 64 && browser.errors.contains("touchsync-browser-bench"), "\(browser.errors)")
        #expect(try await !touchsync(["bench", "--help"]).output.contains("--browser"))
    }

    @Test func renderRefusesUnknownBoardsAndWritesFilesCarefully() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let folder = try temporaryFolder("render")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let data = folder + "/data"
        let ports = try TouchSyncProcess.freePorts(4)
        let publishing = ["--publish", "tcp://127.0.0.1:\(ports[1])", "--snapshot", "tcp://127.0.0.1:\(ports[2])"]
        let (hub, _, _) = try await children.startHub(
            ["hub", "--ingest", "tcp://127.0.0.1:\(ports[0])", "--history", "tcp://127.0.0.1:\(ports[3])", "--data", data] + publishing)
        let board = "my board/one"
        // A short scene still ends every stroke it drew before it reports success.
        let draw = try await touchsync(["draw", "--board", board, "--seconds", "0.5", "--hub", "tcp://127.0.0.1:\(ports[0])"])
        #expect(draw.status == 0, "\(draw.output)\(draw.errors)")

        // A board nobody drew on is an error, not an empty picture.
        let unknown = try await touchsync(["render", "--board", "nosuch"] + publishing, in: folder)
        #expect(unknown.status == 1 && unknown.errors.contains("no such board"), "\(unknown.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/nosuch.svg"))

        // The default file name is the board's, readable.
        let live = try await touchsync(["render", "--board", board] + publishing, in: folder)
        #expect(live.status == 0, "\(live.errors)")
        #expect(live.output.contains("(3 accepted, 0 in progress)"), "\(live.output)")
        let svg = try String(contentsOfFile: folder + "/my board_one.svg", encoding: .utf8)
        #expect(svg.hasPrefix("<svg") && svg.contains("<path"))

        // Folders are not created; file errors are plain words with the path.
        let missing = try await touchsync(["render", "--board", board, "-o", folder + "/no/such/dir/x.svg"] + publishing)
        #expect(missing.status == 1 && missing.errors.contains("the folder \(folder)/no/such/dir does not exist"), "\(missing.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/no"))
        let proc = try await touchsync(["render", "--board", board, "-o", "/proc/x.svg"] + publishing)
        #expect(proc.status == 1 && proc.errors.contains("cannot write /proc/x.svg:"), "\(proc.errors)")
        #expect(!proc.errors.contains("NSCocoaErrorDomain"))

        // A PNG is written alone (through a temporary SVG), or refused with what to install.
        let png = try await touchsync(["render", "--board", board, "--data", data, "-o", folder + "/picture.png"])
        let files = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(!files.contains("picture.svg"), "an SVG was left beside the PNG: \(files)")
        #expect(!files.contains { $0.contains(".tmp") }, "a temporary file was left: \(files)")
        if png.status == 0 {
            #expect(files.contains("picture.png"))
        } else {
            #expect(png.errors.contains("apt-get install librsvg2-bin"), "\(png.errors)")
            #expect(!files.contains("picture.png"))
        }

        // A second hub on a port in use fails without creating its data folder.
        let second = try await touchsync(["hub", "--ingest", "tcp://127.0.0.1:\(ports[0])", "--data", folder + "/second"])
        #expect(second.status == 1 && second.errors.contains("cannot listen"), "\(second.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/second"))
        // The same when only its history endpoint is taken.
        let others = try TouchSyncProcess.freePorts(3)
        let third = try await touchsync([
            "hub", "--ingest", "tcp://127.0.0.1:\(others[0])", "--publish", "tcp://127.0.0.1:\(others[1])",
            "--snapshot", "tcp://127.0.0.1:\(others[2])", "--history", "tcp://127.0.0.1:\(ports[3])", "--data", folder + "/third",
        ])
        #expect(third.status == 1 && third.errors.contains("cannot listen"), "\(third.errors)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/third"))

        // Replay: a time past the end gives the recording's length; a missing folder says so.
        let late = try await touchsync(["replay", "--data", data, "--board", board, "--from", "1e9", "--exit-at-end"])
        #expect(late.status == 1 && late.errors.contains("past the end of the recording") && late.errors.contains(" s long"), "\(late.errors)")
        let nowhere = try await touchsync(["replay", "--data", folder + "/nowhere", "--board", board])
        #expect(nowhere.status == 1 && nowhere.errors.contains("no journal folder at \(folder)/nowhere"), "\(nowhere.errors)")
        let compact = try await touchsync(["compact", "--data", data, "--log-level", "info"])
        #expect(compact.status == 0 && compact.output.contains("my board/one:"), "\(compact.errors)")
        hub.interrupt()
        await hub.exited()
    }

    /// Ctrl-C during a load run: the drawing stops, the run drains and checks,
    /// prints and writes its report marked as interrupted, and exits 130.
    @Test func interruptedLoadRunStillReports() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let folder = try temporaryFolder("load")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let ports = try TouchSyncProcess.freePorts(3)
        _ = try await children.startHub(
            ["hub", "--ingest", "tcp://127.0.0.1:\(ports[0])", "--publish", "tcp://127.0.0.1:\(ports[1])",
             "--snapshot", "tcp://127.0.0.1:\(ports[2])", "--no-journal"])
        let (load, output) = try children.run([
            "load", "--hub", "tcp://127.0.0.1:\(ports[0])", "--publish", "tcp://127.0.0.1:\(ports[1])",
            "--snapshot", "tcp://127.0.0.1:\(ports[2])", "--users", "3", "--fingers", "2", "--duration", "60",
            "--json", folder + "/report.json", "--svg", folder + "/chart.svg",
        ])
        var text = ""
        // Two progress lines (one a second), then Ctrl-C.
        while text.components(separatedBy: "samples/s").count < 4 {
            let chunk = await output.nextChunk()
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        load.interrupt()
        text += String(decoding: await output.readToEnd(), as: UTF8.self)
        await load.exited()
        #expect(load.terminationReason == .exit && load.terminationStatus == 130, "\(text)")
        #expect(text.contains("INTERRUPTED after"), "\(text)")
        #expect(text.contains("lost / duplicated   0 / 0"))
        #expect(text.contains("(generator and subscribers; the hub is another process)"))
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: folder + "/report.json"))) as? [String: Any])
        #expect(report["interrupted"] as? Bool == true)
        #expect((report["drawing_seconds"] as? Double ?? 60) < 30)
        // The chart draws whole seconds only: one point fewer than the timeline, whose last second was cut short.
        let timeline = try #require(report["latency_over_time"] as? [[String: Any]])
        let chart = try String(contentsOfFile: folder + "/chart.svg", encoding: .utf8)
        let throughput = try #require(chart.components(separatedBy: "stroke=\"#1565c0\" stroke-width=\"2\" points=\"").last?.split(separator: "\"").first)
        #expect(throughput.split(separator: " ").count == timeline.count - 1)
    }

    /// The same seed draws the same strokes for every user; the board digest
    /// may differ (it covers how users interleaved), as --seed's help says.
    @Test func demoSeedFixesEveryUsersStrokes() async throws {
        let folder = try temporaryFolder("demo")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func run(seed: Int) async throws -> (fingerprint: String, accepted: String, output: String) {
            let demo = try await touchsync(["demo", "--steps", "600", "--seed", "\(seed)", "--image", folder + "/board-\(seed).svg"])
            #expect(demo.status == 0, "\(demo.errors)")
            let lines = demo.output.split(separator: "\n")
            let fingerprint = lines.first { $0.contains("scene fingerprint:") }.map(String.init) ?? ""
            let accepted = lines.first { $0.contains("strokes accepted") }.map(String.init) ?? ""
            return (fingerprint, accepted, demo.output)
        }
        let first = try await run(seed: 5)
        let again = try await run(seed: 5)
        let other = try await run(seed: 6)
        #expect(!first.fingerprint.isEmpty && first.fingerprint == again.fingerprint)
        #expect(first.accepted == again.accepted)
        #expect(first.fingerprint != other.fingerprint)
        #expect(try await touchsync(["demo", "--help"]).output.contains("board digest"))
        // Without rsvg-convert the demo says how to get the PNG.
        let pngWritten = first.output.contains("board-5.png")
        #expect(pngWritten || first.output.contains("apt-get install librsvg2-bin"))
    }

    /// However short the scene, every touch it begins ends (fingers) or is
    /// cancelled (the palm) before `draw` reports success.
    @Test(arguments: [0.01, 0.1, 0.5, 1.0, 2.0])
    func drawnScenesEndEveryTouch(seconds: Double) {
        for fingers in 1...10 {
            let scene = ScriptedScene(fingers: fingers, seconds: seconds)
            var down = Set<UInt64>()
            var began = 0
            for event in scene.events {
                for touch in event.touches {
                    switch event.phase {
                    case .began:
                        #expect(down.insert(touch.id).inserted)
                        began += 1
                    case .ended, .cancelled: #expect(down.remove(touch.id) != nil)
                    case .moved, .stationary: #expect(down.contains(touch.id))
                    }
                }
            }
            #expect(down.isEmpty, "\(fingers) finger(s), \(seconds) s: touches left down: \(down)")
            #expect(began == scene.strokes + 1)  // the fingers it counts as strokes, and the palm
            #expect(scene.strokes >= 1 && scene.strokes <= fingers)
            if seconds >= 0.5 { #expect(scene.strokes == fingers) }
            #expect(scene.events.map(\.time) == scene.events.map(\.time).sorted())
        }
    }

    @Test func benchTableKeepsWholeLabels() async throws {
        let bench = try await touchsync(["bench", "--frames", "300", "--repetitions", "1"])
        #expect(bench.status == 0)
        #expect(bench.output.contains("hub pipeline: reduce, coalesce per tick, encode "), "\(bench.output)")
    }
}
