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
    static func open(
        _ core: inout GatewayCore, _ token: String, user: String? = nil, address: String = "10.0.0.1", board: String = "b", connection: UInt64,
        now: ContinuousClock.Instant = start
    ) -> [GatewayCore.Action] {
        guard case .success(let evictions) = core.admit(user: user, address: address, now: now) else { return [] }
        return evictions
            + core.open(token: token, namespace: "web:" + token, board: board, user: user, address: address, displayName: token, connection: connection)
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

    /// A hub refusal names the agent's post; the tab hears it as a refusal of the page number that made it.
    @Test func aHubRefusalIsTiedToThePageNumberThatPostedIt() {
        var core = Self.core()
        _ = Self.open(&core, "t1", connection: 1)
        for (page, posted) in [(1, 1), (2, 1), (3, 2), (4, 3)] as [(UInt64, UInt64)] {
            _ = core.number(page, of: "t1")
            core.handed(page, of: "t1", agentMessages: posted)  // page 2 was refused by the gateway: it posted nothing
        }
        #expect(core.page(of: "t1", posted: 1) == 1)
        #expect(core.page(of: "t1", posted: 2) == 3)
        #expect(core.page(of: "t1", posted: 3) == 4)
        #expect(core.page(of: "t1", posted: 4) == nil, "not posted yet")
        // Handed as the post it is about to make (before the hub can refuse it), then refused here after all.
        _ = core.number(5, of: "t1")
        core.handed(5, of: "t1", agentMessages: 4)
        #expect(core.page(of: "t1", posted: 4) == 5)
        core.notPosted(5, of: "t1")
        #expect(core.page(of: "t1", posted: 4) == nil)
        _ = core.acknowledged("t1", agentThrough: 2)
        #expect(core.page(of: "t1", posted: 1) == nil && core.page(of: "t1", posted: 3) == 4, "acknowledged pages are done")
    }

    @Test func aFullGatewayEndsTheLongestWaitingSessionThenRefuses() {
        var core = Self.core {
            $0.maxSessions = 3
            $0.maxTabsPerAddress = nil
        }
        _ = Self.open(&core, "a", connection: 1)
        _ = Self.open(&core, "b", connection: 2)
        _ = Self.open(&core, "c", connection: 3)
        _ = core.detach("b", 2, now: Self.start + .seconds(1))
        _ = core.detach("c", 3, now: Self.start + .seconds(2))
        // Full: b waited longest for its tab, so it makes room.
        let room = try? core.admit(user: nil, address: "10.0.0.1", now: Self.start + .seconds(3)).get()
        #expect(room == [.endAgent(token: "b", namespace: "web:b", why: .evicted), .usersChanged(board: "b")])
        _ = core.open(token: "d", namespace: "web:d", board: "b", user: nil, address: "10.0.0.1", displayName: "d", connection: 4)
        _ = core.admit(user: nil, address: "10.0.0.1", now: Self.start + .seconds(4))  // evicts c
        // Admitted but not open yet (its agent waits for the hub's welcome): the place is reserved.
        guard case .failure(let reserved) = core.admit(user: nil, address: "10.0.0.2", now: Self.start + .seconds(4)) else {
            Issue.record("a reserved place was given twice")
            return
        }
        #expect(reserved.code == "GATEWAY_FULL")
        _ = core.open(token: "e", namespace: "web:e", board: "b", user: nil, address: "10.0.0.1", displayName: "e", connection: 5)
        // Every session has its tab now: refused in words.
        guard case .failure(let full) = core.admit(user: nil, address: "10.0.0.3", now: Self.start + .seconds(5)) else {
            Issue.record("admitted past the maximum")
            return
        }
        #expect(full.code == "GATEWAY_FULL" && core.sessionCount == 3)
        // A refused agent gives its reservation back.
        _ = core.close("e")
        _ = try? core.admit(user: nil, address: "10.0.0.3", now: Self.start + .seconds(6)).get()
        core.cancelAdmission(user: nil, address: "10.0.0.3")
        #expect((try? core.admit(user: nil, address: "10.0.0.4", now: Self.start + .seconds(6)).get()) == [])
    }

    @Test func seatsAreLimitedPerGatewayUserAndAddressWatchersToo() {
        var core = Self.core {
            $0.maxTabs = 6
            $0.maxTabsPerUser = 2
            $0.maxTabsPerAddress = 3
        }
        // Watchers take seats as drawers do (a seat is a connected tab, session or not).
        #expect((try? core.seat(1, user: "ann", address: "10.0.0.1").get()) != nil)
        #expect((try? core.seat(2, user: "ann", address: "10.0.0.2").get()) != nil)
        guard case .failure(let ann) = core.seat(3, user: "ann", address: "10.0.0.3") else {
            Issue.record("a third seat of ann")
            return
        }
        #expect(ann.code == "TOO_MANY_TABS" && ann.message.contains("--max-tabs-per-user"), "\(ann)")
        #expect((try? core.seat(4, user: nil, address: "10.0.0.9").get()) != nil)
        #expect((try? core.seat(5, user: nil, address: "10.0.0.9").get()) != nil)
        #expect((try? core.seat(6, user: nil, address: "10.0.0.9").get()) != nil)
        guard case .failure(let address) = core.seat(7, user: nil, address: "10.0.0.9") else {
            Issue.record("a fourth seat of one address")
            return
        }
        #expect(address.code == "TOO_MANY_TABS" && address.message.contains("--max-tabs-per-address"), "\(address)")
        #expect((try? core.seat(8, user: "ben", address: "10.0.0.4").get()) != nil)
        guard case .failure(let full) = core.seat(9, user: nil, address: "10.0.0.5") else {
            Issue.record("a seventh seat")
            return
        }
        #expect(full.code == "GATEWAY_FULL" && full.message.contains("--max-tabs"))
        // A closed WebSocket frees its seat at once.
        core.unseat(5)
        #expect(core.seatCount == 5)
        #expect((try? core.seat(7, user: nil, address: "10.0.0.9").get()) != nil)
        core.unseat(1)
        #expect((try? core.seat(3, user: "ann", address: "10.0.0.3").get()) != nil)
    }

    @Test func aDroppedTabsSeatIsFreeAtOnceWhileItsSessionWaits() {
        var core = Self.core {
            $0.maxTabs = 1
            $0.maxTabsPerAddress = nil
        }
        #expect((try? core.seat(1, user: nil, address: "10.0.0.1").get()) != nil)
        _ = Self.open(&core, "a", connection: 1)
        _ = core.detach("a", 1, now: Self.start)
        core.unseat(1)
        #expect((try? core.seat(2, user: nil, address: "10.0.0.2").get()) != nil, "a new tab does not wait for the grace of one that is gone")
        #expect(core.session("a") != nil, "the session still waits for its tab")
        core.unseat(2)
        #expect(core.resume("a", board: "b", user: nil, on: 3) != nil)
    }

    @Test func oneUserOrAddressKeepsOnlySoManySessionsEndingItsOwnLongestWaiting() {
        var core = Self.core {
            $0.maxTabsPerUser = 2
            $0.maxTabsPerAddress = 2
        }
        _ = Self.open(&core, "a1", user: "ann", connection: 1)
        _ = Self.open(&core, "a2", user: "ann", connection: 2)
        guard case .failure(let refused) = core.admit(user: "ann", address: "10.0.0.1", now: Self.start) else {
            Issue.record("a third tab of ann")
            return
        }
        #expect(refused.code == "TOO_MANY_TABS")
        #expect((try? core.admit(user: "ben", address: "10.0.0.1", now: Self.start).get()) == [], "another user is not held back")
        // ann's dropped tab makes room for ann's new one (not for anyone else's).
        _ = core.detach("a1", 1, now: Self.start)
        let room = try? core.admit(user: "ann", address: "10.0.0.1", now: Self.start + .seconds(1)).get()
        #expect(room == [.endAgent(token: "a1", namespace: "web:a1", why: .evicted), .usersChanged(board: "b")])
        // Guests are counted by address.
        _ = Self.open(&core, "g1", address: "10.0.0.7", connection: 3)
        _ = Self.open(&core, "g2", address: "10.0.0.7", connection: 4)
        guard case .failure(let guest) = core.admit(user: nil, address: "10.0.0.7", now: Self.start) else {
            Issue.record("a third guest session of one address")
            return
        }
        #expect(guest.code == "TOO_MANY_TABS")
        #expect((try? core.admit(user: nil, address: "10.0.0.8", now: Self.start).get()) == [])
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
        #expect((try? core.rename("t2", to: "  Émile  ", now: Self.start).get()) == [.usersChanged(board: "b")])
        #expect((try? core.rename("t2", to: "Émile", now: Self.start).get()) == [], "the same name again is not sent to anyone")
        #expect(core.users(of: "b").last == BrowserMessage.TabUser(user: "web:t2", name: "Émile", rgba: 0xFF00_00FF))
        guard case .failure(let fixed) = core.rename("t1", to: "x", now: Self.start),
            case .failure(let empty) = core.rename("t2", to: " \n", now: Self.start),
            case .failure(let watcher) = core.rename("nobody", to: "x", now: Self.start)
        else {
            Issue.record("a rename that should be refused was not")
            return
        }
        #expect(fixed.code == "NAME_FIXED" && empty.code == "MALFORMED" && watcher.code == "NAME_FIXED")
        #expect((try? core.rename("t2", to: String(repeating: "x", count: 60), now: Self.start).get()) != nil)
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

    /// A crowd joining one board: the first change is sent at once, the
    /// changes within the interval after it go together in one list when the
    /// interval has passed, and each board is paced on its own.
    @Test func aBoardsUsersListGoesAtMostOncePerInterval() {
        var core = Self.core { $0.usersListInterval = .milliseconds(100) }
        core.join(1, board: "b", now: Self.start)
        core.join(2, board: "c", now: Self.start)
        let first = core.usersListDue("b", now: Self.start)
        #expect(first, "the first change goes at once")
        #expect(core.nextDeadline == nil, "nothing owed")
        var due: [Bool] = []
        for step in 1...50 { due.append(core.usersListDue("b", now: Self.start + .milliseconds(step))) }
        #expect(!due.contains(true), "fifty joins within the interval send nothing yet")
        let otherBoard = core.usersListDue("c", now: Self.start + .milliseconds(20))
        #expect(otherBoard, "another board is paced on its own")
        #expect(core.nextDeadline == Self.start + .milliseconds(100))
        let early = core.tick(now: Self.start + .milliseconds(99))
        #expect(early == [])
        let owed = core.tick(now: Self.start + .milliseconds(100))
        #expect(owed == [.usersChanged(board: "b")], "one list for all of them")
        let sent = core.usersListDue("b", now: Self.start + .milliseconds(100))
        #expect(sent, "the adapter sends it")
        #expect(core.nextDeadline == nil)
        let quiet = core.tick(now: Self.start + .milliseconds(300))
        #expect(quiet == [], "nothing changed since: nothing more is sent")
        let later = core.usersListDue("b", now: Self.start + .milliseconds(300))
        #expect(later, "a change after a quiet interval goes at once")
    }
}

/// Names others see, and the allowances a tab's messages draw from.
@Suite("Gateway names and allowances")
struct GatewayAllowanceTests {
    static let start = ContinuousClock.now

    @Test func namesAreBoundedInCharactersAndBytes() {
        #expect(DisplayName.cleaned("  Émile  ") == "Émile")
        #expect(DisplayName.cleaned(String(repeating: "x", count: 60)) == String(repeating: "x", count: 40))
        // One character of 12,000 combining marks is 24,001 bytes: nothing of it fits in 120.
        let heavy = "e" + String(repeating: "\u{301}", count: 12_000)
        #expect(heavy.count == 1)
        #expect(DisplayName.cleaned(heavy) == nil)
        let name = DisplayName.cleaned(String(repeating: "é\u{301}\u{302}", count: 40))
        #expect((name?.utf8.count ?? 999) <= DisplayName.maxBytes && (name?.count ?? 0) > 0)
        #expect(DisplayName.cleaned("ann\u{7}") == nil && DisplayName.cleaned(" \n ") == nil)
    }

    @Test func renamesAreRateLimited() {
        var core = GatewayCore(configuration: .init())
        _ = core.admit(user: nil, address: "a", now: Self.start)
        _ = core.open(token: "t", namespace: "web:t", board: "b", user: nil, address: "a", displayName: "t", connection: 1)
        for index in 0..<5 { #expect((try? core.rename("t", to: "n\(index)", now: Self.start).get()) == [.usersChanged(board: "b")]) }
        guard case .failure(let limited) = core.rename("t", to: "n5", now: Self.start) else {
            Issue.record("a sixth rename at once")
            return
        }
        #expect(limited.code == "RATE_LIMITED")
        #expect(core.session("t")?.displayName == "n4")
        #expect((try? core.rename("t", to: "n5", now: Self.start + .seconds(1)).get()) == [.usersChanged(board: "b")], "a second later there is room")
    }

    @Test func aTabsAllowanceRefillsAtItsRate() {
        var limits = TabAllowance.Limits()
        limits.messagesPerSecond = 10
        limits.messageBurst = 20
        var allowance = TabAllowance(limits, now: Self.start)
        var taken = 0
        while allowance.message(now: Self.start) { taken += 1 }
        #expect(taken == 20, "the burst")
        let next = allowance.nextMessage(now: Self.start)
        #expect(next == Self.start + .milliseconds(100))
        let early = allowance.message(now: Self.start + .milliseconds(50))
        let due = allowance.message(now: Self.start + .milliseconds(160))
        #expect(!early && due)
        var later = 0
        while allowance.message(now: Self.start + .seconds(10)) { later += 1 }
        #expect(later == 20, "never more than the burst saved up")
        // Resyncs have their own, smaller allowance.
        var resyncs: [Bool] = []
        for _ in 0..<4 { resyncs.append(allowance.resync(now: Self.start)) }
        resyncs.append(allowance.resync(now: Self.start + .seconds(1)))
        #expect(resyncs == [true, true, true, false, true])
    }
}
