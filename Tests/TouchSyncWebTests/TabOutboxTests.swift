import Synchronization
import Testing
@testable import TouchSyncWeb

/// A tab's outbox: bounded, and a tab that falls behind gets a snapshot instead of its backlog.
@Suite("Gateway: per-tab outboxes")
struct TabOutboxTests {
    @Test func aSlowTabIsResyncedInsteadOfQueuingWithoutBound() {
        let outbox = TabOutbox(limit: 4)
        outbox.requestSnapshot()  // a new tab starts from a snapshot
        guard case .snapshot = outbox.take() else { Issue.record("a new tab gets a snapshot first"); return }
        for index in 0..<3 { #expect(outbox.post("batch \(index)")) }
        guard case .messages(let three) = outbox.take() else { Issue.record("queued batches"); return }
        #expect(three == ["batch 0", "batch 1", "batch 2"], "in order, each once")
        #expect(outbox.take() == nil)

        // The tab stops reading: four fit, the fifth overflows and everything queued is replaced by a snapshot.
        for index in 0..<4 { #expect(outbox.post("batch \(index)")) }
        #expect(!outbox.post("batch 4"))
        #expect(!outbox.post("batch 5"), "batches before the snapshot are moot")
        #expect(outbox.overflows == 1)
        guard case .snapshot = outbox.take() else { Issue.record("an overflowed tab gets a snapshot"); return }
        #expect(outbox.post("batch 6"), "after the snapshot, batches queue again")
        guard case .messages(let after) = outbox.take() else { Issue.record("batches after the snapshot"); return }
        #expect(after == ["batch 6"])
    }

    @Test func theWakerIsCalledOnceUntilTheQueueIsTakenEmpty() {
        let outbox = TabOutbox(limit: 8)
        let wakes = Atomic(0)
        outbox.post("before the waker")
        outbox.wake { wakes.add(1, ordering: .relaxed) }
        #expect(wakes.load(ordering: .relaxed) == 1, "what waited before the waker wakes it at once")
        outbox.post("more")
        #expect(wakes.load(ordering: .relaxed) == 1, "not again until the drain took the queue empty")
        guard case .messages(let messages) = outbox.take() else { Issue.record("both queued"); return }
        #expect(messages == ["before the waker", "more"])
        #expect(outbox.take() == nil)
        outbox.post("after the drain")
        #expect(wakes.load(ordering: .relaxed) == 2, "a post after the queue was taken empty wakes again")
        outbox.close()
        #expect(wakes.load(ordering: .relaxed) == 2, "the drain has not taken the queue empty since")
        guard case .closed = outbox.take() else { Issue.record("closed"); return }
        #expect(outbox.post("late"), "posting to a closed outbox is harmless")
    }
}

extension TabOutboxTests {
    /// Acks are never dropped by a snapshot that is due or an overflow (a tab's
    /// first stroke on a new board, drawn while its snapshot waited, was never
    /// acknowledged), and they go while the snapshot is fetched: the latest
    /// stands for those before it.
    @Test func acksSurviveSnapshotsAndGoWhileOneIsFetched() {
        let outbox = TabOutbox(limit: 2)
        let wakes = Atomic(0)
        outbox.wake { wakes.add(1, ordering: .relaxed) }
        outbox.requestSnapshot()  // a new tab: its snapshot is due
        outbox.postAck(1)
        outbox.post("batch moot before the snapshot")
        outbox.postAck(2)
        guard case .snapshot = outbox.take() else { Issue.record("the snapshot first"); return }
        // While the snapshot is fetched, a new ack wakes the tab and is taken on its own.
        let wakesBefore = wakes.load(ordering: .relaxed)
        outbox.postAck(3)
        #expect(wakes.load(ordering: .relaxed) == wakesBefore + 1, "an ack wakes the tab during the fetch")
        #expect(outbox.takeAck() == .text(#"{"t":"ack","n":3}"#), "the latest ack, standing for 1 and 2")
        #expect(outbox.takeAck() == nil)
        // An overflow drops batches, never the ack.
        outbox.post("b1")
        outbox.post("b2")
        outbox.postAck(4)
        #expect(!outbox.post("b3"))
        guard case .snapshot = outbox.take() else { Issue.record("an overflow resyncs"); return }
        guard case .messages(let after) = outbox.take() else { Issue.record("the ack after the snapshot"); return }
        #expect(after == [.text(#"{"t":"ack","n":4}"#)])
    }

    /// Another tab's pointer replaces its previous one still queued, keeps its
    /// place among the batches, and never overflows the queue into a resync.
    @Test func pointersReplaceTheirWaitingOnesAndNeverCauseAResync() {
        let outbox = TabOutbox(limit: 4)
        outbox.post(presence: "ann at 1", from: 1)
        outbox.post("batch 1")
        outbox.post(presence: "ben at 1", from: 2)
        outbox.post(presence: "ann at 2", from: 1)
        outbox.post(presence: "ann at 3", from: 1)
        guard case .messages(let first) = outbox.take() else { Issue.record("queued"); return }
        #expect(first == ["ann at 3", "batch 1", "ben at 1"], "the latest of each, where the first stood")
        // Taken: the next pointer queues anew.
        outbox.post(presence: "ann at 4", from: 1)
        outbox.post("batch 2")
        outbox.post("batch 3")
        outbox.post("batch 4")
        outbox.post(presence: "ben at 2", from: 2)  // the queue is full: the pointer waits, no resync
        #expect(outbox.overflows == 0)
        guard case .messages(let second) = outbox.take() else { Issue.record("queued"); return }
        #expect(second == ["ann at 4", "batch 2", "batch 3", "batch 4"])
    }
}

extension TabOutbox.Next: Equatable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.messages(let a), .messages(let b)): a == b
        case (.snapshot, .snapshot), (.closed, .closed): true
        case (.revoked(let a, let b), .revoked(let c, let d)): a == c && b == d
        default: false
        }
    }
}

