import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import TouchSyncAccess
import TouchSyncClient
import TouchSyncCore
import TouchSyncWebWire
import TouchSyncRender
import TouchSyncWire
import ZeroMQ

/// Where the gateway finds the hub (or a cluster's hub for each board).
public struct GatewayHub: Sendable {
    public var ingest: String
    public var publish: String
    public var snapshot: String
    public var history: String
    /// CURVE keys for an authenticated hub. Default nil: plain text.
    public var curve: CurveClientKeys? = nil

    public init(ingest: String, publish: String, snapshot: String, history: String) {
        self.ingest = ingest
        self.publish = publish
        self.snapshot = snapshot
        self.history = history
    }
}

/// How the gateway runs. Every field has a documented default.
public struct WebConfiguration: Sendable {
    /// Host to listen on. Default 127.0.0.1 (this machine only).
    public var host = "127.0.0.1"
    /// TCP port. Default 8080; 0 picks a free one (see `WebGateway.boundPort`).
    public var port = 8080
    /// The hub of each board (a cluster maps boards to hubs).
    public var hub: @Sendable (String) -> GatewayHub
    /// The hubs whose boards the index lists (a cluster's every hub). Default
    /// empty: the hub `hub` gives for the empty name (a single hub).
    public var boardListHubs: [GatewayHub] = []
    /// Threads that carry every tab's agent (its connection to the hub). Default 2.
    public var agentThreads = 2
    /// How long the gateway keeps following a board (its subscriber and
    /// replica) after its last tab left. Default 30 s.
    public var boardIdleGrace: Duration = .seconds(30)
    /// Messages queued for one tab before it is resynced from a snapshot instead. Default 512.
    public var tabQueueLimit = 512
    /// How long a tab's agent waits for the tab to come back after its WebSocket
    /// drops without a goodbye (its live touches stay meanwhile). Default 30 s.
    public var reconnectGrace: Duration = .seconds(30)
    /// The largest message a tab may send. Default 1 MiB.
    public var maxMessageBytes = 1 << 20
    /// Serve the page from this folder instead of the built-in copy (for working on the page). Default nil.
    public var pageDirectory: String? = nil
    /// The hub's access list, for an authenticated hub: each tab signs in with
    /// an invitation token from it (`touchsync keys invite`), and acts through
    /// the gateway's key (`hub(_:).curve`, whose entry needs `acts_for`). The
    /// file is read again whenever it changes. Default nil: a plain-text hub,
    /// every tab a guest.
    public var accessList: String? = nil
    /// Pages of other origins allowed to open the WebSocket (exact origins,
    /// `https://app.example.com`; `*` for any). A page of the gateway's own
    /// origin always may; a client that sends no `Origin` (not a browser)
    /// too. Default none: another site's page cannot act as its visitor
    /// (cross-site WebSocket hijacking).
    public var allowedOrigins: [String] = []
    /// The role of a guest tab on a plain-text hub (no access list). Default
    /// draw: drawing, undo, clearing and erasing its own strokes; admin also
    /// clears the board and erases others' strokes.
    public var guestRole: Role = .draw
    /// Tabs (agent sessions, also those waiting for a dropped tab to come
    /// back) this gateway keeps; a hello for one more is refused
    /// `GATEWAY_FULL`. Default 256: each costs a thread and a few descriptors.
    public var maxTabs = 256
    /// Tabs one invited user may have at once (`TOO_MANY_TABS` past it). Default 16.
    public var maxTabsPerUser = 16
    /// HTTP connections at once (more wait to be accepted). Default 512.
    public var maxConnections = 512
    /// An HTTP connection that sends nothing for this long is closed (a
    /// WebSocket answers the gateway's pings every 10 s). Default 30 s.
    public var idleTimeout: Duration = .seconds(30)
    /// A connection that has not sent a whole first request head this long
    /// after connecting is closed (slowloris). Default 10 s.
    public var headerTimeout: Duration = .seconds(10)

    public init(hub: @escaping @Sendable (String) -> GatewayHub) { self.hub = hub }
}

/// The browser gateway (`touchsync web`): serves the whiteboard page, makes
/// each tab an agent of the hub and fans each board's batches out to its tabs.
/// A swift-service-lifecycle `Service`: graceful shutdown closes every tab's
/// session with a goodbye and stops the board subscribers.
public final class WebGateway: Service, Sendable {
    public let configuration: WebConfiguration
    private let logger: Logger
    private let context: ZMQContext
    /// Every tab's agent runs on these few driver threads (not a thread per tab).
    private let agents: AgentHost
    /// Every followed board's replica, on one thread with one pair of sockets per hub (not a thread per board).
    private let boards: SubscriptionHost
    private let page: PageFiles
    private struct State {
        var boards: [String: BoardFanout] = [:]
        var sessions: [String: TabSession] = [:]  // by resume token
        var outboxes: [String: [ObjectIdentifier: TabOutbox]] = [:]  // by board: the tabs connected now
        /// Tabs of invited users (authenticated gateway), by outbox: checked again when the access list changes.
        var invitedTabs: [ObjectIdentifier: InvitedTab] = [:]
        /// The access list's modification time when the open tabs were last checked against it.
        var tabsCheckedAgainst: Date? = nil
        var port: Int? = nil
        /// Why the server could not listen (it then stopped).
        var listenFailure: WebGatewayError? = nil
        var stopped = false
        var access: (list: AccessList, modified: Date)? = nil
    }
    private let state = Mutex(State())
    /// The routing id of the gateway's connection to a plain-text hub (its tabs are channels of it).
    private let connectionIdentity = "web-gateway-" + WebGateway.randomName(8)
    /// New sessions, whose agent events `run` forwards to their tabs.
    private let sessionsToForward: AsyncStream<TabSession>
    private let forwardSession: AsyncStream<TabSession>.Continuation
    /// Signalled when the server listens or fails to (`waitUntilListening` waits on it).
    private let listening = ConditionWaiters()
    /// Thumbnails of boards the gateway does not watch, drawn from one hub snapshot, with when.
    private let thumbnails = Mutex<[String: (svg: String, made: ContinuousClock.Instant)]>([:])

