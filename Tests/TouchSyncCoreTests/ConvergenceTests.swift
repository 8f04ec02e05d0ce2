import PropertyChecks
import Testing
import TouchSyncCore
import TouchSyncSimulation

@Suite("Replicas converge on the hub's state")
struct ConvergenceTests {
    /// Random interleavings of several users' multi-touch sessions: a replica
    /// fed every batch from empty, and one that loads a snapshot taken at a
    /// random point (while also receiving batches it already has), both end
    /// with the hub's strokes, order and digest; and the hub agrees with the
    /// independent reference model after every step.
    @Test func replicasMatchHubAndReference() async {
        await checkProperty(
            count: 60, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 1...5), Gen.int(in: 50...400)
        ) { seed, users, steps in
            var profile = SimulationProfile()
            profile.users = users
            profile.fingersPerUser = 1 + Int(seed % 5)
            profile.clearRate = 0.02
            profile.vanishRate = 0.05
            profile.cancelRate = 0.03
            var simulator = SessionSimulator(seed: seed, profile: profile)
            var hub = TestHub()
            var reference = ReferenceBoard()
            let snapshotAt = Int(seed % UInt64(steps))
            var snapshot: BoardSnapshot? = nil
            var batchesBeforeSnapshot = 0

            for step in 0..<steps {
                let input = simulator.next()
                do {
                    try hub.feed(input)
                } catch {
                    Issue.record("the hub refused valid input at step \(step): \(error)")
                    return
                }
                switch input {
                case .frame(let user, let frame, let style): reference.handle(frame, from: user.rawValue, style: style)
                case .clear(let user, let scope): reference.clear(scope, by: user.rawValue)
                }
                if step == snapshotAt {
                    snapshot = hub.board.snapshot()
                    batchesBeforeSnapshot = hub.batches.count
                }
            }

            // The stored-sample counts (board limit, per-user quota) are what the strokes hold.
            var acceptedByOwner: [UserNamespace: Int] = [:]
            for stroke in hub.board.acceptedStrokes where !stroke.samples.isEmpty {
                acceptedByOwner[stroke.owner, default: 0] += stroke.samples.count
            }
            #expect(hub.board.acceptedSamplesByOwner == acceptedByOwner)
            let owners = Set(hub.board.orderedActiveStrokes.map(\.owner)).union(acceptedByOwner.keys)
            let stored = owners.reduce(0) { $0 + hub.board.acceptedSamples(of: $1) + hub.board.activeSamples(of: $1) }
            #expect(hub.board.storedSampleCount == stored)

            let accepted = hub.board.acceptedStrokes.map { ReferenceBoard.Path($0) }
            #expect(accepted.count == reference.strokes.count)
            #expect(zip(accepted, reference.strokes).allSatisfy { $0.sameStroke(as: $1) })
            let active = hub.board.orderedActiveStrokes.map { ReferenceBoard.Path($0) }
            #expect(active.count == reference.activePaths.count)
            #expect(zip(active, reference.activePaths).allSatisfy { $0.sameStroke(as: $1) })

            var fromEmpty = BoardState()
            do {
                for batch in hub.batches { try fromEmpty.apply(batch) }
            } catch {
                Issue.record("replica from empty refused a batch: \(error)")
            }
            #expect(fromEmpty == hub.board)
            #expect(fromEmpty.digest == hub.board.digest)

            do {
                var late = try BoardState(snapshot: #require(snapshot))
                // The subscriber subscribed before asking for the snapshot, so it also holds
                // a few batches the snapshot already includes: they must be skipped.
                let overlap = max(0, batchesBeforeSnapshot - 3)
                var applied = 0
                for batch in hub.batches[overlap...] where try late.applyIfNew(batch) { applied += 1 }
                #expect(applied == hub.batches.count - batchesBeforeSnapshot)
                #expect(late == hub.board)
                #expect(late.digest == hub.board.digest)
                #expect(late.orderedActiveStrokes.map(\.id) == hub.board.orderedActiveStrokes.map(\.id))
                #expect(late.acceptedStrokes.map(\.id) == hub.board.acceptedStrokes.map(\.id))
            } catch {
                Issue.record("late replica failed: \(error)")
            }
        }
    }

