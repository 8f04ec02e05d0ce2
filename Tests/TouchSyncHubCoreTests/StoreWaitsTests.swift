import Testing
import TouchSyncCore
@testable import TouchSyncHubCore

/// What waits for the board store, alone: the first waiter asks the store, bounds refuse the rest.
@Suite("StoreWaits")
struct StoreWaitsTests {
    func hello(_ board: String, _ user: String) -> StoreWaits.ParkedHello {
        StoreWaits.ParkedHello(
            peer: Peer(id: PeerID(Array(user.utf8)), principal: UserNamespace(user)), hello: AgentHello(board: board, sessionID: [1]), bytes: 0)
    }

    @Test func theFirstWaiterAsksTheStoreAndAnswersComeInArrivalOrder() {
        var waits = StoreWaits()
        #expect(waits.park(hello("b", "ann")) == .parked(askStore: true))
        #expect(waits.park(hello("b", "bob")) == .parked(askStore: false))
        // A claim under way answers snapshot requests too: no look-up is asked.
        #expect(waits.park(StoreWaits.ParkedSnapshot(peer: PeerID([1]), requestID: 7), board: "b") == .parked(askStore: false))
        #expect(waits.park(StoreWaits.ParkedSnapshot(peer: PeerID([1]), requestID: 8), board: "c") == .parked(askStore: true))
        #expect(waits.isWaiting(for: "b") && waits.isWaiting(for: "c") && !waits.isWaiting(for: "d"))
        #expect(waits.waitingHellos == 2 && waits.waitingSnapshots == 2)
        let hellos = waits.takeHellos(for: "b")
        #expect(hellos.map(\.peer.principal.rawValue) == ["ann", "bob"])
        #expect(waits.takeHellos(for: "b").isEmpty)
        #expect(waits.takeSnapshots(for: "b").map(\.requestID) == [7])
        #expect(waits.takeSnapshots(for: "c").map(\.requestID) == [8])
        #expect(waits.waitingHellos == 0 && waits.waitingSnapshots == 0 && !waits.isWaiting(for: "b"))
    }

    @Test func floodsArePastTheBounds() {
        var waits = StoreWaits()
        let parked = (0..<300).map { waits.park(hello("b", "u\($0)")) }
        #expect(parked.filter { $0 != .full }.count == StoreWaits.maxHellosPerBoard)
        let snapshots = (0..<100).map { waits.park(StoreWaits.ParkedSnapshot(peer: PeerID([2]), requestID: UInt64($0)), board: "s") }
        #expect(snapshots.filter { $0 != .full }.count == StoreWaits.maxSnapshotsPerBoard)
        // In all, over many boards.
        var boards = 0
        while waits.park(hello("board-\(boards)", "x")) != .full { boards += 1 }
        #expect(waits.waitingHellos == StoreWaits.maxWaiting)
    }
}

/// The per-user quotas and the snapshot allowance, alone.
@Suite("UserQuotas")
struct UserQuotasTests {
    let start = Moment(nanoseconds: 0)  // the core's own time type
    let ann = UserNamespace("ann")

    @Test func storedSamplesBoundNewStrokes() {
        var quotas = UserQuotas(maxSamplesPerUser: 100, maxBoardsPerUser: 5, maxBoardsPerUserPerMinute: 2)
        #expect(quotas.mayBeginStroke(ann, inProgress: 99))
        quotas.count(60, of: ann)
        #expect(quotas.stored(by: ann) == 60 && quotas.mayBeginStroke(ann, inProgress: 39) && !quotas.mayBeginStroke(ann, inProgress: 40))
        quotas.count(-60, of: ann)
        #expect(quotas.stored(by: ann) == 0)
    }

    @Test func boardsCreatedAreBoundedInAllAndPerMinute() {
        var quotas = UserQuotas(maxSamplesPerUser: 100, maxBoardsPerUser: 3, maxBoardsPerUserPerMinute: 2)
        let first = [quotas.createBoard(by: ann, now: start), quotas.createBoard(by: ann, now: start)]
        #expect(first.allSatisfy { $0 == nil })
        let later = [
            quotas.createBoard(by: ann, now: start + .seconds(59)), quotas.createBoard(by: ann, now: start + .seconds(60)),
            quotas.createBoard(by: ann, now: start + .seconds(200)), quotas.createBoard(by: UserNamespace("bob"), now: start),
        ]
        #expect(later[0]?.message.contains("in the last minute") == true)
        #expect(later[1] == nil)
        #expect(later[2]?.message.contains("its maximum of 3 boards") == true)
        #expect(later[3] == nil)  // per user
    }

    @Test func snapshotRequestsAreCountedPerRequesterAndSecond() {
        var allowance = SnapshotAllowance(perSecond: 2)
        let admitted = (0..<5).map { _ in allowance.admit([1], now: start) }
        #expect(admitted == [true, true, false, false, false])
        let other = allowance.admit([2], now: start + .milliseconds(10))  // another requester
        let next = allowance.admit([1], now: start + .seconds(1))  // the next second
        #expect(other && next)
    }
}
