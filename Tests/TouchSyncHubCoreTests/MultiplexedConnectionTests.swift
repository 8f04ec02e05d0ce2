import HubCoreHarness
import Testing
import TouchSyncAccess
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire

/// One connection carrying many sessions, each on a channel (docs/protocol.md,
/// "Multiplexed connections"), on `HubCore` alone with a manual clock.
@Suite struct MultiplexedConnectionTests {
    /// Channel `channel` of the gateway connection `gateway` (a plain hub: the routing id's namespace).
    static func channel(_ channel: UInt32, of gateway: String = "gw") -> Peer {
        Peer(id: PeerID(Array(gateway.utf8), channel: channel), principal: UserNamespace(gateway))
    }

    static func hello(_ hub: CoreHarness, _ peer: Peer, actAs: String, board: String = "b", session: String = "s") -> [HubAction] {
        hub.message(peer, .hello(AgentHello(board: board, sessionID: Array(session.utf8), actAs: actAs)), bytes: 40)
    }

    @Test func eachChannelIsItsOwnUserWithItsOwnNumbering() throws {
        let hub = CoreHarness()
        let (one, two) = (Self.channel(1), Self.channel(2))
        let welcomes = Self.hello(hub, one, actAs: "web:ann") + Self.hello(hub, two, actAs: "web:ben")
        #expect(welcomes.replies(to: one).compactMap { if case .welcome(let w) = $0 { w.user.rawValue } else { nil } } == ["web:ann"])
        #expect(welcomes.replies(to: two).compactMap { if case .welcome(let w) = $0 { w.user.rawValue } else { nil } } == ["web:ben"])

        // The same touch id on both channels is two touches, numbered apart.
        _ = hub.message(one, .numbered(sequence: 1, began(1, x: 10)))
        _ = hub.message(two, .numbered(sequence: 1, began(1, x: 90)))
        _ = hub.message(one, .numbered(sequence: 2, ended(1, x: 20, t: 1)))
        let turn = hub.endTurn()
        #expect(turn.acks(to: one) == [2] && turn.acks(to: two) == [1])
        let board = try #require(hub.core.board("b"))
        #expect(board.acceptedStrokes.map(\.owner.rawValue) == ["web:ann"])
        #expect(board.activeStrokes.values.map(\.owner.rawValue).sorted() == ["web:ben"])
        #expect(hub.replicas["b"] == board)

        // Ben cannot end Ann's touch: his channel acts only as him.
        _ = hub.message(two, .numbered(sequence: 2, ended(1, x: 95, t: 1)))
        hub.endTurn()
        #expect(try #require(hub.core.board("b")).acceptedStrokes.map(\.owner.rawValue) == ["web:ann", "web:ben"])
    }

    @Test func theConnectionsHeartbeatKeepsIdleChannelsLiveAndItsSilenceCancelsThem() throws {
        let hub = CoreHarness { $0.timing.livenessTimeout = .seconds(3); $0.timing.abandonTimeout = .seconds(10) }
        let one = Self.channel(1)
        let connection = Self.channel(0)
        _ = Self.hello(hub, one, actAs: "web:ann")
        _ = hub.message(one, .numbered(sequence: 1, began(1)))
        hub.endTurn()
        // Only the connection speaks for 20 s: the channel's session stays live, its touch down.
        for _ in 0..<20 {
            hub.advance(.seconds(1))
            let answered = hub.message(connection, .heartbeat)
            #expect(answered.acks(to: connection) == [0])
            hub.endTurn()
        }
        #expect(hub.core.board("b")?.activeStrokes.count == 1)
        #expect(hub.endTurn().heartbeats.allSatisfy { $0.silent.isEmpty })
        // Then the connection goes quiet: silent after the liveness time-out, cancelled after the abandon time-out.
        hub.advance(.seconds(4))
        hub.endTurn()
        hub.advance(.seconds(7))
        hub.endTurn()
        #expect(hub.core.board("b")?.activeStrokes.isEmpty == true)
    }

