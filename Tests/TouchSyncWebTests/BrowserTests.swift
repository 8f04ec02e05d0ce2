import ProcessTestSupport
import TestSupport
import WebTestSupport
import Foundation
import Logging
import Testing
import TouchSyncAccess
import TouchSyncBrowser
import TouchSyncClient
import TouchSyncCore
import TouchSyncSimulation
import TouchSyncWeb
import TouchSyncWebWire

#if canImport(Glibc)
import Glibc
#endif

/// A hub with a journal, `touchsync web` and a headless Chromium, all real
/// processes on loopback; pages driven through the DevTools protocol.
final class WhiteboardRig {
    let children = ChildProcesses()
    let browser: Chromium
    let endpoints: [String]  // ingest, publish, snapshot, history
    let web: String          // http://127.0.0.1:PORT
    var webProcess: Child? = nil
    var hubProcess: Child? = nil
    var tokens: [String: String] = [:]
    var keys: String? = nil
    let data: String
    /// What `touchsync web` printed as it started.
    var banner = ""

    /// With `invitations`, the hub authenticates (CURVE, an access list
    /// made with touchsync keys), the gateway acts for invited users, and
    /// each invitation's token is in `tokens` (name: (boards, role)).
    init(invitations: [String: (boards: String, role: String)] = [:], webArguments: [String] = []) async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("touchsync-web-\(UUID().uuidString)").path
        self.data = data
        var hubSecurity: [String] = []
        var webSecurity: [String] = []
        if !invitations.isEmpty {
            let keys = data + "-keys"
            let access = keys + "/access.json"
            for name in ["hub", "gateway", "auditor"] {
                let made = try await touchsync(["keys", "generate", name, "--dir", keys])
                guard made.status == 0 else { throw TestFailure("keys generate: \(made.errors)") }
            }
            for (name, role, extra) in [("gateway", "admin", ["--acts-for", "web:"]), ("auditor", "watch", [])] {
                let allowed = try await touchsync(["keys", "allow", name, "--boards", "*", "--role", role, "--access", access, "--dir", keys] + extra)
                guard allowed.status == 0 else { throw TestFailure("keys allow: \(allowed.errors)") }
            }
            for (name, grant) in invitations {
                let invited = try await touchsync(
                    ["keys", "invite", name, "--boards", grant.boards, "--role", grant.role, "--access", access, "--url", "http://gateway:8080"])
                guard invited.status == 0, let range = invited.output.range(of: #"#token=[A-Za-z0-9]+"#, options: .regularExpression) else {
                    throw TestFailure("keys invite: \(invited.output) \(invited.errors)")
                }
                tokens[name] = String(invited.output[range].dropFirst(7))
            }
            hubSecurity = ["--key", keys + "/hub.key", "--access", access]
            webSecurity = ["--key", keys + "/gateway.key", "--hub-key", keys + "/hub.pub", "--access", access]
            self.keys = keys
        }
        let started = try await children.startHub(ports: try TouchSyncProcess.freePorts(4)) { ports in
            ["hub", "--data", data] + zip(["--ingest", "--publish", "--snapshot", "--history"], ports).flatMap { [$0, "tcp://127.0.0.1:\($1)"] }
                + hubSecurity
        }
        hubProcess = started.hub
        endpoints = started.ports.map { "tcp://127.0.0.1:\($0)" }
        let (webChild, output) = try children.run(
            ["web", "--listen", "127.0.0.1:0", "--hub", endpoints[0], "--publish", endpoints[1], "--snapshot", endpoints[2], "--history", endpoints[3],
             "--reconnect-grace", "20"] + webSecurity + webArguments,
            limit: 300)
        var text = ""
        while !text.contains("Ctrl-C stops it.") {
            let chunk = await output.nextChunk()
            if chunk.isEmpty { throw TestFailure("touchsync web exited before it was ready: \(text)") }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let range = text.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) else {
            throw TestFailure("no URL in: \(text)")
        }
        web = String(text[range])
        banner = text
        webProcess = webChild
        browser = try Chromium.launch(spawning: { body in spawnGate.withLock { _ in body() } })
    }

    func close() {
        browser.shutDown()
        children.killAll()
        try? FileManager.default.removeItem(atPath: data)
        if let keys { try? FileManager.default.removeItem(atPath: keys) }
    }

    /// A page on `board`, welcomed by the gateway and showing the board
    /// (opened with `invitee`'s invitation link on an authenticated hub).
    /// The board's page (in the browser wire `wire` asks for: the page's default, packed, without).
    func page(_ board: String, as invitee: String? = nil, watching: Bool = false, wire: String? = nil) async throws -> BrowserPage {
        let fragment = invitee.map { "#token=" + (tokens[$0] ?? "unknown") } ?? ""
        let query = wire.map { "?wire=" + $0 } ?? ""
        let page = try await browser.openPage("\(web)/boards/\(board)\(query)\(fragment)")
        try await page.waitFor(
            watching ? "window.touchsync && touchsync.role === 'watch' && touchsync.board.synced"
                : "window.touchsync && touchsync.user !== null && touchsync.board.synced")
        _ = try await page.evaluate("touchsync.closeNameDialog?.()")  // a first visit asks for a name
        return page
    }

    /// The hub's board, through a subscriber of its own (the auditor's key on an authenticated hub).
    func hubBoard(_ board: String) async throws -> BoardState {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        var settings = SubscriberConfiguration(board: board, publishEndpoint: endpoints[1], snapshotEndpoint: endpoints[2])
        if let keys {
            settings.curve = CurveClientKeys(
                client: try CurveKeyFiles.readPair(keys + "/auditor.key"), serverPublicKey: try CurveKeyFiles.readPublicKey(keys + "/hub.pub"))
        }
        let subscriber = try BoardSubscriber(configuration: settings, logger: logger)
        subscriber.start()
        defer { Task { await subscriber.stop() } }
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let state = await subscriber.replica() { return state }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestFailure("no board from the hub")
    }
}

/// What a page's replica holds: (stroke id, owner, samples) of accepted strokes, and the ids of those in progress.
struct PageBoard: Equatable, CustomStringConvertible {
    var sequence: Int
    var accepted: [[String]]
    var active: [Int]
    var description: String { "seq \(sequence), accepted \(accepted), active \(active)" }

    init(_ page: BrowserPage) async throws {
        guard let summary = try await page.evaluate("touchsync.summary()") as? [String: Any] else { throw TestFailure("no summary") }
        sequence = summary["seq"] as? Int ?? -1
        accepted = (summary["accepted"] as? [[String: Any]] ?? []).map { ["\($0["id"]!)", "\($0["owner"]!)", "\($0["samples"]!)"] }
        active = (summary["active"] as? [[String: Any]] ?? []).map { $0["id"] as? Int ?? -1 }
    }

