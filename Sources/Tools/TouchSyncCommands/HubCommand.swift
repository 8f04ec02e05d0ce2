import ArgumentParser
import Foundation
import CoreMetrics
import Prometheus
import Logging
import TouchSyncAccess
import TouchSyncLoad
import ServiceLifecycle
import UnixSignals
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncStore
import ZeroMQ

struct HubCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hub",
        abstract: "Run a hub: agents draw into it, subscribers follow its boards.",
        discussion: """
            With --key and --access the hub is authenticated: every connection is \
            encrypted (CURVE), only users in the access list get in, each user's \
            touches live in that user's namespace (no one can claim another's), and \
            each board action needs the user's role there (touchsync keys --help, \
            docs/security.md). SIGHUP re-reads the access list. Without them anyone \
            who can connect can claim any identity, so the hub then listens only on \
            loopback: --public or a non-loopback endpoint without keys is refused \
            unless --insecure says you mean it. Stops cleanly on Ctrl-C or SIGTERM, \
            publishing what is pending first.

            Boards are journaled to --data (default ./touchsync-data) and recovered \
            when the hub starts again, even after a crash or SIGKILL. --fsync says \
            when writes are made durable, and so when agents are acknowledged: \
            "batch" (fdatasync every batch: survives power loss), an interval such \
            as "20ms" (the default: the same guarantee, acknowledgements wait up to \
            the interval), or "never" (acknowledged once written to the OS: survives \
            a killed hub, not a power cut). --no-journal keeps boards in memory only.

            With --store postgres://USER@HOST:PORT/DATABASE boards live in a PostgreSQL \
            board store instead (password from PGPASSWORD or --store-password-file): \
            each batch is committed (several turns share a commit when the database is \
            slower) before it is published or acknowledged; the hub migrates the schema, \
            takes the lease of every board no live hub holds and loads it; a board whose \
            lease another hub took is refused with WRONG_HUB (docs/architecture.md, \
            "The board store").
            """)

    @Option(help: "Endpoint for agents (ROUTER; default tcp://127.0.0.1:5570, or this hub's in the --cluster file).") var ingest: String?
    @Option(help: "Endpoint for subscribers (XPUB; default tcp://127.0.0.1:5571, or the cluster file's).") var publish: String?
    @Option(help: "Endpoint for snapshot requests (ROUTER; default tcp://127.0.0.1:5572, or the cluster file's).") var snapshot: String?
    @Option(help: "Endpoint for history requests (ROUTER; served when journaling or on a board store; default tcp://127.0.0.1:5573, or the cluster file's).")
    var history: String?
    @Flag(help: "Listen on every interface (tcp://*:5570, 5571, 5572, 5573) instead of loopback.") var `public` = false
    @Option(parsing: .unconditional, help: "Seconds of silence after which an agent is reported silent (its touches are kept, stalled).")
    var livenessTimeout = 3.0
    @Option(parsing: .unconditional, help: "Seconds of silence after which a silent agent's touches are cancelled (at least --liveness-timeout).")
    var abandonTimeout = 30.0
    @Option(parsing: .unconditional, help: "Seconds between two heartbeats of a board.") var heartbeat = 1.0
    @Option(parsing: .unconditional, help: "Shortest milliseconds between two batches of a board (0: as soon as input is drained).")
    var publishIntervalMs = 0
    @Option(parsing: .unconditional, help: "Shortest milliseconds between two acks to one agent (0: every turn; a few ms: fewer acks for agents sending many small frames).")
    var ackIntervalMs = 0
    @Option(parsing: .unconditional, help: "Largest agent message in bytes; larger ones get MESSAGE_TOO_LARGE.") var maxMessageBytes = 1 << 20
    @Option(parsing: .unconditional, help: "Touches one user may have down at once.") var maxTouches = 20
    @Option(parsing: .unconditional, help: "Numbered messages one agent may send per second.") var maxMessagesPerSecond = 2000
    @Option(parsing: .unconditional, help: "Samples one user may send per second (frames beyond are refused).") var maxSamplesPerSecond = 20_000
    @Option(parsing: .unconditional, help: "Message bytes one user may send per second (messages beyond get BYTE_RATE_LIMITED).")
    var maxBytesPerSecond = 2 << 20
    @Option(parsing: .unconditional, help: "Samples one board stores; at the limit new strokes get BOARD_FULL until a clear.")
    var maxBoardSamples = 5_000_000
    @Option(parsing: .unconditional, help: "Samples one user may store over all this hub's boards; at the limit new strokes get BOARD_FULL until the user clears or erases some.")
    var maxUserSamples = 10_000_000
    @Option(parsing: .unconditional, help: "Boards this hub holds; hellos for more are refused.") var maxBoards = 10_000
    @Option(parsing: .unconditional, help: "Boards one user may create on this hub, in total (RATE_LIMITED past it).")
    var maxBoardsPerUser = 1_000
    @Option(parsing: .unconditional, help: "Boards one user may create on this hub per minute (RATE_LIMITED past it).")
    var maxNewBoardsPerMinute = 60
    @Option(parsing: .unconditional, help: "Snapshot requests per second from one user (authenticated) or connection (without an access list, four times that per remote address); more get RATE_LIMITED.")
    var maxSnapshotsPerSecond = 5
    @Option(parsing: .unconditional, help: "Agent sessions this hub keeps (the longest-abandoned is forgotten to make room).")
    var maxSessions = 10_000
    @Option(help: "The hub's key file (from touchsync keys generate hub): encrypt and authenticate every connection.")
    var key: String?
    @Option(help: "The access list (JSON; touchsync keys allow): who may connect, with which role on which boards.")
    var access: String?
    @Flag(help: "Accept plain-text connections on a non-loopback endpoint (anyone who can connect may claim any identity).")
    var insecure = false
    @Option(help: "Serve Prometheus metrics over HTTP at HOST:PORT (e.g. 127.0.0.1:9570; GET /metrics). Loopback only unless --public-metrics.")
    var metrics: String?
    @Flag(help: "Serve --metrics on a non-loopback address (metrics have no authentication: anyone who can connect reads them).")
    var publicMetrics = false
    @Flag(help: "Label per-board metrics with board names (users' words, readable by whoever reads the metrics).")
    var metricsBoardLabels = false
    @Option(help: "A cluster file (boards sharded over hubs): hold only the boards it gives to --name, refuse others with WRONG_HUB.")
    var cluster: String?
    @Option(help: "This hub's name in the cluster file, or in the board store (default there: HOSTNAME-INGESTPORT).")
    var name: String?
    @OptionGroup var stored: BoardStoreOptions
    @Option(parsing: .unconditional, help: "Seconds a board's lease in the store lasts unless renewed (renewed every eighth of it); another hub may take the board after it.")
    var leaseTimeout = 5.0
    @Option(
        help: ArgumentHelp(
            "With --store: the host clients reach this hub by, advertised in the store in place of a wildcard bind address (tcp://*:5570 becomes tcp://HOST:5570).",
            valueName: "host"))
    var advertise: String?
    @Option(parsing: .unconditional, help: "With --store: a board gets a compacted snapshot after this many KiB of batches since its last one (it then loads from the snapshot and the batches after it).")
    var storeSnapshotKib = 4096
    @Option(help: "Folder of the journal (created if missing).") var data = JournalDefaults.directory
    @Option(help: "When journal writes are made durable: batch, never, or an interval such as 20ms or 1s.")
    var fsync = "20ms"
    @Option(
        help: ArgumentHelp(
            "How a sync round makes several boards' journal files durable: auto (one syncfs of the data folder's filesystem from 4 files up, fdatasync each below), each-file (fdatasync each), or filesystem (always one syncfs; it also waits for other programs' unwritten data on that filesystem).",
            valueName: "method"))
    var journalSync: JournalSyncMethod = .automatic
    @Option(parsing: .unconditional, help: "A board starts a new journal segment (opening with a checkpoint) at this size, in MiB.")
    var segmentMib = 16
    @Option(parsing: .unconditional, help: "Seconds after which a board a hello created but nobody drew on, with no agent and no subscriber, is forgotten.")
    var idleEmptyBoardSeconds = 60.0
    @Option(parsing: .unconditional, help: "Journal segments kept open at once (the least recently written board's is closed past it): keeps boards from using up descriptors.")
    var journalOpenFiles = 256
    @Option(parsing: .unconditional, help: "Seconds between tries to restart a board's journal after it failed (that board's frames are not acknowledged meanwhile; the others go on).")
    var journalRetry = 5.0
    @Flag(help: "Keep boards in memory only: nothing survives a restart.") var noJournal = false
    @Option(
        parsing: .unconditional,
        help: "ZeroMQ I/O threads (the agents' and subscribers' connections are spread over them). Default: one per two cores beyond the first two, 1 to 4.")
    var ioThreads: Int?
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Board threads: the boards are spread over this many threads, each with its own share of the boards, journal and publishing, behind one front thread (clients see one hub). 1 to 64, or auto: one per four cores (1 below 8 cores).",
            valueName: "count"))
    var threads: BoardThreadCount = .count(1)
    @OptionGroup var logging: LoggingOptions

    /// ZeroMQ I/O threads by default: the hub thread and the generator-free
    /// rest of the machine first; one more per two cores beyond two, at most 4.
    static var defaultIOThreads: Int { min(4, max(1, (ProcessInfo.processInfo.activeProcessorCount - 2) / 2 + 1)) }

    func validate() throws {
        if let ioThreads, !(1...64).contains(ioThreads) { throw ValidationError("--io-threads must be 1 to 64") }
        for (endpoint, option) in [(ingest, "--ingest"), (publish, "--publish"), (snapshot, "--snapshot"), (history, "--history")] {
            if let endpoint { try validateEndpoint(endpoint, option: option, binds: true) }
        }
        guard FsyncPolicy(argument: fsync) != nil else {
            throw ValidationError("--fsync must be batch, never, or an interval such as 20ms or 1s")
        }
        guard (1...4096).contains(segmentMib) else { throw ValidationError("--segment-mib must be 1 to 4096") }
        guard livenessTimeout > 0 else { throw ValidationError("--liveness-timeout must be above 0 seconds") }
        guard idleEmptyBoardSeconds >= 1 && idleEmptyBoardSeconds <= 86_400 else {
            throw ValidationError("--idle-empty-board-seconds must be 1 to 86400")
        }
        guard (1...100_000).contains(journalOpenFiles) else { throw ValidationError("--journal-open-files must be 1 to 100000") }
        guard journalRetry > 0 && journalRetry <= 3600 else { throw ValidationError("--journal-retry must be above 0 and at most 3600 seconds") }
        guard heartbeat > 0 else { throw ValidationError("--heartbeat must be above 0 seconds") }
        guard abandonTimeout >= livenessTimeout else {
            throw ValidationError("--abandon-timeout must be at least --liveness-timeout (\(livenessTimeout) s)")
        }
        guard publishIntervalMs >= 0 else { throw ValidationError("--publish-interval-ms cannot be negative") }
        guard (0...1000).contains(ackIntervalMs) else { throw ValidationError("--ack-interval-ms must be 0 to 1000") }
        guard maxMessageBytes >= 1024 else { throw ValidationError("--max-message-bytes must be at least 1024") }
        guard (1...1000).contains(maxTouches) else { throw ValidationError("--max-touches must be 1 to 1000") }
        guard maxMessagesPerSecond > 0 else { throw ValidationError("--max-messages-per-second must be positive") }
        guard maxUserSamples > 0 else { throw ValidationError("--max-user-samples must be positive") }
        guard maxSamplesPerSecond > 0 else { throw ValidationError("--max-samples-per-second must be positive") }
        if let metrics {
            try validateEndpoint("tcp://" + metrics, option: "--metrics", binds: true)
            guard isLoopback("tcp://" + metrics) || publicMetrics || insecure else {
                throw ValidationError(
                    "--metrics \(metrics) accepts other machines, and metrics have no authentication: bind 127.0.0.1, or pass --public-metrics (e.g. in a container whose port is published on the host's loopback)")
            }
        }
        guard cluster == nil || name != nil else { throw ValidationError("--cluster needs --name (this hub's name in it)") }
        guard name == nil || cluster != nil || stored.store != nil else { throw ValidationError("--name goes with --cluster or --store") }
        if let name, !AccessList.isValidUserName(name) { throw ValidationError("--name must be 1 to 64 letters, digits, '-', '_' or '.'") }
        guard stored.store == nil || !noJournal else {
            throw ValidationError("--store and --no-journal: the store is where boards go; choose one")
        }
        guard leaseTimeout >= 1 && leaseTimeout <= 600 else { throw ValidationError("--lease-timeout must be 1 to 600 seconds") }
        if let advertise {
            guard stored.store != nil else { throw ValidationError("--advertise goes with --store (it is what the store tells other hubs' clients)") }
            guard !advertise.isEmpty, !advertise.contains(where: { ":/ *".contains($0) }) else {
                throw ValidationError("--advertise takes a host name or IPv4 address, such as hub-a or 10.0.0.5")
            }
        }
        guard (16...1_048_576).contains(storeSnapshotKib) else { throw ValidationError("--store-snapshot-kib must be 16 to 1048576") }
        guard (key == nil) == (access == nil) else {
            throw ValidationError("--key and --access go together: the hub's key file and the access list")
        }
        let endpoints = try bindEndpoints()
        if key == nil && !insecure, let open = endpoints.first(where: { !isLoopback($0) }) {
            throw ValidationError(
                "\(open) accepts other machines, and without --key and --access anyone there could claim any user's namespace. "
                    + "Make keys (touchsync keys --help) or, on a network you trust, pass --insecure")
        }
        guard maxBytesPerSecond >= 1024 else { throw ValidationError("--max-bytes-per-second must be at least 1024") }
        guard maxBoardSamples > 0 else { throw ValidationError("--max-board-samples must be positive") }
        guard maxBoards > 0 else { throw ValidationError("--max-boards must be positive") }
        guard maxSessions > 0 else { throw ValidationError("--max-sessions must be positive") }
        guard maxBoardsPerUser > 0, maxNewBoardsPerMinute > 0 else {
            throw ValidationError("--max-boards-per-user and --max-new-boards-per-minute must be positive")
        }
        guard maxSnapshotsPerSecond > 0 else { throw ValidationError("--max-snapshots-per-second must be positive") }
    }

    func run() async throws {
        let logger = logging.logger("touchsync.hub")
        var configuration = HubConfiguration()
        let binds = try bindEndpoints()
        (configuration.ingestEndpoint, configuration.publishEndpoint) = (binds[0], binds[1])
        (configuration.snapshotEndpoint, configuration.historyEndpoint) = (binds[2], binds[3])
        configuration.timing.livenessTimeout = Duration(secondsValue: livenessTimeout)
        configuration.timing.abandonTimeout = Duration(secondsValue: abandonTimeout)
        configuration.timing.heartbeatInterval = Duration(secondsValue: heartbeat)
        configuration.timing.publishInterval = .milliseconds(publishIntervalMs)
        configuration.timing.ackInterval = .milliseconds(ackIntervalMs)
        configuration.timing.journalRetryInterval = Duration(secondsValue: journalRetry)
        configuration.timing.idleEmptyBoardTimeout = Duration(secondsValue: idleEmptyBoardSeconds)
        configuration.limits.maxMessageBytes = maxMessageBytes
        configuration.limits.boardLimits.maxLiveTouchesPerUser = maxTouches
        configuration.limits.maxMessagesPerSecond = maxMessagesPerSecond
        configuration.limits.maxSamplesPerSecond = maxSamplesPerSecond
        configuration.limits.maxBytesPerSecond = maxBytesPerSecond
        configuration.limits.boardLimits.maxSamplesPerBoard = maxBoardSamples
        configuration.limits.maxBoards = maxBoards
        configuration.limits.maxSamplesPerUser = maxUserSamples
        configuration.limits.maxSessions = maxSessions
        configuration.metricsBoardLabels = metricsBoardLabels
        configuration.limits.maxSnapshotsPerSecond = maxSnapshotsPerSecond
        configuration.limits.maxBoardsCreatedPerUser = maxBoardsPerUser
        configuration.limits.maxBoardsCreatedPerUserPerMinute = maxNewBoardsPerMinute
        if let cluster, let name {
            let map: ClusterMap
            do {
                map = try ClusterMap.load(from: cluster)
            } catch {
                throw CommandFailure(error.description)
            }
            guard map.hubs.contains(where: { $0.name == name }) else {
                throw CommandFailure("\(cluster) has no hub named \(name) (it lists \(map.hubs.map(\.name).joined(separator: ", ")))")
            }
            configuration.cluster = (map, name)
        }
        configuration.security = try serverSecurity(key: key, access: access)
        configuration.boardThreads = threads.resolved(cores: ProcessInfo.processInfo.activeProcessorCount)
        var storeConfiguration: BoardStoreConfiguration? = nil
        if let address = try stored.address() {
            let ingestEndpoint = configuration.ingestEndpoint
            var settings = BoardStoreConfiguration(
                address: address, hubName: name ?? Self.defaultStoreName(ingest: ingestEndpoint),
                endpoints: [configuration.ingestEndpoint, configuration.publishEndpoint, configuration.snapshotEndpoint, configuration.historyEndpoint]
                    .map { Self.advertised($0, host: advertise) }.joined(separator: " "))
            settings.leaseTimeout = Duration(secondsValue: leaseTimeout)
            settings.snapshotEveryBytes = storeSnapshotKib << 10
            storeConfiguration = settings
        } else if !noJournal {
            var journal = JournalConfiguration(directory: data)
            journal.fsync = FsyncPolicy(argument: fsync) ?? journal.fsync
            journal.segmentBytes = segmentMib << 20
            journal.maxOpenFiles = journalOpenFiles
            journal.syncMethod = journalSync
            configuration.journal = journal
        }

        var metricsEndpoint: MetricsEndpoint? = nil
        var metricsFactory: (any MetricsFactory)? = nil
        if let metrics {
            let registry = PrometheusCollectorRegistry()
            metricsFactory = PrometheusMetricsFactory(registry: registry)
            do {
                metricsEndpoint = try await MetricsEndpoint(registry: registry, address: metrics)
            } catch {
                throw CommandFailure("cannot serve metrics at \(metrics): \(error)")
            }
        }
        let hub = try TouchSyncHub(
            configuration: configuration, store: storeConfiguration, logger: logger, metricsFactory: metricsFactory,
            context: try ZMQContext(ioThreads: Int32(ioThreads ?? Self.defaultIOThreads)))
        let endpoints: HubEndpoints
        do {
            endpoints = try await hub.start()
        } catch let error as ZMQError {
            throw CommandFailure(
                "cannot listen: \(error.description). Is another hub running? Choose other endpoints with --ingest, --publish, --snapshot and --history.")
        } catch let error as AccessListError {
            throw CommandFailure("\(error.description) (touchsync keys allow writes one)")
        } catch let error as JournalError {
            throw CommandFailure("cannot open the journal in \(data): \(error). Choose another folder with --data, or --no-journal.")
        } catch let error as StoreError {
            throw CommandFailure(error.description)
        }
        if let storeConfiguration {
            emit(
                "board store \(storeConfiguration.address) as hub \(storeConfiguration.hubName) (lease \(leaseTimeout) s): \(hub.recovered.count) board(s) loaded")
            for board in hub.recovered {
                emit("  \(board.board): batch \(board.sequence), \(board.samples) samples, digest \(board.digest)")
                for damage in board.damage { emit("  DAMAGE: \(damage)") }
            }
        } else if let journal = configuration.journal {
            emit("journal \(journal.directory) (fsync \(journal.fsync)): \(hub.recovered.count) board(s) recovered")
            for board in hub.recovered {
                emit("  \(board.board): batch \(board.sequence), \(board.samples) samples, digest \(board.digest)")
                for damage in board.damage {
                    emit("  \(damage.isCorruption ? "DAMAGE" : "repaired"): \(damage)")
                }
            }
        } else {
            emit("no journal: boards live in memory only")
        }
        if let security = configuration.security {
            emit("TouchSync hub listening, authenticated: CURVE, access list \(security.accessListPath) (SIGHUP re-reads it)")
            emit("  hub public key \(security.serverKey.publicKey)")
        } else {
            emit("TouchSync hub listening, NOT authenticated: anyone who can connect may claim any identity")
        }
        if let (map, name) = configuration.cluster {
            emit("  cluster     hub \(name) of \(map.hubs.count) (\(cluster ?? "")): boards of other hubs get WRONG_HUB")
        }
        emit("  agents      \(endpoints.ingest)")
        emit("  subscribers \(endpoints.publish)")
        emit("  snapshots   \(endpoints.snapshot)")
        if let history = endpoints.history { emit("  history     \(history)") }
        if configuration.boardThreads > 1 || threads == .automatic {
            emit("  threads     \(configuration.boardThreads) board thread(s)\(threads == .automatic ? " (auto: one per four of \(ProcessInfo.processInfo.activeProcessorCount) cores)" : "")")
        }
        if let metricsEndpoint { emit("  metrics     http://\(metricsEndpoint.endpoint.dropFirst("tcp://".count))/metrics") }
        // Said by a service of the group: services start only once the group
        // traps SIGINT and SIGTERM, so a Ctrl-C from then on stops the hub gracefully.
        let ready = Announcement { emit("Ctrl-C stops it.") }
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: hub), .init(service: ready, successTerminationBehavior: .ignore),
        ]
        if let security = configuration.security {
            services.append(.init(service: AccessReloader(hub: hub, path: security.accessListPath), successTerminationBehavior: .ignore))
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        await metricsEndpoint?.stop()
        emit("hub stopped")
    }
}

