import CoreMetrics
import TouchSyncHubCore
import Logging
import PostgresNIO
import Synchronization
import TouchSyncAccess
import TouchSyncCore
import TouchSyncJournal
import TouchSyncWaiting
@_exported import TouchSyncStoreCore

/// How a hub uses the board store (docs/architecture.md, "The board store").
public struct BoardStoreConfiguration: Sendable {
    public var address: StoreAddress
    /// The hub's name in the store: leases are held under it, so a hub
    /// restarted under the same name takes its boards back at once.
    public var hubName: String
    /// The hub's endpoints as other hubs and clients reach them (ingest,
    /// publish, snapshot), written beside its heartbeat.
    public var endpoints: String
    /// This process's mark beside its heartbeat: one live process per hub
    /// name (a second one at other endpoints is refused at start, and a
    /// process whose name another took hears its heartbeats refused).
    public var instance = BoardStoreConfiguration.newInstance()
    /// A lease not renewed for this long is free for another hub. Default 5 s.
    public var leaseTimeout: Duration = .seconds(5)
    /// At most this many batches go into one commit (the rest into the
    /// next): a store that comes back after an outage gets bounded
    /// statements. Default 4,096.
    public var maxBatchesPerCommit = 4096
    /// A board gets a compacted snapshot once this many bytes of batches
    /// were stored since its last one (it then loads from the snapshot plus
    /// the batches after it). Default 4 MiB.
    public var snapshotEveryBytes = 4 << 20

    /// The hub's board limits, which loaded boards are read with.
    public var limits = BoardLimits()

    /// The boards this writer serves: a hub with several board threads has a
    /// writer per thread (`touchsync hub --threads`), and each adopts only its
    /// thread's share of a dead hub's boards. Default: every board.
    public var holds: @Sendable (String) -> Bool = { _ in true }

    public init(address: StoreAddress, hubName: String, endpoints: String) {
        self.address = address
        self.hubName = hubName
        self.endpoints = endpoints
    }

    /// Renewed this often: an eighth of the time-out, so seven renewals may
    /// fail before it lapses, and a lapsed lease is noticed within it.
    var renewInterval: Duration { leaseTimeout / 8 }

    static func newInstance() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(generator.next() as UInt64, radix: 36) }.joined(separator: "-")
    }
    var leaseSeconds: Double { Double(leaseTimeout.components.seconds) + Double(leaseTimeout.components.attoseconds) / 1e18 }
}

/// The hub's side of the board store: batches go in through `append` (the
/// hub's thread, never blocking), and one task (`run`) commits whatever
/// has queued since its last commit in one statement (group commit: when
/// the database is slower than the hub, several turns share a commit), under
/// each board's lease, and reports back through `report`.
///
/// Fencing: a batch is inserted only if the board's lease row still has this
/// hub's epoch, read with `FOR SHARE` in the same statement, so a takeover
/// (which updates that row) waits for the insert or makes it insert nothing.
/// No two hubs ever commit batches for one board under different epochs at
/// once, whatever the network does.
public final class BoardStoreWriter: Sendable {
    public let configuration: BoardStoreConfiguration
    private let logger: Logger
    private let report: @Sendable ([BoardStoreReport]) -> Void
    private let inbox = WorkQueue(Inbox())
    /// Boards of hubs that may be dead, loaded ahead of their lapse.
    private let preloads = Mutex(BoardPreloads<LoadedBoard>())
    /// Adopted boards by how they were loaded: ahead of the lapse, or whole after it.
    private let adoptedPreloaded: Counter
    private let adoptedWhole: Counter

    typealias LoadedBoard = (board: RecoveredBoard, agents: [UserNamespace: AgentProgress])

    struct Append {
        var ticket: UInt64
        var board: String
        var encodedBatch: [UInt8]
        var sequence: UInt64
        var hubTime: Int64
        var agents: [AgentProgress]
        var state: BoardState
    }

    struct Restart {
        var board: String
        var state: BoardState
        var hubTime: Int64
    }

    typealias ClaimKind = BoardLeases.ClaimKind

    private struct Inbox {
        var appends: [Append] = []
        var restarts: [Restart] = []
        var claims: [(board: String, kind: ClaimKind)] = []
        var renewDue = false
        var stopping = false

        var hasWork: Bool { !appends.isEmpty || !restarts.isEmpty || !claims.isEmpty || renewDue || stopping }
    }

