import Foundation
import Logging
import NIOPosix
import NIOSSL
import PostgresNIO

/// The board store's tables, by version (docs/architecture.md, "The board
/// store"). A migration only adds: a hub of an older version keeps working
/// on a schema it knows, and refuses one newer than it knows.
public enum BoardStoreSchema {
    /// Each version's statements, applied in order in one transaction.
    static let migrations: [[String]] = [
        // 1: boards, their batches (each with the lease epoch it was written
        // under), compacted snapshots, board leases and the live hubs.
        [
            """
            CREATE TABLE touchsync_boards (
                board text PRIMARY KEY,
                created_at timestamptz NOT NULL DEFAULT now())
            """,
            """
            CREATE TABLE touchsync_batches (
                board text NOT NULL REFERENCES touchsync_boards ON DELETE CASCADE,
                sequence bigint NOT NULL CHECK (sequence > 0),
                epoch bigint NOT NULL,
                hub_time_us bigint NOT NULL,
                batch bytea NOT NULL,
                PRIMARY KEY (board, sequence))
            """,
            """
            CREATE TABLE touchsync_snapshots (
                board text NOT NULL REFERENCES touchsync_boards ON DELETE CASCADE,
                sequence bigint NOT NULL,
                snapshot bytea NOT NULL,
                PRIMARY KEY (board, sequence))
            """,
            """
            CREATE TABLE touchsync_leases (
                board text PRIMARY KEY REFERENCES touchsync_boards ON DELETE CASCADE,
                hub text NOT NULL,
                epoch bigint NOT NULL CHECK (epoch > 0),
                expires_at timestamptz NOT NULL)
            """,
            """
            CREATE TABLE touchsync_hubs (
                name text PRIMARY KEY,
                endpoints text NOT NULL,
                heartbeat_at timestamptz NOT NULL)
            """,
        ],
        // 2: which process holds each hub name (one live process per name;
        // a second under a live hub's name is refused, its heartbeats too).
        [
            "ALTER TABLE touchsync_hubs ADD COLUMN instance text NOT NULL DEFAULT ''"
        ],
    ]

    /// The newest version this build knows.
    public static var currentVersion: Int { migrations.count }
}

/// What `touchsync store check` reports.
public struct BoardStoreStatus: Sendable, Equatable {
    public var version: Int
    public var boards: Int
    public var batches: Int
    public var liveHubs: Int
}

/// A connection to the board store for its administration: migrate and check.
public struct BoardStoreAdmin: Sendable {
    public let address: StoreAddress
    let logger: Logger

    public init(address: StoreAddress, logger: Logger) {
        self.address = address
        self.logger = logger
    }

