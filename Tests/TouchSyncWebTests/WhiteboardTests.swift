import WebTestSupport
import Foundation
import Testing
import TouchSyncBrowser
import TouchSyncCore
import TouchSyncRender

extension WhiteboardRig {
    /// The gateway's port (for a link emulator in front of it).
    var webPort: UInt16 { UInt16(web.split(separator: ":").last.flatMap { Int($0) } ?? 0) }

    /// A page on `board` at `base` (the gateway, or a link emulator in front of it),
    /// a desktop window or a phone; `drawing` waits until it is welcomed and synced.
    func open(
        _ board: String, via base: String? = nil, width: Int = 1280, height: Int = 800, scale: Double = 1, mobile: Bool = false,
        drawing: Bool = true, person: String? = nil
    ) async throws -> BrowserPage {
        let encoded = board.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? board
        let page = try await browser.openPage(
            "\(base ?? web)/boards/\(encoded)", width: width, height: height, deviceScaleFactor: scale, mobile: mobile, person: person)
        if drawing {
            try await page.waitFor("window.touchsync && touchsync.user !== null && touchsync.board.synced")
            _ = try await page.evaluate("touchsync.closeNameDialog()")
        }
        return page
    }
}

extension BrowserPage {
    /// With TOUCHSYNC_SCREENSHOTS=FOLDER, saves what the page shows as FOLDER/NAME.png (to look at; nothing is asserted on it).
    func keepScreenshot(_ name: String) async throws {
        guard let folder = ProcessInfo.processInfo.environment["TOUCHSYNC_SCREENSHOTS"] else { return }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try await screenshot().write(to: URL(fileURLWithPath: folder + "/" + name + ".png"))
    }

    /// The canvas's top in the viewport (below the toolbar).
    func canvasTop() async throws -> Double { try await number("document.getElementById('board').getBoundingClientRect().top") }

    /// The canvas pixel [r, g, b, a] at viewport point (x, y), read in the frame after everything dispatched so far.
    func inkAfterNextFrame(x: Double, y: Double) async throws -> [Int] {
        let top = try await canvasTop()
        return try await evaluate("touchsync.nextFrame().then(() => touchsync.pixelAt(\(x), \(y - top)))") as? [Int] ?? []
    }

    /// How many canvas pixels of a vertical line at viewport x, from y0 to y1, have ink.
    func inkedPixels(x: Double, from y0: Double, to y1: Double) async throws -> Int {
        let top = try await canvasTop()
        return Int(
            try await number(
                """
                touchsync.nextFrame().then(() => {
                  const r = touchsync.renderer.ratio, ctx = touchsync.renderer.ctx;
                  const data = ctx.getImageData(Math.round(\(x) * r), Math.round(\(y0 - top) * r), 1, Math.round(\(y1 - y0) * r)).data;
                  let n = 0;
                  for (let i = 3; i < data.length; i += 4) if (data[i] > 128) n++;
                  return n / r;
                })
                """))
    }
}