    /// - Parameters:
    ///   - leases: the boards this hub took at start-up (`BoardStoreLoader`), with their epochs and agents.
    ///   - report: called from the writer's task with each commit's outcome.
    ///   - metricsFactory: where its counters go (the global `MetricsSystem` by default).
    public init(
        configuration: BoardStoreConfiguration, logger: Logger, metricsFactory: (any MetricsFactory)? = nil,
        report: @escaping @Sendable ([BoardStoreReport]) -> Void
    ) {
        self.configuration = configuration
        self.logger = logger
        self.report = report
        let factory = metricsFactory ?? MetricsSystem.factory
        adoptedPreloaded = Counter(label: "touchsync_store_boards_adopted_total", dimensions: [("loaded", "ahead")], factory: factory)
        adoptedWhole = Counter(label: "touchsync_store_boards_adopted_total", dimensions: [("loaded", "after_lapse")], factory: factory)
    }

    // MARK: The hub's side (any thread, never blocks)

    public func append(
        ticket: UInt64, board: String, encodedBatch: [UInt8], sequence: UInt64, hubTime: Int64, agents: [AgentProgress],
        state: BoardState
    ) {
        post {
            $0.appends.append(
                Append(
                    ticket: ticket, board: board, encodedBatch: encodedBatch, sequence: sequence, hubTime: hubTime, agents: agents,
                    state: state))
        }
    }

    /// Stores `state` as the board's snapshot (a failed board's way back).
    public func restart(board: String, state: BoardState, hubTime: Int64) {
        post { $0.restarts.append(Restart(board: board, state: state, hubTime: hubTime)) }
    }

    /// Takes `board`'s lease and loads it: reported `adopted`, or `moved`
    /// when another live hub holds it, or `failed` when the store cannot be reached.
    public func claim(_ board: String) { post { $0.claims.append((board, .hello)) } }

    /// As `claim`, but never creates the board (a spectator's snapshot
    /// request): reported `absent` when the store does not hold it.
    public func lookUp(_ board: String) { post { $0.claims.append((board, .lookUp)) } }

    /// `run` commits what is queued, then returns.
    public func stop() { post { $0.stopping = true } }

    private func post(_ change: (inout Inbox) -> Void) { inbox.post(change) }

    // MARK: The writer's task

