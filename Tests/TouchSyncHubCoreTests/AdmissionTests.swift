import HubCoreHarness
import Testing
import TouchSyncAccess
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire

/// Admission alone: a pure function from a hello, its sender, the access
/// list and the routing to a role or a typed refusal.
@Suite("Admission")
struct AdmissionTests {
    static let lone = BoardRouting(cluster: nil, storeCommits: false)
    static let keys = (0..<4).map { String(repeating: ["w", "x", "y", "z"][$0], count: 40) }
    static let token = String(repeating: "t", count: 32)

    static func list() throws -> AccessList {
        try AccessList(users: [
            "ann": AccessEntry(key: keys[0], boards: ["*": .draw, "boss-*": .admin]),
            "tv": AccessEntry(key: keys[1], boards: ["*": .watch]),
            "gate": AccessEntry(key: keys[2], boards: ["*": .admin, "closed": .watch], actsFor: "web:"),
            "bob": AccessEntry(token: token, boards: ["*": .draw]),
        ])
    }

    static func hello(_ board: String = "b", actAs: String = "", token: String = "", version: UInt32 = 1) -> AgentHello {
        AgentHello(protocolVersion: version, board: board, sessionID: [1, 2, 3], actAs: actAs, token: token)
    }

    static func peer(_ name: String) -> Peer { Peer(id: PeerID(Array("\(name)-conn".utf8)), principal: UserNamespace(name)) }

    static func admit(
        _ hello: AgentHello, from name: String, access: AccessList?, routing: BoardRouting = lone, heldHere: Bool = false
    ) -> Result<Admission.Admitted, HubRefusal> {
        Admission.admit(hello, from: peer(name), acting: peer(name), access: access, routing: routing, heldHere: heldHere)
    }

    static func code(_ result: Result<Admission.Admitted, HubRefusal>) -> ErrorCode? {
        if case .failure(let refusal) = result { return refusal.code }
        return nil
    }

    @Test func withoutAnAccessListEveryoneIsAdmin() throws {
        let result = Self.admit(Self.hello(), from: "anyone", access: nil)
        #expect(try result.get() == Admission.Admitted(peer: Self.peer("anyone"), role: .admin, delegation: nil))
    }

    @Test func theHelloItselfIsCheckedFirst() throws {
        #expect(Self.code(Self.admit(Self.hello(version: 99), from: "ann", access: try Self.list())) == .unsupportedVersion)
        #expect(Self.code(Self.admit(Self.hello(String(repeating: "b", count: 129)), from: "ann", access: nil)) == .unknownBoard)
        #expect(Self.code(Self.admit(Self.hello("bad\u{0}name"), from: "ann", access: nil)) == .unknownBoard)
        var noSession = Self.hello()
        noSession.sessionID = []
        #expect(Self.code(Self.admit(noSession, from: "ann", access: nil)) == .malformed)
        noSession.sessionID = Array(repeating: 7, count: 65)
        #expect(Self.code(Self.admit(noSession, from: "ann", access: nil)) == .malformed)
    }

    @Test func rolesComeFromTheAccessList() throws {
        let list = try Self.list()
        #expect(try Self.admit(Self.hello("b"), from: "ann", access: list).get().role == .draw)
        #expect(try Self.admit(Self.hello("boss-1"), from: "ann", access: list).get().role == .admin)
        let watcher = Self.admit(Self.hello("b"), from: "tv", access: list)
        #expect(Self.code(watcher) == .forbidden)
        if case .failure(let refusal) = watcher { #expect(refusal.message.contains("may only watch")) }
        let stranger = Self.admit(Self.hello("b"), from: "mallory", access: list)
        if case .failure(let refusal) = stranger { #expect(refusal.code == .forbidden && refusal.message.contains("has no access")) }
        #expect(Self.code(stranger) == .forbidden)
    }

    @Test func aGatewayActsForATokenHolderInANamespaceOfItsOwn() throws {
        let list = try Self.list()
        let admitted = try Self.admit(Self.hello("b", actAs: "web:bob:tab-1", token: Self.token), from: "gate", access: list).get()
        #expect(admitted.peer == Peer(id: Self.peer("gate").id, principal: UserNamespace("web:bob:tab-1")))
        #expect(admitted.role == .draw)  // the lower of the gateway's (admin) and the user's (draw)
        #expect(
            admitted.delegation
                == Delegation(gateway: UserNamespace("gate"), user: "bob", token: Self.token, namespace: UserNamespace("web:bob:tab-1")))
        // Outside the user's prefix, with a wrong token, by a principal without acts_for, or with unprintable bytes.
        #expect(Self.code(Self.admit(Self.hello("b", actAs: "web:ann:tab", token: Self.token), from: "gate", access: list)) == .forbidden)
        #expect(Self.code(Self.admit(Self.hello("b", actAs: "web:bob:tab", token: "nope"), from: "gate", access: list)) == .forbidden)
        #expect(Self.code(Self.admit(Self.hello("b", actAs: "web:bob:tab", token: Self.token), from: "ann", access: list)) == .forbidden)
        #expect(Self.code(Self.admit(Self.hello("b", actAs: "web:bob:t ab", token: Self.token), from: "gate", access: list)) == .forbidden)
        // The gateway may only watch this board: so may its tabs.
        #expect(Self.code(Self.admit(Self.hello("closed", actAs: "web:bob:tab", token: Self.token), from: "gate", access: list)) == .forbidden)
    }

    @Test func anotherHubsBoardIsRefusedNamingItsOwner() throws {
        let map = try ClusterMap(hubs: ["a", "b"].map { ClusterMap.Hub(name: $0, ingest: "tcp://\($0):5570", publish: "p", snapshot: "s") })
        let board = (0..<100).map { "board-\($0)" }.first { map.hub(for: $0).name == "b" }!
        let result = Self.admit(Self.hello(board), from: "ann", access: nil, routing: BoardRouting(cluster: (map, "a"), storeCommits: false))
        guard case .failure(let refusal) = result else {
            Issue.record("admitted a board of hub b on hub a")
            return
        }
        #expect(refusal.code == .wrongHub && refusal.owner?.name == "b")
        // On a board store a board held here stays here, unless the store moved it.
        var stored = BoardRouting(cluster: (map, "a"), storeCommits: true)
        #expect(Self.code(Self.admit(Self.hello(board), from: "ann", access: nil, routing: stored, heldHere: true)) == nil)
        #expect(Self.code(Self.admit(Self.hello(board), from: "ann", access: nil, routing: stored, heldHere: false)) == .wrongHub)
        stored.movedBoards[board] = "b"
        let moved = Self.admit(Self.hello(board), from: "ann", access: nil, routing: stored, heldHere: true)
        if case .failure(let refusal) = moved { #expect(refusal.code == .wrongHub && refusal.message.contains("moved its lease")) }
        #expect(Self.code(moved) == .wrongHub)
    }
}
