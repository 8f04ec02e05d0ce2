import Testing
import TouchSyncGatewayCore
import TouchSyncWebWire

/// The gateway's tab rules on a manual clock: an instant that moves only
/// when the test says, no sockets, no sleeps.
@Suite("Gateway core")
struct GatewayCoreTests {
    static let start = ContinuousClock.now

    static func core(_ configure: (inout GatewayCore.Configuration) -> Void = { _ in }) -> GatewayCore {
        var configuration = GatewayCore.Configuration()
        configure(&configuration)
        return GatewayCore(configuration: configuration)
    }

    /// Opens a session of `user` on `board` for `connection` (after admission).
    static func open(_ core: inout GatewayCore, _ token: String, user: String? = nil, board: String = "b", connection: UInt64, now: ContinuousClock.Instant = start)
        -> [GatewayCore.Action]
    {
        guard case .success(let evictions) = core.admit(user: user, now: now) else { return [] }
        return evictions + core.open(token: token, namespace: "web:" + token, board: board, user: user, displayName: token, connection: connection)
    }

    @Test func pageNumbersAreHandedOnceInOrderAndAcknowledgedAsTheHubAcknowledges() {
        var core = Self.core()
        _ = Self.open(&core, "t1", connection: 1)
        let value1 = core.number(2, of: "t1")
        #expect(value1 == .outOfOrder(expected: 1))
        let value2 = core.number(1, of: "t1")
        #expect(value2 == .next)
        core.handed(1, of: "t1", agentMessages: 1)
        let value3 = core.number(1, of: "t1")
        #expect(value3 == .resent, "a resend is skipped: the agent delivers it")
        let value4 = core.number(2, of: "t1")
        #expect(value4 == .next)
        core.handed(2, of: "t1", agentMessages: 1)  // refused here: no agent message of its own
        let value5 = core.number(3, of: "t1")
        #expect(value5 == .next)
        core.handed(3, of: "t1", agentMessages: 2)
        // The hub acknowledges the agent's first message: pages 1 and 2 are done, 3 is not.
        let value6 = core.acknowledged("t1", agentThrough: 1)
        #expect(value6 == [.ack(connection: 1, through: 2)])
        let value7 = core.acknowledged("t1", agentThrough: 1)
        #expect(value7 == [], "told once")
        let value8 = core.acknowledged("t1", agentThrough: 2)
        #expect(value8 == [.ack(connection: 1, through: 3)])
        #expect(core.session("t1")?.ackedThrough == 3)
    }

    @Test func aDroppedTabIsWaitedForThenItsAgentEnds() {
        var core = Self.core { $0.reconnectGrace = .seconds(30) }
        _ = Self.open(&core, "t1", connection: 1)
        let value9 = core.number(1, of: "t1")
        #expect(value9 == .next)
        core.handed(1, of: "t1", agentMessages: 1)
        let value10 = core.detach("t1", 2, now: Self.start)
        #expect(value10 == false, "another connection's end changes nothing")
        let value11 = core.detach("t1", 1, now: Self.start)
        #expect(value11)
        #expect(core.nextDeadline == Self.start + .seconds(30))
        // Acknowledged while away: told in the welcome (acked), not as an ack to no one.
        let value12 = core.acknowledged("t1", agentThrough: 1)
        #expect(value12 == [])
        let value13 = core.tick(now: Self.start + .seconds(29))
        #expect(value13 == [])
        // Back in time, on a new connection: the same session, its acks current.
        let back = core.resume("t1", board: "b", user: nil, on: 3)
        #expect(back?.ackedThrough == 1 && back?.connection == 3 && back?.handledThrough == 1)
        let value14 = core.resume("t1", board: "other", user: nil, on: 4)
        #expect(value14 == nil, "another board's tab does not take it")
        #expect(core.nextDeadline == nil)
        // Dropped again and not back: its agent ends after the grace, not before.
        let value15 = core.detach("t1", 3, now: Self.start + .seconds(40))
        #expect(value15)
        let value16 = core.tick(now: Self.start + .seconds(69))
        #expect(value16 == [])
        let ended = core.tick(now: Self.start + .seconds(70))
        #expect(ended == [.endAgent(token: "t1", namespace: "web:t1", why: .didNotComeBack), .usersChanged(board: "b")])
        #expect(core.session("t1") == nil && core.resume("t1", board: "b", user: nil, on: 5) == nil)
    }

