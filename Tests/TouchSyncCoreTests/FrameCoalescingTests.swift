import PropertyChecks
import Testing
import TouchSyncCore
import TouchSyncSimulation

@Suite("Coalesced frames leave the board as the frames they merge")
struct FrameCoalescingTests {
    /// One user's random multi-touch session, applied frame by frame to one
    /// board and, on another, in runs merged greedily (as a busy agent does
    /// with what it has not sent): both boards end with the same strokes, ids,
    /// accept order and digest, and no merged frame is refused.
    @Test func mergedRunsMatchFrameByFrame() async {
        await checkProperty(count: 150, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 2...12)) { seed, run in
            var profile = SimulationProfile()
            profile.users = 1
            profile.fingersPerUser = 1 + Int(seed % 6)
            profile.aliveSetRate = [0, 0.5, 1][Int(seed % 3)]
            profile.vanishRate = 0.1
            profile.cancelRate = 0.05
            profile.estimateRate = seed % 2 == 0 ? 0 : 0.05
            var simulator = SessionSimulator(seed: seed, profile: profile)
            let user = simulator.users[0]
            let style = SessionSimulator.style(forUser: 0)
            let limits = BoardLimits()
            var oneByOne = BoardState()
            var merged = BoardState()
            var diffs: [StrokeDiff] = []
            var pending: TouchFrame? = nil
            var downBeforePending: Set<TouchID> = []
            var framesInRun = 0
            var mergedFrames = 0
            var sentFrames = 0

            func send(_ frame: TouchFrame) -> Bool {
                sentFrames += 1
                do {
                    try merged.reduce(frame, from: user, style: style, into: &diffs)
                    return true
                } catch {
                    Issue.record("a merged frame was refused: \(error)\n\(frame)")
                    return false
                }
            }
            for _ in 0..<400 {
                let frame = simulator.nextFrame(for: 0)
                let downBefore = Set(oneByOne.touches[user].map { Array($0.keys) } ?? [])
                do {
                    try oneByOne.reduce(frame, from: user, style: style, into: &diffs)
                } catch {
                    Issue.record("valid input refused: \(error)")
                    return
                }
                if let earlier = pending, framesInRun < run,
                    let combined = earlier.coalesced(with: frame, downBefore: downBeforePending, limits: limits)
                {
                    pending = combined
                    framesInRun += 1
                    mergedFrames += 1
                    continue
                }
                if let earlier = pending, !send(earlier) { return }
                pending = frame
                downBeforePending = downBefore
                framesInRun = 1
            }
            if let earlier = pending, !send(earlier) { return }
            #expect(merged.digest == oneByOne.digest)
            #expect(merged.acceptedStrokes.map(\.id) == oneByOne.acceptedStrokes.map(\.id))
            #expect(merged.storedSampleCount == oneByOne.storedSampleCount)
            let snapshot = oneByOne.snapshot()
            let counted = (snapshot.activeStrokes + snapshot.acceptedStrokes).reduce(0) { $0 + $1.samples.count }
            #expect(oneByOne.storedSampleCount == counted, "the kept count drifted from the strokes")
            #expect(try! BoardState(snapshot: snapshot).storedSampleCount == counted)
            #expect(sentFrames + mergedFrames == 400)
            if profile.estimateRate == 0 && profile.aliveSetRate != 0.5 {
                #expect(mergedFrames > 100, "frames rarely merge: \(mergedFrames) of 400")
            }
        }
    }

    @Test func framesThatCannotMergeStayApart() {
        let began = TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [sample(1, 1, t: 1)])], aliveTouches: [1])
        let ended = TouchFrame(changes: [TouchChange(touch: 1, phase: .ended, samples: [sample(2, 2, t: 2)])], aliveTouches: [])
        #expect(began.coalesced(with: ended, downBefore: [], limits: BoardLimits()) == nil, "a change has one phase")
        let again = TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [sample(3, 3, t: 3)])], aliveTouches: [1])
        #expect(ended.coalesced(with: again, downBefore: [1], limits: BoardLimits()) == nil, "the id is reused")
        // Touch 2 vanished from the earlier alive set while down: the later frame may not begin it again in the same frame.
        let vanish = TouchFrame(changes: [], aliveTouches: [])
        let reuse = TouchFrame(changes: [TouchChange(touch: 2, phase: .began, samples: [sample(4, 4, t: 4)])], aliveTouches: [2])
        #expect(vanish.coalesced(with: reuse, downBefore: [2], limits: BoardLimits()) == nil)
        #expect(vanish.coalesced(with: reuse, downBefore: [], limits: BoardLimits()) != nil)
        var small = BoardLimits()
        small.maxSamplesPerFrame = 2
        let moved = TouchFrame(changes: [TouchChange(touch: 1, phase: .moved, samples: [sample(5, 5, t: 5)])], aliveTouches: [1])
        #expect(began.coalesced(with: moved, downBefore: [], limits: small) == nil, "over half the frame limit")
        #expect(began.coalesced(with: moved, downBefore: [], limits: BoardLimits())?.changes.first?.samples.count == 2)
    }

    @Test func boardFullRefusesNewStrokesOnly() throws {
        var limits = BoardLimits()
        limits.maxSamplesPerBoard = 3
        var board = BoardState(limits: limits)
        var diffs: [StrokeDiff] = []
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [sample(1, 1, t: 1), sample(2, 2, t: 2), sample(3, 3, t: 3)])]),
            from: alice, style: .default, into: &diffs)
        #expect(board.storedSampleCount == 3)
        #expect(throws: TouchInputError.boardFull(limit: 3)) {
            try board.reduce(
                TouchFrame(changes: [TouchChange(touch: 2, phase: .began, samples: [sample(1, 1, t: 4)])]), from: bob, style: .default,
                into: &diffs)
        }
        // The stroke in progress may still end.
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .ended, samples: [sample(4, 4, t: 5)])]), from: alice, style: .default,
            into: &diffs)
        #expect(board.storedSampleCount == 4)
        board.clear(.board, by: alice, into: &diffs)
        #expect(board.storedSampleCount == 0)
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 2, phase: .began, samples: [sample(1, 1, t: 6)])]), from: bob, style: .default,
            into: &diffs)
    }
}
