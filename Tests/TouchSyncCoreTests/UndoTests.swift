import PropertyChecks
import Testing
import TouchSyncCore
import TouchSyncSimulation

@Suite("Undo, redo and erase")
struct UndoTests {
    /// Random sessions of several users with undo, redo, erase (own and
    /// others') and clears mixed in: the hub's board equals the independent
    /// reference model after every step, and a replica fed the batches (from
    /// empty, or from a snapshot taken mid-way) equals the hub.
    @Test func undoRedoEraseMatchTheReference() async {
        await checkProperty(count: 60, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 100...400)) { seed, steps in
            var profile = SimulationProfile()
            profile.users = 2 + Int(seed % 2)
            profile.fingersPerUser = 2
            profile.clearRate = 0.01
            profile.strokeLength = 2...8
            var simulator = SessionSimulator(seed: seed, profile: profile)
            var random = SplitMix64(seed: seed ^ 0x5EED)
            var hub = TestHub()
            var history = UndoHistory()
            var reference = ReferenceBoard()
            var snapshot: BoardSnapshot? = nil
            var batchesAtSnapshot = 0
            var operations = 0
            for step in 0..<steps {
                let user = simulator.users[Int(random.next() % UInt64(simulator.users.count))]
                var diffs: [StrokeDiff] = []
                switch random.next() % 10 {
                case 0:
                    history.undo(by: user, on: &hub.board, into: &diffs)
                    reference.undo(by: user.rawValue)
                    operations += 1
                case 1:
                    history.redo(by: user, on: &hub.board, into: &diffs)
                    reference.redo(by: user.rawValue)
                    operations += 1
                case 2 where !hub.board.acceptedStrokes.isEmpty:
                    let index = Int(random.next() % UInt64(hub.board.acceptedStrokes.count))
                    let stroke = hub.board.acceptedStrokes[index]
                    let anyOwner = random.next() % 2 == 0
                    do {
                        try hub.board.erase([stroke.id], by: user, anyOwner: anyOwner, into: &diffs)
                        reference.erase(at: [index])
                        operations += 1
                    } catch {
                        #expect((error as? TouchInputError) == .notYours(stroke.id) && !anyOwner && stroke.owner != user)
                    }
                default:
                    let input = simulator.next()
                    do {
                        switch input {
                        case .frame(let owner, let frame, let style):
                            try hub.board.reduce(frame, from: owner, style: style, into: &diffs)
                            reference.handle(frame, from: owner.rawValue, style: style)
                        case .clear(let owner, let scope):
                            hub.board.clear(scope, by: owner, into: &diffs)
                            reference.clear(scope, by: owner.rawValue)
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
                let accepted = hub.board.acceptedStrokes.map { ReferenceBoard.Path($0) }
                guard accepted.count == reference.strokes.count, zip(accepted, reference.strokes).allSatisfy({ $0.sameStroke(as: $1) }) else {
                    Issue.record("step \(step): the accepted strokes differ from the reference")
                    return
                }
                if step == steps / 2 {
                    snapshot = hub.board.snapshot()
                    batchesAtSnapshot = hub.batches.count
                }
            }
            #expect(operations > 10)
            var replica = BoardState()
            do {
                for batch in hub.batches { try replica.apply(batch) }
                #expect(replica == hub.board && replica.digest == hub.board.digest)
                var late = try BoardState(snapshot: snapshot!)
                for batch in hub.batches[batchesAtSnapshot...] { try late.apply(batch) }
                #expect(late.digest == hub.board.digest && late.acceptedStrokes.map(\.id) == hub.board.acceptedStrokes.map(\.id))
                #expect(late.storedSampleCount == hub.board.storedSampleCount)
            } catch {
                Issue.record("a replica refused a batch: \(error)")
            }
        }
    }

    @Test func undoThenRedoRestoresTheStrokeInItsPlace() throws {
        var board = BoardState()
        var history = UndoHistory()
        var diffs: [StrokeDiff] = []
        for (index, user) in [alice, bob, alice].enumerated() {
            let touch = TouchID(index)
            try board.reduce(TouchFrame(changes: [TouchChange(touch: touch, phase: .began, samples: [sample(Int32(index), 0, t: 1)])]), from: user, style: .default, into: &diffs)
            try board.reduce(TouchFrame(changes: [TouchChange(touch: touch, phase: .ended)]), from: user, style: .default, into: &diffs)
        }
        history.note(diffs, on: board)
        #expect(board.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(2), StrokeID(3)])
        #expect(history.undo(by: alice, on: &board, into: &diffs))
        #expect(history.undo(by: alice, on: &board, into: &diffs))
        #expect(board.acceptedStrokes.map(\.id) == [StrokeID(2)])
        #expect(history.redo(by: alice, on: &board, into: &diffs))  // stroke 1, back before bob's
        #expect(board.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(2)])
        #expect(!history.undo(by: UserNamespace("carol"), on: &board, into: &diffs))
        // A new stroke of alice's ends her redo.
        diffs.removeAll()
        try board.reduce(TouchFrame(changes: [TouchChange(touch: 9, phase: .began, samples: [sample(9, 9, t: 9)])]), from: alice, style: .default, into: &diffs)
        try board.reduce(TouchFrame(changes: [TouchChange(touch: 9, phase: .ended)]), from: alice, style: .default, into: &diffs)
        history.note(diffs, on: board)
        #expect(!history.canRedo(alice))
        #expect(throws: TouchInputError.unknownStroke(StrokeID(3))) { try board.erase([StrokeID(3)], by: alice, anyOwner: true, into: &diffs) }
        #expect(throws: TouchInputError.notYours(StrokeID(2))) { try board.erase([StrokeID(2)], by: alice, anyOwner: false, into: &diffs) }
        #expect(throws: TouchInputError.unknownStroke(StrokeID(1))) { try board.erase([StrokeID(1), StrokeID(1)], by: alice, anyOwner: false, into: &diffs) }
        try board.erase([StrokeID(2)], by: alice, anyOwner: true, into: &diffs)
        #expect(board.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(4)])
    }
}