extension HubCommand {
    /// What the hub binds (ingest, publish, snapshot, history): every interface
    /// with --public; else each endpoint given, or this hub's in the --cluster
    /// file (so `--cluster FILE --name b` serves where the file sends clients),
    /// or the loopback default.
    func bindEndpoints() throws -> [String] {
        if `public` { return ["tcp://*:5570", "tcp://*:5571", "tcp://*:5572", "tcp://*:5573"] }
        var listed: ClusterMap.Hub? = nil
        if let cluster, let name {
            let map: ClusterMap
            do { map = try ClusterMap.load(from: cluster) } catch { throw ValidationError(error.description) }
            guard let hub = map.hubs.first(where: { $0.name == name }) else {
                throw ValidationError("\(cluster) has no hub named \(name) (it lists \(map.hubs.map(\.name).joined(separator: ", ")))")
            }
            listed = hub
        }
        func fromFile(_ endpoint: String?) throws -> String? { try endpoint.map { try Self.bindable($0) } }
        return [
            try ingest ?? fromFile(listed?.ingest) ?? "tcp://127.0.0.1:5570", try publish ?? fromFile(listed?.publish) ?? "tcp://127.0.0.1:5571",
            try snapshot ?? fromFile(listed?.snapshot) ?? "tcp://127.0.0.1:5572", try history ?? fromFile(listed?.history) ?? "tcp://127.0.0.1:5573",
        ]
    }