    public init(configuration: WebConfiguration, context: ZMQContext? = nil, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        // Each tab's agent is a socket (two while a reconnect replaces it) and each
        // followed board a subscriber's four; libzmq's default of 1,023 held about 340 tabs.
        self.context = try context ?? ZMQContext(maxSockets: Int32(clamping: max(1023, 6 * configuration.maxTabs + 64)))
        page = try PageFiles(directory: configuration.pageDirectory)
        agents = try AgentHost(threads: max(1, configuration.agentThreads), context: self.context, logger: logger)
        boards = try SubscriptionHost(context: self.context, logger: logger)
        (sessionsToForward, forwardSession) = AsyncStream.makeStream(of: TabSession.self)
    }

    /// The port the server listens on, once it does.
    public var boundPort: Int? { state.withLock { $0.port } }

    /// Waits until the server listens; its port, or nil after `timeout`, once
    /// it failed to listen, or when the waiting task is cancelled.
    public func waitUntilListening(timeout: Duration = .seconds(10)) async -> Int? {
        let outcome: Int?? = await listening.wait(timeout: timeout) { [self] in
            self.state.withLock { state -> Int?? in
                if let port = state.port { return .some(port) }
                return state.listenFailure != nil ? .some(nil) : nil
            }
        }
        return outcome ?? nil
    }

