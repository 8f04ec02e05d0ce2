import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

/// Who serves which board, as this hub knows it: the cluster file's map or
/// the board store's live hubs, and the boards the store moved away.
public struct BoardRouting: Sendable {
    /// The hubs and this hub's name among them (nil: a lone hub serves every board).
    public var cluster: (map: ClusterMap, name: String)?
    /// On a board store, the live hubs are a suggestion for boards not held:
    /// one held here stays here.
    public var storeCommits: Bool
    /// Boards the board store gave to another hub, with its name.
    public var movedBoards: [String: String] = [:]

    public init(cluster: (map: ClusterMap, name: String)?, storeCommits: Bool) {
        self.cluster = cluster
        self.storeCommits = storeCommits
    }

    /// The live hubs changed: a moved board whose owner is no longer among
    /// them (it died, and its lease lapsed) is decided by the live hubs
    /// again. Naming the dead owner would send agents and subscribers back to
    /// it (issue 39: with its endpoints gone from the store, without any:
    /// an agent took that WRONG_HUB as final).
    public mutating func forgetOwnersNotAmong(_ members: ClusterMap) {
        guard storeCommits, !movedBoards.isEmpty else { return }
        let live = Set(members.hubs.map(\.name))
        movedBoards = movedBoards.filter { live.contains($0.value) }
    }

    /// The refusal for a board another hub serves (nil: this one).
    /// - Parameter heldHere: the board is loaded on this hub now.
    public func wrongHub(for board: String, heldHere: Bool) -> HubRefusal? {
        if let owner = movedBoards[board] {
            let known = cluster?.map.hubs.first { $0.name == owner }
            return HubRefusal(
                .wrongHub, "board \(board) is served by hub \(owner)\(known.map { " (\($0.ingest))" } ?? "") now (the board store moved its lease)",
                owner: known)
        }
        if storeCommits && heldHere { return nil }
        guard let (map, name) = cluster else { return nil }
        let owner = map.hub(for: board)
        guard owner.name != name else { return nil }
        if storeCommits {
            return HubRefusal(
                .wrongHub, "board \(board) is served by hub \(owner.name) (\(owner.ingest)), the board store's live hub for it", owner: owner)
        }
        return HubRefusal(
            .wrongHub, "board \(board) lives on hub \(owner.name) (\(owner.ingest)), not on \(name): is your cluster file current?",
            owner: owner)
    }
}

/// A gateway acting for an invited user, in a namespace of its own per tab.
public struct Delegation: Sendable, Equatable {
    /// The authenticated principal that asked (the gateway).
    public var gateway: UserNamespace
    /// The user of the access list it acts for, and the token that proved it.
    public var user: String
    public var token: String
    /// The namespace the connection's messages act in.
    public var namespace: UserNamespace

    public init(gateway: UserNamespace, user: String, token: String, namespace: UserNamespace) {
        self.gateway = gateway
        self.user = user
        self.token = token
        self.namespace = namespace
    }
}

/// Whether a hello may open a session, and with which role: a pure function
/// of the hello, who sent it, the access list and who serves the board. It
/// creates nothing and remembers nothing (board quotas and sessions are the
/// core's).
public enum Admission {
    public struct Admitted: Sendable, Equatable {
        /// The peer as the session's messages act (a delegated tab: its own namespace).
        public var peer: Peer
        public var role: Role
        public var delegation: Delegation?

        public init(peer: Peer, role: Role, delegation: Delegation?) {
            self.peer = peer
            self.role = role
            self.delegation = delegation
        }
    }

    /// - Parameters:
    ///   - authenticated: the peer as its transport vouches for it.
    ///   - acting: the peer as its messages act now (a connection already delegated: that namespace).
    ///   - access: the access list of an authenticated hub (nil: everyone may do everything).
    ///   - heldHere: the board is loaded on this hub now.
    public static func admit(
        _ hello: AgentHello, from authenticated: Peer, acting: Peer, access: AccessList?, routing: BoardRouting, heldHere: Bool
    ) -> Result<Admitted, HubRefusal> {
        // The hello may ask for less than the hub grants (a guest gateway's tabs: draw).
        if hello.roleLimit == .watch {
            return .failure(HubRefusal(.forbidden, "a session limited to watch cannot draw (a watcher needs no agent: subscribe)"))
        }
        return grant(hello, from: authenticated, acting: acting, access: access, routing: routing, heldHere: heldHere).map { admitted in
            var limited = admitted
            if let limit = hello.roleLimit { limited.role = min(admitted.role, limit) }
            return limited
        }
    }