    /// A cluster file's endpoint as ZeroMQ binds it: libzmq binds an address
    /// or an interface, not a host name, so `tcp://hub-b:5570` becomes the
    /// IPv4 address hub-b resolves to here (the interface its clients reach).
    static func bindable(_ endpoint: String) throws -> String {
        guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":"), colon > endpoint.index(endpoint.startIndex, offsetBy: 6) else {
            return endpoint
        }
        let host = String(endpoint[endpoint.index(endpoint.startIndex, offsetBy: 6)..<colon])
        guard host != "*", host.contains(where: { $0.isLetter }) else { return endpoint }
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>? = nil
        guard getaddrinfo(host, nil, &hints, &found) == 0, let first = found else {
            throw ValidationError("the cluster file's \(endpoint): \(host) does not resolve to an IPv4 address here")
        }
        defer { freeaddrinfo(found) }
        var address = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { return endpoint }
        return "tcp://" + String(cString: text) + endpoint[colon...]
    }

    /// The host's name and the ingest port: the same after a restart on this
    /// machine (so the hub takes its leases back at once), and a valid hub name.
    /// `endpoint` as clients are told it: a wildcard bind host (`*`, `0.0.0.0`) replaced by `host`.
    static func advertised(_ endpoint: String, host: String?) -> String {
        guard let host, endpoint.hasPrefix("tcp://") else { return endpoint }
        for wildcard in ["tcp://*:", "tcp://0.0.0.0:"] where endpoint.hasPrefix(wildcard) {
            return "tcp://\(host):" + endpoint.dropFirst(wildcard.count)
        }
        return endpoint
    }

    static func defaultStoreName(ingest: String) -> String {
        let host = String(ProcessInfo.processInfo.hostName.filter { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }.prefix(40))
        let port = ingest.split(separator: ":").last.map(String.init)?.filter(\.isNumber) ?? ""
        return (host.isEmpty ? "hub" : host) + (port.isEmpty ? "" : "-" + port)
    }
}

