import TouchSyncWaiting
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOWebSocket
import ServiceLifecycle
import Synchronization
import TouchSyncAccess
import TouchSyncClient
import TouchSyncCore
import TouchSyncGatewayCore
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
    /// How long an event loop gathers its tabs' outgoing batches and acks before
    /// writing them, one write per tab (0: at once). Default 0.
    public var tabFlushInterval: Duration = .zero
    /// How long an ack with nothing else for its tab waits for a batch to go
    /// with (0: at once). A busy board's next batch comes within it: a fifth
    /// fewer writes to tabs at 100 tabs, but no CPU saving measurable here,
    /// and the page's round-trip badge (send to ack) reads up to that much
    /// more (docs/performance.md, "Acks that wait for a batch"). Default 0.
    public var ackHoldInterval: Duration = .zero
    /// The least time between two sends of the tabs' frames to the hub: what
    /// tabs post sooner gathers and goes as one message; after a quiet spell a
    /// frame goes at once (0: every frame at once). Default 8 ms: 300 busy
    /// tabs cost the hub and the gateway a third less, with a lower p99
    /// (docs/performance.md, "Gathering the tabs' frames").
    public var hubFlushInterval: Duration = .milliseconds(8)
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
    /// Tabs connected at once (watchers too); a hello for one more is refused
    /// `GATEWAY_FULL`. A tab whose connection dropped frees its seat at once;
    /// its session waits the reconnect grace. Default 256.
    public var maxTabs = 256
    /// Tabs one invited user may have at once, watchers too (`TOO_MANY_TABS` past it). Default 16.
    public var maxTabsPerUser = 16
    /// Tabs one remote address may have at once (`TOO_MANY_TABS`), so that
    /// one client cannot hold every seat; nil: no limit (behind a proxy that
    /// is the only address). Default a quarter of `maxTabs`, at least 16.
    public var maxTabsPerAddress: Int?? = nil
    /// Proxies whose `X-Forwarded-For` names the tab's address (per-address
    /// seats and message allowances count it, not the proxy's). Default none.
    public var trustedProxies = TrustedProxies()
    /// Agent sessions kept, also those waiting for their dropped tab (the
    /// longest-waiting is ended for a new one). Default twice `maxTabs`.
    public var maxSessions: Int? = nil
    /// What one tab may send (every message; resyncs apart); past it
    /// `RATE_LIMITED` and reading pauses until there is room.
    public var tabAllowance = TabAllowance.Limits()
    /// A WebSocket that has not said hello this long after its upgrade is closed. Default 10 s.
    public var helloTimeout: Duration = .seconds(10)
    /// Host names (the `Host` header) the gateway answers besides loopback
    /// names, IP addresses, its `--listen` name and the machine's name; `*`
    /// any. Anything else is 403 (DNS rebinding: a page whose name now
    /// points at this address must not read or draw on it). Checked on a
    /// guest gateway, and on an authenticated one when a list is given (there
    /// every read and every tab needs an invitation token, which a page of
    /// another name cannot have). Default none.
    public var allowedHosts: [String] = []
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
    /// Board lists, thumbnails' snapshots and histories for the pages: one thread for all of them.
    private let requests: HubRequestHost
    private let page: PageFiles
    private struct State {
        /// The tabs' rules: sessions, numbering, grace, limits, followed boards.
        var core: GatewayCore
        var fanouts: [String: BoardFanout] = [:]
        /// Each session's agent, by resume token.
        var sessions: [String: TabSession] = [:]
        /// The tabs connected now: their board and outbox.
        var tabs: [GatewayCore.Connection: (board: String, outbox: TabOutbox)] = [:]
        var nextConnection: GatewayCore.Connection = 1
        /// Tabs of invited users (authenticated gateway), by connection: checked again when the access list changes.
        var invitedTabs: [GatewayCore.Connection: InvitedTab] = [:]
        /// The access list's modification time when the open tabs were last checked against it.
        var tabsCheckedAgainst: Date? = nil
        var port: Int? = nil
        /// Why the server could not listen (it then stopped).
        var listenFailure: WebGatewayError? = nil
        var stopped = false
        var access: (list: AccessList, modified: Date)? = nil
        /// The deadline the timer task sleeps until (it is woken when the core's comes earlier).
        var timerSleepsUntil: ContinuousClock.Instant? = nil
        var timerRecheck = false
    }
    private let state: Mutex<State>
    /// One per event loop that serves tabs (`flushGroup(for:)`).
    private let flushGroups = Mutex<[ObjectIdentifier: TabFlushGroup]>([:])
    /// Closed tabs' allowances, for their addresses' next connections.
    let allowances = AllowanceShelf()
    /// Wakes the timer task when the core's next deadline moved earlier.
    private let timerWake = ConditionWaiters()
    /// The routing id of the gateway's connection to a plain-text hub (its tabs are channels of it).
    private let connectionIdentity = "web-gateway-" + WebGateway.randomName(8)
    /// Signalled when the server listens or fails to (`waitUntilListening` waits on it).
    private let listening = ConditionWaiters()
    /// The Host names requests may carry.
    private let hostNames: HostNames
    /// Thumbnails of boards the gateway does not watch, drawn from one hub snapshot, with when.
    private let thumbnails = Mutex<[String: (svg: String, made: ContinuousClock.Instant)]>([:])

    public init(configuration: WebConfiguration, context: ZMQContext? = nil, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        // Each tab's agent is a socket (two while a reconnect replaces it) and each
        // followed board a subscriber's four; libzmq's default of 1,023 held about 340 tabs.
        self.context = try context ?? ZMQContext(maxSockets: Int32(clamping: max(1023, 6 * configuration.maxTabs + 64)))
        var rules = GatewayCore.Configuration()
        rules.maxTabs = configuration.maxTabs
        rules.maxTabsPerUser = configuration.maxTabsPerUser
        rules.maxTabsPerAddress = configuration.maxTabsPerAddress ?? max(configuration.maxTabs / 4, min(configuration.maxTabs, 16))
        rules.maxSessions = configuration.maxSessions ?? 2 * configuration.maxTabs
        rules.reconnectGrace = configuration.reconnectGrace
        rules.boardIdleGrace = configuration.boardIdleGrace
        state = Mutex(State(core: GatewayCore(configuration: rules)))
        page = try PageFiles(directory: configuration.pageDirectory)
        hostNames = HostNames(
            listening: configuration.host,
            allowed: configuration.accessList == nil || !configuration.allowedHosts.isEmpty ? configuration.allowedHosts : ["*"])
        agents = try AgentHost(
            threads: max(1, configuration.agentThreads), context: self.context, logger: logger, gatherInterval: configuration.hubFlushInterval)
        boards = try SubscriptionHost(context: self.context, logger: logger)
        requests = try HubRequestHost(context: self.context, logger: logger)
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
        let router = Router(context: BasicRequestContext.self)
        addPageRoutes(to: router)
        // The page and its API are Hummingbird routes; a WebSocket at /ws is a tab,
        // served by a channel handler on its event loop (TabConnection).
        let headerTimeout = TimeAmount(configuration.headerTimeout)
        let http1 = HTTP1Channel.Configuration(idleTimeout: TimeAmount(configuration.idleTimeout))
        let app = Application(
            router: router,
            server: HTTPServerBuilder { [self] responder in
                TabUpgradeChannel(
                    responder: responder, path: "/ws", http1: http1,
                    // Frames up to twice the largest message, so one just over it gets a reason; larger ones close the connection.
                    maxFrameSize: 2 * configuration.maxMessageBytes, headDeadline: headerTimeout,
                    // Unknown hosts, bodies and other sites' WebSockets are refused with the reason before Hummingbird sees them.
                    refusal: { [self] head in refusal(of: head) },
                    installTab: { [self] channel, forwardedFor in try installTab(on: channel, forwardedFor: forwardedFor) })
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
        requests.start()
        try await serve(app)
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
                // The core's deadlines: sessions whose tab did not come back, boards no tab uses.
                await cancelWhenGracefulShutdown { [self] in await runTimers() }
            }
            if configuration.accessList != nil {
                group.addTask { [self] in
                    // The access list is a file an operator edits: looked at once a second.
                    try? await cancelWhenGracefulShutdown { [self] in
                        while !Task.isCancelled {
                            try await Task.sleep(for: .seconds(1))
                            revokeLostAccess()
                        }
                    }
                }
            }
        }
        await shutDown()
    }

    /// A tab's WebSocket: its connection's handler in the channel's pipeline
    /// (on its event loop); returns what closes it when the gateway stops.
    /// `forwardedFor`: the upgrade request's `X-Forwarded-For`, believed from a trusted proxy only.
    private func installTab(on channel: any Channel, forwardedFor: String?) throws -> @Sendable () -> Void {
        let id = state.withLock { state in
            defer { state.nextConnection += 1 }
            return state.nextConnection
        }
        let connection = TabConnection(gateway: self, id: id, queueLimit: configuration.tabQueueLimit)
        let socket = TabWebSocket(receiver: connection, settings: .init(maxMessageBytes: 2 * configuration.maxMessageBytes))
        if let peer = channel.remoteAddress?.ipAddress {
            socket.clientAddress = configuration.trustedProxies.clientAddress(peer: peer, forwardedFor: forwardedFor)
        }
        try channel.pipeline.syncOperations.addHandler(socket)
        let bound = NIOLoopBound(socket, eventLoop: channel.eventLoop)
        return { bound.value.close(code: .goingAway, reason: "the gateway is stopping") }
    }

    /// The flush group of the tabs on `loop` (made on first use; one per event loop).
    func flushGroup(for loop: any EventLoop) -> TabFlushGroup {
        flushGroups.withLock { groups in
            if let group = groups[ObjectIdentifier(loop)] { return group }
            let group = TabFlushGroup(
                loop: loop, delay: TimeAmount(configuration.tabFlushInterval), ackHold: TimeAmount(configuration.ackHoldInterval))
            groups[ObjectIdentifier(loop)] = group
            return group
        }
    }

    private func isShuttingDown() -> Bool { state.withLock { $0.stopped } }

    /// Why a request is refused before it is served, or nil: a Host the
    /// gateway does not answer to (DNS rebinding), a body (no route takes
    /// one), another site's WebSocket.
    func refusal(of head: RequestHead) -> (status: Int, reason: String)? {
        if let host = head.host, !hostNames.allows(host) {
            return (
                403,
                "this gateway does not answer to the name \(host) (a page whose name was pointed at this address must not reach it); the operator may allow it with --allow-host"
            )
        }
        if head.hasBody { return (413, "the gateway takes no request bodies") }
        if head.upgrade, let reason = originRefusal(origin: head.origin, host: head.host) { return (403, reason) }
        return nil
    }

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
        let (sessions, fanouts, ended) = state.withLock { state in
            state.stopped = true
            defer {
                state.sessions.removeAll()
                state.fanouts.removeAll()
            }
            return (Array(state.sessions.values), Array(state.fanouts.values), state.core.closeAll())
        }
        await withDiscardingTaskGroup { group in
            for session in sessions { group.addTask { await session.close() } }
        }
        for fanout in fanouts { await fanout.stop() }
        await self.boards.stop()
        await requests.stop()
        await agents.stop(goodbye: true)
        logger.notice("web gateway stopped", metadata: ["tabs": "\(ended.count)", "boards": "\(fanouts.count)"])
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
        let tabs: [(GatewayCore.Connection, InvitedTab)]? = state.withLock { state in
            guard state.tabsCheckedAgainst != modified else { return nil }
            return Array(state.invitedTabs)
        }
        guard let tabs, let list = try? currentAccessList() else { return }
        state.withLock { $0.tabsCheckedAgainst = modified }
        for (connection, tab) in tabs {
            let refusal: (code: String, message: String)?
            if list.user(withToken: tab.token) != tab.user {
                refusal = ("UNAUTHORIZED", "\(tab.user)'s invitation was revoked")
            } else if let role = list.role(of: tab.user, on: tab.board) {
                refusal = role < tab.role ? ("FORBIDDEN", "\(tab.user) may now only \(role) board \(tab.board): open it again") : nil
            } else {
                refusal = ("FORBIDDEN", "\(tab.user) no longer has access to board \(tab.board)")
            }
            guard let refusal else { continue }
            state.withLock { _ = $0.invitedTabs.removeValue(forKey: connection) }
            tab.outbox.revoke(code: refusal.code, message: refusal.message)
            logger.notice("tab closed: access revoked", metadata: ["user": "\(tab.user)", "board": "\(tab.board)", "why": "\(refusal.message)"])
        }
    }

    // MARK: The core's actions and deadlines

    /// Carries out what the core decided (outside the lock).
    private func perform(_ actions: [GatewayCore.Action]) async {
        for action in actions {
            switch action {
            case .endAgent(let token, let namespace, let why):
                let session = state.withLock { $0.sessions.removeValue(forKey: token) }
                switch why {
                case .didNotComeBack: logger.info("tab did not come back: its live touches are cancelled", metadata: ["user": "\(namespace)"])
                case .evicted: logger.info("tab ended to make room: its connection had not come back", metadata: ["user": "\(namespace)"])
                case .closed: logger.info("tab closed", metadata: ["user": "\(namespace)"])
                }
                if why == .evicted, let session {
                    Task { await session.close() }  // the new tab's hello does not wait for it
                } else {
                    await session?.close()
                }
            case .ack, .usersChanged:
                performAtOnce(action)
            case .unfollow(let board):
                if let fanout = state.withLock({ $0.fanouts.removeValue(forKey: board) }) {
                    await fanout.stop()
                    logger.info("board no longer followed: no tab", metadata: ["board": "\(board)"])
                }
            }
        }
    }

    /// Carries out the core's actions without waiting: at once when none has
    /// to wait (acks, users), else in a task (an agent's goodbye, a board's unfollow).
    private func performSoon(_ actions: [GatewayCore.Action]) {
        let waits = actions.contains { action in
            switch action {
            case .endAgent, .unfollow: true
            case .ack, .usersChanged: false
            }
        }
        if waits {
            Task { await perform(actions) }
        } else {
            for action in actions { performAtOnce(action) }
        }
    }

    /// An action with no async work: an ack to a tab, a board's users list.
    private func performAtOnce(_ action: GatewayCore.Action) {
        switch action {
        case .ack: perform(acks: [action])
        case .usersChanged(let board): broadcastUsers(of: board)
        case .endAgent, .unfollow: assertionFailure("\(action) waits: perform it with perform(_:)")
        }
    }

    /// Acknowledgements the core owes the tab (a core decision; no async work).
    private func perform(acks actions: [GatewayCore.Action]) {
        for case .ack(let connection, let through) in actions { state.withLock { $0.tabs[connection]?.outbox }?.postAck(through) }
    }

    /// Tells the session's tab what the hub has acknowledged since it last heard:
    /// when the agent reports an acknowledgement and after each handled page message.
    func pushAcks(of session: TabSession) {
        let actions = state.withLock { state in
            // Read under the lock (the order `handed` is recorded in), so no acknowledgement is missed.
            state.core.acknowledged(session.resumeToken, agentThrough: session.agent.acknowledged.through)
        }
        perform(acks: actions)
    }

    /// Runs the core's timers: sleeps until its next deadline (woken when one
    /// comes earlier), then lets it end sessions and boards that are due.
    private func runTimers() async {
        while !Task.isCancelled {
            let deadline = state.withLock { state in
                state.timerRecheck = false
                state.timerSleepsUntil = state.core.nextDeadline
                return state.timerSleepsUntil
            }
            let wait = deadline.map { $0 - .now } ?? .seconds(3600)
            if wait > .zero {
                _ = await timerWake.wait(timeout: wait) { [self] in self.state.withLock { $0.timerRecheck ? true : nil } }
            }
            guard !Task.isCancelled else { return }
            let actions = state.withLock { $0.core.tick(now: .now) }
            await perform(actions)
        }
    }

    /// After a change that may bring a deadline: wakes the timer task if it now sleeps too long.
    private func deadlinesChanged() {
        let wake = state.withLock { state -> Bool in
            guard let next = state.core.nextDeadline else { return false }
            guard state.timerSleepsUntil.map({ next < $0 }) ?? true else { return false }
            state.timerRecheck = true
            return true
        }
        if wake { timerWake.signal() }
    }

    // MARK: Boards

    private func fanout(for board: String) -> BoardFanout {
        let (fanout, isNew) = state.withLock { state -> (BoardFanout, Bool) in
            let followedBefore = !state.core.use(board: board, now: .now)
            if followedBefore, let existing = state.fanouts[board] { return (existing, false) }
            let made = BoardFanout(board: board, hub: configuration.hub(board), host: boards, logger: logger)
            state.fanouts[board] = made
            return (made, true)
        }
        if isNew { fanout.start() }
        return fanout
    }

    /// Boards this gateway serves now, with their tabs and sequence.
    func boardList() -> [(board: String, tabs: Int, sequence: UInt64, strokes: Int, lastActivity: Int64?)] {
        let boards = state.withLock { state in state.fanouts.values.map { ($0, state.core.tabCount(of: $0.board)) } }
        return boards.map { fanout, tabs in
            let status = fanout.status
            return (fanout.board, tabs, status.sequence, status.acceptedStrokes, fanout.lastActivityMilliseconds)
        }.sorted { $0.board < $1.board }
    }

    func usersMessage(of board: String) -> String {
        BrowserMessage.users(state.withLock { $0.core.users(of: board) }).json
    }

    /// The board's tabs are sent its users list, at most once per
    /// `usersListInterval` (a later change waits for the core's timer).
    private func broadcastUsers(of board: String) {
        let due: (message: String, outboxes: [TabOutbox])? = state.withLock { state in
            guard state.core.usersListDue(board, now: .now) else { return nil }
            return (BrowserMessage.users(state.core.users(of: board)).json, state.tabs.values.filter { $0.board == board }.map(\.outbox))
        }
        guard let due else { return deadlinesChanged() }
        for outbox in due.outboxes { outbox.post(due.message) }
    }

    // MARK: Tabs

    /// What a tab's welcome says of its session: the name others see and what the hub acknowledged.
    func welcomeFacts(of session: TabSession?) -> (displayName: String?, acked: UInt64) {
        state.withLock { state in
            let core = session.flatMap { state.core.session($0.resumeToken) }
            return (core?.displayName, core?.ackedThrough ?? 0)
        }
    }

    /// A welcomed tab joins its board: it is listed, sent the board, and told
    /// what the hub acknowledged while it was away.
    func tabJoined(_ id: GatewayCore.Connection, session: TabSession?, board: BoardFanout, identity: TabIdentity, outbox: TabOutbox) {
        state.withLock { state in
            state.tabs[id] = (board.board, outbox)
            state.core.join(id, board: board.board, now: .now)
            if let token = identity.token, let user = identity.user {
                state.invitedTabs[id] = InvitedTab(token: token, user: user, board: board.board, role: identity.role, outbox: outbox)
            }
        }
        board.join(outbox)
        broadcastUsers(of: board.board)
        if let session { pushAcks(of: session) }
    }

    /// A tab's connection ended: it leaves its board; its session waits for
    /// it to come back, or ends at once after a goodbye or a revocation.
    func tabLeft(_ id: GatewayCore.Connection, session: TabSession?, board fanout: BoardFanout?, outbox: TabOutbox, saidGoodbye: Bool) {
        fanout?.leave(outbox)
        let ended: [GatewayCore.Action] = state.withLock { state in
            _ = state.invitedTabs.removeValue(forKey: id)
            _ = state.tabs.removeValue(forKey: id)
            state.core.unseat(id)
            if let board = fanout?.board { state.core.leave(id, board: board, now: .now) }
            guard let session else { return [] }
            if saidGoodbye || outbox.isRevoked { return state.core.close(session.resumeToken) }  // a closed tab: its touches are cancelled at once
            if state.core.detach(session.resumeToken, id, now: .now) {
                session.attach(nil)
                logger.info(
                    "tab connection dropped; its agent waits for it", metadata: ["user": "\(session.namespace)", "grace": "\(configuration.reconnectGrace)"])
            }
            return [.usersChanged(board: session.board)]
        }
        if ended.isEmpty, let board = fanout?.board { broadcastUsers(of: board) }
        Task {
            await perform(ended)
            deadlinesChanged()
        }
    }

    /// A tab's `name`: nil, or why it is refused.
    func rename(_ session: TabSession?, to name: String?) -> BrowserWireError? {
        switch state.withLock({ $0.core.rename(session?.resumeToken ?? "", to: name ?? "", now: .now) }) {
        case .success(let actions):
            performSoon(actions)
            return nil
        case .failure(let error):
            return error
        }
    }

    /// A tab's pointer at board point `point` (nil: it left the board), for
    /// the board's other tabs at this gateway (docs/protocol.md, "Presence"):
    /// ephemeral, never sent to the hub.
    func cursor(of id: GatewayCore.Connection, session: TabSession?, on board: BoardFanout?, outbox: TabOutbox, at point: BrowserMessage.Cursor?) {
        guard let session, let board else { return }
        // The name and colour the users list shows, from the core; the board's tabs from its fan-out.
        guard let (name, rgba) = state.withLock({ $0.core.session(session.resumeToken).map { ($0.displayName, $0.colour) } }) else { return }
        let presence = BrowserMessage.Presence(
            id: id, user: session.namespace, name: name, rgba: rgba, x: point?.x, y: point?.y, laser: point?.laser == true ? true : nil,
            view: point?.view)
        board.post(presence: BrowserMessage.presence(presence).json, from: id, except: outbox)
    }

    /// A tab's `style` with a colour: its users' list shows it.
    func colour(_ session: TabSession, _ rgba: UInt32) {
        performSoon(state.withLock { $0.core.colour(session.resumeToken, rgba) })
    }

    /// Hands page message `number` to the session's agent once (`body` posts it,
    /// or throws to refuse it); the refusal to send back (JSON text), if any.
    /// Resends already handled are skipped; acknowledgements follow.
    func handle(_ number: UInt64, of session: TabSession, _ body: (TouchAgent) throws(BrowserWireError) -> Void) -> String? {
        var refusal: String? = nil
        switch state.withLock({ $0.core.number(number, of: session.resumeToken) }) {
        case .resent:
            break
        case .outOfOrder(let expected):
            refusal = BrowserMessage.refused(
                n: number, code: "OUT_OF_ORDER",
                message: "message \(number) after \(expected - 1): messages are numbered 1, 2, 3… and resent in order").json
        case .next:
            // Recorded before the agent can send it (a page message posts at most one, and only this
            // tab's thread posts to its agent): the hub's refusal of it may come back before this
            // thread goes on, and must find its page number.
            let before = session.agent.postedCount
            state.withLock { $0.core.handed(number, of: session.resumeToken, agentMessages: before + 1) }
            do throws(BrowserWireError) {
                try body(session.agent)
            } catch {
                // Refused here: nothing reached the hub, so it is done once what came before is.
                refusal = BrowserMessage.refused(n: number, code: error.code, message: error.message).json
            }
            if session.agent.postedCount == before { state.withLock { $0.core.notPosted(number, of: session.resumeToken) } }
        }
        pushAcks(of: session)  // a refused or resent message may be done already
        return refusal
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
    func open(_ hello: BrowserMessage.Hello, connection: GatewayCore.Connection, address: String, outbox: TabOutbox) async throws(BrowserWireError)
        -> (TabSession?, BoardFanout, TabIdentity)
    {
        guard let board = hello.board, isValidBoardName(board) else {
            throw BrowserWireError("UNKNOWN_BOARD", boardNameRule)
        }
        let identity = try identify(token: hello.token, board: board)
        if isShuttingDown() { throw BrowserWireError("SHUTTING_DOWN", "the gateway is stopping") }
        // The seat first, before anything waits: hellos at once cannot overshoot the limits.
        try state.withLock { $0.core.seat(connection, user: identity.user, address: address) }.get()
        let fanout = self.fanout(for: board)
        guard identity.role >= .draw else { return (nil, fanout, identity) }
        if let resume = hello.resume {
            let resumed = state.withLock { state -> TabSession? in
                guard state.core.resume(resume, board: board, user: identity.user, on: connection) != nil else { return nil }
                return state.sessions[resume]
            }
            if let resumed {
                resumed.attach(outbox)
                return (resumed, fanout, identity)
            }
        }
        // A full gateway first makes room by ending the tab that has waited longest
        // for its connection to come back: closed tabs must not keep new ones out.
        switch state.withLock({ $0.core.admit(user: identity.user, address: address, now: .now) }) {
        case .success(let evictions): await perform(evictions)
        case .failure(let refusal): throw refusal
        }
        let name = identity.user ?? hello.name.flatMap(DisplayName.cleaned) ?? "guest"
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
        // The hub, which owns the order, checks what the tab's role allows (a plain-text
        // hub would otherwise let a guest clear the board or erase anyone's strokes).
        settings.roleLimit = identity.role
        let agent: TouchAgent
        // The agent's news go straight to the tab from the agent's thread: no task or stream per tab.
        let events = TabAgentEvents()
        let onEvent: @Sendable (AgentEvent) -> Void = { [weak self] event in
            guard let self else { return }
            events.session?.deliver(event, page: { session, posted in self.state.withLock { $0.core.page(of: session.resumeToken, posted: posted) } }) {
                self.pushAcks(of: $0)
            }
        }
        do { agent = try TouchAgent(configuration: settings, context: context, logger: logger, host: agents, onEvent: onEvent) } catch {
            state.withLock { $0.core.cancelAdmission(user: identity.user, address: address) }
            throw BrowserWireError("HUB_UNAVAILABLE", "cannot reach the hub: \(error)")
        }
        agent.start()
        guard await agent.waitUntilWelcomed(timeout: .seconds(10)) else {
            state.withLock { $0.core.cancelAdmission(user: identity.user, address: address) }
            let why = agent.helloRefusal ?? "the hub at \(settings.hubEndpoint) did not answer within 10 s"
            await agent.stop(goodbye: true)
            throw BrowserWireError("HUB_REFUSED", why)
        }
        let session = TabSession(namespace: namespace, resumeToken: Self.randomName(32), board: board, user: identity.user, agent: agent)
        session.attach(outbox)
        events.deliver(to: session)  // what the agent heard before (its welcome) the tab hears from its welcome
        let opened = state.withLock { state in
            state.sessions[session.resumeToken] = session
            return state.core.open(
                token: session.resumeToken, namespace: namespace, board: board, user: identity.user, address: address, displayName: name,
                connection: connection)
        }
        await perform(opened.filter { if case .usersChanged = $0 { false } else { true } })  // the welcome comes first; users follow it
        logger.info("tab joined", metadata: ["user": "\(namespace)", "board": "\(board)", "name": "\(name)"])
        return (session, fanout, identity)
    }

    /// Binary frames as one: the frame itself when alone, else a bundle;
    /// acks but the last are left out (each covers those before it).
    static func bundle(_ frames: [ByteBuffer]) -> ByteBuffer {
        guard frames.count > 1 else { return frames[0] }
        let lastAck = frames.lastIndex { $0.getInteger(at: $0.readerIndex, as: UInt8.self) == BrowserBinary.Kind.ack.rawValue }
        var kept: [ByteBuffer] = []
        for (index, frame) in frames.enumerated() {
            if frame.getInteger(at: frame.readerIndex, as: UInt8.self) == BrowserBinary.Kind.ack.rawValue && index != lastAck { continue }
            kept.append(frame)
        }
        guard kept.count > 1 else { return kept[0] }
        var out = ByteBuffer()
        out.reserveCapacity(kept.reduce(1) { $0 + $1.readableBytes + 3 })
        out.writeInteger(BrowserBinary.Kind.bundle.rawValue)
        for frame in kept {
            out.writeBytes(BrowserBinary.varint(UInt64(frame.readableBytes)))
            out.writeImmutableBuffer(frame)
        }
        return out
    }

    // MARK: Tab messages to agent calls

    /// A board clear below admin is refused here, without a trip to the hub.
    /// Whose strokes an erase or edit may touch is the hub's to say (it owns
    /// the order: the gateway's copy may not have a stroke finished yet);
    /// every tab's session tells it the tab's role (`roleLimit`).
    static func authorize(_ message: BrowserMessage, role: Role) throws(BrowserWireError) {
        guard role < .admin, case .clear(_, "board") = message else { return }
        throw BrowserWireError("FORBIDDEN", "clearing the whole board needs the admin role (your role: \(role))")
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
        case .edit(let edit):
            agent.edit(try edit.strokeEdit())
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

    private func addPageRoutes(to router: Router<BasicRequestContext>) {
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
            var unreachable = 0
            for hub in configuration.boardListHubs.isEmpty ? [configuration.hub("")] : configuration.boardListHubs {
                do {
                    let page = try await BoardDirectory.list(
                        endpoint: hub.snapshot, limit: 1_000, context: self.context, timeout: .seconds(3), curve: hub.curve, host: requests,
                        onBehalf: onBehalf(of: request))
                    for board in page.boards {
                        merged[board.board] = (
                            0, board.sequence, Int(board.acceptedStrokes), Int(board.agents), board.lastChangeTime > 0 ? board.lastChangeTime / 1000 : nil,
                            false
                        )
                    }
                } catch {
                    // The boards this gateway has open are still listed; the page says a hub did not answer.
                    unreachable += 1
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
                return BoardListing(
                    board: board, tabs: entry.tabs, agents: entry.agents, sequence: entry.sequence, strokes: entry.strokes,
                    lastActivity: entry.lastActivity, followed: entry.followed)
            }
            var response = Self.json(String(decoding: (try? Self.listingEncoder.encode(list)) ?? Data("[]".utf8), as: UTF8.self))
            if unreachable > 0 { response.headers[Self.unreachableHubs] = "\(unreachable)" }
            return response
        }
        router.get("/api/boards/:board/thumbnail.svg") { [self] request, context in
            let board = try context.parameters.require("board")
            if let refusal = refusalToRead(board, request) { return refusal }
            // A board this gateway watches is drawn from its replica; another from one snapshot
            // of the hub's (kept 30 s: an index of many boards must not flood the hub's snapshot allowance).
            let svg: String
            if let fanout = state.withLock({ $0.fanouts[board] }), let replica = await fanout.snapshot() {
                svg = Self.thumbnail(of: replica)
            } else if let cached = thumbnails.withLock({ $0[board] }), ContinuousClock.now - cached.made < .seconds(30) {
                svg = cached.svg
            } else {
                let hub = configuration.hub(board)
                do {
                    // Several hubs listed (the board follows whichever holds it): the first that has it answers.
                    var answer: BoardState? = nil
                    var failure: (any Error)? = nil
                    for endpoint in hub.snapshot.split(separator: ",") where answer == nil {
                        do {
                            answer = try await BoardDirectory.snapshot(
                                of: board, endpoint: String(endpoint), context: self.context, timeout: .seconds(3), curve: hub.curve, host: requests,
                                onBehalf: onBehalf(of: request))
                        } catch { failure = error }
                    }
                    guard let replica = answer else { throw failure ?? BrowserWireError("HUB_UNAVAILABLE", "no hub listed") }
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
            return await history(of: board, onBehalf: onBehalf(of: request))
        }
    }

    /// A board drawn small for the index: no touch spots.
    static func thumbnail(of board: BoardState) -> String {
        var renderer = BoardRenderer()
        renderer.spotDiameter = 0
        return renderer.svg(of: board)
    }

    /// Whom an HTTP request asks the hub for: on an authenticated hub the
    /// invited user whose token it carries, so the hub counts it in that
    /// user's allowance and not in the gateway's, which every tab's board
    /// needs (docs/protocol.md, "Requests on behalf of a user"); nil for guests.
    private func onBehalf(of request: Request) -> (actAs: String, token: String)? {
        guard configuration.accessList != nil, let token = Self.bearer(request) else { return nil }
        return ("", token)
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
    /// `hub.history` may list several hubs of a board store, comma-separated
    /// (any of them reads the board from the store): each is asked in turn,
    /// within 10 s in all, until one answers (a dead hub is passed over).
    private func history(of board: String, onBehalf: (actAs: String, token: String)?) async -> Response {
        let hub = configuration.hub(board)
        let endpoints = hub.history.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        do {
            var fetched: RecordedHistory? = nil
            for (index, endpoint) in endpoints.enumerated() where fetched == nil {
                do {
                    fetched = try await HistoryClient.fetch(
                        board: board, endpoint: endpoint, context: context, timeout: .seconds(10) / max(1, endpoints.count), curve: hub.curve,
                        host: requests, onBehalf: onBehalf, logger: logger)
                } catch HistoryError.timedOut where index < endpoints.count - 1 {
                    continue  // a silent hub: the next (a refusal would be every hub's)
                }
            }
            guard let recorded = fetched else { throw HistoryError.timedOut(endpoint: hub.history) }
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

    /// On `GET /api/boards`: how many hubs did not answer (their boards are missing from the list).
    static let unreachableHubs = HTTPField.Name("TouchSync-Unreachable-Hubs")!

    static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// One board of `GET /api/boards` (docs/protocol.md, "HTTP"); `lastActivity` is null when unknown.
struct BoardListing: Encodable {
    var board: String
    var tabs: Int
    var agents: Int
    var sequence: UInt64
    var strokes: Int
    var lastActivity: Int64?
    var followed: Bool

    private enum Key: String, CodingKey { case board, tabs, agents, sequence, strokes, lastActivity, followed }

    func encode(to encoder: any Encoder) throws {
        var object = encoder.container(keyedBy: Key.self)
        try object.encode(board, forKey: .board)
        try object.encode(tabs, forKey: .tabs)
        try object.encode(agents, forKey: .agents)
        try object.encode(sequence, forKey: .sequence)
        try object.encode(strokes, forKey: .strokes)
        try object.encode(lastActivity, forKey: .lastActivity)
        try object.encode(followed, forKey: .followed)
    }
}

extension WebGateway {
    static let listingEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]  // the same text for the same list
        return encoder
    }()
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
