import PropertyChecks
import Testing
import TouchSyncCore
import TouchSyncSimulation

/// Edits of accepted strokes (the whiteboard's selection): what each does to
/// the board, that replicas follow them with the diffs they already know,
/// and that undo and redo take them back and forth with the user's strokes.
@Suite("Stroke edits")
struct StrokeEditTests {
    /// A board with one two-sample stroke each for alice, bob, alice (ids 1, 2, 3).
    private func threeStrokes() throws -> (BoardState, UndoHistory, [DiffBatch]) {
        var board = BoardState()
        var history = UndoHistory()
        var diffs: [StrokeDiff] = []
        for (index, user) in [alice, bob, alice].enumerated() {
            let touch = TouchID(index)
            let x = Int32(index * 640)
            try board.reduce(
                TouchFrame(changes: [TouchChange(touch: touch, phase: .began, samples: [sample(x, 0, t: 1), sample(x + 64, 128, t: 2)])]),
                from: user, style: .default, into: &diffs)
            try board.reduce(TouchFrame(changes: [TouchChange(touch: touch, phase: .ended)]), from: user, style: .default, into: &diffs)
        }
        history.note(diffs, on: board)
        let batch = board.sealBatch(diffs, hubTime: 1)
        return (board, history, [batch])
    }

    private func points(_ board: BoardState, _ id: UInt64) -> [[Int32]] {
        board.acceptedStrokes.first { $0.id == StrokeID(id) }.map { $0.samples.map { [$0.x, $0.y] } } ?? []
    }

    @Test func eachChangeDoesWhatItSaysAndReplicasFollow() throws {
        var (board, history, batches) = try threeStrokes()
        func step(_ edit: StrokeEdit, by user: UserNamespace = alice, anyOwner: Bool = false) throws {
            var diffs: [StrokeDiff] = []
            try history.edit(edit, by: user, anyOwner: anyOwner, on: &board, into: &diffs)
            batches.append(board.sealBatch(diffs, hubTime: Int64(batches.count + 1)))
        }
        // Move by (10, -5) and double about (0, 0): every sample, nothing else.
        try step(StrokeEdit(strokes: [StrokeID(1), StrokeID(3)], change: .transform(StrokeTransform(offsetX: 10, offsetY: -5, scale: 2))))
        #expect(points(board, 1) == [[10, -5], [138, 251]])
        #expect(points(board, 3) == [[2570, -5], [2698, 251]])
        #expect(points(board, 2) == [[640, 0], [704, 128]])
        #expect(board.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(2), StrokeID(3)], "moved strokes keep their place in the order")
        // Recolour keeps the width.
        try step(StrokeEdit(strokes: [StrokeID(3)], change: .recolour(rgba: 0xFF00_00FF)))
        #expect(board.acceptedStrokes.last?.style == StrokeStyle(rgba: 0xFF00_00FF, width: StrokeStyle.default.width))
        // Duplicate: new strokes of the editing user, after everything, moved.
        try step(StrokeEdit(strokes: [StrokeID(2), StrokeID(1)], change: .duplicate(StrokeTransform(offsetY: 1000))), by: alice, anyOwner: true)
        #expect(board.acceptedStrokes.map(\.id) == (1...5).map { StrokeID(UInt64($0)) })
        #expect(board.acceptedStrokes[3].owner == alice && points(board, 4) == [[640, 1000], [704, 1128]])
        #expect(points(board, 5) == [[10, 995], [138, 1251]])
        #expect(board.liveTouchCount == 0 && board.nextAcceptPosition == 6)
        // Delete.
        try step(StrokeEdit(strokes: [StrokeID(4), StrokeID(3)], change: .delete))
        #expect(board.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(2), StrokeID(5)])
        // A replica fed the batches is the same board, sample for sample.
        var replica = BoardState()
        for batch in batches { try replica.apply(batch) }
        #expect(replica == board && replica.digest == board.digest)
        #expect(replica.storedSampleCount == board.storedSampleCount && replica.acceptedSamples(of: alice) == board.acceptedSamples(of: alice))
    }

