import TouchSyncHubCore
import Logging
import PostgresNIO
import TouchSyncCore
import TouchSyncJournal

/// A hub's start on the board store: the schema migrated (or checked), the
/// hub registered, the lease of every board nobody else holds taken, and
/// those boards loaded from their latest snapshot plus the batches after it.
public enum BoardStoreLoader {
    public struct Loaded: Sendable {
        public var boards: [RecoveredBoard]
        /// The epoch of each lease taken.
        public var epochs: [String: Int64]
        /// Every agent's progress per board, as stored.
        var progress: [String: [UserNamespace: AgentProgress]]

        /// The part of what was loaded that `holds` (a board thread's share).
        public func only(_ holds: (String) -> Bool) -> Loaded {
            var part = self
            part.boards = boards.filter { holds($0.name) }
            part.epochs = epochs.filter { holds($0.key) }
            part.progress = progress.filter { holds($0.key) }
            return part
        }
    }

    public static func load(
        configuration: BoardStoreConfiguration, limits: BoardLimits, logger: Logger
    ) async throws(StoreError) -> Loaded {
        let admin = BoardStoreAdmin(address: configuration.address, logger: logger)
        try await admin.migrate()
        return try await configuration.address.withConnection(logger: logger) { connection in
            try await load(configuration: configuration, limits: limits, connection: connection, logger: logger)
        }
    }

    private static func load(
        configuration: BoardStoreConfiguration, limits: BoardLimits, connection: PostgresConnection, logger: Logger
    ) async throws(StoreError) -> Loaded {
        do {
            // The name: this process's unless a live hub at other endpoints holds it (the same
            // endpoints are this hub restarted: its ports cannot be bound twice on one machine).
            let claimed = try await connection.query(
                BoardStoreMembership.heartbeat(configuration: configuration, sameEndpoints: true), logger: logger
            ).collect()
            if claimed.isEmpty {
                let holder = try await connection.query(
                    """
                    SELECT endpoints, extract(epoch FROM now() - heartbeat_at)::float8 FROM touchsync_hubs WHERE name = \(configuration.hubName)
                    """, logger: logger
                ).collect().first?.decode((String, Double).self)
                throw StoreError.nameTaken(name: configuration.hubName, endpoints: holder?.0 ?? "unknown", heardSecondsAgo: holder?.1 ?? 0)
            }
            // The boards to take: this hub's own leases (a restart under the
            // same name takes them back at once), and lapsed ones whose owner
            // among the live hubs is this hub. Each under a new epoch.
            var session = StoreSession(address: configuration.address, logger: logger, using: connection)
            let members = try await BoardStoreMembership.liveHubs(configuration: configuration, connection: &session)
            var wanted = Set(try await BoardStoreMembership.lapsedBoards(connection: &session).filter { lapsed in
                members.map { BoardLeases.successor(for: lapsed.board, after: lapsed.holder, among: $0).name } == configuration.hubName
            }.map(\.board))
            for try await board in try await connection.query(
                "SELECT board FROM touchsync_leases WHERE hub = \(configuration.hubName)", logger: logger
            ).decode(String.self) {
                wanted.insert(board)
            }
            var epochs: [String: Int64] = [:]
            let taken = try await connection.query(
                """
                UPDATE touchsync_leases
                SET hub = \(configuration.hubName), epoch = epoch + 1, expires_at = now() + make_interval(secs => \(configuration.leaseSeconds))
                WHERE board = ANY(\(Array(wanted))) AND (hub = \(configuration.hubName) OR expires_at < now())
                RETURNING board, epoch
                """, logger: logger)
            for try await (board, epoch) in taken.decode((String, Int64).self) { epochs[board] = epoch }
            var loaded = Loaded(boards: [], epochs: epochs, progress: [:])
            for board in epochs.keys.sorted() {
                let (recovered, agents) = try await loadBoard(board, limits: limits, connection: connection, logger: logger)
                loaded.boards.append(recovered)
                loaded.progress[board] = agents
            }
            return loaded
        } catch let error as StoreError {
            throw error
        } catch {
            throw BoardStoreAdmin.storeError(error)
        }
    }

