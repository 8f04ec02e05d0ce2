import Testing
@testable import TouchSyncHubCore

/// Durability alone: tickets, what each policy waits for, when syncs are
/// due, and failed boards with their retries.
@Suite("Durability")
struct DurabilityTests {
    let start = Moment(nanoseconds: 0)  // the core's own time type

    @Test(arguments: [FsyncPolicy.never, .everyBatch, .interval(.milliseconds(20))])
    func acknowledgementsWaitForWhatThePolicyPromises(policy: FsyncPolicy) {
        var durability = Durability(policy: policy, retryInterval: .seconds(5), now: start)
        #expect(durability.isDurable)
        let tickets = [durability.append(), durability.append()]
        #expect(tickets == [1, 2])
        #expect(!durability.isDurable)
        durability.progress(written: 2, synced: 0)
        #expect(durability.isDurable == (policy == .never))
        durability.progress(written: 2, synced: 2)
        #expect(durability.isDurable)
        durability.progress(written: 1, synced: 1)  // reports never go back
        #expect(durability.isDurable)
    }

    @Test func syncsAreAskedWhenThePolicyWantsThem() {
        var batch = Durability(policy: .everyBatch, retryInterval: .seconds(5), now: start)
        var asked = batch.syncIfDue(force: false, now: start)
        #expect(asked == nil)  // nothing appended
        _ = batch.append()
        _ = batch.append()
        asked = batch.syncIfDue(force: false, now: start)
        #expect(asked == 2)
        asked = batch.syncIfDue(force: false, now: start)
        #expect(asked == nil)  // already asked through 2

        var interval = Durability(policy: .interval(.milliseconds(20)), retryInterval: .seconds(5), now: start)
        _ = interval.append()
        #expect(interval.syncDue == start + .milliseconds(20))
        asked = interval.syncIfDue(force: false, now: start + .milliseconds(19))
        #expect(asked == nil)
        asked = interval.syncIfDue(force: false, now: start + .milliseconds(20))
        #expect(asked == 1)
        #expect(interval.syncDue == nil)
        _ = interval.append()
        #expect(interval.syncDue == start + .milliseconds(40))

        var never = Durability(policy: .never, retryInterval: .seconds(5), now: start)
        _ = never.append()
        asked = never.syncIfDue(force: false, now: start + .seconds(60))
        #expect(asked == nil)
        asked = never.syncIfDue(force: true, now: start)
        #expect(asked == 1)  // stopping syncs whatever the policy
    }

    @Test func aFailedBoardIsRetriedAndSaidAgainOnlyOnceAMinute() {
        var durability = Durability(policy: .everyBatch, retryInterval: .seconds(5), now: start)
        #expect(durability.nextRetry == nil)
        let news = [
            durability.failed("a", reason: "disk full", now: start),
            durability.failed("a", reason: "disk full", now: start + .seconds(5)),
            durability.failed("a", reason: "still full", now: start + .seconds(61)),
            durability.failed("b", reason: "gone", now: start + .seconds(1)),
        ]
        #expect(news == [.first, .again(log: false), .again(log: true), .first])
        #expect(durability.failedBoards["a"]?.reason == "still full")
        #expect(durability.nextRetry == start + .seconds(5))
        let early = durability.retriesDue(now: start + .seconds(4))
        let due = durability.retriesDue(now: start + .seconds(6))
        #expect(early.isEmpty && due == ["a", "b"])
        #expect(durability.nextRetry == start + .seconds(11))
        let restored = [durability.restored("a"), durability.restored("a")]
        #expect(restored == [true, false])
        durability.forget("b")
        #expect(durability.failedBoards.isEmpty && durability.nextRetry == nil)
    }
}
