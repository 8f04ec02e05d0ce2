import TouchSyncWebWire

/// The browser gateway's rules for its tabs, apart from any I/O (the
/// HubCore treatment): which tab sessions exist and which WebSocket speaks
/// for each, admission (the gateway's and each user's tab limits, evicting
/// the session that has waited longest for its tab), the translation of the
/// page's numbers to the agent's and of the hub's acknowledgements back,
/// reconnect grace, names and colours for the users list, and which boards
/// are followed. Time is an argument (never read here); every method returns
/// what the adapter must do (`Action`s), and `nextDeadline` says when `tick`
/// has something to do. `WebGateway` holds one under a lock and carries out
/// the actions outside it.
public struct GatewayCore: Sendable {
    public typealias Instant = ContinuousClock.Instant
    /// A WebSocket, as the adapter numbers them (never reused).
    public typealias Connection = UInt64

    public struct Configuration: Sendable {
        /// Sessions kept (also those waiting for a dropped tab); one more is `GATEWAY_FULL`.
        public var maxTabs = 256
        /// Sessions one invited user may have (`TOO_MANY_TABS`).
        public var maxTabsPerUser = 16
        /// How long a session waits for its dropped tab to come back.
        public var reconnectGrace: Duration = .seconds(30)
        /// How long a board no tab uses is still followed.
        public var boardIdleGrace: Duration = .seconds(30)
        public init() {}
    }

    /// A tab's session: its agent's namespace and the page's numbering.
    public struct Session: Sendable, Equatable {
        /// The resume token: the tab's secret key back to its session.
        public let token: String
        public let namespace: String
        public let board: String
        /// The invited user it acts for (nil: a guest on a plain-text hub).
        public let user: String?
        public fileprivate(set) var displayName: String
        /// The colour of the tab's last style (0xRRGGBBAA).
        public fileprivate(set) var colour: UInt32? = nil
        /// The highest page number handed to the agent (or refused): resends at or below it are skipped.
        public fileprivate(set) var handledThrough: UInt64 = 0
        /// Page numbers waiting for the hub, with the agent's message count each needs acknowledged.
        fileprivate var waiting: [Waiting] = []
        fileprivate var waitingStart = 0
        /// The highest page number the hub has acknowledged (or that was refused).
        public fileprivate(set) var ackedThrough: UInt64 = 0
        /// The highest ack told to the current connection.
        fileprivate var ackSent: UInt64 = 0
        public fileprivate(set) var connection: Connection? = nil
        /// Since when no tab speaks for it (nil: one does).
        public fileprivate(set) var detachedAt: Instant? = nil

        struct Waiting: Sendable, Equatable {
            var page: UInt64
            var agentMessages: UInt64
        }
    }

    public enum Action: Sendable, Equatable {
        /// End the session's agent with a goodbye (its live touches are cancelled at once).
        case endAgent(token: String, namespace: String, why: EndReason)
        /// Tell the tab on `connection` that the hub has acknowledged its messages through `through`.
        case ack(connection: Connection, through: UInt64)
        /// The board's users changed (joined, left, renamed, recoloured): send its tabs the list.
        case usersChanged(board: String)
        /// Stop following the board: no tab has used it for the idle grace.
        case unfollow(board: String)
    }

    public enum EndReason: Sendable, Equatable {
        /// The tab did not come back within the reconnect grace.
        case didNotComeBack
        /// A full gateway made room for a new tab.
        case evicted
        /// The tab said goodbye, or its access was revoked.
        case closed
    }

    /// What a numbered page message is.
    public enum Numbering: Sendable, Equatable {
        /// Already handed to the agent: a resend after a reconnect, skipped.
        case resent
        /// The next one: hand it to the agent (or refuse it), then call `handed`.
        case next
        /// It skips ahead: refused `OUT_OF_ORDER`, nothing taken.
        case outOfOrder(expected: UInt64)
    }

    public let configuration: Configuration
    private(set) var sessions: [String: Session] = [:]
    private var boards: [String: FollowedBoard] = [:]

    struct FollowedBoard: Sendable {
        var tabs: Set<Connection> = []
        var lastUsed: Instant
    }

    public init(configuration: Configuration) { self.configuration = configuration }

    public func session(_ token: String) -> Session? { sessions[token] }
    public var sessionCount: Int { sessions.count }
    public var followedBoards: [String] { boards.keys.sorted() }

    // MARK: Boards