    /// The board from its latest snapshot and the batches after it, applied
    /// in order up to the first that does not apply (reported as damage).
    static func loadBoard(
        _ board: String, limits: BoardLimits, connection: PostgresConnection, logger: Logger
    ) async throws -> (RecoveredBoard, [UserNamespace: AgentProgress]) {
        var loading = Loading(board: board, state: BoardState(limits: limits))
        let snapshots = try await connection.query(
            "SELECT sequence, snapshot FROM touchsync_snapshots WHERE board = \(board) ORDER BY sequence DESC LIMIT 1",
            logger: logger)
        for try await (_, bytes) in snapshots.decode((Int64, ByteBuffer).self) {
            guard case .checkpoint(let loaded, _, let progress) = try decode(bytes, limits: limits) else {
                throw StoreError.refused("board \(board)'s snapshot is not a checkpoint record")
            }
            loading.state = loaded
            for agent in progress { loading.agents[agent.principal] = agent }
            loading.applied += 1
        }
        _ = try await loading.applyBatches(fromTheNext: false, limits: limits, connection: connection, logger: logger)
        return loading.result
    }

    /// A board loaded earlier (`BoardPreloads`) brought up to the store's
    /// newest batch; nil when the store's batches do not follow on from it
    /// (its history was trimmed since, or it was damaged): load it whole.
    static func catchUp(
        _ preloaded: (RecoveredBoard, [UserNamespace: AgentProgress]), limits: BoardLimits, connection: PostgresConnection, logger: Logger
    ) async throws -> (RecoveredBoard, [UserNamespace: AgentProgress])? {
        let (board, agents) = preloaded
        guard board.damage.isEmpty else { return nil }
        var loading = Loading(board: board.name, state: board.state, agents: agents, applied: board.recordsApplied)
        guard try await loading.applyBatches(fromTheNext: true, limits: limits, connection: connection, logger: logger), loading.damage.isEmpty else { return nil }
        return loading.result
    }

    /// A board being loaded: its state so far, its agents' progress, what was applied and what did not apply.
    private struct Loading {
        let board: String
        var state: BoardState
        var agents: [UserNamespace: AgentProgress] = [:]
        var applied = 0
        var damage: [JournalDamage] = []

        var result: (RecoveredBoard, [UserNamespace: AgentProgress]) {
            (RecoveredBoard(name: board, state: state, agents: Array(agents.values), damage: damage, recordsApplied: applied), agents)
        }

        /// The stored batches after `state`, applied in order up to the first
        /// that does not apply (recorded as damage). With `fromTheNext`, false
        /// when the first stored batch after `state` is not the next one (then nothing is applied).
        mutating func applyBatches(fromTheNext: Bool, limits: BoardLimits, connection: PostgresConnection, logger: Logger) async throws -> Bool {
            let after = state.sequence
            let batches = try await connection.query(
                "SELECT sequence, batch FROM touchsync_batches WHERE board = \(board) AND sequence > \(Int64(after)) ORDER BY sequence",
                logger: logger)
            var (follows, first) = (true, true)
            for try await (sequence, bytes) in batches.decode((Int64, ByteBuffer).self) {
                // Read to the end of the stream either way: the connection is used again.
                if fromTheNext && first { follows = sequence == Int64(after) + 1 }
                first = false
                guard follows, damage.isEmpty else { continue }
                do {
                    guard case .batch(let batch, let progress) = try decode(bytes, limits: limits) else {
                        throw StoreError.refused("not a batch record")
                    }
                    try state.apply(batch)
                    for agent in progress { agents[agent.principal] = agent }
                    applied += 1
                } catch {
                    damage.append(
                        JournalDamage(
                            board: board, segment: "store batch \(sequence)",
                            damage: .corrupt(offset: 0, bytes: bytes.readableBytes, reason: "\(error)"), movedTo: nil))
                    logger.error(
                        "board store batch does not apply: the board is loaded up to the batch before it",
                        metadata: ["board": "\(board)", "sequence": "\(sequence)", "error": "\(error)"])
                }
            }
            return follows
        }
    }

    static func decode(_ bytes: ByteBuffer, limits: BoardLimits) throws -> JournalEntry {
        try bytes.withUnsafeReadableBytes { raw in try JournalRecordCodec.decode(raw, limits: limits) }
    }
}