    @Test func replicaRefusesAGapAndAStaleOffset() throws {
        var hub = TestHub()
        var simulator = SessionSimulator(seed: 7)
        while hub.batches.count < 30 { try hub.feed(simulator.next()) }

        var replica = BoardState()
        try replica.apply(hub.batches[0])
        let before = replica
        #expect(throws: ReplicaError.sequenceGap(expected: 2, received: 3)) { try replica.apply(hub.batches[2]) }
        #expect(replica == before)
        #expect(throws: ReplicaError.sequenceGap(expected: 2, received: 1)) { try replica.apply(hub.batches[0]) }

        // A forged append at the wrong offset is refused without changing the stroke.
        var board = BoardState()
        try board.apply(.began(StrokeID(1), owner: alice, touch: 1, style: .default))
        try board.apply(.appended(StrokeID(1), offset: 0, samples: [sample(1, 1, t: 1)]))
        let refused = board
        #expect(throws: ReplicaError.wrongOffset(StrokeID(1), expected: 1, received: 0)) {
            try board.apply(.appended(StrokeID(1), offset: 0, samples: [sample(2, 2, t: 2)]))
        }
        #expect(throws: ReplicaError.unknownStroke(StrokeID(9))) { try board.apply(.cancelled(StrokeID(9))) }
        #expect(throws: ReplicaError.wrongAcceptPosition(expected: 1, received: 5)) {
            try board.apply(.accepted(StrokeID(1), position: 5))
        }
        #expect(throws: ReplicaError.unexpectedStrokeID(expected: StrokeID(2), received: StrokeID(4))) {
            try board.apply(.began(StrokeID(4), owner: alice, touch: 2, style: .default))
        }
        #expect(throws: ReplicaError.touchAlreadyDown(alice, 1)) {
            try board.apply(.began(StrokeID(2), owner: alice, touch: 1, style: .default))
        }
        #expect(board == refused)
    }

    @Test func digestIsDeterministicAndSensitive() throws {
        var first = TestHub()
        var second = TestHub()
        var a = SessionSimulator(seed: 42)
        var b = SessionSimulator(seed: 42)
        for _ in 0..<300 {
            try first.feed(a.next())
            try second.feed(b.next())
        }
        #expect(first.board.digest == second.board.digest)
        // A fixed value: the digest must not depend on the process (Swift's Hasher is seeded per run).
        var empty = BoardState()
        #expect(empty.digest.description == BoardState().digest.description)
        #expect(empty.digest.description.count == 16)
        var diffs: [StrokeDiff] = []
        try empty.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [sample(0, 0, t: 0)])]), from: alice,
            style: .default, into: &diffs)
        let one = empty.digest
        var moved = empty
        try moved.reduce(
            TouchFrame(changes: [TouchChange(touch: 1, phase: .moved, samples: [sample(0, 1, t: 1)])]), from: alice,
            style: .default, into: &diffs)
        #expect(one != moved.digest)
        #expect(one != BoardState().digest)
    }

    @Test func snapshotLoadingRefusesContradictions() throws {
        var hub = TestHub()
        var simulator = SessionSimulator(seed: 3)
        for _ in 0..<200 { try hub.feed(simulator.next()) }
        let good = hub.board.snapshot()
        #expect(try BoardState(snapshot: good) == hub.board)

        try #require(good.acceptedStrokes.count > 1 && !good.activeStrokes.isEmpty)

        var reversed = good
        reversed.acceptedStrokes.reverse()
        #expect(throws: ReplicaError.self) { try BoardState(snapshot: reversed) }

        var unassigned = good
        unassigned.nextStrokeID = StrokeID(1)
        #expect(throws: ReplicaError.self) { try BoardState(snapshot: unassigned) }

        // Two active strokes for one touch of one user.
        let stroke = good.activeStrokes[0]
        var twice = good
        twice.activeStrokes.append(Stroke(id: good.nextStrokeID, owner: stroke.owner, touch: stroke.touch, style: stroke.style))
        twice.nextStrokeID = StrokeID(good.nextStrokeID.rawValue + 1)
        #expect(throws: ReplicaError.self) { try BoardState(snapshot: twice) }

        // A hostile snapshot cannot make the replica index 2^60 strokes.
        var sparse = good
        sparse.activeStrokes = [Stroke(id: StrokeID(1 << 60), owner: alice, touch: 1, style: .default)]
        sparse.nextStrokeID = StrokeID((1 << 60) + 1)
        sparse.acceptedStrokes = []
        #expect(throws: ReplicaError.self) { try BoardState(snapshot: { var s = sparse; s.activeStrokes.insert(Stroke(id: StrokeID(1), owner: bob, touch: 1, style: .default), at: 0); return s }()) }
        let far = try BoardState(snapshot: sparse)  // one active stroke far out is fine: the index starts at it
        #expect(far.activeStroke(StrokeID(1 << 60)) != nil)

        var predictedAccepted = good
        predictedAccepted.acceptedStrokes[0].predicted = [sample(1, 1, t: 1)]
        #expect(throws: ReplicaError.self) { try BoardState(snapshot: predictedAccepted) }
    }
}

