import TouchSyncCore
import TouchSyncSimulation

/// A simulated session drawn on a board, batch by batch, with undo, redo
/// and erase mixed in every so many steps: what the browser wire's tests
/// encode and decode.
enum SimulatedBoardSession {
    /// Runs `steps` steps; `batch` gets each step that changed the board: the
    /// step, the board before, the sealed batch (hub time `step`) and the board after.
    @discardableResult
    static func run(
        _ simulator: inout SessionSimulator, steps: Int, undoEvery: Int = 37, redoEvery: Int = 53, eraseEvery: Int = 91,
        _ batch: (_ step: Int, _ before: BoardState, _ sealed: DiffBatch, _ after: BoardState) throws -> Void
    ) throws -> BoardState {
        var board = BoardState()
        var undo = UndoHistory()
        for step in 0..<steps {
            var diffs: [StrokeDiff] = []
            let before = board
            switch simulator.next() {
            case .frame(let user, let frame, let style): try board.reduce(frame, from: user, style: style, into: &diffs)
            case .clear(let user, let scope): board.clear(scope, by: user, into: &diffs)
            }
            let user = simulator.users[step % simulator.users.count]
            if step % undoEvery == 0 { _ = undo.undo(by: user, on: &board, into: &diffs) }
            if step % redoEvery == 0 { _ = undo.redo(by: user, on: &board, into: &diffs) }
            if step % eraseEvery == 0, let victim = board.acceptedStrokes.first { try board.erase([victim.id], by: user, anyOwner: true, into: &diffs) }
            undo.note(diffs, on: board)
            guard !diffs.isEmpty else { continue }
            let sealed = board.sealBatch(diffs, hubTime: Int64(step))
            try batch(step, before, sealed, board)
        }
        return board
    }
}