    /// Brings the schema to `BoardStoreSchema.currentVersion`; returns the
    /// version it found (nil: none). Several processes may run it at once: an
    /// advisory lock makes them take turns, and the later ones find it done.
    @discardableResult
    public func migrate() async throws(StoreError) -> Int? {
        try await withConnection { connection throws(StoreError) in
            do {
                return try await connection.withTransaction(logger: logger) { connection in
                    try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
                    try await connection.query(
                        "CREATE TABLE IF NOT EXISTS touchsync_schema (version integer PRIMARY KEY, migrated_at timestamptz NOT NULL DEFAULT now())",
                        logger: logger)
                    let found = try await Self.version(connection, logger: logger)
                    if let found, found > BoardStoreSchema.currentVersion {
                        throw StoreError.newerSchema(found: found, known: BoardStoreSchema.currentVersion)
                    }
                    for version in ((found ?? 0) + 1)...max((found ?? 0) + 1, BoardStoreSchema.currentVersion) where version <= BoardStoreSchema.currentVersion {
                        for statement in BoardStoreSchema.migrations[version - 1] {
                            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                        try await connection.query("INSERT INTO touchsync_schema (version) VALUES (\(version))", logger: logger)
                        logger.notice("board store migrated", metadata: ["version": "\(version)"])
                    }
                    return found
                }
            } catch let error as StoreError {
                throw error
            } catch {
                throw Self.storeError(error)
            }
        }
    }

    /// The schema's version and what the store holds; throws `notMigrated`
    /// or `newerSchema` when this build cannot use it.
    public func check() async throws(StoreError) -> BoardStoreStatus {
        try await withConnection { connection throws(StoreError) in
            do {
                let exists = try await connection.query("SELECT to_regclass('touchsync_schema') IS NOT NULL", logger: logger)
                    .collect().first?.decode(Bool.self) ?? false
                guard exists, let version = try await Self.version(connection, logger: logger) else {
                    throw StoreError.notMigrated(found: nil, expected: BoardStoreSchema.currentVersion)
                }
                guard version <= BoardStoreSchema.currentVersion else {
                    throw StoreError.newerSchema(found: version, known: BoardStoreSchema.currentVersion)
                }
                guard version == BoardStoreSchema.currentVersion else {
                    throw StoreError.notMigrated(found: version, expected: BoardStoreSchema.currentVersion)
                }
                func count(_ query: PostgresQuery) async throws -> Int {
                    try await connection.query(query, logger: logger).collect().first?.decode(Int.self) ?? 0
                }
                return BoardStoreStatus(
                    version: version, boards: try await count("SELECT count(*)::bigint FROM touchsync_boards"),
                    batches: try await count("SELECT count(*)::bigint FROM touchsync_batches"),
                    liveHubs: try await count("SELECT count(*)::bigint FROM touchsync_hubs WHERE heartbeat_at > now() - interval '5 seconds'"))
            } catch let error as StoreError {
                throw error
            } catch {
                throw Self.storeError(error)
            }
        }
    }

    /// Who holds `board`'s lease, under which epoch, and whether it has lapsed (nil: never leased).
    public func lease(of board: String) async throws(StoreError) -> (hub: String, epoch: Int64, lapsed: Bool)? {
        try await withConnection { connection throws(StoreError) in
            do {
                let rows = try await connection.query(
                    "SELECT hub, epoch, expires_at < now() FROM touchsync_leases WHERE board = \(board)", logger: logger
                ).collect()
                guard let row = rows.first else { return nil }
                let (hub, epoch, lapsed) = try row.decode((String, Int64, Bool).self)
                return (hub, epoch, lapsed)
            } catch {
                throw Self.storeError(error)
            }
        }
    }

    /// The hub time (wall clock, µs since 1970) of `board`'s first batch
    /// committed under lease `epoch` (nil: none yet): when its new holder
    /// first committed, as the failover benchmark measures it.
    public func firstBatchTime(of board: String, epoch: Int64) async throws(StoreError) -> Int64? {
        try await withConnection { connection throws(StoreError) in
            do {
                let rows = try await connection.query(
                    "SELECT min(hub_time_us) FROM touchsync_batches WHERE board = \(board) AND epoch = \(epoch)", logger: logger
                ).collect()
                return try rows.first?.decode(Int64?.self)
            } catch {
                throw Self.storeError(error)
            }
        }
    }

    /// Any number both sides agree on, the same for every touchsync: "TSYN".
    static let migrationLock: Int64 = 0x5453_594E

    static func version(_ connection: PostgresConnection, logger: Logger) async throws -> Int? {
        try await connection.query("SELECT max(version) FROM touchsync_schema", logger: logger).collect().first?.decode(Int?.self)
    }

    private func withConnection<Value: Sendable>(_ body: (PostgresConnection) async throws -> Value) async throws(StoreError) -> Value {
        try await address.withConnection(logger: logger, body)
    }

    /// A PostgresNIO error in words, with what to do: the server's message
    /// when it sent one (and a hint for the common ones), else what failed.
    static func storeError(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                let state = error.serverInfo?[.sqlState]
                let hint: String =
                    switch state {
                    case "28000": ": the user does not exist there; name another in the URL (postgres://USER@HOST:PORT/DATABASE) or create it (createuser)"
                    case "28P01": ": the password is wrong; set PGPASSWORD or --store-password-file to the user's password"
                    case "3D000": ": create it (createdb -h HOST -p PORT -U USER DATABASE) or name another in the URL"
                    case "42501": ": the user may not do this; grant it the rights on the database, or use its owner"
                    default: ""
                    }
                return .refused("\(message)" + (state.map { " (SQLSTATE \($0))" } ?? "") + hint)
            }
            switch error.code {
            case .authMechanismRequiresPassword:
                return .refused("the server asks for a password: set PGPASSWORD or --store-password-file to the user's password")
            case .sslUnsupported:
                return .refused("the server does not speak TLS, which the URL requires (sslmode): drop ?sslmode=require or enable TLS on the server")
            default:
                break
            }
            if let underlying = error.underlying { return storeError(underlying) }
            return .unreachable("\(error.code)")
        }
        if let error = error as? NIOConnectionError {
            let address = "\(error.host):\(error.port)"
            if error.dnsAError != nil || error.dnsAAAAError != nil {
                return .unreachable("\(error.host) does not resolve to an address here: check the host in the URL")
            }
            let refused = error.connectionErrors.contains { ($0.error as? IOError)?.errnoCode == ECONNREFUSED }
            if refused {
                return .unreachable(
                    "nothing listens at \(address) (connection refused): is PostgreSQL running there, on that port? "
                        + "(scripts/local-postgres.sh starts a throw-away one to try)")
            }
            return .unreachable("no connection to \(address): \(error.connectionErrors.map { "\($0.error)" }.joined(separator: "; "))")
        }
        if let error = error as? ChannelError, case .connectTimeout(let after) = error {
            return .unreachable("no answer within \(after.nanoseconds / 1_000_000_000) s: is the host reachable, and PostgreSQL listening on it (listen_addresses)?")
        }
        return .unreachable("\(error)")
    }
}