    @Test func aSilentChannelIsLiveAgainWhenTheConnectionIsHeard() throws {
        let hub = CoreHarness { $0.timing.livenessTimeout = .seconds(3); $0.timing.abandonTimeout = .seconds(30); $0.timing.heartbeatInterval = .seconds(1) }
        let one = Self.channel(1)
        _ = Self.hello(hub, one, actAs: "web:ann")
        _ = hub.message(one, .numbered(sequence: 1, began(1)))
        hub.endTurn()
        hub.advance(.seconds(4))
        let silentTurn = hub.endTurn()
        hub.advance(.seconds(1))
        let listed = silentTurn + hub.endTurn()
        #expect(listed.heartbeats.contains { $0.silent == ["web:ann"] })
        _ = hub.message(Self.channel(0), .heartbeat)
        hub.advance(.seconds(1))
        #expect(hub.endTurn().heartbeats.allSatisfy { $0.silent.isEmpty })
    }

    @Test func theConnectionsGoodbyeEndsEveryChannelAtOnce() throws {
        let hub = CoreHarness()
        for channel in UInt32(1)...3 {
            _ = Self.hello(hub, Self.channel(channel), actAs: "web:u\(channel)")
            _ = hub.message(Self.channel(channel), .numbered(sequence: 1, began(1)))
        }
        // Another gateway's channel is not touched.
        _ = Self.hello(hub, Self.channel(1, of: "other"), actAs: "web:x")
        _ = hub.message(Self.channel(1, of: "other"), .numbered(sequence: 1, began(1)))
        hub.endTurn()
        #expect(hub.core.board("b")?.activeStrokes.count == 4)
        _ = hub.message(Self.channel(0), .goodbye)
        hub.endTurn()
        #expect(hub.core.board("b")?.activeStrokes.values.map(\.owner.rawValue).sorted() == ["web:x"])
        #expect(hub.core.sessionCount == 1)
    }

    @Test func channelZeroCarriesNoSessionAndBadNamespacesAreRefused() {
        let hub = CoreHarness()
        let connection = Self.channel(0)
        #expect(Self.hello(hub, connection, actAs: "web:ann").errors(to: connection).map(\.code) == [.malformed])
        let one = Self.channel(1)
        #expect(Self.hello(hub, one, actAs: "web ann").errors(to: one).map(\.code) == [.malformed])
        #expect(Self.hello(hub, one, actAs: String(repeating: "a", count: 129)).errors(to: one).map(\.code) == [.malformed])
        #expect(hub.core.sessionCount == 0)
    }

    @Test func aChannelGivenToAnotherSessionEndsTheOneItCarried() throws {
        let hub = CoreHarness()
        let one = Self.channel(1)
        _ = Self.hello(hub, one, actAs: "web:ann", session: "a")
        _ = hub.message(one, .numbered(sequence: 1, began(1)))
        hub.endTurn()
        _ = Self.hello(hub, one, actAs: "web:ben", session: "b")
        hub.endTurn()
        // Ann's stroke is cancelled with her session; Ben numbers from 1.
        #expect(hub.core.board("b")?.activeStrokes.isEmpty == true)
        #expect(hub.core.sessionCount == 1)
        _ = hub.message(one, .numbered(sequence: 1, began(2)))
        #expect(hub.endTurn().acks(to: one) == [1])
        #expect(hub.core.board("b")?.activeStrokes.values.map(\.owner.rawValue).sorted() == ["web:ben"])
    }

