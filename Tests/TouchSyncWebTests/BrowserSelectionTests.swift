import TestSupport
import WebTestSupport
import Foundation
import Testing
import TouchSyncBrowser
import TouchSyncCore

extension BrowserTests {
    /// Select and move ink as a person does it (issue 38, item 5): a marquee
    /// selects one of two strokes; dragging it moves it, the corner handle
    /// scales it, a colour recolours it, Ctrl-D copies it (the copy is then
    /// selected), Delete removes the copy, and undo and redo take the edits
    /// back and forth. After each step the hub's board is checked sample for
    /// sample, and another person's page shows the same board, in its
    /// replica and in pixels; that person cannot select the strokes (not
    /// theirs, not an admin).
    @Test func selectMoveScaleRecolourCopyAndDeleteInk() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let a = try await rig.page("select")
        let b = try await rig.page("select")
        try await a.drag(from: (100, 120))
        try await a.drag(from: (100, 330))
        try await a.settled()
        let drawn = try await rig.hubBoard("select")
        try #require(drawn.acceptedStrokes.count == 2)
        let (first, second) = (drawn.acceptedStrokes[0], drawn.acceptedStrokes[1])
        let top = try await a.number("document.getElementById('board').getBoundingClientRect().top")

        /// The hub's board once both pages show its latest batch (with `strokes` accepted strokes): A's
        /// messages acknowledged first, so the hub's board is read after A's last change, never before it.
        func agreed(strokes: Int) async throws -> BoardState {
            try await a.settled()
            let deadline = ContinuousClock.now + .seconds(10)
            while true {
                let hub = try await rig.hubBoard("select")
                if hub.acceptedStrokes.count == strokes {
                    try await a.waitFor("touchsync.board.seq === \(hub.sequence)")
                    try await b.waitFor("touchsync.board.seq === \(hub.sequence)")
                    #expect(try await PageBoard(b) == PageBoard(hub))
                    return hub
                }
                guard ContinuousClock.now < deadline else { throw TestFailure("the hub holds \(hub.acceptedStrokes.count) strokes, not \(strokes)") }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        func moved(_ stroke: Stroke, by dx: Int32, _ dy: Int32) -> [[Int32]] { stroke.samples.map { [$0.x + dx, $0.y + dy] } }
        func xy(_ stroke: Stroke?) -> [[Int32]] { stroke?.samples.map { [$0.x, $0.y] } ?? [] }
        func inked(_ page: BrowserPage, at point: (x: Double, y: Double)) async throws -> Bool {
            let png = try await page.screenshot()
            let pixel = try await page.screenshotPixel(x: Int(point.x.rounded()), y: Int((point.y + top).rounded()), png: png)
            return pixel.count == 3 && pixel != [255, 255, 255]
        }

        // V, then a marquee around the first stroke only.
        try await a.press(key: "v", code: "KeyV")
        try await a.pointer("mousePressed", x: 60, y: 80)
        try await a.pointer("mouseMoved", x: 200, y: 200)
        try await a.pointer("mouseMoved", x: 300, y: 260)
        try await a.pointer("mouseReleased", x: 300, y: 260)
        #expect(try await a.evaluate("[...touchsync.selection.ids]") as? [Int] == [Int(first.id.rawValue)])

        // Drag it 200 points right and 40 down.
        let middle = first.samples[5]
        let grab = (x: middle.xInPoints, y: middle.yInPoints + top)
        try await a.pointer("mousePressed", x: grab.x, y: grab.y)
        for step in 1...10 { try await a.pointer("mouseMoved", x: grab.x + Double(step) * 20, y: grab.y + Double(step) * 4) }
        try await a.pointer("mouseReleased", x: grab.x + 200, y: grab.y + 40)
        var hub = try await agreed(strokes: 2)
        #expect(xy(hub.acceptedStrokes.first { $0.id == first.id }) == moved(first, by: 200 * 64, 40 * 64), "every sample moved, in the hub's board")
        #expect(xy(hub.acceptedStrokes.first { $0.id == second.id }) == xy(second), "the other stroke stayed")
        #expect(hub.acceptedStrokes.map(\.id) == [first.id, second.id], "the moved stroke keeps its place")
        #expect(try await inked(b, at: (middle.xInPoints + 200, middle.yInPoints + 40)), "the other page draws it where it went")
        #expect(try await !inked(b, at: (middle.xInPoints, middle.yInPoints)), "and nothing where it was")

        // The corner handle: dragged twice as far from the box's top left, the stroke is twice as large.
        let box = try #require(try await a.evaluate("touchsync.selectionBounds()") as? [Double])
        let corner = (x: box[2], y: box[3] + top)
        try await a.pointer("mousePressed", x: corner.x, y: corner.y)
        try await a.pointer("mouseMoved", x: corner.x + (box[2] - box[0]) / 2, y: corner.y + (box[3] - box[1]) / 2)
        try await a.pointer("mouseReleased", x: corner.x + box[2] - box[0], y: corner.y + box[3] - box[1])
        hub = try await agreed(strokes: 2)
        let scaled = try #require(hub.acceptedStrokes.first { $0.id == first.id })
        let span = { (stroke: Stroke) in (stroke.samples.map(\.x).max()! - stroke.samples.map(\.x).min()!) }
        #expect(abs(Double(span(scaled)) / Double(span(first)) - 2) < 0.01, "twice as wide: \(span(scaled)) against \(span(first))")
        #expect(abs(try await a.number("touchsync.selectionBounds()[2] - touchsync.selectionBounds()[0]") - 2 * (box[2] - box[0])) < 8)

        // A colour recolours the selection (and becomes the pen's).
        let red = first.style.rgba == 0xE539_35FF ? 0x43A0_47FF : 0xE539_35FF  // a colour it does not have yet
        _ = try await a.evaluate("document.querySelector('#palette button[data-rgba=\"\(red)\"]').click()")
        try await a.settled()
        hub = try await agreed(strokes: 2)
        #expect(hub.acceptedStrokes.first { $0.id == first.id }?.style.rgba == UInt32(red))
        #expect(hub.acceptedStrokes.first { $0.id == second.id }?.style.rgba == second.style.rgba)

        // Ctrl-D copies it 16 points lower right: a third stroke of A's, selected once it arrives.
        try await a.press(key: "d", code: "KeyD", modifiers: 2)
        hub = try await agreed(strokes: 3)
        let copy = hub.acceptedStrokes[2]
        #expect(copy.owner == hub.acceptedStrokes[0].owner && copy.style.rgba == UInt32(red))
        #expect(xy(copy) == moved(scaled, by: 16 * 64, 16 * 64))
        try await a.waitFor("touchsync.selection.has(\(copy.id.rawValue)) && touchsync.selection.size === 1")
        // Delete removes the copy.
        try await a.press(key: "Delete", code: "Delete")
        hub = try await agreed(strokes: 2)
        #expect(!hub.acceptedStrokes.contains { $0.id == copy.id })

        // Undo: the delete (the copy is back), the copy (gone), the recolour; redo: the recolour again.
        try await a.press(key: "z", code: "KeyZ", modifiers: 2)
        hub = try await agreed(strokes: 3)
        try await a.press(key: "z", code: "KeyZ", modifiers: 2)
        hub = try await agreed(strokes: 2)
        try await a.press(key: "z", code: "KeyZ", modifiers: 2)
        try await a.settled()
        hub = try await agreed(strokes: 2)
        #expect(hub.acceptedStrokes.first { $0.id == first.id }?.style.rgba == first.style.rgba, "the recolour undone")
        #expect(xy(hub.acceptedStrokes.first { $0.id == first.id }) == xy(scaled), "the scale kept")
        try await a.press(key: "z", code: "KeyZ", modifiers: 10)
        try await a.settled()
        hub = try await agreed(strokes: 2)
        #expect(hub.acceptedStrokes.first { $0.id == first.id }?.style.rgba == UInt32(red), "the recolour redone")

        // The other person selects nothing of A's: not theirs, and not an admin.
        try await b.press(key: "v", code: "KeyV")
        try await b.pointer("mousePressed", x: 20, y: 70)
        try await b.pointer("mouseMoved", x: 900, y: 700)
        try await b.pointer("mouseReleased", x: 900, y: 700)
        #expect(try await b.number("touchsync.selection.size") == 0)
        #expect(try await a.evaluate("touchsync.refusals.length") as? Int == 0)
    }
}

extension BrowserTests {
    /// A lasso (Alt held while dragging with the select tool, issue 38):
    /// a triangle loop around one stroke selects it and not a second stroke
    /// that lies inside the loop's bounds (a marquee of those bounds would
    /// take both); while it is drawn the loop is tinted on screen; Delete
    /// then removes only the lassoed stroke at the hub.
    @Test func aLassoSelectsWhatAMarqueeCannotSingleOut() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let a = try await rig.page("lasso")
        try await a.drag(from: (100, 120))  // to (250, 220): x + y stays below 500
        try await a.drag(from: (300, 300))  // from x + y = 600: beyond the loop's long side
        try await a.settled()
        let drawn = try await rig.hubBoard("lasso")
        try #require(drawn.acceptedStrokes.count == 2)
        let (inner, outer) = (drawn.acceptedStrokes[0], drawn.acceptedStrokes[1])

