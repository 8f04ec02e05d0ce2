import Testing
@testable import TouchSyncHubCore

/// The publisher alone: when dirty boards are published, and which heartbeats are due.
@Suite("Publisher")
struct PublisherTests {
    let start = Moment(nanoseconds: 0)  // the core's own time type

    func publisher(interval: Duration = .milliseconds(10)) -> Publisher {
        Publisher(publishInterval: interval, heartbeatInterval: .seconds(1), subscribeHeartbeatInterval: .milliseconds(100), now: start)
    }

    @Test func dirtyBoardsArePublishedOnceAnIntervalApart() {
        var publisher = publisher()
        var due: [Int] = [99]
        #expect(!publisher.takeDue(force: false, now: start, into: &due))  // nothing dirty
        #expect(publisher.nextDeadline == start + .seconds(1))  // only the heartbeat
        publisher.markDirty(3)
        publisher.markDirty(1)
        #expect(publisher.nextDeadline == start)
        #expect(publisher.takeDue(force: false, now: start, into: &due))
        #expect(due == [3, 1] && publisher.dirtyBoards.isEmpty)
        publisher.markDirty(2)
        #expect(publisher.nextDeadline == start + .milliseconds(10))
        #expect(!publisher.takeDue(force: false, now: start + .milliseconds(5), into: &due))
        #expect(publisher.takeDue(force: true, now: start + .milliseconds(5), into: &due))  // inspect, stop
        #expect(due == [2])
        publisher.markDirty(4)
        publisher.markDirty(5)
        publisher.forget(4)
        #expect(publisher.takeDue(force: false, now: start + .milliseconds(15), into: &due))
        #expect(due == [5])
    }

    @Test func aFloodOfSubscribersOwesOneHeartbeatPerInterval() {
        var publisher = publisher()
        var sent = (0..<50).filter { _ in publisher.subscriberArrived(at: 7, now: start) }.count
        #expect(sent == 1)
        #expect(publisher.nextDeadline == start + .milliseconds(100))
        #expect(publisher.owedHeartbeatsDue(now: start + .milliseconds(99)).isEmpty)
        #expect(publisher.owedHeartbeatsDue(now: start + .milliseconds(100)) == [7])
        #expect(publisher.owedHeartbeatsDue(now: start + .milliseconds(300)).isEmpty)  // owed once, paid
        sent = [publisher.subscriberArrived(at: 7, now: start + .milliseconds(300))].filter { $0 }.count
        #expect(sent == 1)
        _ = publisher.subscriberArrived(at: 8, now: start)
        _ = publisher.subscriberArrived(at: 8, now: start + .milliseconds(1))
        publisher.forget(8)
        #expect(publisher.owedHeartbeatsDue(now: start + .seconds(2)).isEmpty)
    }

    @Test func everyBoardsHeartbeatIsDueEveryInterval() {
        var publisher = publisher()
        let checks = [
            publisher.periodicHeartbeatDue(now: start + .milliseconds(999)),
            publisher.periodicHeartbeatDue(now: start + .seconds(1)),
            publisher.periodicHeartbeatDue(now: start + .milliseconds(1500)),
            publisher.periodicHeartbeatDue(now: start + .seconds(2)),
        ]
        #expect(checks == [false, true, false, true])
    }
}