extension TabOutboxTests {
    /// With a hold, a lone ack does not wake the tab: it goes with the next
    /// batch, or on its own when the hold ends; an ack behind queued batches
    /// goes with them at once, and one hold is armed however many acks come.
    @Test func aLoneAckWaitsForABatchOrTheHoldsEnd() {
        let outbox = TabOutbox(limit: 8)
        let wakes = Atomic(0)
        let holds = Atomic(0)
        outbox.wake { wakes.add(1, ordering: .relaxed) }
        outbox.holdAcks { holds.add(1, ordering: .relaxed) }

        outbox.postAck(1)
        outbox.postAck(2)
        #expect(wakes.load(ordering: .relaxed) == 0, "a lone ack does not wake the tab")
        #expect(holds.load(ordering: .relaxed) == 1, "one hold for both")
        outbox.post("batch 1")
        #expect(wakes.load(ordering: .relaxed) == 1, "the batch wakes it")
        guard case .messages(let together) = outbox.take() else { Issue.record("the batch and the ack"); return }
        #expect(together == ["batch 1", .text(#"{"t":"ack","n":2}"#)], "the ack rides with the batch")
        #expect(outbox.take() == nil)
        outbox.ackHoldEnded()
        #expect(wakes.load(ordering: .relaxed) == 1, "the hold's end finds nothing left to send")

        // No batch comes: the hold's end sends the ack alone.
        outbox.postAck(3)
        #expect(holds.load(ordering: .relaxed) == 2)
        #expect(wakes.load(ordering: .relaxed) == 1)
        outbox.ackHoldEnded()
        #expect(wakes.load(ordering: .relaxed) == 2)
        guard case .messages(let alone) = outbox.take() else { Issue.record("the ack alone"); return }
        #expect(alone == [.text(#"{"t":"ack","n":3}"#)])

        // Behind a batch already due, an ack is not held.
        outbox.post("batch 2")
        outbox.postAck(4)
        #expect(holds.load(ordering: .relaxed) == 2, "nothing to wait for")
        guard case .messages(let behind) = outbox.take() else { Issue.record("the batch and the ack"); return }
        #expect(behind == ["batch 2", .text(#"{"t":"ack","n":4}"#)])
    }
}