        try await a.press(key: "v", code: "KeyV")
        let alt = 1
        let loop: [(Double, Double)] = [(60, 80), (240, 80), (420, 80), (240, 260), (60, 440), (60, 260)]  // the long side: x + y = 500
        try await a.pointer("mousePressed", x: loop[0].0, y: loop[0].1, modifiers: alt)
        for (x, y) in loop.dropFirst() { try await a.pointer("mouseMoved", x: x, y: y, modifiers: alt) }
        // While drawn: the loop's inside is tinted (a person sees what it will take).
        _ = try await a.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))")  // drawn
        let png = try await a.screenshot()
        let tint = try await a.screenshotPixel(x: 80, y: 300, png: png)
        #expect(tint.count == 3 && tint != [255, 255, 255] && tint[2] > tint[0], "inside the loop: \(tint)")
        try await a.keepScreenshot("lasso-drawn")
        try await a.pointer("mouseReleased", x: loop.last!.0, y: loop.last!.1, modifiers: alt)
        _ = try await a.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))")
        try await a.keepScreenshot("lasso-selected")
        #expect(try await a.evaluate("[...touchsync.selection.ids]") as? [Int] == [Int(inner.id.rawValue)])
        // The loop's bounds hold a sample of the other stroke: a marquee would have taken it.
        #expect(outer.samples.contains { $0.xInPoints >= 60 && $0.xInPoints <= 420 })

        try await a.press(key: "Delete", code: "Delete")
        try await a.settled()
        let deadline = ContinuousClock.now + .seconds(10)
        var hub = try await rig.hubBoard("lasso")
        while hub.acceptedStrokes.count != 1, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            hub = try await rig.hubBoard("lasso")
        }
        #expect(hub.acceptedStrokes.map(\.id) == [outer.id], "only the lassoed stroke deleted")
    }
}

