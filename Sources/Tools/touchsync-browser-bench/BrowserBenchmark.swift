import Foundation
import Logging
import ServiceLifecycle
import TouchSyncBrowser
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncWeb
import ZeroMQ

/// `touchsync-browser-bench`: the whiteboard end to end, in one run on
/// loopback: an embedded hub, the gateway, and headless Chromium with two
/// pages on one board. Page A draws mouse strokes through the DevTools
/// protocol; page B records, for each of A's strokes, the time from A's
/// pointer event to the end of B's animation frame that drew it, how long
/// its frames took to render, and the bytes and samples of the batches it
/// received. Run once on an empty board and once on a board seeded with
/// `seededStrokes` accepted strokes, so the two rows compare in one run.
struct BrowserBenchmark {
    /// Frame costs while the viewer moves its view over the board.
    struct Motion {
        var renderMilliseconds: [Double]
        var frameIntervals: [Double]
    }

    struct Row {
        var seededStrokes: Int
        /// The round trip to the gateway of the pages behind a link emulator (0: both direct).
        var roundTripMilliseconds: Int
        /// Which pages are behind it.
        var linked: LinkedPages
        /// Page A's own ink: from its pointer event to the end of the frame that drew it.
        var ownInk: [Double]
        /// The viewer panning (wheel) and zooming (Ctrl-wheel), on the seeded board.
        var pan: Motion?
        var zoom: Motion?
        /// Dragging a selection of the seeded strokes across the board.
        var move: Motion?
        var lateJoinMilliseconds: Double
        var snapshotBytes: Double
        var strokesDrawn: Int
        var latency: [Double]
        var renderMilliseconds: [Double]
        var frameIntervals: [Double]
        var bytesPerSample: Double
        /// Page A's hovering mouse to page B's `presence` for it (presence: no hub on the path).
        var cursor: [Double]
    }

    var seededStrokes = 10_000
    var drawnStrokes = 300
    var selectedStrokes = 1_000

    /// The pages a round trip is put in front of.
    enum LinkedPages: String, Sendable {
        /// Each page behind a link of its own: what one page sends crosses both to reach the other.
        case both
        /// Only the drawing page (A): one round trip's proxy between two people, as the issue's figures name it.
        case drawer
    }

    func run(logger: Logger, report: (Row) -> Void) async throws {
        for seeded in [0, seededStrokes] {
            for (roundTrip, linked) in [(0, LinkedPages.both), (100, .both)] + (seeded == 0 ? [(100, .drawer)] : []) {
                report(try await runOnce(seeded: seeded, roundTrip: roundTrip, linked: linked, logger: logger))
            }
        }
    }