    /// A tab wants `board`: true when it was not followed (the adapter starts following it).
    public mutating func use(board: String, now: Instant) -> Bool {
        if boards[board] != nil {
            boards[board]!.lastUsed = now
            return false
        }
        boards[board] = FollowedBoard(lastUsed: now)
        return true
    }

    /// A welcomed tab on `connection` watches `board`.
    public mutating func join(_ connection: Connection, board: String, now: Instant) {
        if boards[board] == nil { boards[board] = FollowedBoard(lastUsed: now) }
        boards[board]!.tabs.insert(connection)
        boards[board]!.lastUsed = now
    }

    /// The tab's WebSocket ended.
    public mutating func leave(_ connection: Connection, board: String, now: Instant) {
        boards[board]?.tabs.remove(connection)
        boards[board]?.lastUsed = now
    }

    public func tabCount(of board: String) -> Int { boards[board]?.tabs.count ?? 0 }

    // MARK: Sessions

    /// Room for one more session of `user`: the session that has waited
    /// longest for its tab is ended when the gateway is full (closed tabs must
    /// not keep new ones out); then `GATEWAY_FULL` or `TOO_MANY_TABS`.
    public mutating func admit(user: String?, now: Instant) -> Result<[Action], BrowserWireError> {
        var actions: [Action] = []
        if sessions.count >= configuration.maxTabs,
            let oldest = sessions.values.filter({ $0.detachedAt != nil }).min(by: { $0.detachedAt! < $1.detachedAt! })
        {
            sessions[oldest.token] = nil
            actions.append(.endAgent(token: oldest.token, namespace: oldest.namespace, why: .evicted))
            actions.append(.usersChanged(board: oldest.board))
        }
        guard sessions.count < configuration.maxTabs else {
            return .failure(BrowserWireError("GATEWAY_FULL", "this gateway serves its maximum of \(configuration.maxTabs) tabs: try again later"))
        }
        if let user, sessions.values.count(where: { $0.user == user }) >= configuration.maxTabsPerUser {
            return .failure(BrowserWireError("TOO_MANY_TABS", "\(user) has \(configuration.maxTabsPerUser) tabs open here already: close one"))
        }
        return .success(actions)
    }

    /// A new session, its agent welcomed by the hub, spoken for by `connection`.
    public mutating func open(
        token: String, namespace: String, board: String, user: String?, displayName: String, connection: Connection
    ) -> [Action] {
        sessions[token] = Session(token: token, namespace: namespace, board: board, user: user, displayName: displayName, connection: connection)
        return [.usersChanged(board: board)]
    }

    /// A tab back with its resume token: the session, if it is the same
    /// board's and user's, now spoken for by `connection` (and told what the
    /// hub acknowledged while it was away: the welcome's `acked`).
    public mutating func resume(_ token: String, board: String, user: String?, on connection: Connection) -> Session? {
        guard var session = sessions[token], session.board == board, session.user == user else { return nil }
        session.connection = connection
        session.detachedAt = nil
        session.ackSent = session.ackedThrough
        sessions[token] = session
        return session
    }

    /// The session's WebSocket ended without a goodbye: true if it was its
    /// current one (the session then waits the reconnect grace for the tab).
    public mutating func detach(_ token: String, _ connection: Connection, now: Instant) -> Bool {
        guard sessions[token]?.connection == connection else { return false }
        sessions[token]!.connection = nil
        sessions[token]!.detachedAt = now
        return true
    }

    /// The tab said goodbye or lost its access: the session ends now.
    public mutating func close(_ token: String) -> [Action] {
        guard let session = sessions.removeValue(forKey: token) else { return [] }
        return [.endAgent(token: token, namespace: session.namespace, why: .closed), .usersChanged(board: session.board)]
    }

    /// Ends every session (the gateway stops); their tokens and namespaces.
    public mutating func closeAll() -> [Action] {
        defer { sessions.removeAll() }
        return sessions.values.map { .endAgent(token: $0.token, namespace: $0.namespace, why: .closed) }
    }

    // MARK: Numbered messages

    /// Page message `number` of the session: whether to hand it to the agent.
    public mutating func number(_ number: UInt64, of token: String) -> Numbering {
        guard let session = sessions[token], number > session.handledThrough else { return .resent }
        guard number == session.handledThrough + 1 else { return .outOfOrder(expected: session.handledThrough + 1) }
        sessions[token]!.handledThrough = number
        return .next
    }

