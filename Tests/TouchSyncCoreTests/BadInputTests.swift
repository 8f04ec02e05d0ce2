import Testing
import TouchSyncCore

/// Bad input is refused with a typed error and changes nothing.
@Suite("Bad input")
struct BadInputTests {
    /// A board with alice drawing touch 1 (stroke 1) and one accepted stroke of bob's.
    static func board(limits: BoardLimits = BoardLimits()) throws -> BoardState {
        var board = BoardState(limits: limits)
        var diffs: [StrokeDiff] = []
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 100)])]), from: alice,
            style: .default, into: &diffs)
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0)])]), from: bob,
            style: .default, into: &diffs)
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .ended)]), from: bob, style: .default, into: &diffs)
        return board
    }

    func expectRefused(
        _ expected: TouchInputError, _ changes: [TouchChange], alive: [TouchID]? = nil, from user: UserNamespace = alice,
        limits: BoardLimits = BoardLimits(), sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        var board = try Self.board(limits: limits)
        let before = board
        let digest = board.digest
        var diffs: [StrokeDiff] = []
        #expect(throws: expected, sourceLocation: sourceLocation) {
            try board.reduce(TouchFrame(changes: changes, aliveTouches: alive), from: user, style: .default, into: &diffs)
        }
        #expect(diffs.isEmpty, sourceLocation: sourceLocation)
        #expect(board == before, sourceLocation: sourceLocation)
        #expect(board.digest == digest, sourceLocation: sourceLocation)
    }

    @Test func wrongPhaseOrder() throws {
        try expectRefused(.unknownTouch(9, .moved), [TouchChange(touch: 9, phase: .moved, samples: [sample(1, 1, t: 200)])])
        try expectRefused(.unknownTouch(9, .ended), [TouchChange(touch: 9, phase: .ended)])
        try expectRefused(.unknownTouch(9, .cancelled), [TouchChange(touch: 9, phase: .cancelled)])
        try expectRefused(.unknownTouch(9, .stationary), [TouchChange(touch: 9, phase: .stationary)])
        try expectRefused(.duplicateBegan(1), [TouchChange(touch: 1, phase: .began, samples: [sample(1, 1, t: 200)])])
        try expectRefused(
            .duplicateTouchInFrame(1),
            [TouchChange(touch: 1, phase: .moved, samples: [sample(1, 1, t: 200)]), TouchChange(touch: 1, phase: .ended)])
        try expectRefused(.missingSamples(4, .began), [TouchChange(touch: 4, phase: .began)])
        try expectRefused(.missingSamples(1, .moved), [TouchChange(touch: 1, phase: .moved)])
    }

    @Test func anotherUserCannotEndOrExtendATouch() throws {
        // bob uses alice's touch id 1: in bob's namespace it is not down.
        try expectRefused(.unknownTouch(1, .moved), [TouchChange(touch: 1, phase: .moved, samples: [sample(1, 1, t: 200)])], from: bob)
        try expectRefused(.unknownTouch(1, .ended), [TouchChange(touch: 1, phase: .ended)], from: bob)
        // bob's alive set cannot cancel alice's touch either.
        var board = try Self.board()
        var diffs: [StrokeDiff] = []
        try board.reduce(TouchFrame(changes: [], aliveTouches: []), from: bob, style: .default, into: &diffs)
        #expect(diffs.isEmpty)
        #expect(board.touches[alice] == [1: StrokeID(1)])
    }

    @Test func invalidValues() throws {
        let far = Sample.maxCoordinateUnits + 1
        try expectRefused(
            .invalidSample(1, .outOfRange(field: "x")), [TouchChange(touch: 1, phase: .moved, samples: [sample(far, 0, t: 200)])])
        try expectRefused(
            .invalidSample(1, .outOfRange(field: "y")),
            [TouchChange(touch: 1, phase: .moved, samples: [sample(0, 0, t: 200)], predicted: [sample(0, -far, t: 200)])])
        try expectRefused(
            .invalidSample(1, .timeWentBackwards), [TouchChange(touch: 1, phase: .moved, samples: [sample(0, 0, t: 50)])])
        try expectRefused(
            .invalidSample(1, .outOfRange(field: "timestamp")),
            [TouchChange(touch: 1, phase: .moved, samples: [sample(0, 0, t: 200), sample(0, 0, t: -1)])])
        var weird = sample(0, 0, t: 300)
        weird.flags = SampleFlags(rawValue: 0x80)
        try expectRefused(.invalidSample(1, .unknownFlags(0x80)), [TouchChange(touch: 1, phase: .moved, samples: [weird])])
        var moved = sample(0, 0, t: 100, estimation: 5)
        var board = BoardState()
        var diffs: [StrokeDiff] = []
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [moved])]), from: alice, style: .default,
            into: &diffs)
        moved.x = 64
        moved.flags = []
        let before = board
        #expect(throws: TouchInputError.invalidSample(1, .amendmentChangesLocation)) {
            try board.reduce(
                TouchFrame(changes: [TouchChange(touch: 1, phase: .stationary, amendments: [moved])]), from: alice,
                style: .default, into: &diffs)
        }
        #expect(board == before)
        var unflagged = sample(0, 0, t: 300)
        unflagged.force = 10
        try expectRefused(.invalidSample(1, .valueWithoutFlag(field: "force")), [TouchChange(touch: 1, phase: .moved, samples: [unflagged])])
        var twisted = sample(0, 0, t: 300)
        twisted.azimuth = .max
        twisted.flags = .hasAngles
        try expectRefused(.invalidSample(1, .outOfRange(field: "azimuth")), [TouchChange(touch: 1, phase: .moved, samples: [twisted])])
        try expectRefused(
            .unknownEstimationIndex(1, 5),
            [TouchChange(touch: 1, phase: .moved, samples: [sample(1, 1, t: 200)], amendments: [sample(0, 0, t: 100, estimation: 5)])])
    }

    @Test func nanAndInfinityNeverBecomeSamples() {
        #expect(throws: SampleError(.notFinite(field: "x"))) { try Sample(x: .nan, y: 0, timestamp: 0) }
        #expect(throws: SampleError(.notFinite(field: "y"))) { try Sample(x: 0, y: -.infinity, timestamp: 0) }
        #expect(throws: SampleError(.notFinite(field: "timestamp"))) { try Sample(x: 0, y: 0, timestamp: .nan) }
        #expect(throws: SampleError(.notFinite(field: "force"))) { try Sample(x: 0, y: 0, timestamp: 0, force: .infinity) }
        #expect(throws: SampleError(.notFinite(field: "azimuth"))) { try Sample(x: 0, y: 0, timestamp: 0, azimuth: .nan) }
        #expect(throws: SampleError(.outOfRange(field: "x"))) { try Sample(x: 2e6, y: 0, timestamp: 0) }
        #expect(throws: SampleError(.outOfRange(field: "timestamp"))) { try Sample(x: 0, y: 0, timestamp: -1) }
        #expect(throws: SampleError(.outOfRange(field: "force"))) { try Sample(x: 0, y: 0, timestamp: 0, force: -0.5) }
    }

    @Test func quantizationKeepsUIKitValues() throws {
        let value = try Sample(
            x: 100.5, y: -3.25, timestamp: 12.000125, force: 1.5, azimuth: 1.0, altitude: 0.5, coalesced: true,
            estimationIndex: 9)
        #expect(value.x == 6432 && value.y == -208 && value.time == 12_000_125)
        #expect(value.force == 1536)
        #expect(value.azimuth == 4096 && value.altitude == 2048)
        #expect(value.flags == [.coalesced, .hasForce, .hasAngles, .estimated])
        #expect(value.estimationIndex == 9)
        #expect(value.xInPoints == 100.5)
        #expect(value.validate() == nil)
    }

    @Test func limits() throws {
        var limits = BoardLimits()
        limits.maxLiveTouchesPerUser = 2
        try expectRefused(
            .tooManyTouches(limit: 2),
            [
                TouchChange(touch: 2, phase: .began, samples: [sample(0, 0, t: 0)]),
                TouchChange(touch: 3, phase: .began, samples: [sample(0, 0, t: 0)]),
            ], limits: limits)
        limits = BoardLimits()
        limits.maxSamplesPerStroke = 3
        try expectRefused(
            .strokeTooLong(1, limit: 3),
            [TouchChange(touch: 1, phase: .moved, samples: [sample(0, 0, t: 200), sample(0, 0, t: 201), sample(0, 0, t: 202)])],
            limits: limits)
        limits = BoardLimits()
        limits.maxSamplesPerFrame = 2
        try expectRefused(
            .frameTooLarge("samples", limit: 2),
            [TouchChange(touch: 1, phase: .moved, samples: [sample(0, 0, t: 200), sample(0, 0, t: 201), sample(0, 0, t: 202)])],
            limits: limits)
        try expectRefused(
            .frameTooLarge("predicted samples per touch", limit: 64),
            [TouchChange(touch: 1, phase: .moved, samples: [sample(0, 0, t: 200)], predicted: Array(repeating: sample(0, 0, t: 300), count: 65))])
        try expectRefused(
            .frameTooLarge("touch changes", limit: 64),
            (0..<65).map { TouchChange(touch: TouchID(100 + $0), phase: .began, samples: [sample(0, 0, t: 0)]) })

        // Ending one touch makes room for another in the same frame: the limit counts what is down afterwards.
        var board = try Self.board(limits: { var l = BoardLimits(); l.maxLiveTouchesPerUser = 1; return l }())
        var diffs: [StrokeDiff] = []
        try board.reduce(
            TouchFrame(changes: [
                TouchChange(touch: 1, phase: .ended), TouchChange(touch: 2, phase: .began, samples: [sample(0, 0, t: 500)]),
            ]), from: alice, style: .default, into: &diffs)
        #expect(board.touches[alice] == [2: StrokeID(3)])
    }

    @Test func errorsCarryStableCodesAndText() {
        #expect(TouchInputError.unknownTouch(3, .moved).code == .unknownTouch)
        #expect(TouchInputError.duplicateBegan(3).code == .phaseOrder)
        #expect(TouchInputError.invalidSample(3, .notFinite(field: "x")).code == .invalidValue)
        #expect(TouchInputError.tooManyTouches(limit: 20).description == "more than 20 touches down at once")
        #expect("\(TouchInputError.unknownTouch(3, .moved))" == "moved for touch 3, which is not down")
    }
}