    private func runOnce(seeded: Int, roundTrip: Int, linked: LinkedPages, logger: Logger) async throws -> Row {
        let context = try ZMQContext()
        let configuration = HubConfiguration.loopbackEphemeral()
        let hub = try TouchSyncHub(configuration: configuration, logger: logger, context: context)
        let endpoints = try await hub.start()
        defer { Task { await hub.stop() } }
        let board = "bench"
        try await seed(board: board, strokes: seeded, ingest: endpoints.ingest, context: context, logger: logger)

        var settings = WebConfiguration { _ in
            GatewayHub(ingest: endpoints.ingest, publish: endpoints.publish, snapshot: endpoints.snapshot, history: endpoints.history ?? "")
        }
        settings.port = 0
        let gateway = try WebGateway(configuration: settings, context: context, logger: logger)
        let group = ServiceGroup(services: [gateway], logger: logger)
        let serving = Task { try await group.run() }
        defer {
            Task {
                await group.triggerGracefulShutdown()
                _ = await serving.result
            }
        }
        guard let port = await gateway.waitUntilListening() else { throw BenchFailure("the gateway did not start") }
        let browser = try Chromium.launch()
        defer { browser.shutDown() }
        // Each page behind a link of its own (a stroke travels A to the gateway to B, one round trip
        // in all), or only A (half of that).
        var links: [LinkEmulator] = []
        defer { for link in links { link.stop() } }
        func address(linked: Bool) throws -> String {
            guard roundTrip > 0, linked else { return "http://127.0.0.1:\(port)/boards/\(board)" }
            let link = try LinkEmulator(targetPort: UInt16(port), oneWayDelay: .milliseconds(roundTrip / 2))
            links.append(link)
            return "http://127.0.0.1:\(link.port)/boards/\(board)"
        }

        let joining = ContinuousClock.now
        let viewer = try await browser.openPage(try address(linked: linked == .both))
        try await viewer.waitFor("window.touchsync && touchsync.board.synced", timeout: .seconds(120))
        let lateJoin = (ContinuousClock.now - joining).milliseconds
        let drawer = try await browser.openPage(try address(linked: true))
        try await drawer.waitFor("window.touchsync && touchsync.user !== null && touchsync.board.synced", timeout: .seconds(120))
        _ = try await viewer.evaluate("touchsync.renderer.frameTimes.length = 0; touchsync.frameIntervals.length = 0; touchsync.received.batchBytes = 0; touchsync.received.batchSamples = 0")
        _ = try await drawer.evaluate("touchsync.closeNameDialog(); touchsync.ownInk.length = 0")
        let top = try await drawer.evaluate("document.getElementById('board').getBoundingClientRect().top") as? Double ?? 44

        for stroke in 0..<drawnStrokes {
            let x = 40 + Double(stroke % 30) * 30
            let y = top + 116 + Double((stroke / 30) % 16) * 30  // below the toolbar
            try await drawer.pointer("mousePressed", x: x, y: y)
            for step in 1...8 { try await drawer.pointer("mouseMoved", x: x + Double(step) * 3, y: y + Double(step * step) / 4) }
            try await drawer.pointer("mouseReleased", x: x + 24, y: y + 16)
            try await Task.sleep(for: .milliseconds(16))
        }
        try await drawer.waitFor("touchsync.pending.length === 0", timeout: .seconds(60))
        do {
            try await viewer.waitFor("touchsync.latencies.length >= \(drawnStrokes)", timeout: .seconds(30))
        } catch {
            let state = try await viewer.evaluate("JSON.stringify({l: touchsync.latencies.length, r: touchsync.renders, seq: touchsync.board.seq, acc: touchsync.board.accepted.length, user: touchsync.user, e: touchsync.errors})")
            let drawerState = try await drawer.evaluate("JSON.stringify({seq: touchsync.board.seq, acc: touchsync.board.accepted.length, user: touchsync.user, sent: touchsync.sent, r: touchsync.refusals})")
            throw BenchFailure("\(error); viewer \(state ?? ""), drawer \(drawerState ?? ""), console \(browser.console)")
        }
        func numbers(_ expression: String) async throws -> [Double] {
            (try await viewer.evaluate(expression) as? [Any] ?? []).compactMap { ($0 as? Double) ?? ($0 as? Int).map(Double.init) }
        }
        let latency = try await numbers("touchsync.latencies")
        let render = try await numbers("touchsync.renderer.frameTimes")
        let intervals = try await numbers("touchsync.frameIntervals")
        let bytes = try await numbers("[touchsync.received.batchBytes, touchsync.received.batchSamples, touchsync.received.snapshotBytes]")
        let ownInk = (try await drawer.evaluate("touchsync.ownInk") as? [Any] ?? []).compactMap { ($0 as? Double) ?? ($0 as? Int).map(Double.init) }
        let cursor = try await cursorLatency(from: drawer, to: viewer, top: top)
        var pan: Motion? = nil, zoom: Motion? = nil, move: Motion? = nil
        if seeded > 0 && roundTrip == 0 {
            move = try await selectionDrag(of: viewer, strokes: min(selectedStrokes, seeded), top: top)
            pan = try await motion(of: viewer, steps: 120) { step in (step % 40 < 20 ? 12 : -12, step % 30 < 15 ? 8 : -8, 0) }
            zoom = try await motion(of: viewer, steps: 60) { step in (0, step % 30 < 15 ? -12 : 12, 2) }
        }
        return Row(
            seededStrokes: seeded, roundTripMilliseconds: roundTrip, linked: linked, ownInk: ownInk, pan: pan, zoom: zoom, move: move, lateJoinMilliseconds: lateJoin,
            snapshotBytes: bytes[2], strokesDrawn: drawnStrokes, latency: latency, renderMilliseconds: render, frameIntervals: intervals,
            bytesPerSample: bytes[1] > 0 ? bytes[0] / bytes[1] : 0, cursor: cursor)
    }

    /// Page A's mouse hovers to 40 points 70 ms apart (beyond the 50 ms pace, so each is sent); the
    /// time from each dispatch to page B's `presence` for that point (both on this machine's clock).
    private func cursorLatency(from drawer: BrowserPage, to viewer: BrowserPage, top: Double) async throws -> [Double] {
        _ = try await viewer.evaluate("touchsync.cursorArrivals.length = 0")
        var sent: [(x: Double, at: Double)] = []
        for step in 0..<40 {
            let (x, y) = (200 + Double(step) * 9, top + 400)
            let boardX = try await drawer.evaluate("Math.round(touchsync.view.toBoard(\(x), \(y - top))[0] * 10) / 10") as? Double ?? .nan
            sent.append((boardX, Date().timeIntervalSince1970 * 1000))
            try await drawer.hover(x: x, y: y)
            try await Task.sleep(for: .milliseconds(70))
        }
        try await Task.sleep(for: .milliseconds(500))
        let arrivals = (try await viewer.evaluate("touchsync.cursorArrivals") as? [[Any]] ?? []).compactMap { pair -> (x: Double, at: Double)? in
            guard pair.count == 2, let x = (pair[0] as? Double) ?? (pair[0] as? Int).map(Double.init),
                let at = (pair[1] as? Double) ?? (pair[1] as? Int).map(Double.init) else { return nil }
            return (x, at)
        }
        return sent.compactMap { hover in arrivals.first { abs($0.x - hover.x) < 0.05 }.map { $0.at - hover.at } }
    }