/// The whiteboard as a person uses it, in real Chromium: own ink at the pen
/// through a slow link and offline, ink that follows pressure and curves,
/// pan and zoom in board coordinates on a desktop and a phone, a canvas that
/// fits its window, refused boards, people and shortcuts. Part of the
/// browser suite, so that one Chromium runs at a time.
extension BrowserTests {
    /// A phone (390x844, touch) draws with a finger through a link with a
    /// 100 ms round trip, in the packed2 wire; a desktop (1280x800) on the same
    /// board sees the stroke: ink on both canvases where the finger went.
    @Test func aPhoneDrawsWithAFingerThroughASlowLink() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let link = try LinkEmulator(targetPort: rig.webPort, oneWayDelay: .milliseconds(50))
        defer { link.stop() }
        let phone = try await rig.open("finger", via: "http://127.0.0.1:\(link.port)", width: 390, height: 844, scale: 3, mobile: true)
        let desktop = try await rig.open("finger")
        #expect(try await phone.evaluate("touchsync.wire") as? String == "packed2", "the page speaks packed2 frames")
        let top = try await phone.canvasTop()
        try await phone.touch("touchStart", [(80, top + 300, 0)])
        for step in 1...10 { try await phone.touch("touchMove", [(80 + Double(step) * 20, top + 300 + Double(step) * 15, 0)]) }
        try await phone.touch("touchEnd", [])
        try await phone.settled()
        try await desktop.waitFor("touchsync.board.accepted.length === 1")
        // The stroke's middle, in board points: where both pages draw it at 100%.
        let middle = try await desktop.evaluate("(s => [s[20] / 64, s[21] / 64])(touchsync.board.accepted[0].s)") as? [Double] ?? []
        #expect(middle.count == 2, "\(middle)")
        let desktopTop = try await desktop.canvasTop()
        #expect(try await desktop.inkAfterNextFrame(x: middle[0], y: middle[1] + desktopTop)[3] > 0, "the desktop draws the phone's stroke")
        #expect(try await phone.inkAfterNextFrame(x: middle[0], y: middle[1] + top)[3] > 0, "the phone keeps its own stroke")
        try await phone.keepScreenshot("phone-finger")
        try await desktop.keepScreenshot("desktop-finger")
    }

    /// Through a link with a 100 ms round trip, your own ink is on the canvas in
    /// the first frame after the input, before the hub has seen it; with the
    /// link down too. The offline stroke reaches a second tab when the link
    /// returns, and the local ink gives way to the hub's stroke.
    @Test func ownInkIsAtThePenAtAnyDelayAndOffline() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let link = try LinkEmulator(targetPort: rig.webPort, oneWayDelay: .milliseconds(50))
        defer { link.stop() }
        let drawer = try await rig.open("ink", via: "http://127.0.0.1:\(link.port)")
        let watcher = try await rig.open("ink")
        let user = try await drawer.evaluate("touchsync.user") as? String ?? ""

        // Through the slow link: each move's ink is there in the next frame, while the hub has not echoed it.
        try await drawer.pointer("mousePressed", x: 200, y: 300)
        try await drawer.pointer("mouseMoved", x: 210, y: 300)
        let top = try await drawer.canvasTop()
        let first = try await drawer.evaluate(
            """
            touchsync.nextFrame().then(() => ({ pixel: touchsync.pixelAt(210, \(300 - top)), waiting: touchsync.pending.length,
              echoed: [...touchsync.board.active.values()].some(s => s.owner === touchsync.user),
              elapsed: performance.now() - touchsync.local.get(1).startedAt }))
            """) as? [String: Any] ?? [:]
        #expect(((first["pixel"] as? [Int])?.last ?? 0) > 0, "ink in the frame after the first move: \(first)")
        // The hub's echo cannot be back before a round trip: drawn from input (a slow machine may take longer than that to look).
        let elapsed = (first["elapsed"] as? Double) ?? 1000
        #expect(elapsed >= 100 || (first["echoed"] as? Bool == false && (first["waiting"] as? Int ?? 0) > 0), "drawn from input, not from the hub: \(first)")
        for step in 1...6 {
            let x = 200 + Double(step) * 20
            try await drawer.pointer("mouseMoved", x: x, y: 300)
            let pixel = try await drawer.inkAfterNextFrame(x: x, y: 300)
            #expect(pixel.count == 4 && pixel[3] > 0, "ink under the pointer in the next frame, step \(step): \(pixel)")
        }
        try await drawer.pointer("mouseReleased", x: 320, y: 300)
        try await drawer.settled()
        try await drawer.waitFor("touchsync.finished.length === 0 && touchsync.board.accepted.length === 1")
        #expect(try await drawer.inkAfterNextFrame(x: 260, y: 300)[3] > 0, "the hub's stroke drawn where the local ink was")

        // The link goes down: the page draws offline, and nothing is lost when it comes back.
        link.down()
        try await drawer.waitFor("!touchsync.connected")
        try await drawer.pointer("mousePressed", x: 200, y: 450)
        for step in 1...8 {
            try await drawer.pointer("mouseMoved", x: 200 + Double(step) * 20, y: 450 + Double(step * step))
        }
        #expect(try await drawer.inkAfterNextFrame(x: 360, y: 514)[3] > 0, "offline ink under the pointer")
        try await drawer.pointer("mouseReleased", x: 360, y: 514)
        #expect(try await drawer.inkAfterNextFrame(x: 300, y: 475)[3] > 0, "the finished offline stroke stays on screen")
        #expect(try await drawer.number("touchsync.pending.length") > 0)
        link.up()
        try await drawer.settled()
        try await watcher.waitFor("touchsync.board.accepted.filter(s => s.owner === '\(user)').length === 2")
        let sent = try await drawer.number("touchsync.sent.endedSamples")
        let received = try await watcher.number("touchsync.board.accepted.reduce((n, s) => n + s.s.length / 4, 0)")
        #expect(received == sent, "every sample reached the other tab")
        try await drawer.waitFor("touchsync.finished.length === 0")
        #expect(try await drawer.inkAfterNextFrame(x: 300, y: 475)[3] > 0, "still drawn once the hub's stroke replaced the local ink")
        let ownInk = try await drawer.evaluate("touchsync.ownInk") as? [Double] ?? []
        #expect(!ownInk.isEmpty)
        print("own ink through a 100 ms round trip: \(ownInk.count) inputs, worst \(String(format: "%.1f", ownInk.max() ?? 0)) ms to the frame")
        #expect(rig.browser.console.filter { $0.hasPrefix("exception") }.isEmpty, "\(rig.browser.console)")
    }

    /// Pressure makes ink wider; a mouse circle of twelve samples is drawn as a
    /// curve, not as chords; the page's outline is the SVG renderer's.
    @Test func inkFollowsPressureAndCurves() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let page = try await rig.open("ink-shape")
        for (force, y) in [(1.0, 200.0), (0.1, 300.0)] {
            try await page.pointer("mousePressed", x: 100, y: y, pointerType: "pen", force: force)
            for step in 1...12 { try await page.pointer("mouseMoved", x: 100 + Double(step) * 25, y: y, pointerType: "pen", force: force) }
            try await page.pointer("mouseReleased", x: 400, y: y, pointerType: "pen", force: force)
        }
        let heavy = try await page.inkedPixels(x: 250, from: 180, to: 220)
        let light = try await page.inkedPixels(x: 250, from: 280, to: 320)
        print("pen at force 1.0: \(heavy) px thick; at 0.1: \(light) px")
        #expect(heavy >= 2 * light && light >= 1, "force 1.0 \(heavy) px against force 0.1 \(light) px")

        // A circle of radius 150 from twelve mouse samples: between two samples the ink is on
        // the circle, not on the chord (4.4 points inside at the chord's middle).
        let (cx, cy, radius) = (800.0, 400.0, 150.0)
        try await page.pointer("mousePressed", x: cx + radius, y: cy)
        for k in 1...12 {
            let angle = Double(k) * .pi / 6
            try await page.pointer("mouseMoved", x: cx + radius * cos(angle), y: cy + radius * sin(angle))
        }
        try await page.pointer("mouseReleased", x: cx + radius, y: cy)
        try await page.settled()
        try await page.waitFor("touchsync.finished.length === 0")
        for k in [2, 5, 8] {
            let middle = (Double(k) + 0.5) * .pi / 6
            let onArc = try await page.inkAfterNextFrame(x: cx + radius * cos(middle), y: cy + radius * sin(middle))
            let chord = radius * cos(Double.pi / 12)
            let onChord = try await page.inkAfterNextFrame(x: cx + chord * cos(middle), y: cy + chord * sin(middle))
            #expect(onArc[3] > 0 && onChord[3] == 0, "between samples \(k) and \(k + 1): arc \(onArc), chord \(onChord)")
        }

        // The page and `touchsync render` draw the same outline for the hub's strokes.
        try await page.keepScreenshot("ink")
        let hub = try await rig.hubBoard("ink-shape")
        #expect(hub.acceptedStrokes.count == 3)
        for (index, stroke) in hub.acceptedStrokes.enumerated() {
            let swift = InkOutline.pathData(
                InkOutline.outline(
                    InkOutline.points(stroke.samples), width: Double(stroke.style.width) / Double(Sample.unitsPerPoint), complete: true))
            let page = try await page.evaluate(
                "import('/static/ink.js').then(ink => { const s = touchsync.board.accepted[\(index)]; return ink.pathData(ink.outline(ink.inkPoints(s.s), s.w / 64, true)); })"
            ) as? String ?? ""
            let numbers = { (d: String) in d.split(whereSeparator: { " MQZ".contains($0) }).compactMap { Double($0) } }
            let (a, b) = (numbers(swift), numbers(page))
            #expect(a.count == b.count && a.count > 50, "stroke \(index): \(a.count) and \(b.count) numbers")
            let worst = zip(a, b).map { abs($0 - $1) }.max() ?? 0
            #expect(worst <= 0.011, "stroke \(index): the outlines differ by up to \(worst) points")
        }
        // The page's SVG export: the board's three strokes as those outlines.
        let exported = try await page.evaluate("touchsync.exportSVG()") as? String ?? ""
        #expect(exported.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\"") && exported.components(separatedBy: "<path ").count == 4)
        #expect(rig.browser.console.filter { $0.hasPrefix("exception") }.isEmpty, "\(rig.browser.console)")
    }

    /// A phone (390x844, three device pixels per point, touch) and a desktop on
    /// one board: the phone's toolbar is one row and leaves at least 70% of the
    /// screen to the board; a pinch zooms and draws nothing (the first finger's
    /// stroke is cancelled); after zooming and panning, the desktop's stroke is
    /// where its board coordinates say on both screens; the canvas follows resizes.
    @Test func panAndZoomOnAPhoneAndADesktop() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let desktop = try await rig.open("phone")
        let phone = try await rig.open("phone", width: 390, height: 844, scale: 3, mobile: true)
        let phoneUser = try await phone.evaluate("touchsync.user") as? String ?? ""

        // The layout: one toolbar row, every button on screen, the canvas the rest of the window.
        let layout = try await phone.evaluate(
            """
            (() => {
              const bar = document.getElementById('toolbar').getBoundingClientRect();
              const canvas = document.getElementById('board').getBoundingClientRect();
              const tools = [...document.querySelectorAll('#toolbar > *')].filter(e => e.offsetParent !== null)
                .map(e => e.getBoundingClientRect()).filter(r => r.width > 0);
              return { bar: bar.height, top: canvas.top, bottom: canvas.bottom, right: canvas.right, left: canvas.left,
                       offRow: tools.filter(r => r.top < bar.top - 0.5 || r.bottom > bar.bottom + 0.5).length,
                       outside: tools.filter(r => r.right > innerWidth + 0.5).length,
                       pixels: document.getElementById('board').width, innerWidth, innerHeight };
            })()
            """) as? [String: Any] ?? [:]
        let number = { (key: String) in (layout[key] as? Double) ?? Double(layout[key] as? Int ?? -1) }
        #expect(number("bar") <= 48 && number("offRow") == 0 && number("outside") == 0, "one toolbar row, nothing cut off: \(layout)")
        #expect((number("bottom") - number("top")) / 844 >= 0.7, "the board has at least 70% of the screen: \(layout)")
        #expect(number("bottom") == 844 && number("right") == 390 && number("left") == 0, "the canvas fills the window: \(layout)")
        #expect(number("pixels") == 390 * 3, "backed at the device pixel ratio: \(layout)")

        // The desktop draws at board (700, 600): beyond the phone's first view.
        try await desktop.drag(from: (700, 600 + (try await desktop.canvasTop())), steps: 8)
        try await desktop.settled()
        try await phone.waitFor("touchsync.board.accepted.length === 1")
        let stroke = try await desktop.evaluate("touchsync.board.accepted[0].s.slice(0, 2).map(v => v / 64)") as? [Double] ?? []
        #expect(stroke.count == 2 && abs(stroke[0] - 700) < 1 && abs(stroke[1] - 600) < 1, "board coordinates are the desktop's screen at 100%: \(stroke)")

        try await phone.keepScreenshot("phone")
        try await desktop.keepScreenshot("desktop")
        // A pinch on the phone: the first finger begins a stroke, the second makes it a gesture.
        let phoneTop = try await phone.canvasTop()
        let zoomBefore = try await phone.number("touchsync.view.zoom")
        try await phone.touch("touchStart", [(150, 400, 0)])
        try await phone.touch("touchMove", [(148, 398, 0)])
        try await phone.touch("touchStart", [(148, 398, 0), (250, 500, 1)])
        for step in 1...6 {
            let spread = Double(step) * 12
            try await phone.touch("touchMove", [(148 - spread, 398 - spread, 0), (250 + spread, 500 + spread, 1)])
        }
        try await phone.touch("touchEnd", [])
        try await phone.settled()
        let zoomAfter = try await phone.number("touchsync.view.zoom")
        #expect(zoomAfter > zoomBefore * 1.3, "the pinch zoomed: \(zoomBefore) to \(zoomAfter)")
        let hub = try await rig.hubBoard("phone")
        #expect(!hub.acceptedStrokes.contains { $0.owner.rawValue == phoneUser } && hub.orderedActiveStrokes.isEmpty, "the gesture drew nothing")
        #expect(try await phone.number("touchsync.sent.cancelledStrokes") == 1, "the first finger's stroke was cancelled")

        // Pan the phone so the desktop's stroke is in view, then check the pixel where the board point maps.
        _ = try await phone.evaluate("touchsync.view.zoom = 1; touchsync.view.ox = -500; touchsync.view.oy = -400; touchsync.requestRender(true)")
        for (page, top) in [(phone, phoneTop), (desktop, try await desktop.canvasTop())] {
            let screen = try await page.evaluate("touchsync.view.toScreen(\(stroke[0] + 15 * 4), \(stroke[1] + 16))") as? [Double] ?? []
            let pixel = try await page.inkAfterNextFrame(x: screen[0], y: screen[1] + top)
            #expect(pixel[3] > 0, "the stroke's fifth sample is drawn where its board point maps: \(screen) \(pixel)")
        }
        // The desktop zooms with the wheel about the pointer (the point under it stays): a mouse notch
        // (Ctrl-wheel, deltaY 100) is one 10% step, three notches at once three, a trackpad pinch
        // (Ctrl-wheel with small deltas) zooms continuously.
        let desktopTop = try await desktop.canvasTop()
        let anchor = try await desktop.evaluate("touchsync.view.toBoard(400, 300)") as? [Double] ?? []
        let zoom0 = try await desktop.number("touchsync.view.zoom")
        try await desktop.wheel(x: 400, y: 300 + desktopTop, deltaY: -100, modifiers: 2)
        let oneNotch = try await desktop.number("touchsync.view.zoom")
        try await desktop.wheel(x: 400, y: 300 + desktopTop, deltaY: -300, modifiers: 2)
        let threeMore = try await desktop.number("touchsync.view.zoom")
        for _ in 0..<10 { try await desktop.wheel(x: 400, y: 300 + desktopTop, deltaY: -4, modifiers: 2) }
        let pinched = try await desktop.number("touchsync.view.zoom")
        let stays = try await desktop.evaluate("touchsync.view.toScreen(\(anchor[0]), \(anchor[1]))") as? [Double] ?? []
        #expect(abs(oneNotch / zoom0 - 1.1) < 0.001, "a notch is 10%: \(zoom0) to \(oneNotch)")
        #expect(abs(threeMore / oneNotch - 1.331) < 0.001, "three notches at once are three steps: \(oneNotch) to \(threeMore)")
        #expect(abs(pinched / threeMore - exp(0.4)) < 0.01, "a pinch's small deltas zoom continuously: \(threeMore) to \(pinched)")
        #expect(abs(stays[0] - 400) < 1 && abs(stays[1] - 300) < 1, "the point under the pointer stays: \(stays)")

        // Two fingers pan the phone: the board stays under them, exactly.
        _ = try await phone.evaluate("touchsync.view.zoom = 1; touchsync.view.ox = 0; touchsync.view.oy = 0; touchsync.requestRender(true)")
        let underFinger = try await phone.evaluate("touchsync.view.toBoard(100, 300)") as? [Double] ?? []
        try await phone.touch("touchStart", [(100, 300 + phoneTop, 0), (200, 300 + phoneTop, 1)])
        for step in 1...10 {
            let dx = Double(step) * 20
            try await phone.touch("touchMove", [(100 + dx, 300 + phoneTop + dx / 2, 0), (200 + dx, 300 + phoneTop + dx / 2, 1)])
        }
        try await phone.touch("touchEnd", [])
        try await phone.settled()
        let followed = try await phone.evaluate("touchsync.view.toScreen(\(underFinger[0]), \(underFinger[1]))") as? [Double] ?? []
        #expect(abs(followed[0] - 300) < 1 && abs(followed[1] - 400) < 1, "the board point first under the finger is under it after a 200 x 100 pan: \(followed)")
        // The same when the second finger lands after the first has moved (its stroke is cancelled, the pan starts there).
        try await phone.touch("touchStart", [(100, 300 + phoneTop, 0)])
        try await phone.touch("touchMove", [(110, 300 + phoneTop, 0)])
        let underSecond = try await phone.evaluate("touchsync.view.toBoard(110, 300)") as? [Double] ?? []
        try await phone.touch("touchStart", [(110, 300 + phoneTop, 0), (210, 300 + phoneTop, 1)])
        for step in 1...10 {
            let dx = Double(step) * 20
            try await phone.touch("touchMove", [(110 + dx, 300 + phoneTop, 0), (210 + dx, 300 + phoneTop, 1)])
        }
        try await phone.touch("touchEnd", [])
        try await phone.settled()
        let followedAgain = try await phone.evaluate("touchsync.view.toScreen(\(underSecond[0]), \(underSecond[1]))") as? [Double] ?? []
        #expect(abs(followedAgain[0] - 310) < 1 && abs(followedAgain[1] - 300) < 1, "still under the finger: \(followedAgain)")

        // Palm rejection: right after a pen stroke, a finger on the desktop's screen pans instead of drawing.
        let desktopUser = try await desktop.evaluate("touchsync.user") as? String ?? ""
        try await desktop.drag(from: (300, 200), steps: 6, pointerType: "pen", force: 0.6)
        let panBefore = try await desktop.number("touchsync.view.ox")
        try await desktop.touch("touchStart", [(500, 500, 0)])
        for step in 1...5 { try await desktop.touch("touchMove", [(500 + Double(step) * 20, 500, 0)]) }
        try await desktop.touch("touchEnd", [])
        try await desktop.settled()
        let panAfter = try await desktop.number("touchsync.view.ox")
        let drawn = try await rig.hubBoard("phone").acceptedStrokes.filter { $0.owner.rawValue == desktopUser }.count
        #expect(drawn == 2 && panAfter - panBefore == 100, "the pen drew, the palm panned: \(drawn) strokes, pan \(panBefore) to \(panAfter)")

        // Resizes and a rotation: the canvas keeps filling the window.
        for (width, height, scale) in [(1280, 500, 1.0), (700, 900, 2.0), (844, 390, 3.0)] {
            try await phone.resize(width: width, height: height, deviceScaleFactor: scale, mobile: true)
            try await phone.waitFor(
                """
                (() => { const c = document.getElementById('board'), r = c.getBoundingClientRect();
                  return r.bottom === innerHeight && r.right === innerWidth && c.width === Math.round(r.width * devicePixelRatio)
                    && c.height === Math.round(r.height * devicePixelRatio); })()
                """, timeout: .seconds(5))
        }
        #expect(rig.browser.console.filter { $0.hasPrefix("exception") }.isEmpty, "\(rig.browser.console)")
    }

    /// A board the gateway refuses shows why once and stops trying; a board
    /// name the hub accepts in any script opens and draws.
    @Test func refusedBoardsSayWhyAndUnicodeNamesOpen() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let link = try LinkEmulator(targetPort: rig.webPort, oneWayDelay: .milliseconds(1))
        defer { link.stop() }
        let tooLong = String(repeating: "b", count: 129)
        let refused = try await rig.open(tooLong, via: "http://127.0.0.1:\(link.port)", drawing: false)
        try await refused.waitFor("window.touchsync && touchsync.ended !== null")
        let connectionsWhenRefused = link.connections
        try await Task.sleep(for: .seconds(3))
        let sockets = try await refused.number("touchsync.sockets")
        #expect(sockets == 1 && link.connections == connectionsWhenRefused, "one WebSocket, no retries: \(sockets) sockets, connections \(connectionsWhenRefused) then \(link.connections)")
        let banner = try await refused.evaluate("(() => { const b = document.getElementById('banner'); return b.hidden ? '' : b.textContent; })()") as? String
        #expect(banner?.contains("128 bytes") == true, "the reason is shown: \(banner ?? "nothing")")

        let unicode = try await rig.open("白板 ✏️")
        try await unicode.drag(from: (300, 300))
        try await unicode.settled()
        let hub = try await rig.hubBoard("白板 ✏️")
        #expect(hub.acceptedStrokes.count == 1)
    }

    /// Colour and name are a person's, not a tab's: two tabs of one browser
    /// draw in one colour under one name, a colour or name chosen in one tab
    /// reaches the other, and a reload keeps them; another person (another
    /// browser profile) has their own. The users list shows names and colours.
    @Test func colourAndNameArePerPerson() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let a = try await rig.open("people")
        let b = try await rig.open("people")
        try await a.drag(from: (200, 200))
        try await b.drag(from: (200, 400))
        try await a.settled()
        try await b.settled()
        var hub = try await rig.hubBoard("people")
        #expect(Set(hub.acceptedStrokes.map(\.owner)).count == 2, "two tabs, two sessions at the hub")
        #expect(Set(hub.acceptedStrokes.map(\.style.rgba)).count == 1, "one person, one colour")
        let names = [try await a.evaluate("touchsync.name") as? String, try await b.evaluate("touchsync.name") as? String]
        #expect(names[0] != nil && names[0] == names[1], "one person, one name, before the prompt was answered: \(names)")

        // A colour and a name chosen in tab B: tab A follows, and so does a reload of A.
        let other = try await b.evaluate("touchsync.PALETTE.find(c => c !== touchsync.colour)") as? Int ?? 0
        _ = try await b.evaluate("document.querySelector('#palette button[data-rgba=\"\(other)\"]').click()")
        _ = try await b.evaluate("document.getElementById('name-input').value = 'Ana'; document.getElementById('name-form').requestSubmit()")
        try await a.waitFor("touchsync.colour === \(other) && touchsync.users.filter(u => u.name === 'Ana').length === 2")
        try await a.drag(from: (200, 600))
        try await a.settled()
        hub = try await rig.hubBoard("people")
        #expect(hub.acceptedStrokes.last?.style.rgba == UInt32(other), "A draws in the colour chosen in B")
        let labels = try await a.evaluate("[...document.querySelectorAll('#users li')].map(li => li.textContent)") as? [String] ?? []
        #expect(labels.contains("Ana") && labels.contains("Ana (you)"), "\(labels)")
        _ = try await a.evaluate("window.beforeReload = true; location.reload()")
        try await a.waitFor("!window.beforeReload && window.touchsync && touchsync.user !== null && touchsync.board.synced")
        #expect(try await a.number("touchsync.colour") == Double(other), "a reload keeps the colour")
        #expect(try await a.evaluate("document.getElementById('name-dialog').hidden") as? Bool == true, "and does not ask the name again")

        // Another person's browser: its own colour and name, kept across its visits.
        let person = try await rig.browser.newPerson()
        let c = try await rig.open("people", person: person)
        let cColour = try await c.number("touchsync.colour")
        #expect(try await c.evaluate("touchsync.name") as? String != "Ana")
        _ = try await c.evaluate("window.beforeReload = true; location.reload()")
        try await c.waitFor("!window.beforeReload && window.touchsync && touchsync.user !== null && touchsync.board.synced")
        #expect(try await c.number("touchsync.colour") == cColour, "kept across visits")
    }

    /// Through a 100 ms round trip, your stroke never vanishes, drawn with a
    /// mouse, a pen (with pressure) or a finger on a phone (390x844, touch):
    /// while you draw, every point drawn so far is inked in the frame after
    /// each move (the hub's echo arriving meanwhile changes nothing), and in
    /// every frame from the release until the hub's accepted stroke has taken
    /// the local ink's place and some frames after, the stroke's points stay inked.
    @Test(arguments: ["mouse", "pen", "touch"])
    func ownInkNeverVanishesWhenTheHubsStrokeTakesItsPlace(pointer kind: String) async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let link = try LinkEmulator(targetPort: rig.webPort, oneWayDelay: .milliseconds(50))
        defer { link.stop() }
        let phone = kind == "touch"
        let page = try await rig.open(
            "no-flicker", via: "http://127.0.0.1:\(link.port)", width: phone ? 390 : 1280, height: phone ? 844 : 800, scale: phone ? 3 : 1,
            mobile: phone)
        let top = try await page.canvasTop()
        /// One input event of this kind at board point (x, y): "down", "move" or "up".
        func input(_ what: String, _ point: (x: Double, y: Double)) async throws {
            if phone {
                let type = ["down": "touchStart", "move": "touchMove", "up": "touchEnd"][what]!
                try await page.touch(type, what == "up" ? [] : [(x: point.x, y: top + point.y, id: 1)])
            } else {
                let type = ["down": "mousePressed", "move": "mouseMoved", "up": "mouseReleased"][what]!
                try await page.pointer(type, x: point.x, y: top + point.y, pointerType: kind, force: kind == "pen" ? 0.6 : nil)
            }
        }
        let (startX, stepX) = phone ? (40.0, 10.0) : (150.0, 12.0)
        var points: [(x: Double, y: Double)] = [(startX, 300)]
        try await input("down", points[0])
        for step in 1...30 {
            let point = (x: startX + Double(step) * stepX, y: 300 + 60 * sin(Double(step) / 5))
            points.append(point)
            try await input("move", point)
            let list = points.map { "[\($0.x), \($0.y)]" }.joined(separator: ",")
            // From the frame after the page has the move (Chromium hands touch moves over at the
            // next animation frame, mouse and pen ones at once): the page's part, not the browser's.
            let missing = try await page.evaluate(
                """
                new Promise(arrived => {
                  const has = () => [...touchsync.local.values()].some(stroke => stroke.points.length >= \(points.count));
                  const look = () => has() ? arrived() : requestAnimationFrame(look);
                  look();
                }).then(() => touchsync.nextFrame()).then(() => [\(list)].filter(([x, y]) => touchsync.pixelAt(x, y)[3] === 0).length)
                """) as? Int ?? -1
            #expect(missing == 0, "move \(step): \(missing) of \(points.count) points not inked")
        }
        try await input("up", points.last!)
        // Every frame from the release until 10 frames after the hub's stroke took the local ink's place.
        let sampled = [points[3], points[15], points[29]].map { "[\($0.x), \($0.y)]" }.joined(separator: ",")
        let watch = try await page.evaluate(
            """
            new Promise(resolve => {
              let frames = 0, misses = 0, after = 0;
              const look = () => {
                frames++;
                misses += [\(sampled)].filter(([x, y]) => touchsync.pixelAt(x, y)[3] === 0).length;
                const handedOver = touchsync.finished.length === 0 && touchsync.board.accepted.length === 1;
                if (handedOver) after++;
                if (after >= 10 || frames > 600) resolve({ frames, misses, after }); else requestAnimationFrame(look);
              };
              requestAnimationFrame(look);
            })
            """) as? [String: Int] ?? [:]
        #expect(watch["after"] == 10 && watch["misses"] == 0, "the stroke stayed on screen through the hand-over: \(watch)")
        #expect((watch["frames"] ?? 0) > 10, "watched over the round trip: \(watch)")
        try await page.keepScreenshot("own-ink-\(kind)")
    }

    /// Presence: a mouse hovering over one page is an arrow with the person's
    /// name and colour on the other page, where it points on the board; when
    /// it leaves the board, or the page closes, the arrow goes.
    @Test func othersPointersAreShownWithTheirNames() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let ann = try await rig.open("presence")
        let ben = try await rig.open("presence", person: try await rig.browser.newPerson())
        _ = try await ann.evaluate(
            "document.getElementById('name-input').value = 'Ann'; document.getElementById('name-form').requestSubmit()")
        let top = try await ann.canvasTop()
        try await ann.hover(x: 400, y: top + 300)
        try await ann.hover(x: 420, y: top + 310)
        try await ben.waitFor("[...touchsync.cursors.values()].some(c => c.name === 'Ann' && Math.abs(c.x - 420) < 1 && Math.abs(c.y - 310) < 1)")
        // Ben's view is panned: the arrow is where the board point is on his screen, in Ann's colour.
        _ = try await ben.evaluate("touchsync.view.panBy(-100, -50); touchsync.requestRender(true)")
        let annColour = try await ann.number("touchsync.colour")
        let benTop = try await ben.canvasTop()
        let pixel = try await ben.inkAfterNextFrame(x: 320 + 2, y: benTop + 260 + 8)
        let expected = [Int(annColour) >> 24 & 255, Int(annColour) >> 16 & 255, Int(annColour) >> 8 & 255]
        #expect(pixel[3] > 200 && zip(pixel.prefix(3), expected).allSatisfy { abs($0 - $1) < 30 }, "the arrow in Ann's colour: \(pixel), \(expected)")
        #expect(try await ann.number("touchsync.cursors.size") == 0, "Ann does not see her own pointer")

        try await ann.hover(x: 400, y: top - 20)  // onto the toolbar: off the board
        try await ben.waitFor("touchsync.cursors.size === 0")
        try await ann.hover(x: 500, y: top + 300)
        try await ben.waitFor("touchsync.cursors.size === 1")
        try await ann.close()
        try await ben.waitFor("touchsync.cursors.size === 0")
    }

    /// The laser pointer is a red trail on every page that fades within a
    /// second and never becomes ink; clicking a name follows that person's
    /// view (their zoom and pan), and Esc stops following.
    @Test func aLaserFadesAndFollowingShowsAnotherView() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let ann = try await rig.open("laser")
        let ben = try await rig.open("laser", person: try await rig.browser.newPerson())
        let annUser = try await ann.evaluate("touchsync.user") as? String ?? ""
        let top = try await ann.canvasTop()
        try await ann.press(key: "l", code: "KeyL")
        #expect(try await ann.evaluate("document.getElementById('laser').classList.contains('on')") as? Bool == true, "L is the laser")
        try await ann.pointer("mousePressed", x: 300, y: top + 300)
        for step in 1...12 { try await ann.pointer("mouseMoved", x: 300 + Double(step) * 20, y: top + 300) }
        // The pixel read below is at x = 500: wait for the trail to have passed it (a loaded run once read it
        // when only the first points had arrived).
        try await ben.waitFor("touchsync.lasers.size === 1 && [...touchsync.lasers.values()][0].some(p => p.x >= 520)")
        let benTop = try await ben.canvasTop()
        let red = try await ben.inkAfterNextFrame(x: 500, y: benTop + 300)
        #expect(red[0] > 150 && red[1] < 120 && red[3] > 100, "a red trail on Ben's page: \(red)")
        try await ben.keepScreenshot("laser")
        try await ann.pointer("mouseReleased", x: 540, y: top + 300)
        try await ben.waitFor("touchsync.lasers.size === 0", timeout: .seconds(5))
        #expect(try await ben.inkAfterNextFrame(x: 500, y: benTop + 300)[3] == 0, "faded away")
        try await ann.settled()
        #expect(try await rig.hubBoard("laser").acceptedStrokes.isEmpty, "the laser drew no ink")

        // Ben follows Ann: her zoom and pan become his view.
        try await ben.waitFor("[...document.querySelectorAll('#users li')].some(li => li.dataset.user === '\(annUser)')")
        _ = try await ben.evaluate("document.querySelector('#users li[data-user=\"\(annUser)\"]').click()")
        #expect(try await ben.evaluate("touchsync.following") as? String == annUser)
        try await ann.press(key: "p", code: "KeyP")
        try await ann.hover(x: 640, y: top + 300)
        try await ann.wheel(x: 640, y: top + 300, deltaY: -300, modifiers: 2)
        try await ann.wheel(x: 640, y: top + 300, deltaX: 120, deltaY: 80)
        let annView = try await ann.evaluate("touchsync.view.visible(touchsync.renderer.width, touchsync.renderer.height)") as? [Double] ?? []
        try await ben.waitFor(
            "(v => Math.abs(v[0] - \(annView[0])) < 2 && Math.abs(v[1] - \(annView[1])) < 2 && Math.abs(v[2] - \(annView[2])) < 2)"
                + "(touchsync.view.visible(touchsync.renderer.width, touchsync.renderer.height))")
        try await ben.press(key: "Escape", code: "Escape")
        #expect(try await ben.evaluate("touchsync.following === null") as? Bool == true, "Esc stops following")
        let benZoom = try await ben.number("touchsync.view.zoom")
        try await ann.wheel(x: 640, y: top + 300, deltaY: 300, modifiers: 2)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await ben.number("touchsync.view.zoom") == benZoom, "no longer following")
        try await ben.keepScreenshot("following")
    }

    /// Dark mode follows the system: the board and toolbar turn dark, black
    /// ink is drawn light on it (the hub keeps the colour the person chose),
    /// and the PNG export keeps the board's own colours.
    @Test func darkModeFollowsTheSystem() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let page = try await rig.open("dark")
        try await page.send("Emulation.setEmulatedMedia", ["features": [["name": "prefers-color-scheme", "value": "dark"]]])
        _ = try await page.evaluate("document.querySelector('#palette button[data-rgba=\"\(0x2121_21FF)\"]').click()")
        let top = try await page.canvasTop()
        try await page.drag(from: (300, 300), steps: 10)
        try await page.settled()
        try await page.waitFor("touchsync.board.accepted.length === 1")
        let png = try await page.screenshot()
        let background = try await page.screenshotPixel(x: 900, y: 600, png: png)
        let bar = try await page.screenshotPixel(x: 600, y: Int(top / 2), png: png)
        #expect(background.allSatisfy { $0 < 40 } && bar.allSatisfy { $0 < 60 }, "a dark board and toolbar: \(background) \(bar)")
        let ink = try await page.inkAfterNextFrame(x: 300 + 5 * 15, y: 300 + 25)
        #expect(ink[3] > 0 && ink[0] > 180 && ink[1] > 180, "black ink is drawn light: \(ink)")
        #expect(try await rig.hubBoard("dark").acceptedStrokes.first?.style.rgba == 0x2121_21FF, "the hub keeps the chosen colour")
        let svg = try await page.evaluate("touchsync.exportSVG()") as? String ?? ""
        #expect(svg.contains("fill=\"white\"") && svg.contains("fill=\"#212121\""), "the export keeps the board's colours")
        try await page.keepScreenshot("dark")
    }

    /// A first visit (a fresh browser profile) asks for a name, but drawing
    /// takes the keyboard: the prompt steps aside and every shortcut works
    /// from the first stroke (E does not type into the name, Ctrl-Z undoes).
    @Test func shortcutsWorkFromAFirstVisitsFirstStroke() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let page = try await rig.open("first-visit", drawing: false, person: try await rig.browser.newPerson())
        try await page.waitFor("window.touchsync && touchsync.user !== null && touchsync.board.synced")
        #expect(try await page.evaluate("document.activeElement.id") as? String == "name-input", "a first visit asks for a name")
        let asked = try await page.evaluate("document.getElementById('name-input').value") as? String ?? ""
        try await page.drag(from: (300, 300), steps: 8)
        try await page.settled()
        try await page.waitFor("touchsync.board.accepted.length === 1")
        #expect(try await page.evaluate("document.activeElement.id") as? String == "board", "the board has the keyboard")
        #expect(try await page.evaluate("document.getElementById('name-dialog').hidden") as? Bool == true, "the prompt stepped aside")
        try await page.press(key: "e", code: "KeyE")
        #expect(try await page.evaluate("document.getElementById('eraser').classList.contains('on')") as? Bool == true, "E is the eraser")
        #expect(try await page.evaluate("document.getElementById('name-input').value") as? String == asked, "E typed nothing into the name")
        try await page.press(key: "z", code: "KeyZ", modifiers: 2)
        try await page.waitFor("touchsync.board.accepted.length === 0")
        #expect(rig.browser.console.filter { $0.hasPrefix("exception") }.isEmpty, "\(rig.browser.console)")
    }

    /// Keyboard: Ctrl-Z hides your stroke in the next frame (before the hub
    /// answers, through a 100 ms round trip), Ctrl-Shift-Z and Ctrl-Y redo, E is the eraser.
    @Test func shortcutsActAtOnce() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let link = try LinkEmulator(targetPort: rig.webPort, oneWayDelay: .milliseconds(50))
        defer { link.stop() }
        let page = try await rig.open("keys", via: "http://127.0.0.1:\(link.port)")
        try await page.drag(from: (300, 300), steps: 10)
        try await page.settled()
        try await page.waitFor("touchsync.board.accepted.length === 1 && touchsync.finished.length === 0")
        let (x, y) = (300.0 + 5 * 15, 300.0 + 25)
        #expect(try await page.inkAfterNextFrame(x: x, y: y)[3] > 0)

        try await page.press(key: "z", code: "KeyZ", modifiers: 2)
        #expect(try await page.inkAfterNextFrame(x: x, y: y)[3] == 0, "undone in the next frame")
        #expect(try await page.number("touchsync.board.accepted.length") == 1, "before the hub's diff arrived")
        try await page.waitFor("touchsync.board.accepted.length === 0")
        try await page.press(key: "Z", code: "KeyZ", modifiers: 2 | 8)
        #expect(try await page.inkAfterNextFrame(x: x, y: y)[3] > 0, "redone in the next frame")
        try await page.waitFor("touchsync.board.accepted.length === 1")
        try await page.settled()
        try await page.press(key: "z", code: "KeyZ", modifiers: 2)
        try await page.waitFor("touchsync.board.accepted.length === 0")
        try await page.press(key: "y", code: "KeyY", modifiers: 2)
        try await page.waitFor("touchsync.board.accepted.length === 1")
        try await page.settled()
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await page.inkAfterNextFrame(x: x, y: y)[3] > 0, "on screen after the hub agreed")

        try await page.press(key: "e", code: "KeyE")
        #expect(try await page.evaluate("document.getElementById('eraser').classList.contains('on')") as? Bool == true)
        try await page.pointer("mousePressed", x: x, y: y)
        try await page.pointer("mouseReleased", x: x, y: y)
        #expect(try await page.inkAfterNextFrame(x: x, y: y)[3] == 0, "erased in the next frame")
        try await page.waitFor("touchsync.board.accepted.length === 0")
        try await page.press(key: "?", code: "Slash", modifiers: 8)
        #expect(try await page.evaluate("!document.getElementById('help-overlay').hidden") as? Bool == true, "? lists the shortcuts")
        #expect(rig.browser.console.filter { $0.hasPrefix("exception") }.isEmpty, "\(rig.browser.console)")
    }

    /// Tabs share the gateway's few agent threads: 40 tabs welcomed (each an
    /// agent of the hub, each drawing a stroke) add fewer than 8 threads to
    /// the gateway process (before, each tab's agent had a thread of its own).
    @Test func tabsShareAFewThreads() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let gateway = try #require(rig.webProcess).processIdentifier
        func threads() throws -> Int { try FileManager.default.contentsOfDirectory(atPath: "/proc/\(gateway)/task").count }
        let page = try await rig.open("crowd")
        let before = try threads()
        let drawn = try await page.evaluate(
            """
            (async () => {
              const url = location.origin.replace('http', 'ws') + '/ws';
              const tabs = await Promise.all([...Array(40).keys()].map(i => new Promise((resolve, reject) => {
                const ws = new WebSocket(url);
                ws.onopen = () => ws.send(JSON.stringify({ t: 'hello', board: 'crowd', name: 'tab ' + i }));
                ws.onmessage = e => {
                  const m = JSON.parse(e.data);
                  if (m.t === 'welcome') {
                    ws.send(JSON.stringify({ t: 'touch', n: 1, phase: 'began', id: 1, s: [[10 + i, 10, 1]] }));
                    ws.send(JSON.stringify({ t: 'touch', n: 2, phase: 'ended', id: 1, s: [[20 + i, 20, 2]] }));
                  }
                  if (m.t === 'ack' && m.n === 2) resolve(ws);
                  if (m.t === 'error') reject(m.message);
                };
              })));
              return tabs.length;
            })()
            """) as? Int
        #expect(drawn == 40, "every tab drew and was acknowledged")
        let after = try threads()
        print("gateway threads: \(before) before, \(after) with 40 more tabs")
        #expect(after - before < 8, "\(after - before) threads more for 40 tabs")
        try await page.waitFor("touchsync.board.accepted.length === 40")
    }

    /// A board whose last tab left is let go after the grace
    /// (`--idle-board-seconds`): the gateway no longer follows it (its
    /// subscriber and replica go); it comes back whole when a tab opens it
    /// again, and other boards are not disturbed.
    @Test func idleBoardsAreLetGo() async throws {
        let rig = try await WhiteboardRig(webArguments: ["--idle-board-seconds", "1"])
        defer { rig.close() }
        let stays = try await rig.open("stays")
        let passing = try await rig.open("passing")
        try await passing.drag(from: (200, 200))
        try await passing.settled()
        let followed = "fetch('/api/boards').then(r => r.json()).then(list => list.find(b => b.board === 'passing')?.followed)"
        #expect(try await stays.evaluate(followed) as? Bool == true)
        try await passing.close()
        try await stays.waitFor("\(followed).then(f => f === false)", timeout: .seconds(8))
        try await stays.drag(from: (300, 300))
        try await stays.settled()
        let again = try await rig.open("passing")
        try await again.waitFor("touchsync.board.accepted.length === 1")
    }
}
