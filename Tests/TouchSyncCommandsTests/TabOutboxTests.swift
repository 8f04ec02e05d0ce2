import Testing
@testable import TouchSyncWeb

/// A tab's outbox: bounded, and a tab that falls behind gets a snapshot instead of its backlog.
@Suite("Gateway: per-tab outboxes")
struct TabOutboxTests {
    @Test func aSlowTabIsResyncedInsteadOfQueuingWithoutBound() async {
        let outbox = TabOutbox(limit: 4)
        outbox.requestSnapshot()  // a new tab starts from a snapshot
        guard case .snapshot = await outbox.next() else { Issue.record("a new tab gets a snapshot first"); return }
        for index in 0..<3 { #expect(outbox.post("batch \(index)")) }
        guard case .messages(let three) = await outbox.next() else { Issue.record("queued batches"); return }
        #expect(three == ["batch 0", "batch 1", "batch 2"], "in order, each once")

        // The tab stops reading: four fit, the fifth overflows and everything queued is replaced by a snapshot.
        for index in 0..<4 { #expect(outbox.post("batch \(index)")) }
        #expect(!outbox.post("batch 4"))
        #expect(!outbox.post("batch 5"), "batches before the snapshot are moot")
        #expect(outbox.overflows == 1)
        guard case .snapshot = await outbox.next() else { Issue.record("an overflowed tab gets a snapshot"); return }
        #expect(outbox.post("batch 6"), "after the snapshot, batches queue again")
        guard case .messages(let after) = await outbox.next() else { Issue.record("batches after the snapshot"); return }
        #expect(after == ["batch 6"])
    }

    @Test func aWaitingWriterWakesForPostsAndClose() async {
        let outbox = TabOutbox(limit: 8)
        async let next = outbox.next()
        try? await Task.sleep(for: .milliseconds(20))
        outbox.post("hello")
        guard case .messages(let messages) = await next else { Issue.record("woken by a post"); return }
        #expect(messages == ["hello"])
        async let closed = outbox.next()
        try? await Task.sleep(for: .milliseconds(20))
        outbox.close()
        guard case .closed = await closed else { Issue.record("woken by close"); return }
        #expect(outbox.post("late"), "posting to a closed outbox is harmless")
    }
}