    /// Commits until `stop()`; renews the leases and the hub's heartbeat every
    /// `leaseTimeout / 8`.
    public func run(startingWith loaded: BoardStoreLoader.Loaded) async {
        post { $0.renewDue = true }  // the live hubs known from the start
        let (snapshots, snapshotsDue) = AsyncStream.makeStream(of: SnapshotJob.self)
        let (preloadJobs, preloadsDue) = AsyncStream.makeStream(of: [String].self)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: configuration.renewInterval)
                    post { $0.renewDue = true }
                }
            }
            // Compacted snapshots on a connection of their own: encoding and
            // storing a large board takes a while, and no commit waits for it.
            group.addTask { [self] in
                var connection = StoreSession(address: configuration.address, logger: logger)
                for await job in snapshots {
                    do {
                        try await storeSnapshot(job, connection: &connection)
                    } catch {
                        logger.warning("board snapshot not stored (the batches are)", metadata: ["board": "\(job.board)", "error": "\(error)"])
                    }
                }
                await connection.close()
            }
            // Boards loaded ahead of their adoption, beside the commits (which never wait for them).
            group.addTask { [self] in
                for await boards in preloadJobs {
                    for (board, result) in await loadInParallel(boards) {
                        let loaded = try? result.get()
                        if loaded == nil { logger.info("board not loaded ahead (it is loaded whole if adopted)", metadata: ["board": "\(board)"]) }
                        preloads.withLock { $0.loaded(board, loaded) }
                    }
                }
            }
            await commitLoop(loaded, snapshotsDue: snapshotsDue, preloadsDue: preloadsDue)
            snapshotsDue.finish()
            preloadsDue.finish()
            group.cancelAll()
        }
    }

    /// A board's state to store as its snapshot, under the lease epoch it was committed with.
    struct SnapshotJob: Sendable {
        var board: String
        var state: BoardState
        var hubTime: Int64
        var agents: [AgentProgress]
        var epoch: Int64
    }

    /// Everything queued (at most `maxBatchesPerCommit` appends); nil when the task was cancelled.
    private func nextWork() async -> Inbox? {
        let limit = configuration.maxBatchesPerCommit
        return await inbox.next { inbox -> Inbox? in
            guard inbox.hasWork else { return nil }
            var taken = inbox
            if inbox.appends.count > limit {
                taken.appends = Array(inbox.appends[..<limit])
                taken.stopping = false  // stops once the rest is committed too
                inbox.appends.removeFirst(limit)
            } else {
                inbox.appends.removeAll(keepingCapacity: true)
            }
            inbox.restarts.removeAll()
            inbox.claims.removeAll()
            inbox.renewDue = false
            return taken
        }
    }

    private func commitLoop(
        _ loaded: BoardStoreLoader.Loaded, snapshotsDue: AsyncStream<SnapshotJob>.Continuation, preloadsDue: AsyncStream<[String]>.Continuation
    ) async {
        var leases = BoardLeases(
            hubName: configuration.hubName, leaseTimeout: configuration.leaseTimeout, snapshotEveryBytes: configuration.snapshotEveryBytes,
            epochs: loaded.epochs, progress: loaded.progress, now: .now)
        var connection = StoreSession(address: configuration.address, logger: logger)
        connection.timeout = max(configuration.leaseTimeout, .seconds(2))
        while let work = await nextWork() {
            var reports: [BoardStoreReport] = []
            // Renewal first: a claim or a move reported after it names hubs as they are now.
            if work.renewDue { await renew(&leases, connection: &connection, into: &reports) { preloadsDue.yield($0) } }
            for restart in work.restarts { await self.restart(restart, leases: &leases, connection: &connection, into: &reports) }
            for (board, kind) in work.claims where leases.shouldClaim(board) {
                await claim(board, kind, leases: &leases, connection: &connection, into: &reports)
            }
            if !work.appends.isEmpty {
                await commit(work.appends, leases: &leases, connection: &connection, into: &reports) { snapshotsDue.yield($0) }
            }
            if !reports.isEmpty { report(reports) }
            if work.stopping { break }
        }
        await connection.close()
    }

    /// One group: every batch the rules let through inserted in one
    /// statement, fenced by epoch.
    private func commit(
        _ appends: [Append], leases: inout BoardLeases, connection: inout StoreSession, into reports: inout [BoardStoreReport],
        snapshotDue: (SnapshotJob) -> Void
    ) async {
        let through = appends[appends.count - 1].ticket
        defer { reports.append(.committed(through: through)) }
        let rules = appends.map { BoardLeases.Append(board: $0.board, agents: $0.agents) }
        let plan = leases.planCommit(rules)
        for board in plan.notHeld {  // not this hub's (every board the hub serves was claimed first): never written
            await lose(board, leases: &leases, connection: &connection, into: &reports)
        }
        guard !plan.written.isEmpty else { return }
        let records = plan.written.map {
            ByteBuffer(bytes: JournalRecordCodec.batchPayload(encodedBatch: appends[$0.index].encodedBatch, agents: appends[$0.index].agents))
        }
        let inserted: [String: Int]
        do {
            inserted = try await insertBatches(plan, appends: appends, records: records, connection: &connection)
        } catch {
            reports += leases.commitFailed(plan, appends: rules, reason: "\(error)")
            return
        }
        let (lost, due) = leases.committed(plan, appends: rules, inserted: inserted, bytes: records.map(\.readableBytes))
        for board in lost { await lose(board, leases: &leases, connection: &connection, into: &reports) }  // its epoch is no longer ours
        for (index, epoch) in due {
            // Not needed for durability (the batches are in): stored aside, a failure only logged.
            let append = appends[index]
            snapshotDue(
                SnapshotJob(
                    board: append.board, state: append.state, hubTime: append.hubTime,
                    agents: leases.progress[append.board].map { Array($0.values) } ?? [], epoch: epoch))
        }
    }

    /// The group's insert: a batch is inserted only if its board's lease row
    /// still has this hub's epoch, read `FOR SHARE` in the same statement.
    /// Returns the rows inserted per board.
    private func insertBatches(
        _ plan: BoardLeases.CommitPlan, appends: [Append], records: [ByteBuffer], connection: inout StoreSession
    ) async throws(StoreError) -> [String: Int] {
        let written = plan.written.map { appends[$0.index] }
        let rows = try await connection.query(
            """
            WITH held AS (
                SELECT board, epoch FROM touchsync_leases
                WHERE hub = \(configuration.hubName) AND board = ANY(\(Array(plan.boards))) FOR SHARE)
            INSERT INTO touchsync_batches (board, sequence, epoch, hub_time_us, batch)
            SELECT b.board, b.sequence, b.epoch, b.hub_time_us, b.batch
            FROM unnest(\(written.map(\.board))::text[], \(written.map { Int64($0.sequence) })::bigint[], \(plan.written.map(\.epoch))::bigint[],
                        \(written.map(\.hubTime))::bigint[], \(records)::bytea[])
                AS b(board, sequence, epoch, hub_time_us, batch)
            JOIN held ON held.board = b.board AND held.epoch = b.epoch
            RETURNING board
            """)
        var counts: [String: Int] = [:]
        for row in rows {
            do { counts[try row.decode(String.self), default: 0] += 1 } catch { throw StoreError.refused("\(error)") }
        }
        return counts
    }

    /// A failed board back: its whole state stored as a snapshot under its lease.
    private func restart(
        _ restart: Restart, leases: inout BoardLeases, connection: inout StoreSession, into reports: inout [BoardStoreReport]
    ) async {
        switch leases.planRestart(restart.board) {
        case .nothing: return
        case .lose: await lose(restart.board, leases: &leases, connection: &connection, into: &reports)
        case .store(let epoch, let agents):
            do {
                let stored = try await storeSnapshot(
                    SnapshotJob(board: restart.board, state: restart.state, hubTime: restart.hubTime, agents: agents, epoch: epoch),
                    connection: &connection)
                if let restored = leases.restarted(restart.board, stored: stored) {
                    reports.append(restored)
                } else {
                    await lose(restart.board, leases: &leases, connection: &connection, into: &reports)
                }
            } catch {
                reports.append(.failed(board: restart.board, reason: "restart: \(error)"))
            }
        }
    }

    /// Inserts (or replaces) the board's snapshot at `state.sequence` if this
    /// hub still holds its lease; false: it does not.
    @discardableResult
    private func storeSnapshot(_ job: SnapshotJob, connection: inout StoreSession) async throws(StoreError) -> Bool {
        let (board, state, epoch) = (job.board, job.state, job.epoch)
        let record = JournalRecordCodec.checkpointPayload(state: state, board: board, hubTime: job.hubTime, agents: job.agents)
        let rows = try await connection.query(
            """
            WITH held AS (
                SELECT board FROM touchsync_leases
                WHERE board = \(board) AND hub = \(configuration.hubName) AND epoch = \(epoch) FOR SHARE)
            INSERT INTO touchsync_snapshots (board, sequence, snapshot)
            SELECT board, \(Int64(state.sequence)), \(ByteBuffer(bytes: record)) FROM held
            ON CONFLICT (board, sequence) DO UPDATE SET snapshot = excluded.snapshot
            RETURNING board
            """)
        return !rows.isEmpty
    }

    /// The board is another hub's: its owner read (and the live hubs, to
    /// tell the hub where the board went), reported once, never written again.
    private func lose(
        _ board: String, leases: inout BoardLeases, connection: inout StoreSession, into reports: inout [BoardStoreReport]
    ) async {
        let owner = (try? await connection.query("SELECT hub FROM touchsync_leases WHERE board = \(board)").first?.decode(String.self))
            ?? "unknown"
        var members: ClusterMap? = nil
        if leases.needsMembers(toName: owner) {
            members = try? await BoardStoreMembership.liveHubs(configuration: configuration, connection: &connection)
        }
        logger.warning("board lease lost: another hub serves it", metadata: ["board": "\(board)", "owner": "\(owner)"])
        reports += leases.lose(board, to: owner, members: members)
    }

    /// Every lease this hub holds extended, and its heartbeat; a lease whose
    /// epoch changed (or that is gone) was taken by another hub.
    /// - Parameter preload: loads these boards ahead (off this task).
    private func renew(
        _ leases: inout BoardLeases, connection: inout StoreSession, into reports: inout [BoardStoreReport], preload: ([String]) -> Void
    ) async {
        let started = ContinuousClock.now
        do {
            guard try await renewHeartbeat(connection: &connection) else {
                // Another process holds this hub's name now: its boards are that one's (their leases are under the name).
                logger.error("another process took this hub's name in the board store: its boards go to it", metadata: ["name": "\(configuration.hubName)"])
                // The name's endpoints are the new holder's now: agents are sent there.
                reports += leases.membersRead(try await BoardStoreMembership.liveHubs(configuration: configuration, connection: &connection))
                for board in leases.boardsToGive { await lose(board, leases: &leases, connection: &connection, into: &reports) }
                return
            }
            let held = try await renewLeases(connection: &connection)
            for board in leases.renewed(held, started: started) { await lose(board, leases: &leases, connection: &connection, into: &reports) }
            // Who is live, and the lapsed boards whose owner among them is this hub.
            reports += leases.membersRead(try await BoardStoreMembership.liveHubs(configuration: configuration, connection: &connection))
            // A dead hub's boards (issue 39: loaded one at a time, they delayed this hub's own renewals
            // and grew the failover with the board count): every lease taken here in one statement,
            // the boards then loaded in parallel, each on a connection of its own.
            var adopting: [(board: String, epoch: Int64)] = []
            let adoptable = leases.adoptable(lapsed: try await BoardStoreMembership.lapsedBoards(connection: &connection))
                .filter(configuration.holds)
            if !adoptable.isEmpty {
                do {
                    adopting = try await takeLeases(adoptable, connection: &connection)
                } catch {
                    for board in adoptable { reports.append(.failed(board: board, reason: "claiming its lease: \(error)")) }
                }
            }
            await load(adopting, leases: &leases, connection: &connection, into: &reports)
            // A hub two renewals late may be dead: its boards that would be this hub's are loaded
            // now, while their leases still run, so that adopting them at the lapse reads only
            // what was stored since (nothing, when it is dead). An optimisation only: a failure to ask is not a failed renewal.
            let suspects = (try? await BoardStoreMembership.boardsOfLateHubs(
                notHeldBy: configuration.hubName, lateBy: configuration.renewInterval * 2, connection: &connection)) ?? []
            let start = preloads.withLock { $0.suspected(leases.adoptable(lapsed: suspects).filter(configuration.holds)) }
            if !start.isEmpty {
                logger.info("a hub is late renewing: loading its boards ahead", metadata: ["boards": "\(start.count)"])
                preload(start)
            }
            // A lease another hub stopped renewing lapses before the next tick:
            // renew (and adopt) right after it lapses, not up to a tick later.
            if let lapse = try await BoardStoreMembership.soonestLapse(notHeldBy: configuration.hubName, connection: &connection),
                let wake = BoardLeases.earlyRenewal(untilLapse: lapse, interval: configuration.renewInterval)
            {
                Task { [self] in
                    try? await Task.sleep(for: wake)
                    post { $0.renewDue = true }
                }
            }
        } catch {
            logger.warning("board leases not renewed", metadata: ["error": "\(error)"])
            reports += leases.renewFailed(now: .now, reason: "\(error)")
        }
    }

    /// The hub's heartbeat, only while the name is this process's (or its
    /// holder's lease lapsed); false: another process holds the name.
    private func renewHeartbeat(connection: inout StoreSession) async throws(StoreError) -> Bool {
        !(try await connection.query(BoardStoreMembership.heartbeat(configuration: configuration, sameEndpoints: false)).isEmpty)
    }

    /// Every lease under this hub's name extended: board → epoch.
    private func renewLeases(connection: inout StoreSession) async throws(StoreError) -> [String: Int64] {
        let rows = try await connection.query(
            """
            UPDATE touchsync_leases SET expires_at = now() + make_interval(secs => \(configuration.leaseSeconds))
            WHERE hub = \(configuration.hubName) RETURNING board, epoch
            """)
        var held: [String: Int64] = [:]
        for row in rows {
            guard let (board, epoch) = try? row.decode((String, Int64).self) else { continue }
            held[board] = epoch
        }
        return held
    }

    /// The board's lease, if it is free, lapsed or this hub's: its new epoch, or nil (another hub holds it).
    private func takeLease(_ board: String, connection: inout StoreSession) async throws -> Int64? {
        try await takeLeases([board], connection: &connection).first?.epoch
    }

    /// The leases of `boards` that are free, lapsed or this hub's, taken in
    /// one statement (one commit, however many a dead hub held): each taken
    /// board with its new epoch (the others another hub was quicker to).
    private func takeLeases(_ boards: [String], connection: inout StoreSession) async throws -> [(board: String, epoch: Int64)] {
        let rows = try await connection.query(
            """
            INSERT INTO touchsync_leases (board, hub, epoch, expires_at)
            SELECT board, \(configuration.hubName), 1, now() + make_interval(secs => \(configuration.leaseSeconds))
            FROM touchsync_boards WHERE board = ANY(\(boards))
            ON CONFLICT (board) DO UPDATE
                SET hub = excluded.hub, epoch = touchsync_leases.epoch + 1, expires_at = excluded.expires_at
                WHERE touchsync_leases.hub = excluded.hub OR touchsync_leases.expires_at < now()
            RETURNING board, epoch
            """)
        return rows.compactMap { try? $0.decode((String, Int64).self) }.map { (board: $0.0, epoch: $0.1) }.sorted { $0.board < $1.board }
    }

    /// Boards whose leases this hub just took, reported adopted: those
    /// loaded ahead caught up on `connection` (the batches stored since),
    /// the others loaded whole in parallel.
    private func load(
        _ adopting: [(board: String, epoch: Int64)], leases: inout BoardLeases, connection: inout StoreSession,
        into reports: inout [BoardStoreReport]
    ) async {
        guard !adopting.isEmpty else { return }
        let started = ContinuousClock.now
        let epochs = Dictionary(adopting.map { ($0.board, $0.epoch) }, uniquingKeysWith: { $1 })
        var whole: [String] = []
        var ahead = 0
        for (board, epoch) in adopting {
            guard let preloaded = preloads.withLock({ $0.take(board) }) else {
                whole.append(board)
                continue
            }
            do throws(StoreError) {
                if let caughtUp = try await connection.catchUp(preloaded, limits: configuration.limits) {
                    adopted(caughtUp.board, epoch: epoch, agents: caughtUp.agents, leases: &leases, into: &reports)
                    ahead += 1
                    adoptedPreloaded.increment()
                    continue
                }
            } catch {
                logger.info("board loaded ahead did not catch up: loading it whole", metadata: ["board": "\(board)", "error": "\(error)"])
            }
            whole.append(board)
        }
        for (board, result) in await loadInParallel(whole) {
            switch result {
            case .success(let loaded):
                adopted(loaded.board, epoch: epochs[board]!, agents: loaded.agents, leases: &leases, into: &reports)
                adoptedWhole.increment()
            case .failure(let error):
                reports.append(.failed(board: board, reason: "loading it after taking its lease: \(error)"))
            }
        }
        // What a failover spends here, beside the lease's lapse and the agents' search.
        logger.notice(
            "lapsed boards adopted",
            metadata: ["boards": "\(adopting.count)", "loaded_ahead": "\(ahead)", "took": "\(ContinuousClock.now - started)"])
    }

    /// `boards` loaded whole, in parallel: at most four at once, each on a connection opened for it.
    private func loadInParallel(_ boards: [String]) async -> [(board: String, result: Result<LoadedBoard, StoreError>)] {
        guard !boards.isEmpty else { return [] }
        let (address, limits, logger) = (configuration.address, configuration.limits, logger)
        var results: [(board: String, result: Result<LoadedBoard, StoreError>)] = []
        await withTaskGroup(of: (board: String, result: Result<LoadedBoard, StoreError>).self) { group in
            var next = 0
            func start() {
                guard next < boards.count else { return }
                let board = boards[next]
                next += 1
                group.addTask {
                    var session = StoreSession(address: address, logger: logger)
                    let result: Result<LoadedBoard, StoreError>
                    do throws(StoreError) {
                        let (loaded, agents) = try await session.load(board, limits: limits)
                        result = .success((loaded, agents))
                    } catch {
                        result = .failure(error)
                    }
                    await session.close()
                    return (board, result)
                }
            }
            for _ in 0..<min(4, boards.count) { start() }
            while let loaded = await group.next() {
                results.append(loaded)
                start()
            }
        }
        return results
    }

    private func adopted(
        _ loaded: RecoveredBoard, epoch: Int64, agents: [UserNamespace: AgentProgress], leases: inout BoardLeases,
        into reports: inout [BoardStoreReport]
    ) {
        logger.notice("board lease taken", metadata: ["board": "\(loaded.name)", "epoch": "\(epoch)", "sequence": "\(loaded.state.sequence)"])
        reports.append(leases.adopted(loaded, epoch: epoch, agents: agents))
    }

    /// Takes the board's lease if it is free, lapsed or this hub's (for a
    /// hello, also a board the store does not have yet), and loads it.
    private func claim(
        _ board: String, _ kind: ClaimKind, leases: inout BoardLeases, connection: inout StoreSession, into reports: inout [BoardStoreReport]
    ) async {
        do {
            if kind == .hello { _ = try await connection.query("INSERT INTO touchsync_boards (board) VALUES (\(board)) ON CONFLICT DO NOTHING") }
            guard let epoch = try await takeLease(board, connection: &connection) else {
                switch leases.claimRefused(kind) {
                case .lose:
                    await lose(board, leases: &leases, connection: &connection, into: &reports)
                case .checkExists:
                    if try await connection.query("SELECT 1 FROM touchsync_boards WHERE board = \(board)").isEmpty {
                        reports.append(.absent(board: board))
                    } else {
                        await lose(board, leases: &leases, connection: &connection, into: &reports)
                    }
                case .nothing:
                    break
                }
                return
            }
            let (loaded, agents) = try await connection.load(board, limits: configuration.limits)
            adopted(loaded, epoch: epoch, agents: agents, leases: &leases, into: &reports)
        } catch {
            reports.append(.failed(board: board, reason: "claiming its lease: \(error)"))
        }
    }
}

