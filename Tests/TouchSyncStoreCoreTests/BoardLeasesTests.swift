import Testing
import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncStoreCore

/// The board store's lease rules without PostgreSQL: each transition (claim,
/// commit, renew, lose, adopt, move, fence, restart) with what the store's
/// statements would have returned. The SQL that feeds them is tested against
/// a real PostgreSQL in the store tests.
@Suite("Board leases (the store's rules, no I/O)")
struct BoardLeasesTests {
    let start = ContinuousClock.now

    func leases(holding epochs: [String: Int64] = ["a": 3, "b": 1]) -> BoardLeases {
        BoardLeases(hubName: "hub-1", leaseTimeout: .seconds(4), snapshotEveryBytes: 100, epochs: epochs, progress: [:], now: start)
    }

    func progress(_ user: String, through: UInt64) -> AgentProgress {
        AgentProgress(principal: UserNamespace(user), appliedThrough: through, style: StrokeStyle(rgba: 0xFF, width: 64))
    }

    func cluster(_ names: String...) throws -> ClusterMap {
        try ClusterMap(hubs: names.map { ClusterMap.Hub(name: $0, ingest: "tcp://\($0):1", publish: "tcp://\($0):2", snapshot: "tcp://\($0):3") })
    }

    func isFailed(_ report: BoardStoreReport, _ board: String) -> Bool {
        if case .failed(board, _) = report { true } else { false }
    }

    @Test func aCommitWritesHeldBoardsUnderTheirEpochsAndOwesSnapshots() {
        var leases = leases()
        let appends = [
            BoardLeases.Append(board: "a", agents: [progress("ann", through: 1)]),
            BoardLeases.Append(board: "c", agents: []),  // never claimed here
            BoardLeases.Append(board: "b", agents: [progress("bob", through: 4)]),
            BoardLeases.Append(board: "a", agents: [progress("ann", through: 2)]),
        ]
        let plan = leases.planCommit(appends)
        #expect(plan.written.map(\.index) == [0, 2, 3] && plan.written.map(\.epoch) == [3, 1, 3])
        #expect(plan.boards == ["a", "b"] && plan.notHeld == ["c"])
        // Board b's lease moved under the insert (no row for it): to be lost; a's bytes pass the snapshot threshold.
        let (lost, due) = leases.committed(plan, appends: appends, inserted: ["a": 2], bytes: [60, 30, 50])
        #expect(lost == ["b"])
        #expect(due.map(\.index) == [3] && due.map(\.epoch) == [3], "a's second batch brought it to 110 bytes")
        #expect(leases.sinceSnapshot["a"] == 0)
        #expect(leases.progress["a"]?[UserNamespace("ann")]?.appliedThrough == 2)
        #expect(leases.progress["b"] == nil, "a board whose batch was not inserted keeps no progress from it")
    }

    @Test func aFailedCommitBreaksItsBoardsUntilARestartStoresThem() {
        var leases = leases()
        let appends = [BoardLeases.Append(board: "a", agents: [progress("ann", through: 5)])]
        let plan = leases.planCommit(appends)
        let reports = leases.commitFailed(plan, appends: appends, reason: "connection reset")
        #expect(reports.count == 1 && isFailed(reports[0], "a") && leases.broken == ["a"])
        #expect(leases.progress["a"]?[UserNamespace("ann")]?.appliedThrough == 5, "kept for the restart's snapshot")
        // While broken, nothing of the board is written; its agents' progress still grows.
        let later = [BoardLeases.Append(board: "a", agents: [progress("ann", through: 6)])]
        #expect(leases.planCommit(later).written.isEmpty)
        #expect(leases.progress["a"]?[UserNamespace("ann")]?.appliedThrough == 6)
        // The restart stores the whole board under the lease's epoch, with that progress.
        guard case .store(let epoch, let agents) = leases.planRestart("a") else {
            Issue.record("a broken board held here is restarted by storing it")
            return
        }
        #expect(epoch == 3 && agents == [progress("ann", through: 6)])
        #expect(leases.planRestart("b") == .nothing, "a board that is not broken has nothing to restart")
        guard case .restored("a")? = leases.restarted("a", stored: true) else {
            Issue.record("a stored restart is reported restored")
            return
        }
        #expect(leases.broken.isEmpty && leases.planCommit(later).written.count == 1)
        // A restart whose lease is gone (stored nothing) leaves the board to be lost.
        _ = leases.commitFailed(leases.planCommit(later), appends: later, reason: "again")
        #expect(leases.restarted("a", stored: false) == nil && leases.broken == ["a"])
    }