    @Test func anAuthenticatedGatewaysChannelsActForInvitedUsers() throws {
        let access = try AccessList(users: [
            "gateway": AccessEntry(key: String(repeating: "g", count: 40), boards: ["*": .admin], actsFor: "web:"),
            "ann": AccessEntry(token: String(repeating: "t", count: 32), boards: ["b": .draw]),
        ])
        let hub = CoreHarness(access: access)
        let gateway = Peer(id: PeerID(Array("random-id".utf8), channel: 1), principal: UserNamespace("gateway"))
        let welcome = hub.message(
            gateway, .hello(AgentHello(board: "b", sessionID: Array("s".utf8), actAs: "web:ann:abc", token: String(repeating: "t", count: 32))), bytes: 40)
        #expect(welcome.replies(to: gateway).contains { if case .welcome(let w) = $0 { w.user.rawValue == "web:ann:abc" } else { false } })
        // Another channel may not act for ann with a wrong token.
        let other = Peer(id: PeerID(Array("random-id".utf8), channel: 2), principal: UserNamespace("gateway"))
        let refused = hub.message(
            other, .hello(AgentHello(board: "b", sessionID: Array("t".utf8), actAs: "web:ann:def", token: "wrong")), bytes: 40)
        #expect(refused.errors(to: other).map(\.code) == [.forbidden])
        // Ann may not clear the board (draw role) even through the gateway's admin key.
        #expect(hub.message(gateway, .numbered(sequence: 1, .clear(.board))).errors(to: gateway).map(\.code) == [.forbidden])
    }

    /// Boards an invited user creates count against that user, whichever tab
    /// (namespace) creates them: one invitee's tabs created 400 boards in 54 s.
    @Test func boardsCreatedThroughAGatewayCountAgainstTheInvitedUser() throws {
        let token = String(repeating: "t", count: 32)
        let access = try AccessList(users: [
            "gateway": AccessEntry(key: String(repeating: "g", count: 40), boards: ["*": .admin], actsFor: "web:"),
            "ann": AccessEntry(token: token, boards: ["*": .draw]),
            "bob": AccessEntry(token: String(repeating: "u", count: 32), boards: ["*": .draw]),
        ])
        let hub = CoreHarness({ $0.limits.maxBoardsCreatedPerUserPerMinute = 3 }, access: access)
        func tab(_ channel: UInt32, of user: String, token: String, board: String) -> [HubRefusal] {
            let peer = Peer(id: PeerID(Array("gw".utf8), channel: channel), principal: UserNamespace("gateway"))
            let hello = AgentHello(board: board, sessionID: Array("s\(channel)".utf8), actAs: "web:\(user):tab\(channel)", token: token)
            return hub.message(peer, .hello(hello), bytes: 40).errors(to: peer)
        }
        #expect((1...3).map { tab(UInt32($0), of: "ann", token: token, board: "ann-\($0)").isEmpty } == [true, true, true])
        let fourth = tab(4, of: "ann", token: token, board: "ann-4")
        #expect(fourth.first?.code == .rateLimited && fourth.first?.message.contains("ann created 3 boards") == true, "\(fourth)")
        #expect(tab(5, of: "bob", token: String(repeating: "u", count: 32), board: "bob-1").isEmpty, "another invitee is not held back")
    }
}

/// Snapshot and board-list requests a gateway makes for its users count in
/// those users' allowances, and are allowed as them (docs/protocol.md,
/// "Requests on behalf of a user").
@Suite struct RequestsOnBehalfTests {
    static let annToken = String(repeating: "t", count: 32)
    static let eveToken = String(repeating: "e", count: 32)

    static func hub() throws -> CoreHarness {
        let access = try AccessList(users: [
            "gateway": AccessEntry(key: String(repeating: "g", count: 40), boards: ["*": .admin], actsFor: "web:"),
            "ann": AccessEntry(token: annToken, boards: ["*": .draw]),
            "eve": AccessEntry(token: eveToken, boards: ["public-*": .watch]),
        ])
        return CoreHarness({ $0.limits.maxSnapshotsPerSecond = 3 }, access: access)
    }

    /// The outcome of one snapshot request from the gateway's connection: "ok" or the refusal's code.
    static func snapshot(_ hub: CoreHarness, _ board: String, token: String?, id: UInt64) -> String {
        let gateway = PeerID(Array("gateway-connection".utf8))
        let onBehalf = token.map { OnBehalf(actAs: "", token: $0) }
        for action in hub.send(.snapshotRequested(by: gateway, user: UserNamespace("gateway"), board: board, requestID: id, onBehalf: onBehalf)) {
            if case .sendSnapshot = action { return "ok" }
            if case .refuseSnapshot(_, _, let refusal) = action { return "\(refusal.code)" }
        }
        return "nothing"
    }