    private static func grant(
        _ hello: AgentHello, from authenticated: Peer, acting: Peer, access: AccessList?, routing: BoardRouting, heldHere: Bool
    ) -> Result<Admitted, HubRefusal> {
        guard touchSyncProtocolVersions.contains(hello.protocolVersion) else {
            return .failure(
                HubRefusal(
                    .unsupportedVersion,
                    "this hub speaks protocols \(touchSyncProtocolVersions.lowerBound) to \(touchSyncProtocolVersions.upperBound), not \(hello.protocolVersion)"))
        }
        guard isValidBoardName(hello.board) else { return .failure(HubRefusal(.unknownBoard, boardNameRule)) }
        guard (1...64).contains(hello.sessionID.count) else {
            return .failure(HubRefusal(.malformed, "Hello.session_id must be 1 to 64 bytes, chosen at random once per agent session"))
        }
        if let wrong = routing.wrongHub(for: hello.board, heldHere: heldHere) { return .failure(wrong) }
        guard let access else {
            // A channel of a multiplexed connection names its namespace. A plain hub takes
            // it as it takes a routing id (a claim anyone could make by connecting with it).
            guard authenticated.id.channel != nil, !hello.actAs.isEmpty else { return .success(Admitted(peer: acting, role: .admin, delegation: nil)) }
            guard hello.actAs.utf8.count <= 128, isPrintableNamespace(hello.actAs) else {
                return .failure(
                    HubRefusal(.malformed, "act_as is at most 128 letters, digits, '-', '.', '_' and ':', not \(hello.actAs)"))
            }
            let namespace = UserNamespace(hello.actAs)
            return .success(
                Admitted(
                    peer: Peer(id: authenticated.id, principal: namespace), role: .admin,
                    delegation: Delegation(gateway: authenticated.principal, user: "", token: "", namespace: namespace)))
        }
        if !hello.actAs.isEmpty {
            let gateway = authenticated.principal
            guard let (user, prefix) = access.delegatedPrefix(for: gateway.rawValue, token: hello.token),
                hello.actAs.hasPrefix(prefix), hello.actAs.utf8.count <= 128, isPrintableNamespace(hello.actAs)
            else {
                return .failure(
                    HubRefusal(
                        .forbidden,
                        "\(gateway) may not act as \(hello.actAs): it needs acts_for in the access list, a token the list holds, and a namespace of that user"
                    ))
            }
            guard let granted = access.role(of: user, through: gateway.rawValue, on: hello.board), granted >= .draw else {
                return .failure(HubRefusal(.forbidden, "\(user) may not draw on board \(hello.board)"))
            }
            let namespace = UserNamespace(hello.actAs)
            return .success(
                Admitted(
                    peer: Peer(id: authenticated.id, principal: namespace), role: granted,
                    delegation: Delegation(gateway: gateway, user: user, token: hello.token, namespace: namespace)))
        }
        let principal = authenticated.principal
        let granted = access.role(of: principal.rawValue, on: hello.board)
        guard let granted, granted >= .draw else {
            return .failure(
                HubRefusal(
                    .forbidden,
                    granted == nil
                        ? "\(principal) has no access to board \(hello.board)"
                        : "\(principal) may only watch board \(hello.board), not draw on it"))
        }
        return .success(Admitted(peer: authenticated, role: granted, delegation: nil))
    }

    /// Letters, digits, '-', '.', '_' and ':' only (what a plain hub shows as text too).
    static func isPrintableNamespace(_ name: String) -> Bool {
        name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x3A
        }
    }
}
