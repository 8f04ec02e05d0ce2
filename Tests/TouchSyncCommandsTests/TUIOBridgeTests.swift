import ProcessTestSupport
import TestSupport
import Foundation
import Logging
import Synchronization
import Testing
import TouchSyncClient
import TouchSyncCore
import TouchSyncTUIO
import ZeroMQ

/// The TUIO bridge as real processes over loopback UDP (issue 15). The
/// sender is the tests' own hand-written OSC encoder (`RawTUIO`), apart from
/// the bridge's decoder.
@Suite("TUIO bridge", .timeLimit(.minutes(3)))
struct TUIOBridgeTests {
    /// Two sources: a table that names itself, sending reordered, repeated and
    /// lossy frames with cursor ids reused, and an unnamed one that goes
    /// silent with a touch down. The board holds the named table's three
    /// strokes with exactly the samples of the frames that counted, in its
    /// own namespace, and nothing of the silent one is left stuck.
    @Test func trackersDrawOnABoard() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        // A source timeout well above the 15 ms between this test's frames, however slowly a loaded
        // machine runs it: only the unnamed source, silent for good, may time out. (3 s was not:
        // on two cores busy with a build, a load run and the parallel suite, this test's own
        // sends were once late enough for tableA's first stroke to be cancelled and begun again.)
        // (8 s failed once too, under the same load: the test's 15 ms sleeps run on a
        // cooperative pool that a busy parallel suite can hold up for seconds.)
        let run = try await BridgeRun.start(board: "table", sourceTimeout: 20, children: children)
        defer { Task { await run.subscriber.stop() } }

        let named = try UDPSender()
        let unnamed = try UDPSender()
        func send(_ sender: UDPSender, _ source: String?, _ fseq: Int32, alive: [Int32], sets: [(Int32, Float, Float)]) async throws {
            sender.send(RawTUIO.cursors(source: source, alive: alive, sets: sets, fseq: fseq), port: run.port)
            try await Task.sleep(for: .milliseconds(15))
        }
        try await send(named, "tableA", 1, alive: [1], sets: [(1, 0.10, 0.10)])
        try await send(unnamed, nil, 1, alive: [5], sets: [(5, 0.30, 0.30)])
        try await send(named, "tableA", 2, alive: [1, 2], sets: [(1, 0.11, 0.10), (2, 0.50, 0.50)])
        try await send(named, "tableA", 3, alive: [1, 2], sets: [(1, 0.12, 0.10), (1, 0.13, 0.10)])  // two samples in one frame
        try await send(unnamed, nil, 2, alive: [5], sets: [(5, 0.31, 0.30)])  // then silent, touch down
        try await send(named, "tableA", 5, alive: [2], sets: [(2, 0.51, 0.50)])  // cursor 1 lifted
        try await send(named, "tableA", 4, alive: [1, 2], sets: [(1, 0.99, 0.99)])  // late: dropped
        try await send(named, "tableA", 6, alive: [2], sets: [(2, 0.52, 0.50)])
        try await send(named, "tableA", 6, alive: [2], sets: [(2, 0.52, 0.50)])  // repeated: dropped
        try await send(named, "tableA", 7, alive: [1, 2], sets: [(1, 0.20, 0.20)])  // cursor id 1 again: a new stroke
        try await send(named, "tableA", 8, alive: [1], sets: [(1, 0.21, 0.20)])  // cursor 2 gone, its own packets lost
        try await send(named, "tableA", 9, alive: [], sets: [])

        let board = try await run.board { $0.acceptedStrokes.count >= 3 && $0.liveTouchCount == 0 }
        let final = try #require(board, "the board never showed three strokes and no touch down")
        let strokes = final.acceptedStrokes
        #expect(strokes.map(\.owner.rawValue) == ["tuio-tableA", "tuio-tableA", "tuio-tableA"])
        #expect(strokes.map(\.samples.count) == [4, 3, 2], "\(strokes.map(\.samples.count))")
        #expect(strokes.map(\.touch) == [1, 2, 1])
        #expect(strokes[0].samples.first?.xInPoints == 192 && strokes[0].samples.first?.yInPoints == 108)
        #expect(!strokes.flatMap(\.samples).contains { $0.xInPoints > 1900 }, "the late frame was applied")
        #expect(final.liveTouchCount == 0, "the silent source's touch is stuck")

