import Testing
import TouchSyncWebWire
@testable import TouchSyncLoad

/// What a measuring tab of `load --web` reads as each appended sample's time.
@Suite("Web load latency")
struct WebTabLatencyTests {
    /// A stroke that comes twice in one batch (a hub publishing at an interval
    /// sends that) is read from its sample before each append, not from the
    /// one before the batch: the second append's times were wrong before.
    @Test func aStrokesSecondAppendInABatchContinuesFromItsFirst() throws {
        var replica = BrowserReplica()
        // Stroke 7 holds one sample at t = 1,000; stroke 9 begins in the batch.
        try replica.apply(
            BrowserSnapshot(
                seq: 4, accepted: [],
                active: [BrowserStroke(id: 7, owner: "ann", touch: 1, rgba: 0, w: 2, pos: nil, s: [10, 20, 1_000, 0], p: [])]))
        let batch = BrowserBatch(
            seq: 5,
            diffs: [
                .appended(id: 7, offset: 1, samples: [1, 1, 16, 0]),  // t 1,016
                .predicted(id: 7, samples: [1, 1, 8, 0]),
                .began(id: 9, owner: "bob", touch: 2, rgba: 0, width: 2),
                .appended(id: 9, offset: 0, samples: [5, 5, 2_000, 0, 1, 1, 17, 0]),  // t 2,000, 2,017
                .appended(id: 7, offset: 2, samples: [1, 1, 17, 0, 1, 1, 16, 0]),  // t 1,033, 1,049
                .appended(id: 9, offset: 2, samples: [1, 1, 16, 0]),  // t 2,033
            ])
        #expect(WebTab.appendedSampleTimes(of: batch, after: replica) == [1_016, 2_000, 2_017, 1_033, 1_049, 2_033])
        // Against the replica the times describe: applying the batch ends the strokes at the last times read.
        #expect(try replica.apply(batch) == .applied)
        #expect(replica.active[7]?.samples.last?.t == 1_049)
        #expect(replica.active[9]?.samples.last?.t == 2_033)
    }
}
