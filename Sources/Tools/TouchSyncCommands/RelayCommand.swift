import ArgumentParser
import Logging
import ServiceLifecycle
import TouchSyncAccess
import TouchSyncHub
import TouchSyncHubCore

/// `touchsync relay`: a fan-out tier between a hub and its spectators.
struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Serve a hub's boards to more subscribers: a replica per board, the hub's messages passed on unchanged.",
        discussion: """
            Subscribes to the upstream hub (--publish, --snapshot; or another relay: \
            relays chain), keeps a replica of every board it follows, passes every \
            batch and heartbeat on byte for byte, and answers snapshot requests \
            itself, so subscribers pointed at --serve-publish and --serve-snapshot see \
            exactly the hub's boards (same sequence numbers and digests) while the \
            hub serves one connection. --board names boards or prefixes (team-*, or * \
            for all; from an authenticated hub a prefix needs a key that may watch \
            every board it matches: team-* or *). Downstream is plain \
            text unless --serve-key and --access make it authenticate its \
            subscribers as a hub does; a plain non-loopback --serve endpoint needs --insecure.

              touchsync relay --publish tcp://hub:5571 --snapshot tcp://hub:5572 \\
                --serve-publish tcp://*:5591 --serve-snapshot tcp://*:5592 --insecure
              touchsync spectate --publish tcp://relay:5591 --snapshot tcp://relay:5592 --board demo
            """)

    @OptionGroup var hub: SubscriberAddressOptions
    @Option(help: "Endpoint for subscribers (XPUB).") var servePublish = "tcp://127.0.0.1:5591"
    @Option(help: "Endpoint for snapshot requests (ROUTER).") var serveSnapshot = "tcp://127.0.0.1:5592"
    @Option(parsing: .singleValue, help: "A board to follow, or a prefix ending in * (repeatable; default *: every board).")
    var board: [String] = []
    @Option(help: "Serve downstream with this key file (as a hub's --key): CURVE, only users of --access who may watch each board.")
    var serveKey: String?
    @Option(help: "The access list for downstream subscribers (with --serve-key).") var access: String?
    @Flag(help: "Serve plain text on a non-loopback endpoint.") var insecure = false
    @Option(
        parsing: .singleValue,
        help: ArgumentHelp(
            "Another hub of the same board store, as PUBLISH,SNAPSHOT (repeatable): the relay listens to every hub given, so boards are followed to whichever hub holds them.",
            valueName: "publish,snapshot"))
    var hubFeed: [String] = []
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try hub.requireOneHub("relay (its other hubs go in --hub-feed)")
        try validateEndpoint(servePublish, option: "--serve-publish", binds: true)
        try validateEndpoint(serveSnapshot, option: "--serve-snapshot", binds: true)
        for name in board where !name.hasSuffix("*") { try validateBoard(name) }
        guard (serveKey == nil) == (access == nil) else { throw ValidationError("--serve-key and --access go together") }
        for feed in try feeds() {
            try validateEndpoint(feed.publish, option: "--hub-feed")
            try validateEndpoint(feed.snapshot, option: "--hub-feed")
        }
        guard hubFeed.isEmpty || hub.cluster == nil else { throw ValidationError("--hub-feed is for hubs sharing a board store; --cluster gives one hub per board") }
        if serveKey == nil && !insecure, let open = [servePublish, serveSnapshot].first(where: { !isLoopback($0) }) {
            throw ValidationError("\(open) accepts other machines in plain text: pass --insecure on a network you trust")
        }
    }

    /// The other hubs' endpoints, from `--hub-feed PUBLISH,SNAPSHOT`.
    func feeds() throws -> [(publish: String, snapshot: String)] {
        try hubFeed.map { feed in
            let parts = feed.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2 else { throw ValidationError("--hub-feed takes PUBLISH,SNAPSHOT (two endpoints, a comma between), not \(feed)") }
            return (parts[0], parts[1])
        }
    }

    /// The hub to follow: the endpoints given, or with --cluster the one hub
    /// that holds every board named (a relay follows one upstream).
    func upstream() throws -> SubscriberAddressOptions {
        guard let cluster = hub.cluster else { return hub }
        guard !board.isEmpty, board.allSatisfy({ !$0.hasSuffix("*") }) else {
            throw CommandFailure("with --cluster, name each board in full (--board NAME): a relay follows the one hub that holds them")
        }
        let map = try SubscriberAddressOptions.loadCluster(cluster)
        let owners = Dictionary(grouping: board) { map.hub(for: $0).name }
        guard owners.count == 1 else {
            let where_ = owners.keys.sorted().map { "\($0): \(owners[$0]!.joined(separator: ", "))" }.joined(separator: "; ")
            throw CommandFailure("these boards live on different hubs (\(where_)): a relay follows one hub, so run one relay per hub")
        }
        return try hub.resolved(board: board[0])
    }

    func run() async throws {
        let logger = logging.logger("touchsync.relay")
        var configuration = RelayConfiguration()
        let hub = try upstream()
        configuration.upstreamPublish = hub.publish
        configuration.upstreamSnapshot = hub.snapshot
        configuration.otherUpstreams = try feeds()
        configuration.publishEndpoint = servePublish
        configuration.snapshotEndpoint = serveSnapshot
        if !board.isEmpty { configuration.boards = board }
        configuration.upstreamCurve = try hub.keys.curve()
        configuration.security = try serverSecurity(key: serveKey, access: access)
        let relay = try BoardRelay(configuration: configuration, logger: logger)
        let endpoints: (publish: String, snapshot: String)
        do {
            endpoints = try await relay.start()
        } catch {
            throw CommandFailure("cannot start the relay: \(error). Choose other endpoints with --serve-publish and --serve-snapshot.")
        }
        emit("TouchSync relay of \(([hub.publish] + configuration.otherUpstreams.map(\.publish)).joined(separator: ", ")) (boards \(configuration.boards.joined(separator: ", ")))")
        emit("  subscribers \(endpoints.publish)")
        emit("  snapshots   \(endpoints.snapshot)")
        let ready = Announcement { emit("Ctrl-C stops it.") }
        let service = RelayService(relay: relay)
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: service), .init(service: ready, successTerminationBehavior: .ignore)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        let status = relay.status
        emit("relay stopped: \(status.forwarded) messages forwarded, \(status.snapshotsServed) snapshots served, \(status.resyncs) resyncs")
    }
}

/// Runs a relay until graceful shutdown.
struct RelayService: Service {
    let relay: BoardRelay
    func run() async throws {
        try? await gracefulShutdown()
        await relay.stop()
    }
}
