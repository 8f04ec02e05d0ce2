import Testing
import TouchSyncCore

/// The seed app's behaviour, step by step.
@Suite("Stroke semantics")
struct SemanticsTests {
    var board = BoardState()
    var diffs: [StrokeDiff] = []

    mutating func send(_ user: UserNamespace, _ changes: [TouchChange], alive: [TouchID]? = nil) throws {
        diffs = []
        try board.reduce(TouchFrame(changes: changes, aliveTouches: alive), from: user, style: .default, into: &diffs)
    }

    @Test mutating func beganMovedEndedAcceptsTheStroke() throws {
        try send(alice, [TouchChange(touch: 5, phase: .began, samples: [sample(0, 0, t: 0)])])
        #expect(diffs == [
            .began(StrokeID(1), owner: alice, touch: 5, style: .default),
            .appended(StrokeID(1), offset: 0, samples: [sample(0, 0, t: 0)]),
        ])
        #expect(board.touches[alice] == [5: StrokeID(1)])
        #expect(board.touchSpots == [TouchSpot(owner: alice, touch: 5, stroke: StrokeID(1), x: 0, y: 0)])

        let coalesced = [sample(1, 1, t: 1), sample(2, 2, t: 2)]
        try send(alice, [TouchChange(touch: 5, phase: .moved, samples: coalesced)])
        #expect(diffs == [.appended(StrokeID(1), offset: 1, samples: coalesced)])
        #expect(board.touchSpots.map(\.x) == [2])  // the spot follows the finger

        try send(alice, [TouchChange(touch: 5, phase: .ended, samples: [sample(3, 3, t: 3)])])
        #expect(diffs == [
            .appended(StrokeID(1), offset: 3, samples: [sample(3, 3, t: 3)]), .accepted(StrokeID(1), position: 1),
        ])
        #expect(board.activeStrokes.isEmpty && board.touches.isEmpty && board.touchSpots.isEmpty)
        #expect(board.acceptedStrokes.map(\.samples.count) == [4])
    }

    @Test mutating func cancelAbandonsThePath() throws {
        try send(alice, [TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0)])])
        try send(alice, [TouchChange(touch: 1, phase: .cancelled)])
        #expect(diffs == [.cancelled(StrokeID(1))])
        #expect(board.activeStrokes.isEmpty && board.acceptedStrokes.isEmpty)
    }

    @Test mutating func predictedTailIsReplacedAndNeverAccepted() throws {
        let guess = [sample(10, 10, t: 10), sample(20, 20, t: 20)]
        try send(alice, [TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0)], predicted: guess)])
        #expect(board.activeStrokes[StrokeID(1)]?.predicted == guess)
        try send(alice, [TouchChange(touch: 1, phase: .moved, samples: [sample(5, 5, t: 5)], predicted: [sample(9, 9, t: 9)])])
        #expect(diffs.last == .predicted(StrokeID(1), samples: [sample(9, 9, t: 9)]))
        // A change with no prediction clears the old guess.
        try send(alice, [TouchChange(touch: 1, phase: .stationary)])
        #expect(diffs == [.predicted(StrokeID(1), samples: [])])
        try send(alice, [TouchChange(touch: 1, phase: .moved, samples: [sample(6, 6, t: 6)], predicted: guess)])
        try send(alice, [TouchChange(touch: 1, phase: .ended)])
        #expect(board.acceptedStrokes[0].predicted.isEmpty)
        #expect(board.acceptedStrokes[0].samples == [sample(0, 0, t: 0), sample(5, 5, t: 5), sample(6, 6, t: 6)])
    }

    @Test mutating func estimatedValuesAreAmended() throws {
        try send(alice, [TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0, estimation: 77)])])
        var final = sample(0, 0, t: 0)
        final.force = 900
        final.flags = [.hasForce]
        final.estimationIndex = 77
        try send(alice, [TouchChange(touch: 1, phase: .moved, samples: [sample(1, 1, t: 1)], amendments: [final])])
        #expect(diffs.contains(.amended(StrokeID(1), offset: 0, sample: final)))
        #expect(board.activeStrokes[StrokeID(1)]?.samples[0].force == 900)
    }

    @Test mutating func clearKeepsStrokesInProgress() throws {
        try send(alice, [TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0)])])
        try send(alice, [TouchChange(touch: 1, phase: .ended)])
        try send(bob, [TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0)])])
        try send(bob, [TouchChange(touch: 1, phase: .ended)])
        try send(alice, [TouchChange(touch: 2, phase: .began, samples: [sample(0, 0, t: 0)])])

        diffs = []
        board.clear(.own, by: bob, into: &diffs)
        #expect(diffs == [.cleared(owner: bob)])
        #expect(board.acceptedStrokes.map(\.owner) == [alice])
        board.clear(.board, by: bob, into: &diffs)
        #expect(board.acceptedStrokes.isEmpty)
        #expect(board.activeStrokes.count == 1)  // alice's touch 2 is still being drawn
    }

    @Test mutating func touchesAreNamespacedByUserAndIdsAreReused() throws {
        // Both users use touch id 1 at once: two strokes, neither can touch the other's.
        try send(alice, [TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0)])])
        try send(bob, [TouchChange(touch: 1, phase: .began, samples: [sample(9, 9, t: 0)])])
        try send(bob, [TouchChange(touch: 1, phase: .ended)])
        #expect(board.acceptedStrokes.map(\.owner) == [bob])
        #expect(board.touches[alice] == [1: StrokeID(1)])
        // bob reuses id 1 after it ended.
        try send(bob, [TouchChange(touch: 1, phase: .began, samples: [sample(5, 5, t: 5)])])
        #expect(board.touches[bob] == [1: StrokeID(3)])
        #expect(board.orderedActiveStrokes.map(\.id) == [StrokeID(1), StrokeID(3)])
    }

    @Test mutating func touchesMissingFromTheAliveSetAreCancelled() throws {
        try send(alice, [
            TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0)]),
            TouchChange(touch: 2, phase: .began, samples: [sample(0, 0, t: 0)]),
            TouchChange(touch: 3, phase: .began, samples: [sample(0, 0, t: 0)]),
        ])
        try send(bob, [TouchChange(touch: 2, phase: .began, samples: [sample(0, 0, t: 0)])])
        // alice's agent lost the "ended" of touches 1 and 3.
        try send(alice, [TouchChange(touch: 2, phase: .moved, samples: [sample(1, 1, t: 1)])], alive: [2])
        #expect(diffs.suffix(2) == [.cancelled(StrokeID(1)), .cancelled(StrokeID(3))])
        #expect(board.touches[alice] == [2: StrokeID(2)])
        #expect(board.touches[bob] == [2: StrokeID(4)])  // another user's touches are untouched
        try send(alice, [], alive: [])
        #expect(board.touches[alice] == nil)
    }

    @Test mutating func silentAgentHasItsTouchesCancelled() throws {
        try send(alice, [
            TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0)]),
            TouchChange(touch: 2, phase: .began, samples: [sample(0, 0, t: 0)]),
        ])
        diffs = []
        board.cancelTouches(of: alice, into: &diffs)
        #expect(diffs == [.cancelled(StrokeID(1)), .cancelled(StrokeID(2))])
        #expect(board.activeStrokes.isEmpty)
    }
}