/// One connection, opened when first needed and again after a failure (not
/// more than once a second, so an unreachable store fails groups at once
/// instead of making each wait for a connect time-out).
struct StoreSession {
    let address: StoreAddress
    let logger: Logger
    /// How long a statement may go unanswered before its connection is given up.
    var timeout: Duration = .seconds(5)
    private var connection: PostgresConnection? = nil
    private var lastFailure: ContinuousClock.Instant? = nil

    init(address: StoreAddress, logger: Logger, using connection: PostgresConnection? = nil) {
        self.address = address
        self.logger = logger
        self.connection = connection
    }

    /// Runs `query`; one that has no answer within `timeout` (a network
    /// that drops packets without a word) closes the connection and fails.
    mutating func query(_ query: PostgresQuery) async throws(StoreError) -> [PostgresRow] {
        let connection = try await open()
        let (logger, timeout) = (logger, timeout)
        do {
            return try await withThrowingTaskGroup(of: [PostgresRow]?.self) { group in
                group.addTask { try await connection.query(query, logger: logger).collect() }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    try? await connection.close()  // fails the query, so the group can end
                    return nil
                }
                defer { group.cancelAll() }
                guard let rows = try await group.next() ?? nil else {
                    throw StoreError.unreachable("no answer within \(timeout)")
                }
                return rows
            }
        } catch {
            throw await failed(error, on: connection)
        }
    }

    /// The error in words; unless only the statement failed, the connection is given up.
    private mutating func failed(_ error: any Error, on connection: PostgresConnection) async -> StoreError {
        let failure = BoardStoreAdmin.storeError(error)
        if case .refused = failure, !connection.isClosed { return failure }  // the statement failed, not the connection
        self.connection = nil
        lastFailure = .now
        try? await connection.close()
        return failure
    }

    /// A board from its newest snapshot and the batches after it (no time-out: a large board takes a while).
    mutating func load(_ board: String, limits: BoardLimits) async throws(StoreError) -> (RecoveredBoard, [UserNamespace: AgentProgress]) {
        let connection = try await open()
        do {
            return try await BoardStoreLoader.loadBoard(board, limits: limits, connection: connection, logger: logger)
        } catch {
            throw await failed(error, on: connection)
        }
    }

    /// A board loaded ahead, brought up to the store's newest batch; nil: load it whole.
    mutating func catchUp(
        _ preloaded: BoardStoreWriter.LoadedBoard, limits: BoardLimits
    ) async throws(StoreError) -> BoardStoreWriter.LoadedBoard? {
        let connection = try await open()
        do {
            return try await BoardStoreLoader.catchUp(
                (preloaded.board, preloaded.agents), limits: limits, connection: connection, logger: logger
            ).map { (board: $0.0, agents: $0.1) }
        } catch {
            throw await failed(error, on: connection)
        }
    }

    private mutating func open() async throws(StoreError) -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        if let lastFailure, ContinuousClock.now - lastFailure < .seconds(1) {
            throw StoreError.unreachable("the last connection failed under a second ago")
        }
        do {
            let connection = try await address.connect(logger: logger, timeout: .seconds(2))
            self.connection = connection
            return connection
        } catch {
            lastFailure = .now
            throw error
        }
    }

    mutating func close() async {
        try? await connection?.close()
        connection = nil
    }
}
