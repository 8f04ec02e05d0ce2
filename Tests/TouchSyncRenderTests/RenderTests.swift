import Foundation
import Testing
import TouchSyncCore
import TouchSyncRender

@Suite("Rendering")
struct RenderTests {
    /// A known scene: alice's red stroke accepted first, then bob's tap (in the default purple);
    /// carol's blue stroke in progress with a prediction. The SVG has the
    /// accepted strokes solid in acceptance order, the one in progress at
    /// half opacity, its predicted tail fainter, and a gray spot at carol's finger.
    @Test func knownSceneHasTheExpectedStrokesInOrderAndColour() throws {
        var board = BoardState()
        var diffs: [StrokeDiff] = []
        let red = StrokeStyle(rgba: 0xFF00_00FF, width: 8 * UInt32(Sample.unitsPerPoint))
        let blue = StrokeStyle(rgba: 0x0000_FF80, width: 2 * UInt32(Sample.unitsPerPoint))
        func points(_ coordinates: [(Double, Double)], from time: Double) throws -> [Sample] {
            try coordinates.enumerated().map { index, point in
                try Sample(x: point.0, y: point.1, timestamp: time + Double(index) / 120)
            }
        }
        let alice = UserNamespace("alice"), bob = UserNamespace("bob"), carol = UserNamespace("carol")
        try board.reduce(TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: try points([(10, 10), (20, 15)], from: 0))]), from: alice, style: red, into: &diffs)
        try board.reduce(TouchFrame(changes: [TouchChange(touch: 1, phase: .moved, samples: try points([(30, 30), (40, 35)], from: 0.1))]), from: alice, style: red, into: &diffs)
        try board.reduce(TouchFrame(changes: [TouchChange(touch: 1, phase: .ended, samples: try points([(50, 50)], from: 0.2))]), from: alice, style: red, into: &diffs)
        try board.reduce(TouchFrame(changes: [TouchChange(touch: 7, phase: .began, samples: try points([(200, 200)], from: 0.3))]), from: bob, style: .default, into: &diffs)
        try board.reduce(TouchFrame(changes: [TouchChange(touch: 7, phase: .ended, samples: try points([(200, 200)], from: 0.31))]), from: bob, style: .default, into: &diffs)
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 3, phase: .began, samples: try points([(100, 100), (110, 120), (130, 125)], from: 0.4), predicted: try points([(150, 130)], from: 0.5))]),
            from: carol, style: blue, into: &diffs)
        _ = board.sealBatch(diffs, hubTime: 1)

        let svg = BoardRenderer().svg(of: board)
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        let accepted = try #require(section(svg, "accepted"))
        let inProgress = try #require(section(svg, "in-progress"))
        let touches = try #require(section(svg, "touches"))

        // Accepted: alice's red ink outline, then bob's tap as a round dot in the default purple.
        let aliceAt = try #require(accepted.range(of: "data-owner=\"alice\""))
        let bobAt = try #require(accepted.range(of: "data-owner=\"bob\""))
        #expect(aliceAt.lowerBound < bobAt.lowerBound)
        let alicePath = try #require(accepted.split(separator: "\n").first { $0.contains("alice") })
        #expect(alicePath.contains("fill=\"#ff0000\" fill-opacity=\"1\""))
        #expect(alicePath.contains(" Z\"") && alicePath.contains(" Q"), "a closed outline of curves")
        let bobPath = try #require(accepted.split(separator: "\n").first { $0.contains("bob") })
        #expect(bobPath.contains("fill=\"#6a1b9a\""))
        #expect(!accepted.contains("carol"))

        // In progress: carol's blue ink at half of its own alpha (0x80), the prediction fainter.
        #expect(inProgress.contains("class=\"in-progress\"") && inProgress.contains("fill=\"#0000ff\""))
        #expect(inProgress.contains("fill-opacity=\"0.25\""))
        #expect(inProgress.contains("class=\"predicted\"") && inProgress.contains("fill-opacity=\"0.13\""))
        #expect(!inProgress.contains("alice"))

        // One gray spot, 100 points across, at carol's latest real sample.
        #expect(touches.components(separatedBy: "<circle").count == 2)
        #expect(touches.contains("data-owner=\"carol\"") && touches.contains("cx=\"130\" cy=\"125\" r=\"50\""))
        #expect(svg.contains("fill=\"#d3d3d3\""))
    }

    @Test func emptyBoardAndCaptionAreValid() {
        var renderer = BoardRenderer()
        renderer.caption = "a <board> & more"
        let svg = renderer.svg(of: BoardState())
        #expect(svg.contains("a &lt;board&gt; &amp; more"))
        #expect(svg.hasSuffix("</svg>\n"))
        renderer.canvas = (1024, 768)
        #expect(renderer.svg(of: BoardState()).contains("width=\"1024\" height=\"796\""))  // the caption's band on top
        renderer.caption = nil
        #expect(renderer.svg(of: BoardState()).contains("width=\"1024\" height=\"768\""))
    }

    /// The caption sits in a band above the drawing: a stroke at the very top
    /// of the board (the demo's first strokes were under it) stays clear of its text.
    @Test func captionNeverCoversTheDrawing() throws {
        var board = BoardState()
        var diffs: [StrokeDiff] = []
        let wide = StrokeStyle(rgba: 0x0000_00FF, width: 10 * UInt32(Sample.unitsPerPoint))
        let samples = try (0..<20).map { try Sample(x: 5 + Double($0) * 30, y: 5, timestamp: Double($0) / 120) }
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: samples)]), from: UserNamespace("ann"), style: wide, into: &diffs)
        _ = board.sealBatch(diffs, hubTime: 1)
        var renderer = BoardRenderer()
        renderer.caption = "TouchSync demo: board \"demo\" at batch 842, digest 0b15ae6ab8ff6111"
        for canvas in [nil, (width: 800.0, height: 600.0)] as [(width: Double, height: Double)?] {
            renderer.canvas = canvas
            let svg = renderer.svg(of: board)
            let viewBox = try #require(attribute("viewBox", in: svg)).split(separator: " ").compactMap { Double($0) }
            let text = try #require(svg.range(of: "<text "))
            let baseline = try #require(attribute("y", in: String(svg[text.lowerBound...])).flatMap(Double.init))
            // 14-point text: its descenders end about 4 points below the baseline.
            let captionBottom = baseline + 4
            let strokeTop = 5.0 - 5 * (1 + InkOutline.thinning)  // the samples' y minus the widest half-width (pressure 1)
            #expect(captionBottom <= strokeTop, "caption bottom \(captionBottom), stroke top \(strokeTop)")
            #expect(viewBox[1] < baseline - 14, "the band is inside the picture: \(viewBox)")
        }
    }

    func attribute(_ name: String, in svg: String) -> String? {
        guard let start = svg.range(of: " \(name)=\"") else { return nil }
        guard let end = svg[start.upperBound...].firstIndex(of: "\"") else { return nil }
        return String(svg[start.upperBound..<end])
    }

    func section(_ svg: String, _ id: String) -> String? {
        guard let start = svg.range(of: "<g id=\"\(id)\"") else { return nil }
        guard let end = svg.range(of: "</g>", range: start.upperBound..<svg.endIndex) else { return nil }
        return String(svg[start.lowerBound..<end.upperBound])
    }
}