    @Test func undoTakesTheLatestStrokeOrEditAndRedoGivesThemBack() throws {
        var (board, history, batches) = try threeStrokes()
        var diffs: [StrokeDiff] = []
        let start = board.digest
        try history.edit(StrokeEdit(strokes: [StrokeID(1)], change: .transform(StrokeTransform(offsetX: 64))), by: alice, anyOwner: false, on: &board, into: &diffs)
        let moved = board.digest
        // A stroke after the move.
        try board.reduce(TouchFrame(changes: [TouchChange(touch: 7, phase: .began, samples: [sample(5, 5, t: 9)])]), from: alice, style: .default, into: &diffs)
        try board.reduce(TouchFrame(changes: [TouchChange(touch: 7, phase: .ended)]), from: alice, style: .default, into: &diffs)
        history.note(diffs, on: board)
        let drawn = board.digest
        #expect(history.undo(by: alice, on: &board, into: &diffs))  // the new stroke
        #expect(board.digest == moved)
        #expect(history.undo(by: alice, on: &board, into: &diffs))  // the move
        #expect(board.digest == start && points(board, 1) == [[0, 0], [64, 128]])
        #expect(history.undo(by: alice, on: &board, into: &diffs))  // stroke 3, alice's latest before the move
        #expect(board.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(2)])
        #expect(history.redo(by: alice, on: &board, into: &diffs))
        #expect(board.digest == start)
        #expect(history.redo(by: alice, on: &board, into: &diffs))
        #expect(board.digest == moved)
        #expect(history.redo(by: alice, on: &board, into: &diffs))
        #expect(board.digest == drawn)
        #expect(!history.redo(by: alice, on: &board, into: &diffs))
        // Deleting and copying are undone too.
        try history.edit(StrokeEdit(strokes: [StrokeID(2)], change: .delete), by: alice, anyOwner: true, on: &board, into: &diffs)
        try history.edit(StrokeEdit(strokes: [StrokeID(1)], change: .duplicate(StrokeTransform())), by: alice, anyOwner: false, on: &board, into: &diffs)
        #expect(board.acceptedStrokes.count == 4)
        #expect(history.undo(by: alice, on: &board, into: &diffs) && history.undo(by: alice, on: &board, into: &diffs))
        #expect(board.digest == drawn)
        var replica = BoardState()
        for batch in batches + [board.sealBatch(diffs, hubTime: 2)] { try replica.apply(batch) }
        #expect(replica.digest == board.digest)
    }

    @Test func anEditsUndoSkipsStrokesGoneSince() throws {
        var (board, history, _) = try threeStrokes()
        var diffs: [StrokeDiff] = []
        // alice (allowed to edit anyone's) moves bob's stroke; bob then undoes it.
        try history.edit(StrokeEdit(strokes: [StrokeID(2), StrokeID(1)], change: .transform(StrokeTransform(offsetX: 1))), by: alice, anyOwner: true, on: &board, into: &diffs)
        #expect(history.undo(by: bob, on: &board, into: &diffs))
        #expect(board.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(3)])
        // alice's undo puts her own stroke back and leaves bob's undone.
        #expect(history.undo(by: alice, on: &board, into: &diffs))
        #expect(board.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(3)] && points(board, 1) == [[0, 0], [64, 128]])
        // bob's redo brings his stroke back as his undo found it (moved).
        #expect(history.redo(by: bob, on: &board, into: &diffs))
        #expect(points(board, 2) == [[641, 0], [705, 128]])
        // A clear ends every edit's undo.
        try history.edit(StrokeEdit(strokes: [StrokeID(1)], change: .delete), by: alice, anyOwner: false, on: &board, into: &diffs)
        var cleared: [StrokeDiff] = []
        board.clear(.board, by: bob, into: &cleared)
        history.note(cleared, on: board)
        #expect(!history.undo(by: alice, on: &board, into: &diffs))
        #expect(board.acceptedStrokes.isEmpty)
    }

    @Test func badEditsAreRefusedWholeWithNothingChanged() throws {
        var (board, history, _) = try threeStrokes()
        let before = board
        var diffs: [StrokeDiff] = []
        func refused(_ edit: StrokeEdit, anyOwner: Bool = false) -> TouchInputError? {
            do {
                try history.edit(edit, by: alice, anyOwner: anyOwner, on: &board, into: &diffs)
                return nil
            } catch { return error }
        }
        let move = StrokeEdit.Change.transform(StrokeTransform(offsetX: 1))
        #expect(refused(StrokeEdit(strokes: [], change: move))?.code == .invalidValue)
        #expect(refused(StrokeEdit(strokes: [StrokeID(9)], change: move)) == .unknownStroke(StrokeID(9)))
        #expect(refused(StrokeEdit(strokes: [StrokeID(1), StrokeID(1)], change: .delete)) == .unknownStroke(StrokeID(1)))
        #expect(refused(StrokeEdit(strokes: [StrokeID(1), StrokeID(2)], change: .delete)) == .notYours(StrokeID(2)))
        #expect(refused(StrokeEdit(strokes: (1...1025).map { StrokeID(UInt64($0)) }, change: .delete))?.code == .frameTooLarge)
        for scale in [Double.nan, .infinity, 0, 1.0 / 65, 65] {
            #expect(refused(StrokeEdit(strokes: [StrokeID(1)], change: .transform(StrokeTransform(scale: scale))))?.code == .invalidValue)
        }
        #expect(refused(StrokeEdit(strokes: [StrokeID(1)], change: .duplicate(StrokeTransform(offsetX: Sample.maxCoordinateUnits))))?.code == .invalidValue)
        #expect(refused(StrokeEdit(strokes: [StrokeID(1)], change: .transform(StrokeTransform(scale: 64, originX: -Sample.maxCoordinateUnits))))?.code == .invalidValue)
        board.limits.maxSamplesPerBoard = board.storedSampleCount + 1
        #expect(refused(StrokeEdit(strokes: [StrokeID(1)], change: .duplicate(StrokeTransform())))?.code == .boardFull)
        board.limits = before.limits
        #expect(diffs.isEmpty && board == before)
    }

