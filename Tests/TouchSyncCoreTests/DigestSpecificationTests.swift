import PropertyChecks
import Testing
import TouchSyncCore

/// The digest exactly as docs/protocol.md ("Digest") specifies it: the
/// expected values were computed from the text by an independent
/// implementation (Python), so the document, not this code, is the reference.
@Suite("The digest follows its specification")
struct DigestSpecificationTests {
    @Test func emptyBoard() {
        #expect(BoardState().digest.rawValue == 0x0c86_57ae_0d7a_ac18)
    }

    @Test func workedExample() throws {
        var board = BoardState()
        let alice = UserNamespace("alice")
        let bob = UserNamespace("bob")
        let diffs: [StrokeDiff] = [
            .began(StrokeID(1), owner: alice, touch: 1, style: StrokeStyle(rgba: 0x1565_C0FF, width: 320)),
            .appended(StrokeID(1), offset: 0, samples: [
                Sample(x: 6400, y: 3200, time: 1_000_000, flags: .coalesced), Sample(x: 6464, y: 3232, time: 1_004_166),
            ]),
            .accepted(StrokeID(1), position: 1),
            .began(StrokeID(2), owner: bob, touch: 7, style: .default),
            .appended(StrokeID(2), offset: 0, samples: [Sample(x: 640, y: 640, time: 2_000_000)]),
            .predicted(StrokeID(2), samples: [Sample(x: 700, y: 660, time: 2_008_000)]),
        ]
        for diff in diffs { try board.apply(diff) }
        #expect(board.digest.rawValue == 0x7d7f_dad2_4993_5e89)
        #expect(board.digest.description == "7d7fdad249935e89")
        // Without predictions (the stream that leaves them out): computed from the text independently too.
        #expect(board.digest(includingPredictions: false).description == "f5dc75f27423753b")
        var unpredicted = BoardState()
        for diff in diffs { if case .predicted = diff { continue } else { try unpredicted.apply(diff) } }
        #expect(unpredicted.digest == board.digest(includingPredictions: false))
        // Both in one pass give the same two values.
        #expect(board.digests == (board.digest, board.digest(includingPredictions: false)))
    }

    /// The digest walks a packed stroke straight from its columns (heartbeats
    /// and late joins read whole boards that way): it must hash exactly the
    /// words the samples give one by one, whatever the stroke holds (force,
    /// angles, estimation indices, values that wrap, checkpoints).
    @Test func aPackedStrokeHashesAsItsSamples() async throws {
        await checkProperty(count: 200, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            let samples = StrokeSamplesTransferTests.samples(seed: seed)
            func board(packed: Bool) throws -> BoardState {
                var stored = StrokeSamples(samples)
                if packed { stored.pack() }
                let accepted = Stroke(
                    id: StrokeID(1), owner: UserNamespace("alice"), touch: 1, style: .default, samples: stored, acceptedPosition: 1)
                // An active stroke with the same samples, never packed, hashes them the plain way in the same digest.
                let active = Stroke(
                    id: StrokeID(2), owner: UserNamespace("bob"), touch: 2, style: .default, samples: StrokeSamples(samples),
                    predicted: [samples[0]])
                let snapshot = BoardSnapshot(
                    sequence: 5, nextStrokeID: StrokeID(3), nextAcceptPosition: 2, activeStrokes: [active], acceptedStrokes: [accepted])
                return try BoardState(snapshot: snapshot, packing: false)
            }
            let plain = try board(packed: false), packed = try board(packed: true)
            #expect(packed.acceptedStrokes[0].samples.isPacked && !plain.acceptedStrokes[0].samples.isPacked)
            #expect(packed.digest == plain.digest)
            #expect(packed.digests == plain.digests)
            #expect(packed.digest(includingPredictions: false) == plain.digest(includingPredictions: false))
        }
        // A stroke accepted with no sample is packed with no storage: it hashes as its count alone.
        var empty = StrokeSamples()
        empty.pack()
        #expect(empty.isPacked)
        let boards = try [empty, StrokeSamples()].map { samples in
            try BoardState(
                snapshot: BoardSnapshot(
                    sequence: 1, nextStrokeID: StrokeID(2), nextAcceptPosition: 2, activeStrokes: [],
                    acceptedStrokes: [Stroke(id: StrokeID(1), owner: UserNamespace("alice"), touch: 1, style: .default, samples: samples, acceptedPosition: 1)]),
                packing: false)
        }
        #expect(boards[0].digest == boards[1].digest)
    }
}