    /// The first `strokes` seeded strokes selected (the page told it may edit anyone's, as an
    /// admin's may; the edit it sends at the end is the gateway's to refuse), then dragged by the
    /// mouse with moves 16 ms apart for two seconds: the frames drawn meanwhile.
    private func selectionDrag(of page: BrowserPage, strokes: Int, top: Double) async throws -> Motion {
        _ = try await page.evaluate(
            """
            touchsync.role = 'admin';
            document.dispatchEvent(new KeyboardEvent('keydown', { key: 'v', code: 'KeyV' }));
            touchsync.selection.set(touchsync.board.accepted.slice(0, \(strokes)).map(s => s.id));
            touchsync.renderer.frameTimes.length = 0; touchsync.frameIntervals.length = 0
            """)
        let (x, y) = (500.0, top + 360)
        try await page.pointer("mousePressed", x: x, y: y)
        for step in 1...120 {
            try await page.pointer("mouseMoved", x: x + Double(step % 40) * 3, y: y + Double(step % 30) * 2)
            try await Task.sleep(for: .milliseconds(16))
        }
        func numbers(_ expression: String) async throws -> [Double] {
            (try await page.evaluate(expression) as? [Any] ?? []).compactMap { ($0 as? Double) ?? ($0 as? Int).map(Double.init) }
        }
        let motion = Motion(
            renderMilliseconds: try await numbers("touchsync.renderer.frameTimes"), frameIntervals: try await numbers("touchsync.frameIntervals"))
        try await page.pointer("mouseReleased", x: x, y: y)
        return motion
    }

    /// Wheel events 16 ms apart over the middle of `page` (a trackpad's scroll; with
    /// modifiers 2, its pinch), then 300 ms of rest: the frames drawn meanwhile.
    private func motion(of page: BrowserPage, steps: Int, _ delta: (Int) -> (x: Double, y: Double, modifiers: Int)) async throws -> Motion {
        _ = try await page.evaluate("touchsync.renderer.frameTimes.length = 0; touchsync.frameIntervals.length = 0")
        for step in 0..<steps {
            let (dx, dy, modifiers) = delta(step)
            try await page.wheel(x: 500, y: 400, deltaX: dx, deltaY: dy, modifiers: modifiers)
            try await Task.sleep(for: .milliseconds(16))
        }
        try await Task.sleep(for: .milliseconds(300))
        func numbers(_ expression: String) async throws -> [Double] {
            (try await page.evaluate(expression) as? [Any] ?? []).compactMap { ($0 as? Double) ?? ($0 as? Int).map(Double.init) }
        }
        return Motion(renderMilliseconds: try await numbers("touchsync.renderer.frameTimes"), frameIntervals: try await numbers("touchsync.frameIntervals"))
    }

    /// Fills the board with `strokes` accepted strokes of 20 samples (small loops spread over the page).
    private func seed(board: String, strokes: Int, ingest: String, context: ZMQContext, logger: Logger) async throws {
        guard strokes > 0 else { return }
        var settings = AgentConfiguration(board: board, hubEndpoint: ingest)
        settings.identity = "seed"
        let agent = try TouchAgent(configuration: settings, context: context, logger: logger)
        agent.start()
        defer { Task { await agent.stop() } }
        var time = 1.0
        for stroke in 0..<strokes {
            let cx = 30 + Double((stroke * 37) % 940)
            let cy = 60 + Double((stroke * 53) % 600)
            var points: [TouchPoint] = []
            for k in 0..<20 {
                let angle = Double(k) / 20 * 2 * .pi
                time += 0.004
                points.append(TouchPoint(x: cx + 12 * cos(angle), y: cy + 8 * sin(angle * 2), timestamp: time))
            }
            try agent.touchesBegan([TouchInput(id: 1, coalesced: [points[0]])])
            try agent.touchesEnded([TouchInput(id: 1, coalesced: Array(points.dropFirst()))])
        }
        guard await agent.flush(timeout: .seconds(300)) else { throw BenchFailure("seeding the board did not finish") }
    }
}

extension Duration {
    fileprivate var milliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }
}

/// The value at `percentile` (0…100) of `values` (nearest rank).
func percentile(_ values: [Double], _ percentile: Double) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    let rank = Int((percentile / 100 * Double(sorted.count)).rounded(.up)) - 1
    return sorted[max(0, min(sorted.count - 1, rank))]
}