    @Test func aFullGatewayEndsTheLongestWaitingSessionThenRefuses() {
        var core = Self.core { $0.maxTabs = 3 }
        _ = Self.open(&core, "a", connection: 1)
        _ = Self.open(&core, "b", connection: 2)
        _ = Self.open(&core, "c", connection: 3)
        _ = core.detach("b", 2, now: Self.start + .seconds(1))
        _ = core.detach("c", 3, now: Self.start + .seconds(2))
        // Full: b waited longest for its tab, so it makes room.
        let room = try? core.admit(user: nil, now: Self.start + .seconds(3)).get()
        #expect(room == [.endAgent(token: "b", namespace: "web:b", why: .evicted), .usersChanged(board: "b")])
        _ = core.open(token: "d", namespace: "web:d", board: "b", user: nil, displayName: "d", connection: 4)
        _ = core.admit(user: nil, now: Self.start + .seconds(4))  // evicts c
        _ = core.open(token: "e", namespace: "web:e", board: "b", user: nil, displayName: "e", connection: 5)
        // Every session has its tab now: refused in words.
        guard case .failure(let full) = core.admit(user: nil, now: Self.start + .seconds(5)) else {
            Issue.record("admitted past the maximum")
            return
        }
        #expect(full.code == "GATEWAY_FULL" && core.sessionCount == 3)
    }

    @Test func oneUserMayOpenOnlySoManyTabs() {
        var core = Self.core { $0.maxTabsPerUser = 2 }
        _ = Self.open(&core, "a1", user: "ann", connection: 1)
        _ = Self.open(&core, "a2", user: "ann", connection: 2)
        guard case .failure(let refused) = core.admit(user: "ann", now: Self.start) else {
            Issue.record("a third tab of ann")
            return
        }
        #expect(refused.code == "TOO_MANY_TABS")
        #expect((try? core.admit(user: "ben", now: Self.start).get()) == [], "another user is not held back")
        let value17 = core.close("a1")
        #expect(value17 == [.endAgent(token: "a1", namespace: "web:a1", why: .closed), .usersChanged(board: "b")])
        #expect((try? core.admit(user: "ann", now: Self.start).get()) == [])
    }

    @Test func theUsersListFollowsNamesColoursAndConnections() {
        var core = Self.core()
        _ = Self.open(&core, "t2", connection: 2)
        _ = Self.open(&core, "t1", user: "ann", connection: 1)
        #expect(core.users(of: "b").map(\.user) == ["web:t1", "web:t2"])
        let value18 = core.colour("t2", 0xFF00_00FF)
        #expect(value18 == [.usersChanged(board: "b")])
        let value19 = core.colour("t2", 0xFF00_00FF)
        #expect(value19 == [], "the same colour again changes nothing")
        #expect((try? core.rename("t2", to: "  Émile  ").get()) == [.usersChanged(board: "b")])
        #expect(core.users(of: "b").last == BrowserMessage.TabUser(user: "web:t2", name: "Émile", rgba: 0xFF00_00FF))
        guard case .failure(let fixed) = core.rename("t1", to: "x"), case .failure(let empty) = core.rename("t2", to: " \n"),
            case .failure(let watcher) = core.rename("nobody", to: "x")
        else {
            Issue.record("a rename that should be refused was not")
            return
        }
        #expect(fixed.code == "NAME_FIXED" && empty.code == "MALFORMED" && watcher.code == "NAME_FIXED")
        #expect((try? core.rename("t2", to: String(repeating: "x", count: 60)).get()) != nil)
        #expect(core.session("t2")?.displayName.count == 40)
        _ = core.detach("t1", 1, now: Self.start)
        #expect(core.users(of: "b").map(\.user) == ["web:t2"], "a tab away is not listed")
    }

    @Test func aBoardNobodyUsesIsUnfollowedAfterItsGrace() {
        var core = Self.core { $0.boardIdleGrace = .seconds(30); $0.reconnectGrace = .seconds(10) }
        let value20 = core.use(board: "b", now: Self.start)
        #expect(value20)
        let value21 = core.use(board: "b", now: Self.start)
        #expect(!value21, "followed once")
        core.join(7, board: "b", now: Self.start)
        #expect(core.nextDeadline == nil, "a tab watches it")
        core.leave(7, board: "b", now: Self.start + .seconds(5))
        #expect(core.nextDeadline == Self.start + .seconds(35))
        // A session waiting for its tab keeps the board followed.
        _ = Self.open(&core, "t", connection: 8)
        _ = core.detach("t", 8, now: Self.start + .seconds(6))
        let value22 = core.tick(now: Self.start + .seconds(16))
        #expect(value22.contains(.endAgent(token: "t", namespace: "web:t", why: .didNotComeBack)))
        let value23 = core.tick(now: Self.start + .seconds(34))
        #expect(value23 == [])
        let value24 = core.tick(now: Self.start + .seconds(35))
        #expect(value24 == [.unfollow(board: "b")])
        #expect(core.followedBoards.isEmpty && core.nextDeadline == nil)
    }
}