    public func run() async throws {
        let router = Router(context: BasicWebSocketRequestContext.self)
        addPageRoutes(to: router)
        router.ws(
            "/ws",
            shouldUpgrade: { [self] request, _ in
                guard let refusal = originRefusal(origin: request.headers[.origin], host: request.head.authority) else { return .upgrade([:]) }
                logger.notice("WebSocket from another origin refused", metadata: ["origin": "\(request.headers[.origin] ?? "")"])
                throw HTTPError(.forbidden, message: refusal)
            }
        ) { [self] inbound, outbound, context in
            await self.serveTab(inbound: inbound, outbound: outbound)
        }
        // Frames up to the largest message (browsers send a message as one
        // frame); pings find tabs whose network went away; a connection must
        // send its first request head within the header time-out.
        let channelConfiguration = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(idleTimeout: .nanoseconds(Int64(configuration.idleTimeout / .nanoseconds(1)))),
            ws: .init(maxFrameSize: 2 * configuration.maxMessageBytes, autoPing: .enabled(timePeriod: .seconds(10))))
        let webSocketResponder = router.buildResponder()
        let headerTimeout = TimeAmount.nanoseconds(Int64(configuration.headerTimeout / .nanoseconds(1)))
        let app = Application(
            router: router,
            server: HTTPServerBuilder { responder in
                HeadDeadlineChannel(
                    inner: HTTP1WebSocketUpgradeChannel(
                        responder: responder, webSocketResponder: webSocketResponder, configuration: channelConfiguration),
                    deadline: headerTimeout,
                    // Another site's page is refused 403 with the reason before the upgrade (which can only say 400).
                    upgradeRefusal: { [self] origin, host in originRefusal(origin: origin, host: host) })
            },
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: "touchsync web",
                availableConnectionsDelegate: MaximumAvailableConnections(configuration.maxConnections)),
            onServerRunning: { [self] channel in
                let port = channel.localAddress?.port ?? configuration.port
                state.withLock { $0.port = port }
                listening.signal()
                logger.notice("web gateway listening", metadata: ["url": "http://\(configuration.host):\(port)/"])
            },
            logger: logger)
        agents.start()
        boards.start()
        try await withThrowingDiscardingTaskGroup { gateway in
            // Each session's agent events go to its tab for the session's life (they
            // end when its agent stops): children of the gateway's run, not loose tasks.
            gateway.addTask { [sessionsToForward] in
                await withDiscardingTaskGroup { forwarders in
                    for await session in sessionsToForward { forwarders.addTask { await session.forwardAgentEvents() } }
                }
            }
            do { try await serve(app) } catch {
                forwardSession.finish()
                gateway.cancelAll()
                throw error
            }
            forwardSession.finish()  // every session's agent has stopped: the forwarders end
        }
    }

    /// Serves until graceful shutdown, then closes every session and board.
    private func serve(_ app: some ApplicationProtocol) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            // Returns once graceful shutdown has closed the server (and its WebSockets).
            group.addTask { [self] in
                do {
                    try await app.run()
                } catch where boundPort == nil {
                    // It never listened (a port in use, an address no interface has): say so in words.
                    let failure = WebGatewayError.cannotListen(address: "\(configuration.host):\(configuration.port)", reason: Self.reason(error))
                    state.withLock { $0.listenFailure = failure }
                    listening.signal()
                    throw failure
                }
            }
            group.addTask { [self] in
                // Ends sessions whose tab did not come back in time.
                try? await cancelWhenGracefulShutdown { [self] in
                    while !Task.isCancelled {
                        try await Task.sleep(for: .seconds(1))
                        await reapDetachedSessions()
                        await reapIdleBoards()
                        revokeLostAccess()
                    }
                }
            }
        }
        await shutDown()
    }

    private func isShuttingDown() -> Bool { state.withLock { $0.stopped } }

    /// Why a WebSocket from `origin` is refused, or nil: browsers send the
    /// page's origin, so a page of another site is told apart from ours
    /// (`host`: the Host the browser connected to).
    func originRefusal(origin: String?, host: String?) -> String? {
        guard let origin else { return nil }  // not a browser: no page to hijack it
        if configuration.allowedOrigins.contains("*") || configuration.allowedOrigins.contains(origin) { return nil }
        let authority = origin.split(separator: "://", maxSplits: 1).last.map(String.init)
        if let authority, let host, authority.lowercased() == host.lowercased() { return nil }
        return "this gateway serves pages of its own origin only (\(origin) is another; the operator may allow it with --allow-origin)"
    }

    private func shutDown() async {
        let (sessions, boards) = state.withLock { state in
            state.stopped = true
            defer {
                state.sessions.removeAll()
                state.boards.removeAll()
            }
            return (Array(state.sessions.values), Array(state.boards.values))
        }
        await withDiscardingTaskGroup { group in
            for session in sessions { group.addTask { await session.close() } }
        }
        for board in boards { await board.stop() }
        await self.boards.stop()
        await agents.stop(goodbye: true)
        logger.notice("web gateway stopped", metadata: ["tabs": "\(sessions.count)", "boards": "\(boards.count)"])
    }

    /// An open tab of an invited user, as it was let in.
    struct InvitedTab: Sendable {
        var token: String
        var user: String
        var board: String
        var role: Role
        var outbox: TabOutbox
    }

    /// When the access list changed, every invited user's tab is checked
    /// again: a tab whose invitation was revoked, whose user lost the board,
    /// or whose role went down is told why and closed, its agent ended (its
    /// touches cancelled) at once.
    private func revokeLostAccess() {
        guard let path = configuration.accessList else { return }
        let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? .distantPast
        let tabs: [InvitedTab]? = state.withLock { state in
            guard state.tabsCheckedAgainst != modified else { return nil }
            return Array(state.invitedTabs.values)
        }
        guard let tabs, let list = try? currentAccessList() else { return }
        state.withLock { $0.tabsCheckedAgainst = modified }
        for tab in tabs {
            let refusal: (code: String, message: String)?
            if list.user(withToken: tab.token) != tab.user {
                refusal = ("UNAUTHORIZED", "\(tab.user)'s invitation was revoked")
            } else if let role = list.role(of: tab.user, on: tab.board) {
                refusal = role < tab.role ? ("FORBIDDEN", "\(tab.user) may now only \(role) board \(tab.board): open it again") : nil
            } else {
                refusal = ("FORBIDDEN", "\(tab.user) no longer has access to board \(tab.board)")
            }
            guard let refusal else { continue }
            state.withLock { _ = $0.invitedTabs.removeValue(forKey: ObjectIdentifier(tab.outbox)) }
            tab.outbox.revoke(code: refusal.code, message: refusal.message)
            logger.notice("tab closed: access revoked", metadata: ["user": "\(tab.user)", "board": "\(tab.board)", "why": "\(refusal.message)"])
        }
    }

    private func reapDetachedSessions() async {
        let now = ContinuousClock.now
        let expired = state.withLock { state in
            let expired = state.sessions.values.filter { $0.expired(grace: configuration.reconnectGrace, now: now) }
            for session in expired { state.sessions.removeValue(forKey: session.resumeToken) }
            return expired
        }
        for session in expired {
            logger.info("tab did not come back: its live touches are cancelled", metadata: ["user": "\(session.namespace)"])
            await session.close()
            broadcastUsers(of: session.board)
        }
    }

    // MARK: Boards

    private func fanout(for board: String) -> BoardFanout {
        let existing = state.withLock { state in
            state.boards[board].map { fanout in
                fanout.touch()
                return fanout
            }
        }
        if let existing { return existing }
        // A tab that raced us to it wins (the one made here is never started).
        let made = BoardFanout(board: board, hub: configuration.hub(board), host: boards, logger: logger)
        let (fanout, isNew) = state.withLock { state in
            if let existing = state.boards[board] {
                existing.touch()
                return (existing, false)
            }
            state.boards[board] = made
            made.touch()
            return (made, true)
        }
        if isNew { fanout.start() }
        return fanout
    }

    /// Stops following boards no tab has used for `boardIdleGrace`: their subscriber and replica go.
    private func reapIdleBoards() async {
        let now = ContinuousClock.now
        let idle: [BoardFanout] = state.withLock { state in
            var removed: [BoardFanout] = []
            for (name, fanout) in state.boards
            where fanout.isIdle(for: configuration.boardIdleGrace, now: now) && !state.sessions.values.contains(where: { $0.board == name }) {
                state.boards[name] = nil
                removed.append(fanout)
            }
            return removed
        }
        for fanout in idle {
            await fanout.stop()
            logger.info("board no longer followed: no tab", metadata: ["board": "\(fanout.board)"])
        }
    }

    /// Boards this gateway serves now, with their tabs and sequence.
    func boardList() -> [(board: String, tabs: Int, sequence: UInt64, strokes: Int, lastActivity: Int64?)] {
        let boards = state.withLock { Array($0.boards.values) }
        return boards.map { fanout in
            let status = fanout.status
            return (fanout.board, fanout.tabCount, status.sequence, status.acceptedStrokes, fanout.lastActivityMilliseconds)
        }.sorted { $0.board < $1.board }
    }

    private func usersMessage(of board: String) -> String {
        let sessions = state.withLock { state in state.sessions.values.filter { $0.board == board && !$0.expired(grace: .zero, now: .now) } }
        let list = sessions.sorted { $0.namespace < $1.namespace }.map {
            BrowserMessage.TabUser(user: $0.namespace, name: $0.displayName, rgba: $0.colour)
        }
        return BrowserMessage.users(list).json
    }

    private func broadcastUsers(of board: String) {
        let message = usersMessage(of: board)
        let outboxes = state.withLock { Array($0.outboxes[board]?.values ?? [:].values) }
        for outbox in outboxes { outbox.post(message) }
    }

    // MARK: Tabs

    /// One WebSocket: a hello, then numbered messages; batches and acks go back.
    private func serveTab(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async {
        let connection = ConnectionToken()
        // The token must outlive every use of its identifier: freed after its
        // last use (the optimizer may), the next tab's token can take its
        // address, and this tab's `detach(id)` would then detach that one.
        defer { withExtendedLifetime(connection) {} }
        let id = ObjectIdentifier(connection)
        var session: TabSession? = nil
        var fanout: BoardFanout? = nil
        var saidGoodbye = false
        var welcomed = false
        var identityRole: Role = .watch
        let outbox = TabOutbox(limit: configuration.tabQueueLimit)
        let decoder = JSONDecoder()
        await withDiscardingTaskGroup { group in
            do {
                for try await message in inbound.messages(maxSize: 2 * configuration.maxMessageBytes) {
                    // Frames up to twice the limit are read so that one just over it gets a reason; larger ones the library refuses.
                    let size: Int
                    switch message {
                    case .text(let text): size = text.utf8.count
                    case .binary(let buffer): size = buffer.readableBytes
                    }
                    guard size <= configuration.maxMessageBytes else {
                        try await send(outbound, error: "TOO_LARGE", "a message is at most \(configuration.maxMessageBytes) bytes")
                        try await outbound.close(.messageTooLarge, reason: "TOO_LARGE")
                        break
                    }
                    let decoded: BrowserMessage
                    do {
                        switch message {
                        case .text(let text):
                            decoded = try BrowserMessage.decode(text, with: decoder)
                        case .binary(let buffer):
                            // Binary frames carry touches, once the welcome said the connection speaks them.
                            guard welcomed, outbox.binary else {
                                try await send(outbound, error: "MALFORMED", "binary frames need a welcome with wire binary (docs/protocol.md, \"Binary frames\")")
                                continue
                            }
                            decoded = .touch(try BrowserBinary.decodeTouch(buffer.readableBytesView))
                        }
                    } catch let unknown as BrowserMessage.UnknownNumberedKind {
                        // A numbered kind we do not know: refused by its number, like any message the hub never saw.
                        guard welcomed, let session else {
                            try await send(outbound, error: unknown.code, unknown.message)
                            continue
                        }
                        do throws(BrowserWireError) {
                            _ = try session.handle(unknown.number) { (_: TouchAgent) throws(BrowserWireError) in
                                throw BrowserWireError(unknown.code, unknown.message)
                            }
                        } catch {
                            try await outbound.write(.text(BrowserMessage.refused(n: unknown.number, code: error.code, message: error.message).json))
                        }
                        session.pushAcks()
                        continue
                    } catch {
                        let why = (error as? BrowserWireError)?.message ?? "\(error)"
                        try await send(outbound, error: "MALFORMED", why)
                        continue
                    }
                    if case .hello(let hello) = decoded {
                        guard !welcomed else {
                            try await send(outbound, error: "MALFORMED", "hello twice on one connection")
                            continue
                        }
                        do {
                            let (opened, board, identity) = try await open(hello, connection: id, outbox: outbox)
                            session = opened
                            fanout = board
                            welcomed = true
                            identityRole = identity.role
                            // The name others see: the invited user's, or the one this tab's hello gave (null for a nameless watcher).
                            let name = opened?.displayName ?? identity.user ?? hello.name.map { String($0.prefix(40)) }
                            let binary = hello.wire == "binary"
                            if binary { outbox.speakBinary() }
                            let welcome = BrowserMessage.Welcome(
                                user: opened?.namespace, resume: opened?.resumeToken, board: board.board, acked: opened?.ackedThrough ?? 0,
                                role: "\(identity.role)", name: name, wire: binary ? "binary" : "json")
                            try await outbound.write(.text(BrowserMessage.welcome(welcome).json))
                            state.withLock { state in
                                state.outboxes[board.board, default: [:]][ObjectIdentifier(outbox)] = outbox
                                if let token = identity.token, let user = identity.user {
                                    state.invitedTabs[ObjectIdentifier(outbox)] = InvitedTab(
                                        token: token, user: user, board: board.board, role: identity.role, outbox: outbox)
                                }
                            }
                            board.join(outbox)
                            broadcastUsers(of: board.board)
                            group.addTask { [self] in await self.write(outbox, of: board, to: outbound) }
                            opened?.pushAcks()  // what the hub acknowledged while the tab was away
                        } catch let error as BrowserWireError {
                            try await send(outbound, error: error.code, error.message)
                            try await outbound.close(.policyViolation, reason: error.code)
                            break
                        }
                        continue
                    }
                    guard welcomed else {
                        try await send(outbound, error: "NOT_WELCOMED", "say hello first")
                        continue
                    }
                    switch decoded {
                    case .ping(let at):
                        try await outbound.write(.text(BrowserMessage.pong(at: at).json))
                    case .resync:
                        outbox.requestSnapshot()
                    case .bye:
                        saidGoodbye = true
                    case .name(let name):
                        let chosen = (name ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
                        guard let session, session.user == nil else {
                            try await send(outbound, error: "NAME_FIXED", "an invited user's name is the invitation's; a watcher has none")
                            continue
                        }
                        guard !chosen.isEmpty, !chosen.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                            try await send(outbound, error: "MALFORMED", "name has a name: 1 to 40 characters, no control characters")
                            continue
                        }
                        session.rename(String(chosen.prefix(40)))
                        broadcastUsers(of: session.board)
                    default:
                        guard let number = decoded.number else {
                            try await send(outbound, error: "MALFORMED", "\(decoded.kind) is what the gateway sends, not a tab")
                            continue
                        }
                        guard let session else {
                            try await outbound.write(
                                .text(BrowserMessage.refused(n: number, code: "FORBIDDEN", message: "you may only watch this board").json))
                            continue
                        }
                        // Who owns the strokes an erase names: the board's replica (only then, and only below admin).
                        var owners: BoardState? = nil
                        if case .erase = decoded, identityRole < .admin { owners = await fanout?.snapshot() }
                        do throws(BrowserWireError) {
                            let role = identityRole
                            let handled = try session.handle(number) { (agent: TouchAgent) throws(BrowserWireError) in
                                try Self.authorize(decoded, role: role, user: session.namespace, board: owners)
                                try Self.post(decoded, to: agent)
                            }
                            if handled, case .style(_, let rgba?, _) = decoded, rgba != session.colour {
                                session.setColour(rgba)
                                broadcastUsers(of: session.board)
                            }
                        } catch {
                            try await outbound.write(.text(BrowserMessage.refused(n: number, code: error.code, message: error.message).json))
                        }
                        session.pushAcks()  // a refused or resent message may be done already
                    }
                    if saidGoodbye { break }
                }
            } catch {
                logger.debug("tab connection ended", metadata: ["error": "\(error)"])
            }
            outbox.close()
            group.cancelAll()
        }
        fanout?.leave(outbox)
        state.withLock { state in
            _ = state.invitedTabs.removeValue(forKey: ObjectIdentifier(outbox))
            if let board = fanout?.board { _ = state.outboxes[board]?.removeValue(forKey: ObjectIdentifier(outbox)) }
        }
        guard let session else {
            if let board = fanout?.board { broadcastUsers(of: board) }
            return
        }
        if saidGoodbye || outbox.isRevoked {
            // A closed tab: its live touches are cancelled at once.
            state.withLock { _ = $0.sessions.removeValue(forKey: session.resumeToken) }
            await session.close()
            logger.info("tab closed", metadata: ["user": "\(session.namespace)"])
        } else if session.detach(id) {
            logger.info(
                "tab connection dropped; its agent waits for it", metadata: ["user": "\(session.namespace)", "grace": "\(configuration.reconnectGrace)"])
        }
        broadcastUsers(of: session.board)
    }

    /// Who a tab is: a guest on a plain-text hub; with an access list, the
    /// invited user its token names, and that user's role on the board.
    struct TabIdentity {
        var user: String?
        var role: Role
        var token: String?
        var namespacePrefix: String
    }

    /// The access list, read again when the file changed.
    private func currentAccessList() throws(BrowserWireError) -> AccessList? {
        guard let path = configuration.accessList else { return nil }
        let modified = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? .distantPast
        if let cached = state.withLock({ $0.access }), cached.modified == modified { return cached.list }
        do {
            let list = try AccessList.load(from: path)
            state.withLock { $0.access = (list, modified) }
            return list
        } catch {
            // A bad edit: keep serving with the last good list, as the hub does on SIGHUP.
            logger.error("cannot read the access list; keeping the last one", metadata: ["error": "\(error)"])
            if let cached = state.withLock({ $0.access }) { return cached.list }
            throw BrowserWireError("UNAVAILABLE", "the gateway cannot read its access list")
        }
    }

    func identify(token: String?, board: String) throws(BrowserWireError) -> TabIdentity {
        guard let list = try currentAccessList() else {
            return TabIdentity(user: nil, role: configuration.guestRole, token: nil, namespacePrefix: "web:")
        }
        guard let token, let user = list.user(withToken: token) else {
            throw BrowserWireError("UNAUTHORIZED", "this board needs an invitation link (touchsync keys invite NAME …), or it was revoked")
        }
        guard let role = list.role(of: user, on: board) else {
            throw BrowserWireError("FORBIDDEN", "\(user) has no access to board \(board)")
        }
        let gatewayKey = configuration.hub(board).curve?.client.publicKey
        guard let gateway = gatewayKey.flatMap({ list.user(withKey: $0) }), let prefix = list.users[gateway]?.actsFor else {
            throw BrowserWireError("UNAVAILABLE", "the gateway's key has no acts_for entry in the access list (touchsync keys allow … --acts-for web:)")
        }
        return TabIdentity(user: user, role: role, token: token, namespacePrefix: prefix + user + ":")
    }

    /// Finds the tab's session (a resume) or starts a new agent for it; nil
    /// for a tab that may only watch (it gets the board, and no agent).
    private func open(_ hello: BrowserMessage.Hello, connection: ObjectIdentifier, outbox: TabOutbox) async throws(BrowserWireError) -> (
        TabSession?, BoardFanout, TabIdentity
    ) {
        guard let board = hello.board, isValidBoardName(board) else {
            throw BrowserWireError("UNKNOWN_BOARD", boardNameRule)
        }
        let identity = try identify(token: hello.token, board: board)
        if isShuttingDown() { throw BrowserWireError("SHUTTING_DOWN", "the gateway is stopping") }
        let fanout = self.fanout(for: board)
        guard identity.role >= .draw else { return (nil, fanout, identity) }
        if let resume = hello.resume, let existing = state.withLock({ $0.sessions[resume] }), existing.board == board,
            existing.user == identity.user
        {
            existing.attach(connection, outbox: outbox)
            return (existing, fanout, identity)
        }
        // A full gateway first makes room by ending the tab that has waited longest
        // for its connection to come back: closed tabs must not keep new ones out.
        let (tabs, usersTabs, evicted) = state.withLock { state in
            var evicted: TabSession? = nil
            if state.sessions.count >= configuration.maxTabs,
                let oldest = state.sessions.values.filter({ $0.detachedSince != nil }).min(by: { $0.detachedSince! < $1.detachedSince! })
            {
                state.sessions.removeValue(forKey: oldest.resumeToken)
                evicted = oldest
            }
            return (state.sessions.count, identity.user.map { user in state.sessions.values.count { $0.user == user } } ?? 0, evicted)
        }
        if let evicted {
            logger.info("tab ended to make room: its connection had not come back", metadata: ["user": "\(evicted.namespace)"])
            Task { await evicted.close() }
        }
        guard tabs < configuration.maxTabs else {
            throw BrowserWireError("GATEWAY_FULL", "this gateway serves its maximum of \(configuration.maxTabs) tabs: try again later")
        }
        guard usersTabs < configuration.maxTabsPerUser else {
            throw BrowserWireError("TOO_MANY_TABS", "\(identity.user ?? "") has \(configuration.maxTabsPerUser) tabs open here already: close one")
        }
        let name = identity.user ?? String((hello.name ?? "guest").prefix(40))
        let namespace = identity.namespacePrefix + Self.randomName(identity.user == nil ? 10 : 6)
        var settings = AgentConfiguration(board: board, hubEndpoint: configuration.hub(board).ingest)
        settings.clientName = "touchsync web"
        settings.curve = configuration.hub(board).curve
        // Every tab is a channel of the gateway's one connection to the hub (docs/protocol.md,
        // "Multiplexed connections"): the hub sees each tab's user, the gateway keeps
        // its tabs' presence with the connection's heartbeats.
        settings.multiplexed = true
        settings.connectionIdentity = connectionIdentity
        settings.identity = namespace
        // The hub checks the token and the namespace again; a plain-text hub takes the namespace as named.
        settings.delegation = (namespace, identity.token ?? "")
        let agent: TouchAgent
        do { agent = try TouchAgent(configuration: settings, context: context, logger: logger, host: agents) } catch {
            throw BrowserWireError("HUB_UNAVAILABLE", "cannot reach the hub: \(error)")
        }
        agent.start()
        guard await agent.waitUntilWelcomed(timeout: .seconds(10)) else {
            let why = agent.helloRefusal ?? "the hub at \(settings.hubEndpoint) did not answer within 10 s"
            await agent.stop(goodbye: true)
            throw BrowserWireError("HUB_REFUSED", why)
        }
        let session = TabSession(
            namespace: namespace, resumeToken: Self.randomName(32), board: board, displayName: name, user: identity.user, agent: agent)
        session.attach(connection, outbox: outbox)
        state.withLock { $0.sessions[session.resumeToken] = session }
        forwardSession.yield(session)
        logger.info("tab joined", metadata: ["user": "\(namespace)", "board": "\(board)", "name": "\(name)"])
        return (session, fanout, identity)
    }

    /// Sends the tab its snapshot, then its queued batches, until it closes.
    private func write(_ outbox: TabOutbox, of fanout: BoardFanout, to outbound: WebSocketOutboundWriter) async {
        do {
            while true {
                switch await outbox.next() {
                case .closed:
                    return
                case .revoked(let code, let message):
                    try await send(outbound, error: code, message)
                    try await outbound.close(.policyViolation, reason: code)
                    return
                case .snapshot:
                    guard await fanout.waitUntilSynced(timeout: .seconds(30)), let board = await fanout.snapshot() else {
                        try await send(outbound, error: "HUB_UNAVAILABLE", "no snapshot of the board from the hub yet")
                        outbox.requestSnapshot()
                        try await Task.sleep(for: .seconds(1))
                        continue
                    }
                    try await outbound.write(.text(BrowserWire.snapshot(board)))
                    try await outbound.write(.text(usersMessage(of: fanout.board)))
                case .messages(let messages):
                    for message in messages {
                        switch message {
                        case .text(let text): try await outbound.write(.text(text))
                        case .binary(let bytes): try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
                        }
                    }
                }
            }
        } catch {
            outbox.close()
        }
    }

    /// Tells the tab each time the hub has acknowledged more of its messages.
    private func send(_ outbound: WebSocketOutboundWriter, error code: String, _ message: String) async throws {
        try await outbound.write(.text(BrowserMessage.error(code: code, message: message, fromHub: false).json))
    }

    // MARK: Tab messages to agent calls

    /// What the tab's role allows: below admin, no board clear and no erasing
    /// of another user's strokes (`board`: the gateway's replica, for owners).
    /// The hub checks the same for an invited user's agent; a guest's agent
    /// on a plain-text hub may do anything, so the gateway is where it is told no.
    static func authorize(_ message: BrowserMessage, role: Role, user: String, board: BoardState?) throws(BrowserWireError) {
        guard role < .admin else { return }
        switch message {
        case .clear(_, "board"):
            throw BrowserWireError("FORBIDDEN", "clearing the whole board needs the admin role (your role: \(role))")
        case .erase(_, let strokes):
            let named = Set(strokes ?? [])
            if let board, let other = board.acceptedStrokes.first(where: { named.contains($0.id.rawValue) && $0.owner.rawValue != user }) {
                throw BrowserWireError("FORBIDDEN", "stroke \(other.id.rawValue) is another user's: erasing it needs the admin role (your role: \(role))")
            }
        default:
            return
        }
    }

    static func post(_ message: BrowserMessage, to agent: TouchAgent) throws(BrowserWireError) {
        switch message {
        case .touch(let touch):
            guard let phase = touch.phase, let id = touch.id else {
                throw BrowserWireError("MALFORMED", "a touch message has phase and id")
            }
            let coalesced = try TabSamples.points(touch.s)
            let predicted = try TabSamples.points(touch.p)
            do {
                switch phase {
                case "began":
                    guard !coalesced.isEmpty else { throw BrowserWireError("MALFORMED", "began needs a sample") }
                    try agent.touchesBegan([TouchInput(id: id, coalesced: coalesced, predicted: predicted)])
                case "moved":
                    guard !coalesced.isEmpty else { throw BrowserWireError("MALFORMED", "moved needs a sample") }
                    try agent.touchesMoved([TouchInput(id: id, coalesced: coalesced, predicted: predicted)])
                case "stationary":
                    try agent.touchesStationary([TouchInput(id: id, coalesced: coalesced, predicted: predicted)])
                case "ended":
                    try agent.touchesEnded([TouchInput(id: id, coalesced: coalesced, predicted: [])])
                case "cancelled":
                    agent.touchesCancelled([id])
                default:
                    throw BrowserWireError("MALFORMED", "phase is began, moved, stationary, ended or cancelled, not \(phase)")
                }
            } catch let error as SampleError {
                throw BrowserWireError("INVALID_SAMPLE", error.description)
            } catch let error as BrowserWireError {
                throw error
            } catch {
                throw BrowserWireError("MALFORMED", "\(error)")
            }
        case .style(_, let rgba, let width):
            guard let rgba, let width, width.isFinite, width > 0, width <= 200 else {
                throw BrowserWireError("MALFORMED", "style has rgba (an integer 0xRRGGBBAA) and width (points, above 0 and at most 200)")
            }
            agent.setStyle(StrokeStyle(rgba: rgba, width: UInt32((width * Double(Sample.unitsPerPoint)).rounded())))
        case .undo:
            agent.undo()
        case .redo:
            agent.redo()
        case .erase(_, let strokes):
            guard let strokes, !strokes.isEmpty, strokes.count <= BoardState.maxErasedStrokes else {
                throw BrowserWireError("MALFORMED", "erase has strokes: 1 to \(BoardState.maxErasedStrokes) stroke ids")
            }
            agent.erase(strokes.map(StrokeID.init))
        case .clear(_, let scope):
            switch scope {
            case "mine": agent.clear(.own)
            case "board": agent.clear(.board)
            default: throw BrowserWireError("MALFORMED", "clear has scope mine or board")
            }
        default:
            throw BrowserWireError("MALFORMED", "\(message.kind) is not a numbered message")
        }
    }

    static func randomName(_ length: Int) -> String {
        var generator = SystemRandomNumberGenerator()  // getrandom(2): resume tokens are secrets
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<length).map { _ in letters[Int(generator.next(upperBound: UInt64(letters.count)))] })
    }

    // MARK: HTTP

    private func addPageRoutes(to router: Router<BasicWebSocketRequestContext>) {
        let page = self.page
        router.get("/") { _, _ in page.response("index.html") }
        router.get("/boards/:board") { _, _ in page.response("board.html") }
        router.get("/boards/:board/replay") { _, _ in page.response("replay.html") }
        router.get("/static/:file") { _, context in
            page.response(try context.parameters.require("file"))
        }
        router.get("/api/boards") { [self] request, _ in
            // On an authenticated gateway, only boards the bearer's user may watch (401 without a valid invitation token).
            var watchable: (String) -> Bool = { _ in true }
            do throws(BrowserWireError) {
                if let list = try currentAccessList() {
                    guard let token = Self.bearer(request), let user = list.user(withToken: token) else {
                        return Self.json(#"{"error":"UNAUTHORIZED","message":"the board list needs an invitation token (Authorization: Bearer TOKEN)"}"#, status: .unauthorized)
                    }
                    watchable = { list.role(of: user, on: $0) != nil }
                }
            } catch {
                return Self.json("{\"error\":\(BrowserWire.quoted(error.code))}", status: .serviceUnavailable)
            }
            // The hubs' boards (those the gateway's key may watch), with the gateway's own tabs and activity.
            var merged: [String: (tabs: Int, sequence: UInt64, strokes: Int, agents: Int, lastActivity: Int64?, followed: Bool)] = [:]
            for hub in configuration.boardListHubs.isEmpty ? [configuration.hub("")] : configuration.boardListHubs {
                do {
                    let page = try await BoardDirectory.list(endpoint: hub.snapshot, limit: 1_000, context: self.context, timeout: .seconds(3), curve: hub.curve)
                    for board in page.boards {
                        merged[board.board] = (
                            0, board.sequence, Int(board.acceptedStrokes), Int(board.agents), board.lastChangeTime > 0 ? board.lastChangeTime / 1000 : nil,
                            false
                        )
                    }
                } catch {
                    // The boards this gateway has open are still listed.
                    logger.notice("a hub did not list its boards", metadata: ["hub": "\(hub.snapshot)", "error": "\(error)"])
                }
            }
            for open in boardList() {
                let listed = merged[open.board]
                merged[open.board] = (
                    open.tabs, max(open.sequence, listed?.sequence ?? 0), max(open.strokes, listed?.strokes ?? 0), listed?.agents ?? 0,
                    [open.lastActivity, listed?.lastActivity].compactMap { $0 }.max(), true
                )
            }
            let list = merged.filter { watchable($0.key) }.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }.map {
                let (board, entry) = $0
                return "{\"board\":\(BrowserWire.quoted(board)),\"tabs\":\(entry.tabs),\"agents\":\(entry.agents),\"sequence\":\(entry.sequence),\"strokes\":\(entry.strokes),\"lastActivity\":\(entry.lastActivity.map { String($0) } ?? "null"),\"followed\":\(entry.followed)}"
            }
            return Self.json("[\(list.joined(separator: ","))]")
        }
        router.get("/api/boards/:board/thumbnail.svg") { [self] request, context in
            let board = try context.parameters.require("board")
            if let refusal = refusalToRead(board, request) { return refusal }
            // A board this gateway watches is drawn from its replica; another from one snapshot
            // of the hub's (kept 30 s: an index of many boards must not flood the hub's snapshot allowance).
            let svg: String
            if let fanout = state.withLock({ $0.boards[board] }), let replica = await fanout.snapshot() {
                svg = Self.thumbnail(of: replica)
            } else if let cached = thumbnails.withLock({ $0[board] }), ContinuousClock.now - cached.made < .seconds(30) {
                svg = cached.svg
            } else {
                let hub = configuration.hub(board)
                do {
                    let replica = try await BoardDirectory.snapshot(of: board, endpoint: hub.snapshot, context: self.context, timeout: .seconds(3), curve: hub.curve)
                    svg = Self.thumbnail(of: replica)
                    thumbnails.withLock { cache in
                        if cache.count >= 256 { cache.removeAll() }
                        cache[board] = (svg, ContinuousClock.now)
                    }
                } catch {
                    return Self.json("{\"error\":\"HUB_UNAVAILABLE\",\"message\":\(BrowserWire.quoted("\(error)"))}", status: .serviceUnavailable)
                }
            }
            var headers = HTTPFields()
            headers[.contentType] = "image/svg+xml"
            headers[.cacheControl] = "no-store"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: svg)))
        }
        router.get("/api/boards/:board/history") { [self] request, context in
            let board = try context.parameters.require("board")
            if let refusal = refusalToRead(board, request) { return refusal }
            return await history(of: board)
        }
    }

    /// A board drawn small for the index: no touch spots.
    static func thumbnail(of board: BoardState) -> String {
        var renderer = BoardRenderer()
        renderer.spotDiameter = 0
        return renderer.svg(of: board)
    }

    /// Why `request` may not read `board` (a bad name, no or a wrong invitation token), or nil.
    private func refusalToRead(_ board: String, _ request: Request) -> Response? {
        guard isValidBoardName(board) else { return Self.json(#"{"error":"UNKNOWN_BOARD"}"#, status: .badRequest) }
        do throws(BrowserWireError) {
            _ = try identify(token: Self.bearer(request), board: board)
            return nil
        } catch {
            let body = "{\"error\":\(BrowserWire.quoted(error.code)),\"message\":\(BrowserWire.quoted(error.message))}"
            return Self.json(body, status: error.code == "FORBIDDEN" ? .forbidden : .unauthorized)
        }
    }

    /// The board's recorded history for the replay view: the oldest checkpoint, then every batch with its hub time.
    private func history(of board: String) async -> Response {
        let hub = configuration.hub(board)
        do {
            let recorded = try await HistoryClient.fetch(
                board: board, endpoint: hub.history, context: context, timeout: .seconds(10), curve: hub.curve, logger: logger)
            var out = "{\"board\":\(BrowserWire.quoted(board)),\"start\":" + BrowserWire.snapshot(recorded.start) + ",\"batches\":["
            var state = recorded.start
            for (index, recordedBatch) in recorded.batches.enumerated() {
                let batch = try DiffStreamDecoder.decode(recordedBatch.proto, against: state)
                if index > 0 { out += "," }
                out += BrowserWire.batch(batch, before: state, withTime: true)
                try state.apply(batch)
            }
            out += "]}"
            return Self.json(out)
        } catch {
            let message = "{\"error\":\"HISTORY_UNAVAILABLE\",\"message\":\(BrowserWire.quoted("\(error)"))}"
            return Self.json(message, status: .serviceUnavailable)
        }
    }

    /// The token of `Authorization: Bearer TOKEN`.
    static func bearer(_ request: Request) -> String? {
        request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
    }

    static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Why the gateway stopped.
public enum WebGatewayError: Error, Equatable, CustomStringConvertible {
    case cannotListen(address: String, reason: String)

    public var description: String {
        switch self {
        case .cannotListen(let address, let reason): "cannot listen on \(address): \(reason)"
        }
    }
}

extension WebGateway {
    /// A socket error in words (NIO's reads "bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)").
    static func reason(_ error: any Error) -> String {
        guard let io = error as? IOError else { return "\(error)" }
        switch io.errnoCode {
        case EADDRINUSE: return "the address is already in use (another gateway, or another program, listens there)"
        case EACCES: return "permission denied (ports below 1024 need privileges)"
        case EADDRNOTAVAIL: return "no network interface of this machine has that address"
        default: return String(cString: strerror(io.errnoCode))
        }
    }
}

/// Identifies one WebSocket connection.
private final class ConnectionToken: Sendable {}

/// The page's files (HTML, CSS, JavaScript modules), read once at start.
struct PageFiles: Sendable {
    let files: [String: (bytes: ByteBuffer, type: String)]

    init(directory: String?) throws {
        // The page ships as SwiftPM resources, a folder next to the executable
        // (the Docker image copies it beside /usr/local/bin/touchsync). Looked up
        // by hand: Bundle.module would stop the process if it were missing.
        let bundled = Bundle.main.bundleURL.appendingPathComponent("TouchSync_TouchSyncWeb.resources/Page")
        let folder = directory.map { URL(fileURLWithPath: $0) } ?? bundled
        guard FileManager.default.fileExists(atPath: folder.appendingPathComponent("board.html").path) else {
            throw BrowserWireError(
                "PAGE_MISSING", "the page's files are not in \(folder.path) (install TouchSync_TouchSyncWeb.resources next to the touchsync binary, or pass --page)")
        }
        var files: [String: (ByteBuffer, String)] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let type: String
            switch (name as NSString).pathExtension {
            case "html": type = "text/html; charset=utf-8"
            case "js": type = "text/javascript; charset=utf-8"
            case "css": type = "text/css; charset=utf-8"
            case "svg": type = "image/svg+xml"
            default: continue
            }
            let data = try Data(contentsOf: folder.appendingPathComponent(name))
            files[name] = (ByteBuffer(bytes: data), type)
        }
        self.files = files
    }

    func response(_ name: String) -> Response {
        guard let file = files[name] else { return Response(status: .notFound) }
        return Response(
            status: .ok, headers: [.contentType: file.type, .cacheControl: "no-cache"], body: .init(byteBuffer: file.bytes))
    }
}
