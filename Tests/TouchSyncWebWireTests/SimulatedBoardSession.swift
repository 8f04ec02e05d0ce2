import TouchSyncCore
import TouchSyncSimulation

/// A simulated session drawn on a board, batch by batch, with undo, redo,
/// erase and edits (a move and scale, a recolour, copies, a delete in turn)
/// mixed in every so many steps: what the browser wire's tests encode and decode.
enum SimulatedBoardSession {
    /// Runs `steps` steps; `batch` gets each step that changed the board: the
    /// step, the board before, the sealed batch (hub time `step`) and the board after.
    @discardableResult
    static func run(
        _ simulator: inout SessionSimulator, steps: Int, undoEvery: Int = 37, redoEvery: Int = 53, eraseEvery: Int = 91, editEvery: Int = 23,
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
            if step % editEvery == 0, !board.acceptedStrokes.isEmpty {
                let strokes = board.acceptedStrokes.suffix(2).map(\.id)
                let transform = StrokeTransform(offsetX: Int32(step % 7) * 64 - 200, offsetY: 320, scale: step % 2 == 0 ? 1 : 1.25, originX: 640, originY: -64)
                let changes: [StrokeEdit.Change] = [.transform(transform), .recolour(rgba: UInt32(step) &* 2_654_435_761), .duplicate(transform), .delete]
                try undo.edit(StrokeEdit(strokes: strokes, change: changes[(step / editEvery) % 4]), by: user, anyOwner: true, on: &board, into: &diffs)
            }
            undo.note(diffs, on: board)
            guard !diffs.isEmpty else { continue }
            let sealed = board.sealBatch(diffs, hubTime: Int64(step))
            try batch(step, before, sealed, board)
        }
        return board
    }
}