extension BrowserTests {
    /// The select tool on a phone (390 x 844, touch): a finger draws a
    /// stroke, the toolbar's select button (on screen) is clicked, a tap on the stroke
    /// selects it, and a finger dragged from it moves it by as much at the
    /// hub, sample for sample.
    @Test func aFingerSelectsAndMovesInkOnAPhone() async throws {
        let rig = try await WhiteboardRig()
        defer { rig.close() }
        let phone = try await rig.open("select-phone", width: 390, height: 844, scale: 3, mobile: true)
        let top = try await phone.canvasTop()
        try await phone.touch("touchStart", [(60, top + 200, 1)])
        for step in 1...8 { try await phone.touch("touchMove", [(60 + Double(step) * 20, top + 200 + Double(step * step), 1)]) }
        try await phone.touch("touchEnd", [])
        try await phone.settled()
        let drawn = try #require(try await rig.hubBoard("select-phone").acceptedStrokes.first)

        let button = try #require(try await phone.evaluate(
            "(() => { const r = document.getElementById('select').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2, r.right]; })()")
            as? [Double])
        #expect(button[2] <= 390, "the select button is on screen")
        _ = try await phone.evaluate("document.elementFromPoint(\(button[0]), \(button[1])).closest('button').click()")  // a tap on what is there
        try await phone.waitFor("document.getElementById('select').classList.contains('on')")

        let sample = drawn.samples[4]
        let at = (x: sample.xInPoints, y: sample.yInPoints + top)
        try await phone.touch("touchStart", [(at.x, at.y, 3)])
        try await phone.touch("touchEnd", [])
        try await phone.waitFor("touchsync.selection.size === 1")
        try await phone.keepScreenshot("select-phone")
        try await phone.touch("touchStart", [(at.x, at.y, 4)])
        for step in 1...6 { try await phone.touch("touchMove", [(at.x + Double(step) * 10, at.y + Double(step) * 15, 4)]) }
        try await phone.touch("touchEnd", [])
        try await phone.settled()
        let hub = try await rig.hubBoard("select-phone")
        let moved = try #require(hub.acceptedStrokes.first { $0.id == drawn.id })
        #expect(moved.samples.map { [$0.x, $0.y] } == drawn.samples.map { [$0.x + 60 * 64, $0.y + 90 * 64] }, "moved 60 right and 90 down")
        #expect(hub.acceptedStrokes.count == 1)
    }
}