        run.bridge.interrupt()
        let bridgeText = run.text + String(decoding: await run.output.readToEnd(), as: UTF8.self)
        await run.bridge.exited()
        #expect(run.bridge.terminationStatus == 0)
        #expect(bridgeText.contains("2 old or repeated"), "\(bridgeText)")
        #expect(bridgeText.contains("from 2 source(s)"), "\(bridgeText)")
    }

    /// A bridge that is not scheduled for longer than the source timeout (a
    /// frozen process: SIGSTOP) reads the datagrams queued meanwhile before
    /// it judges any source silent: the stroke continues, nothing cancelled.
    @Test func aFrozenBridgeReadsWhatWaitedBeforeJudgingSilence() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        // The source timeout leaves room for a loaded machine: the touch must
        // reach the board (through hub and subscriber) well inside it, else
        // the source was silent for real before the freeze (seen with 2 s
        // under the full parallel suite on 2 busy cores: a stroke cut in two).
        let run = try await BridgeRun.start(board: "frozen", sourceTimeout: 6, children: children)
        defer { Task { await run.subscriber.stop() } }
        let sender = try UDPSender()
        let port = run.port
        let bridgeID = run.bridge.processIdentifier
        // Frame 1 is repeated every 100 ms by a thread of its own until the moment of the
        // freeze, which that thread makes itself: no gap between the last frame heard and
        // SIGSTOP, however long this test's task waits for the pool (once, on a busy CI box,
        // it waited past the 6 s time-out between seeing the touch and freezing, and the
        // bridge rightly cancelled a source it had not heard for 6 s). A repeat is dropped
        // as old, but keeps the source heard.
        let freeze = Mutex(false)
        let frozen = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let repeater = Thread {
            func send(_ fseq: Int32, alive: [Int32], sets: [(Int32, Float, Float)]) {
                sender.send(RawTUIO.cursors(source: "pad", alive: alive, sets: sets, fseq: fseq), port: port)
            }
            while !freeze.withLock({ $0 }) {
                send(1, alive: [1], sets: [(1, 0.10, 0.10)])
                usleep(100_000)
            }
            kill(bridgeID, SIGSTOP)
            send(2, alive: [1], sets: [(1, 0.11, 0.10)])
            send(3, alive: [1], sets: [(1, 0.12, 0.10)])
            send(4, alive: [], sets: [])
            frozen.withLock { $0.take() }?.resume()
        }
        repeater.start()
        let down = try await run.board { $0.liveTouchCount == 1 } != nil
        await withCheckedContinuation { continuation in
            frozen.withLock { $0 = continuation }  // in place before the thread can finish
            freeze.withLock { $0 = true }
        }
        try #require(down, "the first frame never reached the board")
        try await Task.sleep(for: .milliseconds(6500))  // past the timeout, the frames waiting in the socket
        kill(run.bridge.processIdentifier, SIGCONT)

        let final = try #require(try await run.board { $0.acceptedStrokes.count >= 1 && $0.liveTouchCount == 0 }, "the stroke never ended")
        #expect(final.acceptedStrokes.map(\.samples.count) == [3], "the stroke was cut: \(final.acceptedStrokes.map(\.samples.count))")
        #expect(final.acceptedStrokes.first?.samples.first?.xInPoints == 192)
        run.bridge.interrupt()
        await run.bridge.exited()
        #expect(run.bridge.terminationStatus == 0)
    }

    /// A source flood (1,500 spoofed sources made 1,508 threads and used up
    /// ZeroMQ's sockets, so a real tracker could not draw) stops at
    /// --max-sources: sources past it are dropped while the first ones draw.
    @Test func sourcesPastTheCapAreDropped() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let run = try await BridgeRun.start(board: "crowded", sourceTimeout: 8, children: children, extra: ["--max-sources", "2"])
        defer { Task { await run.subscriber.stop() } }
        let sender = try UDPSender()
        // Sent again until the board shows them (a repeat is dropped as old but keeps a
        // source heard: on a busy machine a single frame's touch could time out unseen).
        let board = try #require(
            try await run.repeating({
                for (index, source) in ["a", "b", "spoof-1", "spoof-2", "spoof-3"].enumerated() {
                    sender.send(RawTUIO.cursors(source: source, alive: [1], sets: [(1, 0.1 * Float(index + 1), 0.5)], fseq: 1), port: run.port)
                }
            }, until: { $0.liveTouchCount >= 2 }), "the first two sources never drew")
        #expect(Set(board.orderedActiveStrokes.map(\.owner.rawValue)) == ["tuio-a", "tuio-b"])
        run.bridge.interrupt()
        let text = run.text + String(decoding: await run.output.readToEnd(), as: UTF8.self)
        await run.bridge.exited()
        #expect(text.contains("from 2 source(s)") && text.contains("frames of sources past --max-sources"), "\(text)")
    }

    /// Sources share the bridge's threads (1,500 spoofed sources once made
    /// 1,508 threads): 40 sources drawing at once add no thread per source.
    @Test func sourcesShareThreads() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let run = try await BridgeRun.start(board: "crowd", sourceTimeout: 20, children: children, extra: ["--max-sources-per-address", "40"])
        defer { Task { await run.subscriber.stop() } }
        func threads() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: "/proc/\(run.bridge.processIdentifier)/task").count
        }
        let before = try threads()
        let sender = try UDPSender()
        let board = try #require(
            try await run.repeating({
                for index in 0..<40 {
                    sender.send(RawTUIO.cursors(source: "s\(index)", alive: [1], sets: [(1, 0.02 * Float(index + 1), 0.5)], fseq: 1), port: run.port)
                }
            }, until: { $0.liveTouchCount >= 40 }), "the 40 sources never all drew")
        #expect(Set(board.orderedActiveStrokes.map(\.owner.rawValue)).count == 40)
        let after = try threads()
        #expect(after - before < 8, "\(after - before) threads more for 40 sources")
        run.bridge.interrupt()
        await run.bridge.exited()
        #expect(run.bridge.terminationStatus == 0)
    }

    /// Spoofing from another address cannot lock a real tracker out: 64
    /// sources each holding a cursor (they took every place and locked a new
    /// tracker out) get 8 places from their address, and frames naming the
    /// real tracker's source with its numbering jumped by 2^29 (which made
    /// its own frames look old) are another source, since a source is its
    /// sender's address and port: the real tracker begins and ends strokes
    /// throughout.
    @Test func spoofedSourcesAndJumpsDoNotLockARealTrackerOut() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let run = try await BridgeRun.start(board: "spoofed", sourceTimeout: 20, children: children)
        defer { Task { await run.subscriber.stop() } }
        let tracker = try UDPSender()
        let spoofer = try UDPSender(from: "127.0.0.2")
        var fseq: Int32 = 1
        // The real tracker first: its touch is down.
        let began = try await run.repeating({
            tracker.send(RawTUIO.cursors(source: "table", alive: [1], sets: [(1, 0.1, 0.1)], fseq: fseq), port: run.port)
            fseq += 1
        }, until: { $0.orderedActiveStrokes.contains { $0.owner.rawValue == "tuio-table" } })
        #expect(began != nil, "the real tracker never drew")
        // The flood: 64 sources holding a cursor, and the real source's name with its numbering jumped.
        for round in 0..<5 {
            for index in 0..<64 {
                spoofer.send(RawTUIO.cursors(source: "spoof-\(index)", alive: [1], sets: [(1, 0.5, 0.5)], fseq: Int32(round + 1)), port: run.port)
            }
            spoofer.send(RawTUIO.cursors(source: "table", alive: [], sets: [], fseq: fseq + (1 << 29) + Int32(round)), port: run.port)
        }
        // The real tracker ends touch 1 and draws touch 2 after it.
        let drawn = try await run.repeating({
            tracker.send(RawTUIO.cursors(source: "table", alive: [2], sets: [(2, 0.2, 0.3)], fseq: fseq), port: run.port)
            fseq += 1
        }, until: { board in
            board.acceptedStrokes.contains { $0.owner.rawValue == "tuio-table" }
                && board.orderedActiveStrokes.contains { $0.owner.rawValue == "tuio-table" && $0.touch == 2 }
        })
        let board = try #require(drawn, "the real tracker was locked out")
        let spoofers = Set(board.orderedActiveStrokes.map(\.owner.rawValue)).filter { $0.hasPrefix("tuio-spoof") }
        #expect(spoofers.count <= 8, "\(spoofers.count) spoofed sources drew from one address")
        run.bridge.interrupt()
        let text = run.text + String(decoding: await run.output.readToEnd(), as: UTF8.self)
        await run.bridge.exited()
        #expect(text.contains("frames of sources past --max-sources or --max-sources-per-address"), "\(text)")
    }

    /// With --allow, datagrams from other senders are dropped and counted
    /// (TUIO over UDP trusts its network: the operator names the trackers).
    @Test func onlyAllowedSendersDraw() async throws {
        let children = ChildProcesses()
        defer { children.killAll() }
        let run = try await BridgeRun.start(board: "allowed", sourceTimeout: 8, children: children, extra: ["--allow", "127.0.0.1/32"])
        defer { Task { await run.subscriber.stop() } }
        let stranger = try UDPSender(from: "127.0.0.2")
        let tracker = try UDPSender()
        let board = try #require(
            try await run.repeating({
                stranger.send(RawTUIO.cursors(source: "stranger", alive: [1], sets: [(1, 0.9, 0.9)], fseq: 1), port: run.port)
                tracker.send(RawTUIO.cursors(source: "table", alive: [1], sets: [(1, 0.1, 0.1)], fseq: 1), port: run.port)
            }, until: { $0.liveTouchCount >= 1 }), "the allowed tracker never drew")
        #expect(board.orderedActiveStrokes.map(\.owner.rawValue) == ["tuio-table"])
        run.bridge.interrupt()
        let text = run.text + String(decoding: await run.output.readToEnd(), as: UTF8.self)
        await run.bridge.exited()
        #expect(text.contains("datagrams from senders not on --allow") && text.contains("from 1 source(s)"), "\(text)")
    }

    /// Garbage on the port is counted, not fatal.
    @Test func malformedPacketsAreCountedNotFatal() async throws {
        let ports = try TouchSyncProcess.freePorts(4)
        let children = ChildProcesses()
        defer { children.killAll() }
        let hubEndpoints = try await children.startPlainHub(ports: Array(ports.prefix(3)))
        let (bridge, output) = try children.run(
            ["tuio", "--listen", "udp://127.0.0.1:\(ports[3])", "--board", "g", "--hub", hubEndpoints[0]])
        var text = ""
        await readUntil(output, into: &text) { $0.contains("Ctrl-C stops") }
        let sender = try UDPSender()
        for length in [0, 1, 3, 8, 17, 64] { sender.send((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37) }, port: UInt16(ports[3])) }
        sender.send(Array(RawTUIO.cursors(source: "x", alive: [1], sets: [(1, 0.5, 0.5)], fseq: 1).prefix(30)), port: UInt16(ports[3]))
        try await Task.sleep(for: .milliseconds(200))
        #expect(bridge.isRunning)
        bridge.interrupt()
        text += String(decoding: await output.readToEnd(), as: UTF8.self)
        await bridge.exited()
        #expect(bridge.terminationStatus == 0)
        #expect(text.contains("6 malformed packets") || text.contains("7 malformed packets"), "\(text)")
    }

    /// The emitter sends a board's touches in progress as TUIO bundles a display can read.
    @Test func emitterSendsTheBoardsTouches() async throws {
        let ports = try TouchSyncProcess.freePorts(4)
        let children = ChildProcesses()
        defer { children.killAll() }
        let hubEndpoints = try await children.startPlainHub(ports: Array(ports.prefix(3)))
        var quiet = Logger(label: "tuio-test")
        quiet.logLevel = .critical
        let agent = try TouchAgent(configuration: AgentConfiguration(board: "shown", hubEndpoint: hubEndpoints[0]), logger: quiet)
        agent.start()
        try agent.touchesBegan([TouchInput(id: 3, coalesced: [TouchPoint(x: 480, y: 270, timestamp: 1)])])
        #expect(await agent.flush(timeout: .seconds(10)))
        let receiver = try UDPSender(port: UInt16(ports[3]))
        let (emitter, _) = try children.run(
            ["tuio", "--emit", "udp://127.0.0.1:\(ports[3])", "--board", "shown", "--fps", "20",
             "--publish", hubEndpoints[1], "--snapshot", hubEndpoints[2]])
        var seen: TUIOFrame? = nil
        let deadline = ContinuousClock.now + .seconds(10)
        while seen == nil && ContinuousClock.now < deadline {
            guard let bytes = receiver.receive() else { continue }
            let (frames, _) = TUIOParser.frames(in: try OSCDecoder.decode(bytes))
            if let frame = frames.first, frame.alive?.count == 1 { seen = frame }
        }
        let frame = try #require(seen, "no TUIO bundle with the touch arrived")
        #expect(frame.source == "touchsync@shown")
        #expect(frame.updates.count == 1 && abs(frame.updates[0].x - 0.25) < 0.001 && abs(frame.updates[0].y - 0.25) < 0.001)
        emitter.interrupt()
        await emitter.exited()
        #expect(emitter.terminationStatus == 0)
        await agent.stop()
    }
}

