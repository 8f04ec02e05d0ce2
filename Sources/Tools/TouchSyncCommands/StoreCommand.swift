import ArgumentParser
import Foundation
import Logging
import TouchSyncJournal
import TouchSyncStore

/// `touchsync store`: the PostgreSQL board store's schema.
struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "The PostgreSQL board store: create or upgrade its schema (migrate), or check it (check).",
        discussion: """
            The store is a PostgreSQL database: --store postgres://USER@HOST:PORT/DATABASE \
            (add ?sslmode=require for TLS). The password comes from PGPASSWORD or \
            --store-password-file, never from the URL. The schema is versioned; migrate \
            only adds, several processes may run it at once, and a store newer than this \
            touchsync is refused. docs/architecture.md, "The board store", lists the tables.
            """,
        subcommands: [Migrate.self, Check.self])

    struct StoreOptions: ParsableArguments {
        @Option(help: "The board store, postgres://USER@HOST:PORT/DATABASE[?sslmode=disable|prefer|require]; HOST:PORT,HOST:PORT for a primary and its standbys (the first that accepts writes).")
        var store: String
        @Option(help: "A file holding the store's password (default: PGPASSWORD).")
        var storePasswordFile: String?

        func validate() throws {
            do { _ = try address() } catch { throw ValidationError(error.description) }
        }

        func address() throws(StoreError) -> StoreAddress { try StoreAddress(store, passwordFile: storePasswordFile) }

        /// Runs `body` on the store; its `StoreError` becomes the command's failure (exit 1).
        func withAdmin(_ logging: LoggingOptions, _ body: (BoardStoreAdmin, StoreAddress) async throws(StoreError) -> Void) async throws {
            let address = try address()
            do { try await body(BoardStoreAdmin(address: address, logger: logging.logger("touchsync.store")), address) } catch {
                throw CommandFailure(error.description)
            }
        }
    }

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create the schema, or bring it to this touchsync's version.")
        @OptionGroup var options: StoreOptions
        @OptionGroup var logging: LoggingOptions

        func run() async throws {
            try await options.withAdmin(logging) { admin, address throws(StoreError) in
                let found = try await admin.migrate()
                let now = BoardStoreSchema.currentVersion
                emit(found == now ? "\(address): schema already at version \(now)" : "\(address): schema at version \(now) (was \(found.map(String.init) ?? "none"))")
            }
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check that the store is reachable and at this touchsync's schema version; show what it holds (exit 1 if not usable).")
        @OptionGroup var options: StoreOptions
        @OptionGroup var logging: LoggingOptions

        func run() async throws {
            try await options.withAdmin(logging) { admin, address throws(StoreError) in
                let status = try await admin.check()
                emit("\(address): schema version \(status.version); \(status.boards) board(s), \(status.batches) batch(es), \(status.liveHubs) live hub(s)")
            }
        }
    }
}

/// `--store URL` where a command may read or keep boards in the board store
/// instead of a journal folder (hub, replay, render, compact).
struct BoardStoreOptions: ParsableArguments {
    @Option(help: "The PostgreSQL board store, postgres://USER@HOST:PORT/DATABASE[?sslmode=disable|prefer|require], instead of a journal folder; HOST:PORT,HOST:PORT for a primary and its standbys (the first that accepts writes).")
    var store: String?
    @Option(help: "A file holding the store's password (default: PGPASSWORD).") var storePasswordFile: String?

    func validate() throws {
        do { _ = try address() } catch { throw ValidationError(error.description) }
    }

    /// The store's address (nil: no --store).
    func address() throws(StoreError) -> StoreAddress? {
        guard let store else { return nil }
        return try StoreAddress(store, passwordFile: storePasswordFile)
    }

    /// A board's recorded history: from the store with --store, else from the journal folder `data`.
    func history(board: String, data: String, logger: Logger) async throws -> LoadedHistory {
        do {
            if let address = try address() { return try await BoardStoreHistory.load(address: address, board: board, logger: logger) }
            return try BoardHistory.open(dataDirectory: data, board: board).load()
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}