/// A service that says something when its group has started (signals trapped) and ends.
struct Announcement: Service {
    let say: @Sendable () -> Void
    func run() async throws { say() }
}

/// Re-reads the access list on SIGHUP; a bad file is reported and the old list stays.
struct AccessReloader: Service {
    let hub: TouchSyncHub
    let path: String

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        for await _ in signals.cancelOnGracefulShutdown() {
            switch hub.reloadAccessList() {
            case .success(let users): emit("access list \(path) reloaded: \(users) user(s)")
            case .failure(let error): emit("access list NOT reloaded, the previous one stays in force: \(error)")
            }
        }
    }
}

/// Whether a bind endpoint listens only on this machine.
func isLoopback(_ endpoint: String) -> Bool {
    if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") { return true }
    guard endpoint.hasPrefix("tcp://"), let colon = endpoint.lastIndex(of: ":") else { return false }
    let host = endpoint[endpoint.index(endpoint.startIndex, offsetBy: 6)..<colon]
    return host == "localhost" || host.hasPrefix("127.") || host == "[::1]" || host == "::1" || host == "lo"
}

extension JournalSyncMethod: ExpressibleByArgument {}

/// `--threads`: a number of board threads (1 to 64), or `auto`.
enum BoardThreadCount: ExpressibleByArgument, Equatable {
    case count(Int)
    /// One board thread per four cores, at least 1: the front, the ZeroMQ I/O
    /// threads and the journal or store threads need cores of their own
    /// (docs/performance.md, "Board threads": a board thread's samples cost
    /// about as much again on the front and the I/O threads).
    case automatic

    init?(argument: String) {
        if argument == "auto" {
            self = .automatic
        } else if let count = Int(argument), (1...64).contains(count) {
            self = .count(count)
        } else {
            return nil
        }
    }

    var defaultValueDescription: String {
        switch self {
        case .count(let count): "\(count)"
        case .automatic: "auto"
        }
    }

    func resolved(cores: Int) -> Int {
        switch self {
        case .count(let count): count
        case .automatic: min(64, max(1, cores / 4))
        }
    }
}