    init(_ board: BoardState) {
        sequence = Int(board.sequence)
        accepted = board.acceptedStrokes.map { ["\($0.id.rawValue)", $0.owner.rawValue, "\($0.samples.count)"] }
        active = board.orderedActiveStrokes.map { Int($0.id.rawValue) }
    }
}

@Suite("Browser whiteboard (headless Chromium)", .serialized, .timeLimit(.minutes(4)))
struct BrowserTests {
    /// Two pages as two users: two- and three-finger touches, a mouse and a pen
    /// stroke, a touch cancelled mid-stroke; the hub's board has them all in
    /// two namespaces with every sample, the other page shows the same board
    /// (replica and pixels); undo, redo and erase reach the other page; a page
    /// opened late shows the board. The pages speak three of the browser wires:
    /// A packed2 (the default), B JSON, the late one binary.
    @Test func twoUsersDrawTogether() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let a = try await rig.page("together")
        let b = try await rig.page("together", wire: "json")
        #expect(try await a.evaluate("touchsync.wire") as? String == "packed2")
        #expect(try await b.evaluate("touchsync.wire") as? String == "json")
        _ = try await a.evaluate("touchsync.setEveryFingerDraws(true)")  // multi-touch drawing, as in the seeds
        let userA = try await a.evaluate("touchsync.user") as? String ?? ""
        let userB = try await b.evaluate("touchsync.user") as? String ?? ""
        #expect(userA.hasPrefix("web:") && userB.hasPrefix("web:") && userA != userB)

        try await a.multiTouch(fingers: 2, at: (100, 120))
        try await a.multiTouch(fingers: 3, at: (100, 300))
        try await a.multiTouch(fingers: 1, at: (500, 500), cancel: true)
        try await b.drag(from: (450, 100))
        try await b.drag(from: (450, 250), pointerType: "pen", force: 0.7, tilt: 30)
        try await a.settled()
        try await b.settled()
        let sentA = try await a.number("touchsync.sent.endedSamples")
        let sentB = try await b.number("touchsync.sent.endedSamples")
        #expect(try await a.number("touchsync.sent.endedStrokes") == 5)
        #expect(try await a.number("touchsync.sent.cancelledStrokes") == 1)

        let hub = try await rig.hubBoard("together")
        let byOwner = Dictionary(grouping: hub.acceptedStrokes, by: \.owner.rawValue)
        #expect(Set(byOwner.keys) == [userA, userB], "strokes in two namespaces")
        #expect(byOwner[userA]?.count == 5, "two- and three-finger touches: five strokes")
        #expect(byOwner[userB]?.count == 2, "a mouse and a pen stroke")
        #expect(hub.orderedActiveStrokes.isEmpty, "the cancelled touch is gone")
        #expect(Double(byOwner[userA]?.reduce(0) { $0 + $1.samples.count } ?? 0) == sentA, "every sample page A sent")
        #expect(Double(byOwner[userB]?.reduce(0) { $0 + $1.samples.count } ?? 0) == sentB, "every sample page B sent")
        let pen = byOwner[userB]?.last
        #expect(pen?.samples.allSatisfy { $0.flags.contains(.hasForce) && $0.flags.contains(.hasAngles) } == true, "the pen's pressure and tilt")
        #expect(pen.map { abs(Double($0.samples[0].force) / Sample.forceUnits - 0.7) <= 1 / Sample.forceUnits } == true, "pressure 0.7")

        // Page B shows the same board: its replica, and pixels where A's strokes are.
        try await b.waitFor("touchsync.board.seq === \(hub.sequence)")
        #expect(try await PageBoard(b) == PageBoard(hub))
        let first = try #require(byOwner[userA]?.first?.samples[3])
        let png = try await b.screenshot()
        let toolbar = try await b.number("document.getElementById('board').getBoundingClientRect().top")
        let pixel = try await b.screenshotPixel(x: Int(first.xInPoints), y: Int(first.yInPoints + toolbar), png: png)
        let blank = try await b.screenshotPixel(x: 980, y: 690, png: png)
        #expect(blank == [255, 255, 255], "the background is white")
        #expect(pixel.count == 3 && pixel != [255, 255, 255], "A's stroke is drawn on B's page: \(pixel)")

        // Undo, redo and erase from page A reach page B.
        let before = try await PageBoard(b).accepted.count
        _ = try await a.evaluate("document.getElementById('undo').click()")
        try await b.waitFor("touchsync.board.accepted.length === \(before - 1)")
        _ = try await a.evaluate("document.getElementById('redo').click()")
        try await b.waitFor("touchsync.board.accepted.length === \(before)")
        let victim = try #require(byOwner[userA]?.first).id.rawValue
        _ = try await a.evaluate("touchsync.post({t: 'erase', strokes: [\(victim)]})")
        try await b.waitFor("!touchsync.board.accepted.some(s => s.id === \(victim))")
        try await a.settled()