    /// Message `number` was handed to the agent, which had then been posted
    /// `agentMessages` messages (or refused here: done once what came before is).
    public mutating func handed(_ number: UInt64, of token: String, agentMessages: UInt64) {
        sessions[token]?.waiting.append(.init(page: number, agentMessages: agentMessages))
    }

    /// The hub has acknowledged `agentThrough` of the session's agent's
    /// messages: the page numbers they cover are acknowledged to its tab.
    public mutating func acknowledged(_ token: String, agentThrough: UInt64) -> [Action] {
        guard var session = sessions[token] else { return [] }
        while session.waitingStart < session.waiting.count, session.waiting[session.waitingStart].agentMessages <= agentThrough {
            session.ackedThrough = session.waiting[session.waitingStart].page
            session.waitingStart += 1
        }
        if session.waitingStart == session.waiting.count {
            session.waiting.removeAll(keepingCapacity: true)
            session.waitingStart = 0
        }
        var actions: [Action] = []
        if session.ackedThrough > session.ackSent, let connection = session.connection {
            session.ackSent = session.ackedThrough
            actions.append(.ack(connection: connection, through: session.ackedThrough))
        }
        sessions[token] = session
        return actions
    }

    // MARK: Who is on a board

    /// A guest's new name (an invited user's is the invitation's: `NAME_FIXED`).
    public mutating func rename(_ token: String, to name: String) -> Result<[Action], BrowserWireError> {
        guard let session = sessions[token], session.user == nil else {
            return .failure(BrowserWireError("NAME_FIXED", "an invited user's name is the invitation's; a watcher has none"))
        }
        let chosen = name.trimmingPrefix(while: \.isWhitespace)
        guard !chosen.isEmpty, !chosen.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            return .failure(BrowserWireError("MALFORMED", "name has a name: 1 to 40 characters, no control characters"))
        }
        var trimmed = String(chosen)
        while trimmed.last?.isWhitespace == true { trimmed.removeLast() }
        sessions[token]!.displayName = String(trimmed.prefix(40))
        return .success([.usersChanged(board: session.board)])
    }

    /// The tab's style chose a colour (shown in the users list).
    public mutating func colour(_ token: String, _ rgba: UInt32) -> [Action] {
        guard let session = sessions[token], session.colour != rgba else { return [] }
        sessions[token]!.colour = rgba
        return [.usersChanged(board: session.board)]
    }

    /// The tabs drawing on `board` now (connected sessions), in namespace order.
    public func users(of board: String) -> [BrowserMessage.TabUser] {
        sessions.values.filter { $0.board == board && $0.connection != nil }.sorted { $0.namespace < $1.namespace }
            .map { BrowserMessage.TabUser(user: $0.namespace, name: $0.displayName, rgba: $0.colour) }
    }

    // MARK: Time

    /// Ends sessions whose tab did not come back within the grace, and stops
    /// following boards no tab and no session used for the idle grace.
    public mutating func tick(now: Instant) -> [Action] {
        var actions: [Action] = []
        for session in sessions.values {
            guard let detachedAt = session.detachedAt, now - detachedAt >= configuration.reconnectGrace else { continue }
            sessions[session.token] = nil
            actions.append(.endAgent(token: session.token, namespace: session.namespace, why: .didNotComeBack))
            actions.append(.usersChanged(board: session.board))
        }
        let boardsInUse = Set(sessions.values.map(\.board))
        for (name, board) in boards
        where board.tabs.isEmpty && !boardsInUse.contains(name) && now - board.lastUsed >= configuration.boardIdleGrace {
            boards[name] = nil
            actions.append(.unfollow(board: name))
        }
        return actions
    }

    /// When `tick` next has something to do (nil: nothing will come due by itself).
    public var nextDeadline: Instant? {
        var deadline: Instant? = nil
        for session in sessions.values {
            guard let detachedAt = session.detachedAt else { continue }
            deadline = min(deadline ?? detachedAt + configuration.reconnectGrace, detachedAt + configuration.reconnectGrace)
        }
        let boardsInUse = Set(sessions.values.map(\.board))
        for (name, board) in boards where board.tabs.isEmpty && !boardsInUse.contains(name) {
            deadline = min(deadline ?? board.lastUsed + configuration.boardIdleGrace, board.lastUsed + configuration.boardIdleGrace)
        }
        return deadline
    }
}
