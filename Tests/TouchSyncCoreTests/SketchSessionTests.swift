import Testing
import TouchSyncCore
import TouchSyncSimulation

/// The demo's simulated people: valid input, fixed by the seed, and paced to end mid-drawing.
@Suite("Sketching simulation")
struct SketchSessionTests {
    func run(seed: UInt64, events: Int) throws -> BoardState {
        var session = SketchSession(seed: seed, users: 3, fingers: 3, events: events)
        var hub = TestHub()
        for _ in 0..<events { try hub.feed(session.next()) }
        return hub.board
    }

    @Test func everyFrameIsValidAndTheSeedFixesThePicture() throws {
        let board = try run(seed: 7, events: 3000)
        #expect(board.acceptedStrokes.count > 20, "words, shapes and a spiral: many strokes")
        #expect(Set(board.acceptedStrokes.map(\.owner)).count == 3, "every user drew")
        #expect(board.liveTouchCount > 0, "the last strokes are still in progress at the end")
        #expect(board.acceptedStrokes.allSatisfy { $0.samples.count >= 2 })
        let again = try run(seed: 7, events: 3000)
        #expect(again.digest == board.digest, "one seed, one picture")
        let other = try run(seed: 8, events: 3000)
        #expect(other.digest != board.digest)
    }

    @Test func aLongerSessionFinishesEveryFigure() throws {
        var session = SketchSession(seed: 3, users: 2, fingers: 2)  // the brisk default pace
        var hub = TestHub()
        for _ in 0..<20_000 { try hub.feed(session.next()) }
        #expect(session.strokesLeft == 0)
        #expect(hub.board.liveTouchCount == 0, "every stroke begun has ended")
    }
}
