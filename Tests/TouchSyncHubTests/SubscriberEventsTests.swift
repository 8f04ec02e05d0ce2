import TestSupport
import Testing
import TouchSyncClient
import TouchSyncCore

/// A subscriber whose events nobody reads keeps none: with `reportsEvents`
/// false the stream ends at once (a gateway board once kept up to 10,000
/// unread batches); with it true, the same drawing is reported.
@Suite("Subscriber events", .timeLimit(.minutes(3)))
struct SubscriberEventsTests {
    @Test func unreadEventsAreNotKept() async throws {
        let hub = try await TestHub.start()
        defer { Task { await hub.hub.stop() } }
        let quiet = try hub.subscriber(board: "quiet") { $0.reportsEvents = false }
        let told = try hub.subscriber(board: "quiet")
        defer { Task { await quiet.stop(); await told.stop() } }
        // Both live before the drawing, so it reaches them as batches, not in their snapshots.
        #expect(await quiet.waitUntil(sequence: 0))
        #expect(await told.waitUntil(sequence: 0))
        let agent = try hub.agent(board: "quiet")
        defer { Task { await agent.stop() } }
        try agent.touchesBegan([TouchInput(id: 1, coalesced: [point(1, 1, 1)])])
        try agent.touchesEnded([TouchInput(id: 1, coalesced: [point(2, 2, 1.01)])])
        #expect(await agent.flush())
        #expect(await eventually { await quiet.replica()?.acceptedStrokes.count == 1 }, "the replica is kept all the same")
        var reported = 0
        for await _ in quiet.events { reported += 1 }
        #expect(reported == 0)
        var applied = 0
        for await event in told.events {
            if case .applied = event { applied += 1 }
            if applied > 0 { break }
        }
        #expect(applied == 1)
    }
}
