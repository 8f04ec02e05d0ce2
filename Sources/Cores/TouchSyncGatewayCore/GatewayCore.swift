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
        /// Seats: tabs connected at once, watchers too; one more is `GATEWAY_FULL`.
        public var maxTabs = 256
        /// Seats one invited user may hold, watchers too (`TOO_MANY_TABS`).
        public var maxTabsPerUser = 16
        /// Seats one remote address may hold (`TOO_MANY_TABS`), so that one
        /// client cannot take every seat; nil: no limit (a gateway behind a
        /// proxy sees one address). Default a quarter of `maxTabs`.
        public var maxTabsPerAddress: Int? = 64
        /// Agent sessions kept, also those waiting for their dropped tab: past
        /// it the longest-waiting one is ended for a new one. Default 2 × 256.
        public var maxSessions = 512
        /// How long a session waits for its dropped tab to come back.
        public var reconnectGrace: Duration = .seconds(30)
        /// How long a board no tab uses is still followed.
        public var boardIdleGrace: Duration = .seconds(30)
        /// The least time between two users lists sent to a board's tabs:
        /// changes within it go together in the next list. Each list names
        /// every tab of the board and goes to every one of them, so a list per
        /// join made a crowd joining one board cost the cube of its size.
        public var usersListInterval: Duration = .milliseconds(100)
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
        /// Whose allowance the session counts in: the user, or a guest's remote address.
        let owner: String
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
    /// Connected tabs (watchers too), by connection: who holds each seat.
    private var seats: [Connection: Seat] = [:]
    private var seatsByUser: [String: Int] = [:]
    private var seatsByAddress: [String: Int] = [:]
    /// Sessions admitted whose agent the hub has not welcomed yet (by owner; counted as sessions).
    private var reserved: [String: Int] = [:]
    private var reservedCount = 0
    /// Renames each session may still make now (`NameAllowance`).
    private var renames: [String: TokenBucket] = [:]
    /// When each board's tabs were last sent the users list, and whether a
    /// change since waits for the interval to pass (`usersListDue`).
    private var usersLists: [String: (sentAt: Instant, owed: Bool)] = [:]

    struct Seat: Sendable {
        var user: String?
        var address: String
    }

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

    /// The users of `board` changed: true when its tabs are sent the list now;
    /// false when a list went less than `usersListInterval` ago: then `tick`
    /// asks for it (`usersChanged`) once the interval has passed.
    public mutating func usersListDue(_ board: String, now: Instant) -> Bool {
        if let last = usersLists[board], now - last.sentAt < configuration.usersListInterval {
            usersLists[board]!.owed = true
            return false
        }
        usersLists[board] = (now, false)
        return true
    }

    // MARK: Seats

    /// A tab's WebSocket said hello: it takes a seat (before any waiting, so
    /// hellos at once never overshoot), or is refused naming the limit.
    /// `user`: the invited user (nil: a guest); `address`: the remote address.
    public mutating func seat(_ connection: Connection, user: String?, address: String) -> Result<Void, BrowserWireError> {
        guard seats[connection] == nil else { return .success(()) }
        guard seats.count < configuration.maxTabs else {
            return .failure(BrowserWireError("GATEWAY_FULL", "this gateway serves its maximum of \(configuration.maxTabs) tabs (--max-tabs): try again later"))
        }
        if let user, seatsByUser[user, default: 0] >= configuration.maxTabsPerUser {
            return .failure(
                BrowserWireError("TOO_MANY_TABS", "\(user) has \(configuration.maxTabsPerUser) tabs open here already (--max-tabs-per-user): close one"))
        }
        if let limit = configuration.maxTabsPerAddress, seatsByAddress[address, default: 0] >= limit {
            return .failure(
                BrowserWireError("TOO_MANY_TABS", "\(limit) tabs are open here from your address already (--max-tabs-per-address): close one"))
        }
        seats[connection] = Seat(user: user, address: address)
        if let user { seatsByUser[user, default: 0] += 1 }
        seatsByAddress[address, default: 0] += 1
        return .success(())
    }

    /// The tab's WebSocket closed: its seat is free at once (its session, if
    /// any, waits the reconnect grace without one).
    public mutating func unseat(_ connection: Connection) {
        guard let seat = seats.removeValue(forKey: connection) else { return }
        if let user = seat.user { seatsByUser[user] = seatsByUser[user]! > 1 ? seatsByUser[user]! - 1 : nil }
        seatsByAddress[seat.address] = seatsByAddress[seat.address]! > 1 ? seatsByAddress[seat.address]! - 1 : nil
    }

    public var seatCount: Int { seats.count }

    // MARK: Sessions

    /// Room for one more session of `user` (or of a guest at `address`),
    /// reserved until `open` or `cancelAdmission`: past the owner's share
    /// (`maxTabsPerUser`, or `maxTabsPerAddress` for guests) its own session
    /// that has waited longest for its tab is ended, past `maxSessions` the
    /// gateway's (closed tabs must not keep new ones out); `GATEWAY_FULL` or
    /// `TOO_MANY_TABS` when none waits.
    public mutating func admit(user: String?, address: String, now: Instant) -> Result<[Action], BrowserWireError> {
        let owner = Self.owner(user: user, address: address)
        var actions: [Action] = []
        func evictLongestWaiting(_ candidates: some Sequence<Session>) -> Bool {
            guard let oldest = candidates.filter({ $0.detachedAt != nil }).min(by: { $0.detachedAt! < $1.detachedAt! }) else { return false }
            sessions[oldest.token] = nil
            renames[oldest.token] = nil
            actions.append(.endAgent(token: oldest.token, namespace: oldest.namespace, why: .evicted))
            actions.append(.usersChanged(board: oldest.board))
            return true
        }
        let ownerLimit = user != nil ? configuration.maxTabsPerUser : (configuration.maxTabsPerAddress ?? Int.max)
        let owned = sessions.values.filter { $0.owner == owner }
        if owned.count + reserved[owner, default: 0] >= ownerLimit, !evictLongestWaiting(owned) {
            return .failure(BrowserWireError("TOO_MANY_TABS", "\(user ?? "your address") has \(ownerLimit) tabs here already: close one"))
        }
        if sessions.count + reservedCount >= configuration.maxSessions, !evictLongestWaiting(sessions.values) {
            return .failure(BrowserWireError("GATEWAY_FULL", "this gateway keeps its maximum of \(configuration.maxSessions) tab sessions: try again later"))
        }
        reserved[owner, default: 0] += 1
        reservedCount += 1
        return .success(actions)
    }

    /// An admitted session will not open (its agent was refused, the tab left).
    public mutating func cancelAdmission(user: String?, address: String) {
        release(reservationOf: Self.owner(user: user, address: address))
    }

    private mutating func release(reservationOf owner: String) {
        guard let count = reserved[owner] else { return }
        reserved[owner] = count > 1 ? count - 1 : nil
        reservedCount -= 1
    }

    static func owner(user: String?, address: String) -> String { user.map { "user " + $0 } ?? "address " + address }

    /// A new session, its agent welcomed by the hub, spoken for by
    /// `connection` (its admission's reservation is used up).
    public mutating func open(
        token: String, namespace: String, board: String, user: String?, address: String, displayName: String, connection: Connection
    ) -> [Action] {
        let owner = Self.owner(user: user, address: address)
        release(reservationOf: owner)
        sessions[token] = Session(
            token: token, namespace: namespace, board: board, user: user, owner: owner, displayName: displayName, connection: connection)
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
        renames[token] = nil
        return [.endAgent(token: token, namespace: session.namespace, why: .closed), .usersChanged(board: session.board)]
    }

    /// Ends every session (the gateway stops); their tokens and namespaces.
    public mutating func closeAll() -> [Action] {
        defer {
            sessions.removeAll()
            renames.removeAll()
        }
        return sessions.values.map { .endAgent(token: $0.token, namespace: $0.namespace, why: .closed) }
    }

    // MARK: Numbered messages

    /// Page message `number` of the session: whether to hand it to the agent.
    public mutating func number(_ number: UInt64, of token: String) -> Numbering {
        withSession(token) { session in
            guard number > session.handledThrough else { return .resent }
            guard number == session.handledThrough + 1 else { return .outOfOrder(expected: session.handledThrough + 1) }
            session.handledThrough = number
            return .next
        } ?? .resent
    }

    /// Changes the tab's session in place (nil: no such session). A session
    /// copied out and back retained and released each of its names for every
    /// message; `body` must only change the session.
    private mutating func withSession<Result>(_ token: String, _ body: (inout Session) -> Result) -> Result? {
        guard let index = sessions.index(forKey: token) else { return nil }
        return body(&sessions.values[index])
    }

    /// Message `number` was handed to the agent, which had then been posted
    /// `agentMessages` messages (or refused here: done once what came before is).
    public mutating func handed(_ number: UInt64, of token: String, agentMessages: UInt64) {
        sessions[token]?.waiting.append(.init(page: number, agentMessages: agentMessages))
    }

    /// Page message `number`, just handed, posted nothing after all (refused
    /// here, or a message that needs no post): it waits only for what came before.
    public mutating func notPosted(_ number: UInt64, of token: String) {
        guard let session = sessions[token], let last = session.waiting.indices.last, session.waiting[last].page == number else { return }
        sessions[token]!.waiting[last].agentMessages -= 1
    }

    /// The page number of the session's message that made the agent's post
    /// `posted` (as `handed` counted them), while it waits for the hub: a hub
    /// refusal of that post is told to the tab as a refusal of that number.
    public func page(of token: String, posted: UInt64) -> UInt64? {
        guard let session = sessions[token] else { return nil }
        for index in session.waitingStart..<session.waiting.count where session.waiting[index].agentMessages >= posted {
            let before = index > session.waitingStart ? session.waiting[index - 1].agentMessages : nil
            // Only a message that posted (one more than the one before it) can be the one refused.
            guard session.waiting[index].agentMessages == posted, before.map({ $0 == posted - 1 }) ?? true else { return nil }
            return session.waiting[index].page
        }
        return nil
    }

    /// The hub has acknowledged `agentThrough` of the session's agent's
    /// messages: the page numbers they cover are acknowledged to its tab.
    public mutating func acknowledged(_ token: String, agentThrough: UInt64) -> [Action] {
        withSession(token) { session in
            Self.acknowledge(&session, agentThrough: agentThrough)
        } ?? []
    }

    private static func acknowledge(_ session: inout Session, agentThrough: UInt64) -> [Action] {
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
        return actions
    }

    // MARK: Who is on a board

    /// A guest's new name (an invited user's is the invitation's: `NAME_FIXED`):
    /// `DisplayName`'s rules, a few renames a second (`RATE_LIMITED`), and the
    /// board's tabs told only when it changed.
    public mutating func rename(_ token: String, to name: String, now: Instant) -> Result<[Action], BrowserWireError> {
        guard let session = sessions[token], session.user == nil else {
            return .failure(BrowserWireError("NAME_FIXED", "an invited user's name is the invitation's; a watcher has none"))
        }
        guard let chosen = DisplayName.cleaned(name) else {
            return .failure(BrowserWireError("MALFORMED", "a name is \(DisplayName.rule)"))
        }
        guard chosen != session.displayName else { return .success([]) }
        var allowance = renames[token] ?? TokenBucket(rate: Self.renamesPerSecond, burst: Self.renameBurst, now: now)
        guard allowance.take(now: now) else {
            renames[token] = allowance
            return .failure(BrowserWireError("RATE_LIMITED", "a tab may rename itself \(Int(Self.renameBurst)) times at once, then once a second"))
        }
        renames[token] = allowance
        sessions[token]!.displayName = chosen
        return .success([.usersChanged(board: session.board)])
    }

    static let renamesPerSecond = 1.0
    static let renameBurst = 5.0

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
            renames[session.token] = nil
            actions.append(.endAgent(token: session.token, namespace: session.namespace, why: .didNotComeBack))
            actions.append(.usersChanged(board: session.board))
        }
        let boardsInUse = Set(sessions.values.map(\.board))
        for (name, board) in boards
        where board.tabs.isEmpty && !boardsInUse.contains(name) && now - board.lastUsed >= configuration.boardIdleGrace {
            boards[name] = nil
            usersLists[name] = nil
            actions.append(.unfollow(board: name))
        }
        for (board, list) in usersLists where now - list.sentAt >= configuration.usersListInterval {
            // Owed: sent now (the adapter's `usersListDue` then says yes); else forgotten.
            if list.owed && boards[board] != nil { actions.append(.usersChanged(board: board)) }
            usersLists[board] = nil
        }
        return actions
    }

    /// When `tick` next has something to do (nil: nothing will come due by itself).
    public var nextDeadline: Instant? {
        var deadline: Instant? = nil
        func consider(_ instant: Instant) { deadline = min(deadline ?? instant, instant) }
        for session in sessions.values {
            guard let detachedAt = session.detachedAt else { continue }
            consider(detachedAt + configuration.reconnectGrace)
        }
        let boardsInUse = Set(sessions.values.map(\.board))
        for (name, board) in boards where board.tabs.isEmpty && !boardsInUse.contains(name) { consider(board.lastUsed + configuration.boardIdleGrace) }
        for list in usersLists.values where list.owed { consider(list.sentAt + configuration.usersListInterval) }
        return deadline
    }
}