/// A plain hub and `touchsync tuio --listen` for `board` on loopback, with a
/// subscriber watching the board.
struct BridgeRun {
    let port: UInt16
    let bridge: Child
    let output: ChildOutput
    /// What the bridge printed up to its banner.
    let text: String
    let subscriber: BoardSubscriber

    static func start(board: String, sourceTimeout: Int, children: ChildProcesses, extra: [String] = []) async throws -> BridgeRun {
        let ports = try TouchSyncProcess.freePorts(4)
        let hubEndpoints = try await children.startPlainHub(ports: Array(ports.prefix(3)))
        let (bridge, output) = try children.run(
            ["tuio", "--listen", "udp://127.0.0.1:\(ports[3])", "--board", board, "--source-timeout", "\(sourceTimeout)",
             "--hub", hubEndpoints[0], "--publish", hubEndpoints[1], "--snapshot", hubEndpoints[2]] + extra,
            // As long as the hub's watchdog: a test waits up to 20 s for a silent source and 40 s for
            // the board, and on a loaded machine the default 60 s watchdog killed the bridge first.
            limit: 240)
        var text = ""
        await readUntil(output, into: &text) { $0.contains("Ctrl-C stops") }
        var configuration = SubscriberConfiguration(board: board, publishEndpoint: hubEndpoints[1], snapshotEndpoint: hubEndpoints[2])
        configuration.snapshotTimeout = .milliseconds(500)
        var quiet = Logger(label: "tuio-test")
        quiet.logLevel = .critical
        let subscriber = try BoardSubscriber(configuration: configuration, logger: quiet)
        subscriber.start()
        return BridgeRun(port: UInt16(ports[3]), bridge: bridge, output: output, text: text, subscriber: subscriber)
    }

