import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import TouchSyncAccess
import TouchSyncLoad
import TouchSyncWeb

/// `touchsync web`: the browser whiteboard.
struct WebCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web",
        abstract: "Serve the whiteboard to browsers: each tab draws as its own user, every board live.",
        discussion: """
            Open http://127.0.0.1:8080/ for the boards, http://127.0.0.1:8080/boards/NAME \
            to draw on one (several fingers, a mouse or a pen; undo, redo, eraser, \
            clear) and /boards/NAME/replay to watch its recorded history (the hub \
            needs --data for that). Each tab is its own agent towards the hub, named \
            web: and ten letters; a tab whose connection drops keeps its strokes in \
            progress for --reconnect-grace seconds and resends what the hub has not \
            acknowledged.

            For an authenticated hub, give the gateway its key (--key, --hub-key) \
            and the hub's access list (--access): each person then opens the link \
            of an invitation (touchsync keys invite NAME --boards … --role …), \
            their tabs act as web:NAME:… and may do what NAME may on each board. \
            Without them the page has no login, so listening beyond loopback \
            needs --insecure (docs/security.md).

              touchsync hub --data ./boards &
              touchsync web --listen 127.0.0.1:8080
            """)

    @Option(help: "Where browsers connect: HOST:PORT (PORT 0 picks a free one).") var listen = "127.0.0.1:8080"
    @OptionGroup var hub: HubAddressOptions
    @Option(help: "The hub's history endpoint (for the replay view); hubs sharing a board store may be listed, comma-separated: a silent one is passed over.")
    var history = "tcp://127.0.0.1:5573"
    @Option(help: "Seconds a tab's agent waits for a dropped tab to come back before its live touches are cancelled.")
    var reconnectGrace: Double = 30
    @Option(help: "Milliseconds each event loop gathers its tabs' outgoing batches and acks before writing them (one write per tab; 0: at once).")
    var tabFlushMs: Int = 0
    @Option(help: "Milliseconds an acknowledgement with nothing else for its tab waits for the board's next batch to go with (0: at once; fewer writes, but the page's round-trip badge reads that much more).")
    var ackHoldMs: Int = 0
    @Option(help: "Least milliseconds between two sends of the tabs' frames to the hub: frames posted sooner go together as one message (0: each at once).")
    var hubFlushMs: Int = 8
    @Option(help: "Serve the page from this folder instead of the built-in copy (for working on the page).") var page: String?
    @Option(help: "The hub's access list (with --key and --hub-key): browser users sign in with invitation links from it.")
    var access: String?
    @Flag(help: "Listen beyond loopback without --access (the page then has no login).") var insecure = false
    @Option(
        parsing: .singleValue,
        help: "Let pages of this origin open the gateway's WebSocket too (repeatable; exact, e.g. https://app.example.com, or * for any). Pages of the gateway's own origin always may.")
    var allowOrigin: [String] = []
    @Option(help: "Role of a guest tab without --access: watch, draw (its own strokes) or admin (also clear the board and erase others' strokes).")
    var guestRole = "draw"
    @Option(parsing: .unconditional, help: "Tabs connected at once, watchers too; more are refused GATEWAY_FULL.")
    var maxTabs = 256
    @Option(parsing: .unconditional, help: "Tabs one invited user may have open at once, watchers too (TOO_MANY_TABS past it).")
    var maxTabsPerUser = 16
    @Option(
        parsing: .unconditional,
        help: "Tabs one remote address may have open at once (TOO_MANY_TABS past it); default a quarter of --max-tabs, at least 16; 0: no limit (for load tests, or behind a proxy not given as --trusted-proxy).")
    var maxTabsPerAddress: Int?
    @Option(
        parsing: .singleValue,
        help: "A proxy (address or range, e.g. 10.0.0.0/8; repeatable) whose X-Forwarded-For names the tab's address: per-address limits then count browsers, not the proxy. From anyone else the header is ignored.")
    var trustedProxy: [String] = []
    @Option(parsing: .unconditional, help: "Messages one tab may send a second (twice that at once); past it RATE_LIMITED and the tab's reading pauses.")
    var maxTabMessagesPerSecond = 1000.0
    @Option(
        parsing: .singleValue,
        help: "Answer requests for this host name too (repeatable; * for any). IP addresses, localhost, the --listen name and this machine's name always work; others get 403 (DNS rebinding). Checked without --access, and with it once a name is given.")
    var allowHost: [String] = []
    @Option(parsing: .unconditional, help: "Threads that carry every tab's connection to the hub (not one thread per tab).")
    var agentThreads = 2
    @Option(parsing: .unconditional, help: "Seconds a board stays followed (its subscriber and replica) after its last tab left.")
    var idleBoardSeconds = 30.0
    @Option(parsing: .unconditional, help: "HTTP connections served at once (more wait to be accepted); default twice --max-tabs, at least 512.")
    var maxConnections: Int?
    @Option(parsing: .unconditional, help: "Seconds a connection has to send its first request head before it is closed (slowloris).")
    var headerTimeout = 10.0
    @Option(parsing: .unconditional, help: "Seconds a WebSocket has to say hello before it is closed.")
    var helloTimeout = 10.0
    @OptionGroup var logging: LoggingOptions

    var hostAndPort: (host: String, port: Int)? {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (0...65535).contains(port)
        else { return nil }
        let host = String(listen[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return host.isEmpty ? nil : (host, port)
    }

    func validate() throws {
        guard (1...100_000).contains(maxTabs) else { throw ValidationError("--max-tabs must be 1 to 100000") }
        if let maxConnections, !(8...1_000_000).contains(maxConnections) { throw ValidationError("--max-connections must be 8 to 1000000") }
        guard headerTimeout > 0 && headerTimeout <= 600 else { throw ValidationError("--header-timeout must be above 0 and at most 600 seconds") }
        guard helloTimeout > 0 && helloTimeout <= 600 else { throw ValidationError("--hello-timeout must be above 0 and at most 600 seconds") }
        guard (1...10_000).contains(maxTabsPerUser) else { throw ValidationError("--max-tabs-per-user must be 1 to 10000") }
        do { _ = try TrustedProxies(trustedProxy) } catch { throw ValidationError(error.description) }
        if let maxTabsPerAddress, !(0...100_000).contains(maxTabsPerAddress) {
            throw ValidationError("--max-tabs-per-address must be 0 (no limit) to 100000")
        }
        guard maxTabMessagesPerSecond.isFinite, (10...1_000_000).contains(maxTabMessagesPerSecond) else {
            throw ValidationError("--max-tab-messages-per-second must be 10 to 1000000")
        }
        for name in allowHost where name != "*" {
            guard !name.isEmpty, !name.contains("/"), !name.contains(":") || name.hasPrefix("[") else {
                throw ValidationError("--allow-host \(name): a host name without scheme or port, e.g. board.example.com")
            }
        }
        guard (1...64).contains(agentThreads) else { throw ValidationError("--agent-threads must be 1 to 64") }
        guard idleBoardSeconds.isFinite, idleBoardSeconds >= 0, idleBoardSeconds <= 86_400 else {
            throw ValidationError("--idle-board-seconds must be 0 to 86400")
        }
        guard Role(rawValue: guestRole) != nil else { throw ValidationError("--guest-role is watch, draw or admin, not \(guestRole)") }
        for origin in allowOrigin where origin != "*" {
            guard origin.hasPrefix("http://") || origin.hasPrefix("https://"), !origin.hasSuffix("/") else {
                throw ValidationError("--allow-origin \(origin): an origin is scheme://host[:port] without a path, e.g. https://app.example.com")
            }
        }
        guard let (host, _) = hostAndPort else { throw ValidationError("--listen is HOST:PORT with PORT 0 to 65535, not \(listen)") }
        for endpoint in history.split(separator: ",") { try validateEndpoint(String(endpoint), option: "--history") }
        guard reconnectGrace.isFinite, reconnectGrace >= 0, reconnectGrace <= 3600 else {
            throw ValidationError("--reconnect-grace is 0 to 3600 seconds")
        }
        guard (0...1000).contains(tabFlushMs) else { throw ValidationError("--tab-flush-ms is 0 to 1000") }
        guard (0...1000).contains(ackHoldMs) else { throw ValidationError("--ack-hold-ms is 0 to 1000") }
        guard (0...1000).contains(hubFlushMs) else { throw ValidationError("--hub-flush-ms is 0 to 1000") }
        guard (access == nil) == (hub.keys.key == nil) else {
            throw ValidationError("--access goes with --key and --hub-key: the gateway's own key, whose entry in the list has acts_for")
        }
        if access == nil && !insecure && !["127.0.0.1", "localhost", "::1"].contains(host) {
            throw ValidationError("--listen \(listen) accepts other machines and, without --access, the page has no login: pass --insecure on a network you trust")
        }
    }

    func run() async throws {
        let logger = logging.logger("touchsync.web")
        let (host, port) = hostAndPort!
        let addresses = hub
        var clusterMap: ClusterMap? = nil
        if let path = hub.cluster {
            do { clusterMap = try ClusterMap.load(from: path) } catch { throw CommandFailure(error.description) }
        }
        let cluster = clusterMap
        let historyEndpoint = history
        let curve = try hub.keys.curve()
        var configuration = WebConfiguration { board in
            var gatewayHub: GatewayHub
            if let cluster {
                let entry = cluster.hub(for: board)
                gatewayHub = GatewayHub(
                    ingest: entry.ingest, publish: entry.publish, snapshot: entry.snapshot, history: entry.history ?? historyEndpoint)
            } else {
                gatewayHub = GatewayHub(ingest: addresses.ingest, publish: addresses.publish, snapshot: addresses.snapshot, history: historyEndpoint)
            }
            gatewayHub.curve = curve
            return gatewayHub
        }
        let publishes = addresses.publish.split(separator: ",").map(String.init)
        let snapshots = addresses.snapshot.split(separator: ",").map(String.init)
        if cluster == nil && publishes.count > 1 {
            // Several hubs listed: each board is followed to whichever holds it, and each hub lists its own boards.
            configuration.boardListHubs = zip(publishes, snapshots).map { publish, snapshot in
                var listed = GatewayHub(ingest: addresses.ingest, publish: publish, snapshot: snapshot, history: historyEndpoint)
                listed.curve = curve
                return listed
            }
        }
        if let cluster {
            configuration.boardListHubs = cluster.hubs.map { entry in
                var listed = GatewayHub(
                    ingest: entry.ingest, publish: entry.publish, snapshot: entry.snapshot, history: entry.history ?? historyEndpoint)
                listed.curve = curve
                return listed
            }
        }
        configuration.accessList = access
        configuration.allowedOrigins = allowOrigin
        configuration.guestRole = Role(rawValue: guestRole) ?? .draw
        configuration.maxTabs = maxTabs
        configuration.maxTabsPerUser = maxTabsPerUser
        if let maxTabsPerAddress { configuration.maxTabsPerAddress = .some(maxTabsPerAddress == 0 ? nil : maxTabsPerAddress) }
        configuration.trustedProxies = try TrustedProxies(trustedProxy)
        configuration.tabAllowance.messagesPerSecond = maxTabMessagesPerSecond
        configuration.tabAllowance.messageBurst = 2 * maxTabMessagesPerSecond
        configuration.allowedHosts = allowHost
        configuration.agentThreads = agentThreads
        configuration.boardIdleGrace = .milliseconds(Int64(idleBoardSeconds * 1000))
        configuration.maxConnections = maxConnections ?? max(512, 2 * maxTabs)
        configuration.headerTimeout = .milliseconds(Int64(headerTimeout * 1000))
        configuration.helloTimeout = .milliseconds(Int64(helloTimeout * 1000))
        if let access {
            do { _ = try AccessList.load(from: access) } catch { throw CommandFailure(error.description) }
        }
        configuration.host = host
        configuration.port = port
        configuration.reconnectGrace = Duration.milliseconds(Int64(reconnectGrace * 1000))
        configuration.tabFlushInterval = .milliseconds(tabFlushMs)
        configuration.ackHoldInterval = .milliseconds(ackHoldMs)
        configuration.hubFlushInterval = .milliseconds(hubFlushMs)
        configuration.pageDirectory = page
        let gateway: WebGateway
        // Each tab holds a WebSocket and an agent connection, each board a subscriber: thousands of descriptors.
        raiseOpenFileLimit()
        do {
            gateway = try WebGateway(configuration: configuration, logger: logger)
        } catch {
            throw CommandFailure("cannot start the gateway: \(error)")
        }
        let access = self.access
        let ready = ListeningAnnouncement {
            guard let bound = await gateway.waitUntilListening() else { return }
            emit("TouchSync web gateway for the hub at \(addresses.ingest)")
            if access == nil {
                emit("  open http://\(host):\(bound)/boards/demo in two browser windows and draw")
            } else {
                emit("  each person opens their invitation link (touchsync keys invite NAME --boards … prints it, for http://\(host):\(bound)/)")
            }
            emit("Ctrl-C stops it.")
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: gateway), .init(service: ready, successTerminationBehavior: .ignore)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch let error as WebGatewayError {
            throw CommandFailure("\(error). Choose another address with --listen HOST:PORT.")
        } catch {
            throw CommandFailure("the gateway stopped: \(error)")
        }
        emit("web gateway stopped")
    }
}

/// Says where the gateway listens once it does.
struct ListeningAnnouncement: Service {
    let say: @Sendable () async -> Void
    func run() async throws { await say() }
}