    /// Random sessions with edits of every kind, undos and redos mixed in: a
    /// replica fed the batches, from empty or from a snapshot taken midway,
    /// is the hub's board, and samples are counted as the board holds them.
    @Test func randomEditsKeepReplicasExact() async {
        await checkProperty(count: 40, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 100...300)) { seed, steps in
            var profile = SimulationProfile()
            profile.users = 2
            profile.fingersPerUser = 2
            profile.clearRate = 0.005
            profile.strokeLength = 2...6
            var simulator = SessionSimulator(seed: seed, profile: profile)
            var random = SplitMix64(seed: seed ^ 0xED17)
            var hub = TestHub()
            var history = UndoHistory()
            var snapshot: BoardSnapshot? = nil
            var batchesAtSnapshot = 0
            var edits = 0
            for step in 0..<steps {
                let user = simulator.users[Int(random.next() % UInt64(simulator.users.count))]
                var diffs: [StrokeDiff] = []
                switch random.next() % 8 {
                case 0: history.undo(by: user, on: &hub.board, into: &diffs)
                case 1: history.redo(by: user, on: &hub.board, into: &diffs)
                case 2 where !hub.board.acceptedStrokes.isEmpty, 3 where !hub.board.acceptedStrokes.isEmpty:
                    let anyOwner = random.next() % 2 == 0
                    let candidates = hub.board.acceptedStrokes.filter { anyOwner || $0.owner == user }.map(\.id)
                    guard !candidates.isEmpty else { break }
                    let chosen = Array(Set((0..<(1 + Int(random.next() % 3))).map { _ in candidates[Int(random.next() % UInt64(candidates.count))] }))
                    let transform = StrokeTransform(
                        offsetX: Int32(random.next() % 2000) - 1000, offsetY: Int32(random.next() % 2000) - 1000,
                        scale: [0.5, 1, 1.5, 2][Int(random.next() % 4)], originX: Int32(random.next() % 500), originY: 0)
                    let change: StrokeEdit.Change = [.transform(transform), .duplicate(transform), .recolour(rgba: UInt32(truncatingIfNeeded: random.next())), .delete][
                        Int(random.next() % 4)]
                    do {
                        try history.edit(StrokeEdit(strokes: chosen, change: change), by: user, anyOwner: anyOwner, on: &hub.board, into: &diffs)
                        edits += 1
                    } catch {
                        Issue.record("a valid edit was refused: \(error)")
                        return
                    }
                default:
                    do {
                        switch simulator.next() {
                        case .frame(let owner, let frame, let style): try hub.board.reduce(frame, from: owner, style: style, into: &diffs)
                        case .clear(let owner, let scope): hub.board.clear(scope, by: owner, into: &diffs)
                        }
                    } catch {
                        Issue.record("valid input refused: \(error)")
                        return
                    }
                    history.note(diffs, on: hub.board)
                }
                if !diffs.isEmpty {
                    hub.time += 1000
                    hub.batches.append(hub.board.sealBatch(diffs, hubTime: hub.time))
                }
                if step == steps / 2 {
                    snapshot = hub.board.snapshot()
                    batchesAtSnapshot = hub.batches.count
                }
            }
            #expect(edits > 5)
            let counted = hub.board.acceptedStrokes.reduce(0) { $0 + $1.samples.count }
            #expect(hub.board.acceptedSamples(of: simulator.users[0]) + hub.board.acceptedSamples(of: simulator.users[1]) == counted)
            do {
                var replica = BoardState()
                for batch in hub.batches { try replica.apply(batch) }
                #expect(replica == hub.board && replica.digest == hub.board.digest)
                var late = try BoardState(snapshot: snapshot!)
                for batch in hub.batches[batchesAtSnapshot...] { try late.apply(batch) }
                #expect(late.digest == hub.board.digest && late.storedSampleCount == hub.board.storedSampleCount)
            } catch {
                Issue.record("a replica refused a batch: \(error)")
            }
        }
    }
}