    /// Runs `send` every 200 ms until the board satisfies `condition` (nil after 40 s).
    func repeating(_ send: () -> Void, until condition: (BoardState) -> Bool) async throws -> BoardState? {
        let deadline = ContinuousClock.now + .seconds(40)
        while ContinuousClock.now < deadline {
            send()
            try await Task.sleep(for: .milliseconds(200))
            if let replica = await subscriber.replica(), condition(replica) { return replica }
        }
        return nil
    }

    /// The board once `condition` holds (nil after 40 s).
    func board(until condition: (BoardState) -> Bool) async throws -> BoardState? {
        let deadline = ContinuousClock.now + .seconds(40)
        while ContinuousClock.now < deadline {
            if let replica = await subscriber.replica(), condition(replica) { return replica }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }
}

/// The tests' own TUIO 1.1 encoding (big-endian, padded), independent of the module's encoder.
enum RawTUIO {
    static func string(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8) + [0]
        return bytes + Array(repeating: 0, count: (4 - bytes.count % 4) % 4)
    }
    static func int(_ value: Int32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }
    static func float(_ value: Float) -> [UInt8] { withUnsafeBytes(of: value.bitPattern.bigEndian, Array.init) }
    static func message(_ tags: String, _ data: [UInt8]) -> [UInt8] { string("/tuio/2Dcur") + string("," + tags) + data }
    static func cursors(source: String?, alive: [Int32], sets: [(Int32, Float, Float)], fseq: Int32) -> [UInt8] {
        var elements: [[UInt8]] = []
        if let source { elements.append(message("ss", string("source") + string(source))) }
        elements.append(message("s" + String(repeating: "i", count: alive.count), string("alive") + alive.flatMap(int)))
        for (id, x, y) in sets { elements.append(message("sifffff", string("set") + int(id) + float(x) + float(y) + float(0) + float(0) + float(0))) }
        elements.append(message("si", string("fseq") + int(fseq)))
        var out = string("#bundle") + withUnsafeBytes(of: UInt64(1).bigEndian, Array.init)
        for element in elements { out += int(Int32(element.count)) + element }
        return out
    }
}

/// A UDP socket on 127.0.0.1 (a free port, or `port`) for the tests.
final class UDPSender: Sendable {
    let descriptor: Int32

    init(port: UInt16 = 0, from host: String = "127.0.0.1") throws {
        descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard descriptor >= 0, bound == 0 else { throw TestFailure("cannot bind a UDP socket") }
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(descriptor) }

    func send(_ bytes: [UInt8], port: UInt16) {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = bytes.withUnsafeBytes { data in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, data.baseAddress, data.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    func receive() -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        return count > 0 ? Array(buffer[0..<count]) : nil
    }
}