        // A page opened late shows the board as it is.
        let late = try await rig.page("together", wire: "binary")
        #expect(try await late.evaluate("touchsync.wire") as? String == "binary")
        let now = try await rig.hubBoard("together")
        try await late.waitFor("touchsync.board.seq === \(now.sequence)")
        #expect(try await PageBoard(late) == PageBoard(now))
        #expect(rig.browser.console.filter { $0.hasPrefix("exception") }.isEmpty, "\(rig.browser.console)")
    }

    /// A closed tab's live touches are cancelled at once (a goodbye, not the
    /// hub's abandon time-out); a dropped connection loses nothing: the page
    /// keeps drawing offline, reconnects, resends, and the stroke continues.
    @Test func closedTabsCancelAndDroppedConnectionsLoseNothing() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let watcher = try await rig.page("faults")
        let leaver = try await rig.page("faults")
        try await leaver.touch("touchStart", [(200, 200, 0)])
        try await leaver.touch("touchMove", [(230, 210, 0)])
        try await watcher.waitFor("touchsync.board.active.size === 1")
        let closing = ContinuousClock.now
        try await leaver.close()
        try await watcher.waitFor("touchsync.board.active.size === 0", timeout: .seconds(5))
        let cancelledAfter = ContinuousClock.now - closing
        print("a closed tab's touch was cancelled after \(cancelledAfter)")
        #expect(cancelledAfter < .seconds(10), "at once, not after the hub's 30 s abandon time-out")

        let drawer = try await rig.page("faults")
        let user = try await drawer.evaluate("touchsync.user") as? String ?? ""
        try await drawer.touch("touchStart", [(100, 400, 0)])
        for step in 1...5 { try await drawer.touch("touchMove", [(100 + Double(step) * 10, 400, 0)]) }
        _ = try await drawer.evaluate("touchsync.disconnect({hold: true})")
        try await drawer.waitFor("!touchsync.connected")
        for step in 6...12 { try await drawer.touch("touchMove", [(100 + Double(step) * 10, 400 + Double(step), 0)]) }
        try await drawer.touch("touchEnd", [])
        let waitingOffline = try await drawer.number("touchsync.pending.length")
        #expect(waitingOffline > 0, "drawn while offline, kept")
        _ = try await drawer.evaluate("touchsync.reconnect()")
        try await drawer.settled()  // reconnected, resent, acknowledged
        let hub = try await rig.hubBoard("faults")
        let mine = hub.acceptedStrokes.filter { $0.owner.rawValue == user }
        #expect(mine.count == 1, "one stroke, continued across the reconnect")
        #expect(Double(mine.first?.samples.count ?? 0) == (try await drawer.number("touchsync.sent.endedSamples")), "no sample lost or doubled")
        #expect(try await drawer.evaluate("touchsync.user") as? String == user, "the same namespace after the reconnect")

        // A dropped connection that nobody holds down comes back by itself.
        let sockets = try await drawer.number("touchsync.sockets")
        _ = try await drawer.evaluate("touchsync.disconnect()")
        try await drawer.waitFor("touchsync.sockets > \(Int(sockets)) && touchsync.connected")
    }

    /// Bad input from a tab (not JSON, no hello, an unknown board, NaN
    /// coordinates, numbers out of order, a wrong phase order, an unknown
    /// type, a message over the size limit) gets a typed error back; a page
    /// on the same board keeps drawing and loses nothing.
    @Test func badInputGetsTypedErrorsAndOthersKeepDrawing() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let honest = try await rig.page("hostile")
        let replies = try await honest.evaluate(
            """
            (async () => {
              const url = location.origin.replace('http', 'ws') + '/ws';
              const open = async () => {
                const ws = new WebSocket(url);
                ws.replies = [];
                ws.onmessage = e => ws.replies.push(JSON.parse(e.data));
                ws.closed = new Promise(r => ws.onclose = e => r(e.code));
                await new Promise(r => ws.onopen = r);
                return ws;
              };
              const settle = () => new Promise(r => setTimeout(r, 400));
              const codes = ws => ws.replies.filter(m => m.t === 'error' || m.t === 'refused').map(m => m.code);
              const first = await open();
              first.send('not json');
              first.send(JSON.stringify({t: 'touch', n: 1, phase: 'began', id: 1, s: [[1, 2, 3]]}));
              first.send(JSON.stringify({t: 'hello', board: 'x'.repeat(129)}));  // the hub's rule: at most 128 bytes
              const firstClose = await first.closed;
              const second = await open();
              second.send(JSON.stringify({t: 'hello', board: 'hostile', name: 'Zoë'}));
              await settle();
              second.send(JSON.stringify({t: 'touch', n: 1, phase: 'began', id: 5, s: [[NaN, 2, 3]]}));
              second.send(JSON.stringify({t: 'touch', n: 3, phase: 'began', id: 5, s: [[1, 2, 3]]}));
              second.send(JSON.stringify({t: 'touch', n: 2, phase: 'moved', id: 99, s: [[1, 2, 3]]}));
              second.send(JSON.stringify({t: 'bogus', n: 3}));
              second.send(JSON.stringify({t: 'style', n: 4, rgba: 1, width: 1e9}));
              second.send(JSON.stringify({t: 'erase', n: 5, strokes: Array(1025).fill(1)}));  // the hub's limit is 1,024
              second.send(JSON.stringify({t: 'touch', n: 6, phase: 'began', id: 6, s: [[1, 2, 3, 1.5]]}));  // force is 0 to 1
              await settle();
              second.send('x'.repeat(1536 * 1024));
              const secondClose = await second.closed;
              return {first: codes(first), firstClose, second: codes(second), secondClose,
                      welcomeName: (second.replies.find(m => m.t === 'welcome') || {}).name,
                      refusedNumbers: second.replies.filter(m => m.t === 'refused').map(m => m.n)};
            })()
            """) as? [String: Any]
        let first = replies?["first"] as? [String] ?? []
        let second = replies?["second"] as? [String] ?? []
        #expect(first == ["MALFORMED", "NOT_WELCOMED", "UNKNOWN_BOARD"], "\(first)")
        #expect(replies?["firstClose"] as? Int == 1008, "an unknown board closes the connection (policy violation)")
        #expect(second.contains("MALFORMED") && second.contains("OUT_OF_ORDER"), "\(second)")
        #expect(second.contains("UNKNOWN_TOUCH"), "the hub's refusal of a move for a touch that is not down: \(second)")
        #expect(second.contains("TOO_LARGE"), "\(second)")
        // The gateway's refusals, and the hub's of number 2 (a move for a touch that is not down), in whatever order they arrive.
        #expect((replies?["refusedNumbers"] as? [Int])?.sorted() == [1, 2, 3, 3, 4, 5, 6], "each refusal names its message")
        #expect(second.contains("INVALID_SAMPLE"), "force 1.5: \(second)")
        #expect(replies?["welcomeName"] as? String == "Zoë", "the welcome names the tab as its hello did")
        #expect(replies?["secondClose"] as? Int == 1009, "a message over the limit closes with 'message too big'")

        // Any name the hub accepts opens here too (the same rule): UTF-8, punctuation.
        for name in ["白板", "../etc/passwd"] {
            let page = try await rig.page(name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"]))!)
            #expect(try await page.evaluate("touchsync.boardName") as? String == name, "\(name)")
        }

        // The honest page was not disturbed.
        try await honest.drag(from: (300, 300))
        try await honest.settled()
        let hub = try await rig.hubBoard("hostile")
        let user = try await honest.evaluate("touchsync.user") as? String
        #expect(hub.acceptedStrokes.map(\.owner.rawValue) == [user], "only the honest page's stroke, and all of it")
        #expect(Double(hub.acceptedStrokes.first?.samples.count ?? 0) == (try await honest.number("touchsync.sent.endedSamples")))
    }

    /// A page of another site cannot act as its visitor on the gateway
    /// (cross-site WebSocket hijacking: such a page was welcomed as admin and
    /// cleared the board): its WebSocket is refused before any hello. Guests
    /// are not admins: a guest draws, but may not clear the board or erase
    /// another user's stroke, and both refusals take their numbers.
    @Test func anotherSitesPageIsRefusedAndGuestsAreNotAdmins() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let owner = try await rig.page("guarded")
        #expect(try await owner.evaluate("touchsync.role") as? String == "draw")
        try await owner.drag(from: (200, 200))
        try await owner.settled()
        let stroke = try #require(try await rig.hubBoard("guarded").acceptedStrokes.first).id.rawValue

        // The same gateway as http://localhost:PORT is another origin than http://127.0.0.1:PORT.
        let port = try #require(rig.web.split(separator: ":").last)
        let other = try await rig.browser.openPage("http://localhost:\(port)/boards/guarded")
        try await other.waitFor("window.touchsync && touchsync.user !== null && touchsync.board.synced")  // its own origin: welcomed
        let attempt = try await other.evaluate(
            """
            new Promise(resolve => {
              const ws = new WebSocket('ws://127.0.0.1:\(port)/ws');
              ws.onopen = () => ws.send(JSON.stringify({t: 'hello', board: 'guarded'}));
              ws.onmessage = e => resolve('answered: ' + e.data.slice(0, 40));
              ws.onerror = () => resolve('refused');
            })
            """) as? String
        #expect(attempt == "refused", "a page of http://localhost:\(port) opened the WebSocket of http://127.0.0.1:\(port): \(attempt ?? "nil")")

        // The other tab, a guest too, may neither clear the board, nor erase, move or delete the owner's stroke,
        // and an edit it cannot read is refused by its number.
        _ = try await other.evaluate(
            """
            touchsync.post({t: 'clear', scope: 'board'}); touchsync.post({t: 'erase', strokes: [\(stroke)]});
            touchsync.post({t: 'edit', op: 'move', strokes: [\(stroke)], dx: 50}); touchsync.post({t: 'edit', op: 'delete', strokes: [\(stroke)]});
            touchsync.post({t: 'edit', op: 'fold', strokes: [999]}); touchsync.post({t: 'edit', op: 'move', strokes: [999], scale: 1e9})
            """)
        // Four are the hub's (it decides whose strokes a guest may touch): a round trip each, slow on a loaded machine.
        try await other.waitFor("touchsync.refusals.length === 6", timeout: .seconds(45))
        let codes = try await other.evaluate("touchsync.refusals.map(r => r.code + ': ' + r.message)") as? [String] ?? []
        #expect(codes.filter { $0.hasPrefix("FORBIDDEN") }.count == 4 && codes.filter { $0.hasPrefix("MALFORMED") }.count == 2, "\(codes)")
        try await other.waitFor("touchsync.pending.length === 0")  // refused, and acknowledged like the others
        let kept = try await rig.hubBoard("guarded").acceptedStrokes
        #expect(kept.map(\.id.rawValue) == [stroke], "the owner's stroke is still there")
    }

    /// The gateway fails gracefully at its cap (it fell over at a few hundred
    /// tabs): a tab past `--max-tabs` is refused GATEWAY_FULL in words, and
    /// the tabs it serves carry on.
    @Test func aFullGatewayRefusesNewTabsInWords() async throws {
        let rig = try await WhiteboardRig(webArguments: ["--max-tabs", "2"])
        defer { rig.close() }
        let first = try await rig.page("capped")
        let second = try await rig.page("capped")
        let refusal = try await first.evaluate(
            """
            new Promise(resolve => {
              const ws = new WebSocket(location.origin.replace('http', 'ws') + '/ws');
              ws.onopen = () => ws.send(JSON.stringify({t: 'hello', board: 'capped'}));
              ws.onmessage = e => resolve(JSON.parse(e.data));
            })
            """) as? [String: Any]
        #expect(refusal?["t"] as? String == "error" && refusal?["code"] as? String == "GATEWAY_FULL", "\(String(describing: refusal))")
        let message = refusal?["message"] as? String ?? ""
        #expect(message.contains("maximum of 2 tabs"), "\(message)")
        try await first.drag(from: (200, 200))
        try await first.settled()
        #expect(try await rig.hubBoard("capped").acceptedStrokes.count == 1, "the served tabs carry on")

        // A tab whose connection dropped (no goodbye; its agent waits 20 s for it) does not keep
        // a new tab out: the full gateway ends it to make room, at once.
        _ = try await second.evaluate("touchsync.ended = 'gone'; touchsync.disconnect(); true")
        let started = ContinuousClock.now
        _ = try await rig.page("capped")
        #expect(ContinuousClock.now - started < .seconds(15), "the new tab waited for the dropped one's grace")
    }

    /// Ctrl-C with tabs connected: the gateway closes them, says goodbye for
    /// each (their live touches are cancelled) and exits 0.
    @Test func gracefulShutdownWithTabsOpen() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let page = try await rig.page("closing")
        try await page.touch("touchStart", [(200, 200, 0)])
        try await page.touch("touchMove", [(220, 220, 0)])
        try await page.settled()
        #expect(try await rig.hubBoard("closing").orderedActiveStrokes.count == 1)
        let web = try #require(rig.webProcess)
        web.interrupt()
        let deadline = ContinuousClock.now + .seconds(10)
        while web.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!web.isRunning, "the gateway exits within 10 s of SIGINT with a tab open")
        #expect(web.terminationReason == .exit && web.terminationStatus == 0)
        #expect(try await rig.hubBoard("closing").orderedActiveStrokes.isEmpty, "the tab's live touch was cancelled by its goodbye")
        try await page.waitFor("!touchsync.connected")
    }

    /// An authenticated hub: browser users sign in with invitation links;
    /// each tab acts as web:NAME:… through the gateway's key; a user draws
    /// only where invited, a watcher only watches, a page without a link
    /// gets nothing, and even the gateway's key cannot put one user's token
    /// to work in another user's namespace.
    @Test func invitedUsersDrawThroughAnAuthenticatedHub() async throws {
        let rig = try await WhiteboardRig(invitations: [
            "ann": ("team-*", "draw"), "bob": ("other", "draw"), "tv": ("*", "watch"),
        ])
        defer { rig.close() }
        // Invited users need their link, not a bare board address.
        #expect(rig.banner.contains("invitation link") && !rig.banner.contains("two browser windows"), "\(rig.banner)")
        let ann = try await rig.page("team-1", as: "ann")
        // The board list is not for anyone: 401 without a token, and a user sees the boards it may watch.
        let listing = try await ann.evaluate(
            """
            (async () => {
              const list = async token => {
                const reply = await fetch('/api/boards', token ? {headers: {Authorization: 'Bearer ' + token}} : {});
                return reply.ok ? (await reply.json()).map(b => b.board) : reply.status;
              };
              return {anyone: await list(null), ann: await list('\(rig.tokens["ann"] ?? "")'), bob: await list('\(rig.tokens["bob"] ?? "")')};
            })()
            """) as? [String: Any]
        #expect(listing?["anyone"] as? Int == 401, "\(String(describing: listing))")
        #expect(listing?["ann"] as? [String] == ["team-1"], "\(String(describing: listing))")
        #expect(listing?["bob"] as? [String] == [], "bob may not watch team-1: \(String(describing: listing))")
        let annUser = try await ann.evaluate("touchsync.user") as? String ?? ""
        #expect(annUser.hasPrefix("web:ann:"), "\(annUser)")
        let tv = try await rig.page("team-1", as: "tv", watching: true)
        try await ann.drag(from: (200, 200))
        try await ann.settled()
        let board = try await rig.hubBoard("team-1")
        #expect(board.acceptedStrokes.map(\.owner.rawValue) == [annUser], "ann's stroke, in ann's namespace")
        try await tv.waitFor("touchsync.board.seq === \(board.sequence)")
        #expect(try await PageBoard(tv) == PageBoard(board), "the watcher sees the board")
        // A watcher's page that tries anyway: the gateway refuses.
        _ = try await tv.evaluate("touchsync.rawSocket().send(JSON.stringify({t: 'undo', n: 1}))")
        try await tv.waitFor("touchsync.refusals.some(r => r.code === 'FORBIDDEN' && r.n === 1)")

        // Without a link, and with a link for another board: refused.
        let stranger = try await rig.browser.openPage("\(rig.web)/boards/team-1#token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        try await stranger.waitFor("touchsync.errors.some(e => e.code === 'UNAUTHORIZED')")
        let bob = try await rig.browser.openPage("\(rig.web)/boards/team-1#token=\(rig.tokens["bob"]!)")
        try await bob.waitFor("touchsync.errors.some(e => e.code === 'FORBIDDEN')")
        #expect(try await bob.evaluate("touchsync.board.synced") as? Bool == false, "bob does not see team-1")

        // The history for the replay view needs a link too.
        let history = try await ann.evaluate(
            """
            (async () => {
              const anonymous = await fetch('/api/boards/team-1/history');
              const invited = await fetch('/api/boards/team-1/history', {headers: {Authorization: 'Bearer \(rig.tokens["ann"]!)'}});
              return [anonymous.status, invited.status, (await invited.json()).batches.length];
            })()
            """) as? [Int]
        #expect(history?.prefix(2) == [401, 200] && (history?[2] ?? 0) > 0, "\(String(describing: history))")

        // The gateway's own key cannot use ann's token for bob's namespace, nor bob's for ann's.
        let keys = try #require(rig.keys)
        let gatewayKeys = CurveClientKeys(
            client: try CurveKeyFiles.readPair(keys + "/gateway.key"), serverPublicKey: try CurveKeyFiles.readPublicKey(keys + "/hub.pub"))
        for (namespace, invitee) in [("web:bob:x1", "ann"), ("web:ann:x2", "bob"), ("other:ann:x3", "ann")] {
            var settings = AgentConfiguration(board: "team-1", hubEndpoint: rig.endpoints[0])
            settings.curve = gatewayKeys
            settings.delegation = (namespace, rig.tokens[invitee]!)
            let agent = try TouchAgent(configuration: settings, logger: Logger(label: "test"))
            agent.start()
            #expect(await agent.waitUntilWelcomed(timeout: .seconds(5)) == false, "\(namespace) with \(invitee)'s token")
            #expect(agent.helloRefusal?.contains("forbidden") == true, "\(agent.helloRefusal ?? "no refusal")")
            await agent.stop()
        }
    }

    /// Revocation ends what the user had open (issue 22: revoked users' tabs
    /// kept receiving for a minute and the gateway re-sent their hello every
    /// 4.6 s). `keys revoke ann` and SIGHUP: ann's tab is told UNAUTHORIZED,
    /// its socket closes and stays closed (the page does not retry), her
    /// touch down is cancelled; cid, left alone, keeps drawing and the
    /// watcher keeps seeing it, while ann's page sees nothing more.
    @Test func revokedUsersTabsAreClosed() async throws {
        let rig = try await WhiteboardRig(invitations: ["ann": ("*", "draw"), "cid": ("*", "draw"), "tv": ("*", "watch")])
        defer { rig.close() }
        let ann = try await rig.page("team", as: "ann")
        let cid = try await rig.page("team", as: "cid")
        let tv = try await rig.page("team", as: "tv", watching: true)
        try await ann.drag(from: (200, 200))
        try await ann.settled()
        // Ann's mouse stays pressed: a touch down on the board.
        try await ann.pointer("mousePressed", x: 400, y: 400)
        try await ann.pointer("mouseMoved", x: 420, y: 410)
        try await ann.settled()
        try await tv.waitFor("touchsync.board.active.size === 1")
        var board = try await rig.hubBoard("team")
        let annUser = try #require(try await ann.evaluate("touchsync.user") as? String)
        #expect(board.orderedActiveStrokes.map(\.owner.rawValue) == [annUser])

        let keys = try #require(rig.keys)
        #expect(try await touchsync(["keys", "revoke", "ann", "--access", keys + "/access.json"]).status == 0)
        kill(try #require(rig.hubProcess).processIdentifier, SIGHUP)
        try await ann.waitFor("touchsync.errors.some(e => e.code === 'UNAUTHORIZED' && e.message.includes('revoked'))")
        try await ann.waitFor("touchsync.rawSocket().readyState === WebSocket.CLOSED")
        let seenByAnn = try await ann.evaluate("touchsync.board.seq") as? Int ?? -1
        #expect(try await ann.evaluate("touchsync.ended") as? String != nil)

        // cid draws on; the watcher sees it, ann's closed page does not; nothing of ann's is left down.
        try await cid.drag(from: (300, 300))
        try await cid.settled()
        board = try await rig.hubBoard("team")
        try await tv.waitFor("touchsync.board.seq === \(board.sequence)")
        #expect(board.orderedActiveStrokes.filter { $0.owner.rawValue == annUser }.isEmpty, "ann's touch is still down")
        #expect(board.acceptedStrokes.count == 2)
        try await Task.sleep(for: .seconds(6))  // longer than the page's largest back-off (5 s): it must not have come back
        #expect(try await ann.evaluate("touchsync.board.seq") as? Int == seenByAnn)
        #expect(try await ann.evaluate("touchsync.rawSocket().readyState === WebSocket.CLOSED") as? Bool == true, "the page reconnected")
    }

    /// The browser wire against the page's own decoder: a simulated session
    /// (several users and fingers, coalesced, predicted and amended samples,
    /// cancels, clears, undo, redo, erase) encoded by `BrowserWire` and
    /// applied by board.js in Chromium, from the start and from a snapshot
    /// half-way, gives every stroke with exactly the hub's samples.
    @Test func pagesDecodeTheBrowserWireExactly() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        var profile = SimulationProfile()
        profile.users = 3
        profile.clearRate = 0.002
        profile.boardClears = false
        var simulator = SessionSimulator(seed: 12, profile: profile)
        var board = BoardState()
        var undo = UndoHistory()
        var messages: [String] = []
        var midway: (snapshot: String, index: Int)? = nil
        var time: Int64 = 1_700_000_000_000_000
        for step in 0..<1500 {
            var diffs: [StrokeDiff] = []
            let before = board
            switch simulator.next() {
            case .frame(let user, let frame, let style):
                try board.reduce(frame, from: user, style: style, into: &diffs)
            case .clear(let user, let scope):
                board.clear(scope, by: user, into: &diffs)
            }
            let user = simulator.users[step % simulator.users.count]
            if step % 37 == 0 { _ = undo.undo(by: user, on: &board, into: &diffs) }
            if step % 53 == 0 { _ = undo.redo(by: user, on: &board, into: &diffs) }
            if step % 91 == 0, let victim = board.acceptedStrokes.first {
                try board.erase([victim.id], by: user, anyOwner: true, into: &diffs)
            }
            undo.note(diffs, on: board)
            guard !diffs.isEmpty else { continue }
            time += 8_333
            messages.append(BrowserWire.batch(board.sealBatch(diffs, hubTime: time), before: before))
            if step == 750 { midway = (BrowserWire.snapshot(board), messages.count) }
        }
        let expected = board.acceptedStrokes + board.orderedActiveStrokes
        #expect(expected.count > 10 && board.sequence > 500, "\(expected.count) strokes at sequence \(board.sequence)")
        func flat(_ samples: [Sample]) -> [Int] {
            samples.flatMap { [Int($0.x), Int($0.y), Int($0.time), $0.flags.contains(.hasForce) ? Int($0.force) : 0] }
        }
        let expectedJSON = String(
            decoding: try JSONSerialization.data(
                withJSONObject: expected.map { ["id": Int($0.id.rawValue), "s": flat(Array($0.samples)), "p": flat($0.predicted)] as [String: Any] }),
            as: UTF8.self)
        #expect(board.orderedActiveStrokes.contains { !$0.predicted.isEmpty }, "predicted samples are compared too")
        let page = try await rig.browser.openPage("\(rig.web)/")
        try await page.waitFor("document.readyState === 'complete'")
        let midwaySnapshot = try #require(midway)
        let messagesJSON = String(decoding: try JSONSerialization.data(withJSONObject: messages), as: UTF8.self)
        let result = try await page.evaluate(
            """
            (async () => {
              const { Board } = await import('/static/board.js');
              const messages = \(messagesJSON);
              const expected = \(expectedJSON);
              const run = (board, from) => {
                for (let i = from; i < messages.length; i++) {
                  if (board.applyBatch(JSON.parse(messages[i])) !== 'applied') return 'batch ' + i + ' not applied';
                }
                const strokes = [...board.accepted, ...[...board.active.values()].sort((a, b) => a.id - b.id)];
                if (strokes.length !== expected.length) return 'strokes ' + strokes.length + ' != ' + expected.length;
                for (let k = 0; k < strokes.length; k++) {
                  if (strokes[k].id !== expected[k].id) return 'stroke ' + k + ' id ' + strokes[k].id + ' != ' + expected[k].id;
                  if (JSON.stringify(strokes[k].s) !== JSON.stringify(expected[k].s)) return 'samples of stroke ' + strokes[k].id + ' differ';
                  if (JSON.stringify(strokes[k].p) !== JSON.stringify(expected[k].p)) return 'predicted samples of stroke ' + strokes[k].id + ' differ';
                }
                return 'ok';
              };
              const fromStart = new Board();
              fromStart.loadSnapshot({ seq: 0, accepted: [], active: [] });
              const late = new Board();
              late.loadSnapshot(JSON.parse(\(BrowserWire.quoted(midwaySnapshot.snapshot))));
              return [run(fromStart, 0), run(late, \(midwaySnapshot.index))];
            })()
            """) as? [String]
        #expect(result == ["ok", "ok"], "\(result ?? [])")
    }

    /// The page's wire.js against proto/conformance/v1/browser-binary.json:
    /// its binary touches are the gateway's bytes exactly, and the gateway's
    /// binary batches and acks read as the JSON messages they stand for.
    @Test func thePagesBinaryFramesMatchTheVectors() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let vectors = String(decoding: try Data(contentsOf: repositoryRoot.appendingPathComponent("proto/conformance/v1/browser-binary.json")), as: UTF8.self)
        let page = try await rig.browser.openPage("\(rig.web)/")
        try await page.waitFor("document.readyState === 'complete'")
        let result = try await page.evaluate(
            """
            (async () => {
              const { encodeTouch, decodeFrame, frames } = await import('/static/wire.js');
              const vectors = \(vectors);
              const hex = bytes => [...bytes].map(b => b.toString(16).padStart(2, '0')).join('');
              const bytes = text => new Uint8Array(text.match(/../g).map(h => parseInt(h, 16))).buffer;
              const problems = [];
              for (const v of vectors.touches) {
                const mine = hex(encodeTouch(JSON.parse(v.json)));
                if (mine !== v.binary) problems.push(v.note + ': ' + mine + ' != ' + v.binary);
              }
              for (const v of vectors.batches) {
                if (JSON.stringify(decodeFrame(bytes(v.binary))) !== JSON.stringify(JSON.parse(v.json))) problems.push('batch ' + v.json.slice(0, 60));
              }
              for (const v of vectors.acks) {
                const read = decodeFrame(bytes(v.binary));
                if (read.t !== 'ack' || read.n !== v.n) problems.push('ack ' + v.n);
              }
              for (const v of vectors.bundles) {
                const mine = frames(bytes(v.binary)).map(f => hex(new Uint8Array(f)));
                if (JSON.stringify(mine) !== JSON.stringify(v.frames)) problems.push(v.note);
              }
              return [vectors.touches.length + vectors.batches.length + vectors.acks.length + vectors.bundles.length, problems.join('; ')];
            })()
            """) as? [Any]
        #expect((result?.first as? Int ?? 0) > 40, "\(result ?? [])")
        #expect(result?.last as? String == "", "\(result ?? [])")
    }

    /// The page's wire.js against proto/conformance/v1/browser-packed.json:
    /// its chained touches are the gateway's bytes exactly, frame after frame
    /// on one chain, and its board (board.js) reads every packed batch as the
    /// JSON batch it stands for.
    @Test func thePagesPackedFramesMatchTheVectors() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let vectors = String(decoding: try Data(contentsOf: repositoryRoot.appendingPathComponent("proto/conformance/v1/browser-packed.json")), as: UTF8.self)
        let page = try await rig.browser.openPage("\(rig.web)/")
        try await page.waitFor("document.readyState === 'complete'")
        let result = try await page.evaluate(
            """
            (async () => {
              const { TouchChains, decodePackedBatch } = await import('/static/wire.js');
              const { Board } = await import('/static/board.js');
              const vectors = \(vectors);
              const hex = bytes => [...bytes].map(b => b.toString(16).padStart(2, '0')).join('');
              const bytes = text => new Uint8Array(text.match(/../g).map(h => parseInt(h, 16))).buffer;
              const problems = [];
              // Each run of appends and predictions in stroke order (those of one stroke keep theirs).
              const byStroke = ([b, seq, diffs]) => {
                const out = [];
                let run = [];
                const flush = () => { out.push(...run.map((d, i) => [d, i]).sort((p, q) => p[0][1] - q[0][1] || p[1] - q[1]).map(p => p[0])); run = []; };
                for (const d of diffs) { if (d[0] === 'a' || d[0] === 'p') run.push(d); else { flush(); out.push(d); } }
                flush();
                return [b, seq, out];
              };
              let frames = 0;
              for (const session of vectors.touchSessions) {
                const chains = new TouchChains();
                session.touches.forEach((json, i) => {
                  frames++;
                  const mine = hex(chains.encode(JSON.parse(json)));
                  if (mine !== session.frames[i]) problems.push(session.note + ' #' + i + ': ' + mine + ' != ' + session.frames[i]);
                });
              }
              const board = new Board();
              board.loadSnapshot(JSON.parse(vectors.batchSession.snapshot));
              for (const v of vectors.batchSession.batches) {
                frames++;
                const read = decodePackedBatch(bytes(v.packed), board);
                if (JSON.stringify(read) !== JSON.stringify(JSON.parse(v.json))) { problems.push('batch ' + v.json.slice(0, 80)); break; }
                // packed2: the same diffs, a block's appends and predictions in stroke order.
                const read2 = decodePackedBatch(bytes(v.packed2), board, 'packed2');
                if (JSON.stringify(byStroke(read2)) !== JSON.stringify(byStroke(JSON.parse(v.json)))) { problems.push('packed2 batch ' + v.json.slice(0, 80)); break; }
                if (board.applyBatch(read) !== 'applied') { problems.push('not applied: ' + v.json.slice(0, 80)); break; }
              }
              return [frames, problems.join('; ')];
            })()
            """) as? [Any]
        #expect((result?.first as? Int ?? 0) > 100, "\(result ?? [])")
        #expect(result?.last as? String == "", "\(result ?? [])")
    }

    /// The replay view rebuilds the board from the hub's history and seeks.
    @Test func replaySeeksToAMoment() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let page = try await rig.page("replayed")
        for stroke in 0..<4 {
            try await page.drag(from: (100, 80 + Double(stroke) * 120))
            try await Task.sleep(for: .milliseconds(150))
        }
        try await page.settled()
        let history = try await HistoryClient.fetch(board: "replayed", endpoint: rig.endpoints[3], logger: Logger(label: "test"))
        #expect(history.batches.count > 4)
        // The moment half-way through: the board as the history had it then.
        let start = history.batches[0].hubTime
        let middle = (history.batches.last!.hubTime - start) / 2
        var expected = history.start
        for batch in history.batches where batch.hubTime - start <= middle { try expected.apply(batch) }
        #expect(expected.acceptedStrokes.count > 0 && expected.acceptedStrokes.count < 4)

        let replay = try await rig.browser.openPage("\(rig.web)/boards/replayed/replay")
        try await replay.waitFor("touchsync.ready")
        _ = try await replay.evaluate("touchsync.seek(\(middle))")
        #expect(try await PageBoard(replay) == PageBoard(expected))
        _ = try await replay.evaluate("touchsync.seek(touchsync.duration)")
        #expect(try await PageBoard(replay) == PageBoard(try await rig.hubBoard("replayed")))
        _ = try await replay.evaluate("touchsync.seek(0)")
        #expect(try await PageBoard(replay).accepted.isEmpty)
    }

    /// The page's own unit tests (Tests/Page: the replica, the browser wire,
    /// ink outlines, the viewport, pan and zoom, local ink), run in Chromium against the
    /// page's modules as shipped: a gateway serves both folders (`--page`),
    /// with no hub and no build step.
    @Test func thePagesUnitTestsPass() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("touchsync-page-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for source in ["Sources/Adapters/TouchSyncWeb/Page", "Tests/Page"] {
            let directory = root.appendingPathComponent(source)
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
                try FileManager.default.copyItem(at: directory.appendingPathComponent(name), to: folder.appendingPathComponent(name))
            }
        }
        let children = ChildProcesses()
        defer { children.killAll() }
        let nowhere = try TouchSyncProcess.freePorts(4).map { "tcp://127.0.0.1:\($0)" }
        let (port, _) = try await GatewayWireTests.Rig.startGateway(
            children, ["--page", folder.path, "--hub", nowhere[0], "--publish", nowhere[1], "--snapshot", nowhere[2], "--history", nowhere[3]])
        let browser = try Chromium.launch(spawning: { body in spawnGate.withLock { _ in body() } })
        defer { browser.shutDown() }
        let page = try await browser.openPage("http://127.0.0.1:\(port)/static/unit.html")
        try await page.waitFor("window.results !== undefined", timeout: .seconds(30))
        let passed = try await page.evaluate("window.results.passed") as? [String] ?? []
        let failed = try await page.evaluate("window.results.failed") as? [String] ?? []
        #expect(failed.isEmpty, "\(failed)")
        #expect(passed.count >= 20, "\(passed)")
        #expect(Set(passed.map { $0.prefix { $0 != ":" } }) == ["board", "wire", "ink", "view", "gestures", "localink", "selection"], "\(passed)")
    }

    /// The replay fits the whole board at desktop and phone sizes, its
    /// toolbar on one row with the clock whole; a board with nothing
    /// recorded says so. The index counts in words ("1 stroke"), pages have
    /// an icon (no 404), and a gateway whose hub does not answer says so
    /// instead of showing an empty list.
    @Test func replayFitsAndPagesSayWhatTheyHave() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let page = try await rig.page("wide")
        // Zoomed out to a quarter, strokes near the screen's corners reach far beyond one screen of board at 100%.
        _ = try await page.evaluate("touchsync.view.zoom = 0.25; touchsync.view.ox = 0; touchsync.view.oy = 0; touchsync.requestRender(true)")
        let top = try await page.number("document.getElementById('board').getBoundingClientRect().top")
        try await page.drag(from: (40, top + 40), steps: 6)
        try await page.drag(from: (880, top + 540), steps: 6)
        try await page.settled()
        try await page.waitFor("touchsync.board.accepted.length === 2")
        let single = try await rig.page("single")
        try await single.drag(from: (200, 200), steps: 4)
        try await single.settled()

        for (width, height, mobile) in [(1280, 800, false), (390, 844, true)] {
            let replay = try await rig.browser.openPage("\(rig.web)/boards/wide/replay", width: width, height: height, deviceScaleFactor: mobile ? 3 : 1, mobile: mobile)
            try await replay.waitFor("touchsync.ready")
            let geometry = try await replay.evaluate(
                """
                (() => {
                  const b = touchsync.bounds(), v = touchsync.view.visible(touchsync.renderer.width, touchsync.renderer.height);
                  const clock = document.getElementById('clock');
                  return { inside: b[0] >= v[0] && b[1] >= v[1] && b[2] <= v[2] && b[3] <= v[3], wide: (b[2] - b[0]) > (v[2] - v[0]) * 0.5,
                           clockWhole: clock.scrollWidth <= clock.clientWidth + 0.5 && clock.getBoundingClientRect().right <= innerWidth };
                })()
                """) as? [String: Bool] ?? [:]
            #expect(geometry["inside"] == true && geometry["wide"] == true, "\(width)x\(height): the board fits the view, filling it: \(geometry)")
            #expect(geometry["clockWhole"] == true, "\(width)x\(height): the clock is whole: \(geometry)")
            let layout = try await replay.evaluate(
                """
                (() => {
                  const bar = document.getElementById('toolbar').getBoundingClientRect();
                  const tools = [...document.querySelectorAll('#toolbar > *')].filter(e => e.offsetParent !== null).map(e => e.getBoundingClientRect());
                  return [tools.filter(r => r.top < bar.top - 0.5 || r.bottom > bar.bottom + 0.5).length, tools.filter(r => r.right > innerWidth + 0.5).length];
                })()
                """) as? [Int] ?? []
            #expect(layout == [0, 0], "\(width)x\(height): one toolbar row, nothing cut off: \(layout)")
            try await replay.keepScreenshot("replay-\(width)")
        }
        let nothing = try await rig.browser.openPage("\(rig.web)/boards/never-drawn/replay")
        try await nothing.waitFor("touchsync.ready || touchsync.error !== null")
        let said = try await nothing.evaluate("document.getElementById('status').hidden ? '' : document.getElementById('status').textContent") as? String ?? ""
        #expect(said.contains("Nothing has been drawn"), "\(said)")

        let index = try await rig.browser.openPage("\(rig.web)/")
        try await index.waitFor("document.querySelectorAll('#boards li a.card').length === 2")
        let cards = try await index.evaluate("[...document.querySelectorAll('#boards li')].map(li => li.textContent)") as? [String] ?? []
        #expect(cards.contains { $0.contains("single") && $0.contains("1 stroke ") }, "\(cards)")
        #expect(cards.contains { $0.contains("wide") && $0.contains("2 strokes") }, "\(cards)")
        #expect(try await index.evaluate("document.getElementById('list-problem').hidden") as? Bool == true)
        let icon = try await index.evaluate(
            "fetch(document.querySelector('link[rel=icon]').href).then(r => r.status + ' ' + r.headers.get('content-type'))") as? String
        #expect(icon == "200 image/svg+xml", "\(icon ?? "")")

        // A gateway whose hub is not there: the index says so.
        let children = ChildProcesses()
        defer { children.killAll() }
        let dead = try TouchSyncProcess.freePorts(4).map { "tcp://127.0.0.1:\($0)" }
        let (port, _) = try await GatewayWireTests.Rig.startGateway(
            children, ["--hub", dead[0], "--publish", dead[1], "--snapshot", dead[2], "--history", dead[3]])
        let lonely = try await rig.browser.openPage("http://127.0.0.1:\(port)/")
        try await lonely.waitFor("!document.getElementById('list-problem').hidden", timeout: .seconds(20))
        let problem = try await lonely.evaluate("document.getElementById('list-problem').textContent") as? String ?? ""
        #expect(problem.contains("hub cannot be reached"), "\(problem)")
        #expect(try await lonely.evaluate("document.querySelector('#boards li').textContent") as? String == "No board to show.")
    }

    /// The replay skips idle time: a 2.6 s pause between strokes plays as
    /// 0.3 s with a mark on the timeline, seeking still rebuilds the board
    /// exactly, and play continues from where the timeline stands. The index
    /// lists the board with its people, last activity and a thumbnail.
    @Test func replaySkipsIdleGapsAndTheIndexShowsBoards() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let page = try await rig.page("gaps")
        for stroke in 0..<2 { try await page.drag(from: (100, 80 + Double(stroke) * 120)) }
        try await page.settled()
        try await Task.sleep(for: .milliseconds(2600))
        for stroke in 2..<4 { try await page.drag(from: (100, 80 + Double(stroke) * 120)) }
        try await page.settled()

        let replay = try await rig.browser.openPage("\(rig.web)/boards/gaps/replay")
        try await replay.waitFor("touchsync.ready")
        let duration = try await replay.number("touchsync.duration")
        let recorded = try await replay.number("touchsync.recorded")
        let gaps = try await replay.evaluate("touchsync.gaps") as? [[String: Any]] ?? []
        #expect(gaps.count == 1, "one idle gap: \(gaps)")
        #expect(recorded - duration >= 2_200_000, "the pause is skipped: \(recorded) µs recorded, \(duration) µs to play")
        #expect(try await replay.number("document.querySelectorAll('.gap-mark').length") == 1, "marked on the timeline")
        let gapAt = (gaps.first?["at"] as? Double) ?? Double(gaps.first?["at"] as? Int ?? 0)
        _ = try await replay.evaluate("touchsync.seek(\(gapAt + 100_000))")
        #expect(try await PageBoard(replay).accepted.count == 2, "just after the gap: the strokes before it")
        _ = try await replay.evaluate("touchsync.seek(touchsync.duration)")
        #expect(try await PageBoard(replay) == PageBoard(try await rig.hubBoard("gaps")))
        _ = try await replay.evaluate("touchsync.seek(\(gapAt)); document.getElementById('play').click()")
        try await replay.waitFor("touchsync.position > \(gapAt + 50_000)")
        let position = try await replay.number("touchsync.position")
        #expect(position < duration, "playing on from the gap, not from the start")

        // A board drawn on without the gateway (touchsync draw, straight to the hub) is listed too, with its thumbnail.
        let drawn = try await touchsync(["draw", "--board", "elsewhere", "--seconds", "0.5", "--hub", rig.endpoints[0]])
        #expect(drawn.status == 0, "\(drawn.errors)")
        // draw's goodbye ends its session when the hub reads it, which on a busy machine can be
        // after the hub answers the gateway's board list (it reads its sockets in turn): the
        // index is opened once the list no longer counts that agent.
        let webPort = try #require(UInt16(rig.web.split(separator: ":").last ?? ""))
        let deadline = ContinuousClock.now + .seconds(10)
        func elsewhereIsIdle() throws -> Bool {
            let list = try JSONSerialization.jsonObject(with: Data(httpGet(port: webPort, path: "/api/boards", close: true).utf8)) as? [[String: Any]]
            return list?.contains { $0["board"] as? String == "elsewhere" && $0["tabs"] as? Int == 0 && $0["agents"] as? Int == 0 } == true
        }
        while try !elsewhereIsIdle(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let index = try await rig.browser.openPage("\(rig.web)/")
        try await index.waitFor("document.querySelectorAll('#boards li').length === 2")
        try await index.waitFor("[...document.querySelectorAll('#boards img')].every(i => i.complete && i.naturalWidth > 0)")
        let cards = try await index.evaluate("[...document.querySelectorAll('#boards li')].map(li => li.textContent)") as? [String] ?? []
        #expect(cards.count == 2 && cards[0].contains("elsewhere") && cards[0].contains("0 people"), "\(cards)")
        #expect(cards.count == 2 && cards[1].contains("gaps") && cards[1].contains("1 person") && cards[1].contains("4 strokes") && cards[1].contains("active now"), "\(cards)")
    }
}