    @Test func aLostBoardIsNeverWrittenAgainAndNamesItsOwner() throws {
        var leases = leases()
        _ = leases.membersRead(try cluster("hub-1", "hub-2"))
        #expect(!leases.needsMembers(toName: "hub-2") && leases.needsMembers(toName: "hub-3"))
        let reports = leases.lose("a", to: "hub-3", members: try cluster("hub-1", "hub-3"))
        guard reports.count == 2, case .membership(let map) = reports[0], case .moved("a", "hub-3") = reports[1] else {
            Issue.record("expected the new live hubs, then the move: \(reports)")
            return
        }
        #expect(map.hubs.map(\.name) == ["hub-1", "hub-3"])
        #expect(!leases.holds("a") && leases.moved == ["a"])
        let appends = [BoardLeases.Append(board: "a", agents: [progress("ann", through: 9)])]
        #expect(leases.planCommit(appends).written.isEmpty && leases.planCommit(appends).notHeld.isEmpty, "a moved board is skipped, not lost again")
        #expect(leases.planRestart("a") == .nothing)
        // Taken back later (an adoption): written again.
        _ = leases.adopted(RecoveredBoard(name: "a", state: BoardState(), agents: []), epoch: 7, agents: [:])
        #expect(leases.moved.isEmpty && leases.planCommit(appends).written.map(\.epoch) == [7])
    }

    @Test func claimsAskOnlyForBoardsNotHeldAndRefusalsDependOnWhy() {
        let leases = leases()
        #expect(!leases.shouldClaim("a") && leases.shouldClaim("z"))
        #expect(leases.claimRefused(.hello) == .lose)
        #expect(leases.claimRefused(.lookUp) == .checkExists)
        #expect(leases.claimRefused(.adoption) == .nothing)
    }

    @Test func aRenewalLosesLeasesWhoseEpochChangedAndAdoptsWhatThisHubSucceeds() throws {
        var leases = leases()
        let lost = leases.renewed(["a": 3, "b": 2], started: start + .seconds(1))
        #expect(lost == ["b"], "b's epoch moved on: another hub took it")
        #expect(leases.renewedAt == start + .seconds(1))
        #expect(leases.renewed(["a": 3, "b": 1], started: start + .seconds(2)).isEmpty)
        // The live hubs: a report only when they change.
        let members = try cluster("hub-1", "hub-2", "hub-3")
        #expect(leases.membersRead(members).count == 1 && leases.membersRead(members).isEmpty)
        // Lapsed boards: this hub takes those it succeeds to (never its own, never one it holds).
        let lapsed = (0..<40).map { (board: "board-\($0)", holder: "hub-2") } + [(board: "a", holder: "hub-1")]
        let taken = leases.adoptable(lapsed: lapsed)
        #expect(!taken.contains("a"))
        let survivors = try cluster("hub-1", "hub-3")
        for board in lapsed.map(\.board) where board != "a" {
            #expect(taken.contains(board) == (survivors.hub(for: board).name == "hub-1"), "\(board)")
        }
        #expect(!taken.isEmpty && taken.count < 40, "the dead hub's boards are shared among the survivors")
        // A hub that is itself the last holder is not chosen while it still looks live.
        #expect(BoardLeases.successor(for: "x", after: "hub-2", among: members).name != "hub-2")
        // Nobody live known: nothing adopted.
        #expect(self.leases().adoptable(lapsed: lapsed).isEmpty)
    }

    @Test func aRenewalThatFailsPastThreeQuartersOfTheLeaseFencesTheBoards() {
        var leases = leases()
        _ = leases.commitFailed(leases.planCommit([.init(board: "b", agents: [])]), appends: [.init(board: "b", agents: [])], reason: "x")
        // Within three quarters of the 4 s lease: nothing yet (the next renewal may still make it).
        #expect(leases.renewFailed(now: start + .milliseconds(2_999), reason: "timeout").isEmpty)
        // Past it: every held board not failed yet is failed, once.
        let fenced = leases.renewFailed(now: start + .seconds(3), reason: "timeout")
        #expect(fenced.count == 1 && isFailed(fenced[0], "a"), "b was failed already: \(fenced)")
        #expect(leases.broken == ["a", "b"])
        #expect(leases.renewFailed(now: start + .seconds(4), reason: "timeout").isEmpty)
        // A renewal that succeeds starts the count again.
        _ = leases.renewed(["a": 3, "b": 1], started: start + .seconds(5))
        #expect(leases.renewFailed(now: start + .seconds(7), reason: "timeout").isEmpty)
    }

    @Test func aHubWhoseNameWasTakenGivesEveryBoard() {
        var leases = leases()
        #expect(leases.boardsToGive == ["a", "b"])
        for board in leases.boardsToGive { _ = leases.lose(board, to: "hub-1") }
        #expect(leases.epochs.isEmpty && leases.moved == ["a", "b"] && leases.boardsToGive.isEmpty)
    }

    @Test func aLeaseLapsingBeforeTheNextRenewalIsRenewedRightAfterIt() {
        let interval = Duration.milliseconds(625)
        // Lapsing 200 ms from now, before the regular renewal: just after the lapse.
        #expect(BoardLeases.earlyRenewal(untilLapse: .milliseconds(200), interval: interval) == .milliseconds(200) + BoardLeases.pastLapse)
        // A live hub's lease (renewed every interval, so seconds away), or one lapsing at the tick: the tick does it.
        #expect(BoardLeases.earlyRenewal(untilLapse: .milliseconds(4_400), interval: interval) == nil)
        #expect(BoardLeases.earlyRenewal(untilLapse: interval, interval: interval) == nil)
        #expect(BoardLeases.earlyRenewal(untilLapse: .milliseconds(-1), interval: interval) == nil)
    }
}