@Suite("Diff coalescing")
struct CoalescingTests {
    /// Batches folded over windows of any size rebuild exactly the hub's board;
    /// adding by draining (the hub's path) folds as adding copies does.
    @Test func coalescedWindowsRebuildTheHubBoard() async {
        await checkProperty(count: 60, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 1...40)) { seed, window in
            var profile = SimulationProfile()
            profile.users = 1 + Int(seed % 4)
            profile.fingersPerUser = 1 + Int(seed % 5)
            profile.clearRate = 0.01
            profile.estimateRate = 0.2
            var simulator = SessionSimulator(seed: seed, profile: profile)
            var hub = BoardState()
            var replica = BoardState()
            var coalescer = DiffCoalescer()
            var draining = DiffCoalescer()
            var raw = 0
            var folded = 0
            for step in 1...600 {
                var diffs: [StrokeDiff] = []
                switch simulator.next() {
                case .frame(let user, let frame, let style): try hub.reduce(frame, from: user, style: style, into: &diffs)
                case .clear(let user, let scope): hub.clear(scope, by: user, into: &diffs)
                }
                raw += diffs.count
                coalescer.add(contentsOf: diffs)
                draining.add(draining: &diffs)
                #expect(diffs.isEmpty)
                if step % window == 0 && !coalescer.isEmpty {
                    let taken = coalescer.take()
                    #expect(draining.take() == taken)
                    let batch = hub.sealBatch(taken, hubTime: Int64(step))
                    folded += batch.diffs.count
                    try replica.apply(batch)
                }
            }
            if !coalescer.isEmpty { try replica.apply(hub.sealBatch(coalescer.take(), hubTime: 0)) }
            #expect(replica == hub)
            #expect(replica.digest == hub.digest)
            if window > 4 { #expect(folded < raw) }
        }
    }

    @Test func foldsAppendsPredictionsAndAmendments() {
        var coalescer = DiffCoalescer()
        let s = StrokeID(1)
        var amended = sample(1, 1, t: 1)
        amended.force = 7
        amended.flags = .hasForce
        coalescer.add(contentsOf: [
            .began(s, owner: alice, touch: 1, style: .default),
            .appended(s, offset: 0, samples: [sample(0, 0, t: 0)]),
            .predicted(s, samples: [sample(5, 5, t: 5)]),
            .appended(s, offset: 1, samples: [sample(1, 1, t: 1)]),
            .predicted(s, samples: [sample(6, 6, t: 6)]),
            .amended(s, offset: 1, sample: amended),
        ])
        #expect(coalescer.take() == [
            .began(s, owner: alice, touch: 1, style: .default),
            .appended(s, offset: 0, samples: [sample(0, 0, t: 0), amended]),
            .predicted(s, samples: [sample(6, 6, t: 6)]),
        ])
        #expect(coalescer.isEmpty)
        // After acceptance a stroke's window is closed: nothing folds across it.
        coalescer.add(contentsOf: [
            .appended(s, offset: 2, samples: [sample(2, 2, t: 2)]), .accepted(s, position: 1), .cleared(owner: nil),
        ])
        #expect(coalescer.take().count == 3)
    }
}
