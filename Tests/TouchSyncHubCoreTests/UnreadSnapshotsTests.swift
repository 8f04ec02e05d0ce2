import Testing
import TouchSyncHubCore

/// Connections that leave their snapshots unread, on a manual clock with a
/// probe of their unsent bytes given by the test.
@Suite struct UnreadSnapshotsTests {
    static let start = ContinuousClock.now

    @Test func anOwnerWithTooManyUnreadSnapshotsGetsNoMoreAndTheUnreadAreClosed() {
        var limits = UnreadSnapshots.Limits()
        limits.maxBytesPerOwner = 2_000
        limits.patience = .seconds(10)
        var unread = UnreadSnapshots(limits: limits)
        unread.sent(to: 10, owner: "mallory", bytes: 1_000, now: Self.start)
        unread.sent(to: 11, owner: "mallory", bytes: 1_000, now: Self.start)
        #expect(!unread.admits("mallory") && unread.admits("honest"))
        // A second later: 10 has taken everything (0 unsent), 11 has not.
        let unsent: [Int32: Int] = [10: 0, 11: 4096]
        #expect(unread.sweep(now: Self.start + .seconds(1)) { unsent[$0] } == [])
        #expect(unread.admits("mallory") && unread.bytes(of: "mallory") == 1_000)
        // Past the patience, 11 is to be closed, and forgotten.
        #expect(unread.sweep(now: Self.start + .seconds(10)) { unsent[$0] } == [11])
        #expect(unread.count == 0 && unread.bytes == 0)
    }

    @Test func bytesAreJudgedOnlyOnceSettledAndClosedConnectionsAreForgotten() {
        var unread = UnreadSnapshots()
        unread.sent(to: 5, owner: "a", bytes: 10, now: Self.start)
        // At once the probe may say 0 before libzmq wrote anything: not judged yet.
        #expect(unread.sweep(now: Self.start + .milliseconds(50)) { _ in 0 } == [] && unread.count == 1)
        // A closed connection (nil) is forgotten.
        #expect(unread.sweep(now: Self.start + .seconds(1)) { _ in nil } == [] && unread.count == 0)
        // A connection's second snapshot adds up; a reused descriptor is its new owner's alone.
        unread.sent(to: 7, owner: "a", bytes: 10, now: Self.start)
        unread.sent(to: 7, owner: "a", bytes: 5, now: Self.start)
        #expect(unread.bytes(of: "a") == 15)
        unread.sent(to: 7, owner: "b", bytes: 3, now: Self.start)
        #expect(unread.bytes(of: "a") == 0 && unread.bytes(of: "b") == 3 && unread.bytes == 3)
    }

    @Test func theTotalIsBoundedAcrossOwners() {
        var limits = UnreadSnapshots.Limits()
        limits.maxBytesTotal = 3_000
        var unread = UnreadSnapshots(limits: limits)
        for descriptor in Int32(1)...3 { unread.sent(to: descriptor, owner: "owner-\(descriptor)", bytes: 1_000, now: Self.start) }
        #expect(!unread.admits("someone-new"))
    }
}
