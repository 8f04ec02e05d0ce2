import Testing
import TouchSyncCore
@testable import TouchSyncLoad

/// The load run's own account of what was drawn against what a board shows.
@Suite("Drawn strokes against a board")
struct DrawnStrokesTests {
    func stroke(_ start: Int32, _ count: Int) -> [Sample] {
        (0..<Int32(count)).map { Sample(x: start + $0, y: 0, time: Int64(start) * 1000 + Int64($0)) }
    }

    func drawn(_ strokes: [[Sample]]) -> DrawnStrokes {
        var drawn = DrawnStrokes()
        for (index, samples) in strokes.enumerated() {
            let touch = TouchID(index + 1)
            drawn.record(TouchFrame(changes: [TouchChange(touch: touch, phase: .began, samples: [samples[0]])]))
            drawn.record(TouchFrame(changes: [TouchChange(touch: touch, phase: .ended, samples: Array(samples.dropFirst()))]))
        }
        return drawn
    }

    @Test func aMissingStrokeIsLostOnceAndShiftsNothing() {
        let (a, b, c) = (stroke(10, 5), stroke(20, 7), stroke(30, 9))
        let user = drawn([a, b, c])
        #expect(user.compare(with: [a, b, c]) == (0, 0))
        // A stroke the board does not show (cancelled by the hub): its samples are lost; nothing is duplicated.
        #expect(user.compare(with: [a, c]) == (7, 0))
        // A stroke shown that was never drawn, and samples applied twice, are duplicates.
        #expect(user.compare(with: [a, stroke(40, 3), b, c]) == (0, 3))
        #expect(user.compare(with: [a, b + Array(b.suffix(2)), c]) == (0, 2))
        // A stroke cut short.
        #expect(user.compare(with: [a, Array(b.prefix(4)), c]) == (3, 0))
    }
}