    @Test func oneUsersRequestsDoNotUseUpTheGatewaysAllowance() throws {
        let hub = try Self.hub()
        // eve asks past her allowance (3 a second here): refused, as eve.
        let eve = (1...5).map { Self.snapshot(hub, "public-\($0)", token: Self.eveToken, id: UInt64($0)) }
        #expect(eve == ["ok", "ok", "ok", "rateLimited", "rateLimited"])
        // The gateway's own requests (the boards its tabs follow) and ann's are untouched.
        #expect(Self.snapshot(hub, "team", token: nil, id: 10) == "ok")
        #expect(Self.snapshot(hub, "team", token: Self.annToken, id: 11) == "ok")
        // Allowed as the user: eve may not watch "team", whatever the gateway may; a token the list does not hold is refused.
        hub.advance(.seconds(1))
        #expect(Self.snapshot(hub, "team", token: Self.eveToken, id: 12) == "forbidden")
        #expect(Self.snapshot(hub, "team", token: String(repeating: "x", count: 32), id: 13) == "forbidden")
    }

    /// The samples per second of an invited user are one allowance over all
    /// the tabs a gateway opens for that user (each tab is a session).
    @Test func anInvitedUsersTabsShareOneSampleAllowance() throws {
        let access = try AccessList(users: [
            "gateway": AccessEntry(key: String(repeating: "g", count: 40), boards: ["*": .admin], actsFor: "web:"),
            "ann": AccessEntry(token: Self.annToken, boards: ["*": .draw]),
            "eve": AccessEntry(token: Self.eveToken, boards: ["*": .draw]),
        ])
        let hub = CoreHarness({ $0.limits.maxSamplesPerSecond = 100 }, access: access)  // 200 at once
        func tab(_ channel: UInt32, _ user: String, _ token: String) -> Peer {
            let peer = Peer(id: PeerID(Array("gw".utf8), channel: channel), principal: UserNamespace("gateway"))
            _ = hub.message(peer, .hello(AgentHello(board: "b", sessionID: Array("s\(channel)".utf8), actAs: "web:\(user):\(channel)", token: token)), bytes: 40)
            return peer
        }
        func stroke(_ peer: Peer, samples: Int) -> [HubRefusal] {
            let frame = TouchFrame(changes: [
                TouchChange(touch: 1, phase: .began, samples: (0..<samples).map { Sample(x: Int32($0), y: 0, time: Int64($0)) })
            ])
            return hub.message(peer, .numbered(sequence: 1, .frame(frame)), bytes: 40).errors(to: peer)
        }
        let (first, second, other) = (tab(1, "ann", Self.annToken), tab(2, "ann", Self.annToken), tab(3, "eve", Self.eveToken))
        #expect(stroke(first, samples: 150).isEmpty)
        let refused = stroke(second, samples: 100)
        #expect(refused.first?.code == .rateLimited && refused.first?.message.contains("samples per second") == true, "\(refused)")
        #expect(stroke(other, samples: 150).isEmpty, "another invitee has an allowance of her own")
    }

    @Test func aBoardListOnBehalfOfAUserListsWhatThatUserMayWatch() throws {
        let hub = try Self.hub()
        let ann = Peer(id: PeerID(Array("gw".utf8), channel: 1), principal: UserNamespace("gateway"))
        for board in ["public-1", "team"] {
            _ = hub.message(ann, .hello(AgentHello(board: board, sessionID: Array(board.utf8), actAs: "web:ann:x", token: Self.annToken)), bytes: 40)
        }
        let gateway = PeerID(Array("gateway-connection".utf8))
        var listed: [String] = []
        for action in hub.send(
            .boardListRequested(
                by: gateway, user: UserNamespace("gateway"), prefix: "", after: "", limit: 0, requestID: 1,
                onBehalf: OnBehalf(actAs: "", token: Self.eveToken)))
        {
            if case .sendBoardList(_, _, let boards, _) = action { listed = boards.map(\.board) }
        }
        #expect(listed == ["public-1"])
    }
}