/// The ink outline the SVG renderer and the page draw (the page's copy is
/// compared with this one in Chromium: `BrowserInkTests`).
@Suite("Ink outlines")
struct InkOutlineTests {
    func line(force: Double?, msPerSample: Double = 8, count: Int = 30) -> [InkOutline.Point] {
        (0..<count).map { InkOutline.Point(x: Double($0) * 6, y: 0, time: Double($0) * msPerSample, pressure: force) }
    }

    /// Half the outline's height over the middle of a horizontal stroke.
    func halfWidth(_ points: [InkOutline.Point], width: Double) -> Double {
        let polygon = InkOutline.outline(points, width: width, complete: true)
        let middle = polygon.filter { $0.x > 60 && $0.x < 120 }
        return middle.map { abs($0.y) }.max() ?? 0
    }

    @Test func widthFollowsPressure() {
        let heavy = halfWidth(line(force: 1.0), width: 8)
        let light = halfWidth(line(force: 0.1), width: 8)
        #expect(abs(heavy - 4 * 1.6) < 0.01, "pressure 1: 1.6 times the nominal half-width, got \(heavy)")
        #expect(abs(light - 4 * (0.4 + 1.2 * 0.1)) < 0.01, "pressure 0.1, got \(light)")
        #expect(heavy > 3 * light)
    }

    @Test func aMouseIsThinnerWhenFaster() {
        let slow = halfWidth(line(force: nil, msPerSample: 40), width: 8)
        let fast = halfWidth(line(force: nil, msPerSample: 2), width: 8)
        #expect(slow > fast * 1.5, "slow \(slow), fast \(fast)")
    }

    /// Twelve samples on a circle: the centre line stays on the circle between
    /// them (a chord's midpoint would be 3.4 points inside).
    @Test func aCoarseCircleStaysRound() {
        let samples = (0...12).map { k -> InkOutline.Point in
            let angle = Double(k) * .pi / 6
            return InkOutline.Point(x: 100 * cos(angle), y: 100 * sin(angle), time: Double(k) * 16, pressure: 0.5)
        }
        let (centre, simulated) = InkOutline.centreLine(samples)
        #expect(!simulated)
        #expect(centre.count > 100, "subdivided between samples")
        let radii = centre.map { hypot($0.x, $0.y) }
        let chordMidpoint = 100 * (1 - cos(Double.pi / 12))  // 3.4 points inside the circle
        let inner = radii[centre.count / 12..<(centre.count - centre.count / 12)].map { abs($0 - 100) }.max() ?? 0
        let anywhere = radii.map { abs($0 - 100) }.max() ?? 0
        #expect(inner < 0.3, "between inner samples, off the circle by \(inner)")
        #expect(anywhere < chordMidpoint * 0.6, "at the ends (one neighbour missing), off by \(anywhere)")
    }

    @Test func outlinesAreClosedCurvesAndTapsAreDots() {
        let d = InkOutline.pathData(InkOutline.outline(line(force: 0.5), width: 4, complete: true))
        #expect(d.hasPrefix("M") && d.hasSuffix(" Z") && d.contains(" Q"))
        let tap = InkOutline.outline([InkOutline.Point(x: 10, y: 10, time: 0, pressure: 0.5)], width: 4, complete: true)
        #expect(tap.count == 16 && tap.allSatisfy { abs(hypot($0.x - 10, $0.y - 10) - 2) < 1e-9 })
        #expect(InkOutline.outline([], width: 4, complete: true).isEmpty)
    }
}
