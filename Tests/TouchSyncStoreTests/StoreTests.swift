import ProcessTestSupport
import TestSupport
import Foundation
import Testing
import Logging
import TouchSyncCore
@testable import TouchSyncStore

@Suite("Board store: schema", .timeLimit(.minutes(3)))
struct StoreTests {
    /// A newcomer's PostgreSQL (issue 39): scripts/local-postgres.sh starts a
    /// throw-away server as the tests do and prints the --store URL, a store
    /// migrates there, and Ctrl-C stops it and removes its folder; a store
    /// nobody listens at afterwards is refused in words that say what to do.
    @Test func aThrowAwayStoreStartsForTryingAndGoesAway() async throws {
        let port = try TouchSyncProcess.freePorts(1)[0]
        let output = try ChildOutput()
        let errors = open(output.errorLog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(errors) }
        let script = repositoryRoot.path + "/scripts/local-postgres.sh"
        let child = try Child.spawn("/bin/bash", [script, "\(port)"], output: output.writeEnd, errors: errors)
        output.closeWriteEnd()
        defer { if child.isRunning { kill(child.processIdentifier, SIGKILL) } }
        var text = ""
        await readUntil(output, into: &text) { $0.contains("Ctrl-C stops it") }
        let url = "postgres://touchsync@127.0.0.1:\(port)/touchsync"
        #expect(text.contains("touchsync hub --store \(url)"), "\(text) \(output.errors)")
        let migrated = try await touchsync(["store", "migrate", "--store", url])
        #expect(migrated.status == 0, "\(migrated.output) \(migrated.errors)")
        let folder = try #require(text.range(of: #"/tmp/touchsync-postgres-[A-Za-z0-9]+"#, options: .regularExpression).map { String(text[$0]) })
        child.interrupt()
        await child.exited()
        #expect(!FileManager.default.fileExists(atPath: folder), "\(folder) is left")
        let after = try await touchsync(["store", "check", "--store", url])
        #expect(after.status != 0 && after.errors.contains("nothing listens at 127.0.0.1:\(port) (connection refused)"), "\(after.errors)")
    }

    @Test func migrateCreatesTheSchemaOnceAndCheckReportsIt() async throws {
        let server = try await PostgresServer()
        let store = ["--store", server.url]
        do {
            let before = try await touchsync(["store", "check"] + store)
            #expect(before.status == 1 && before.errors.contains("schema is at version none") && before.errors.contains("touchsync store migrate"), "\(before.errors)")

            // Three migrations at once: they take turns, the later ones find it done.
            async let first = touchsync(["store", "migrate"] + store)
            async let second = touchsync(["store", "migrate"] + store)
            async let third = touchsync(["store", "migrate"] + store)
            let migrations = try await [first, second, third]
            #expect(migrations.allSatisfy { $0.status == 0 }, "\(migrations.map(\.errors))")
            #expect(migrations.count { $0.output.contains("schema at version 2 (was none)") } == 1, "\(migrations.map(\.output))")
            #expect(migrations.count { $0.output.contains("schema already at version 2") } == 2, "\(migrations.map(\.output))")
            let versions = try await server.sql("SELECT count(*) FROM touchsync_schema")
            #expect(versions.output.trimmingCharacters(in: .whitespacesAndNewlines) == "2", "each version once: \(versions.output) \(versions.errors)")

            let check = try await touchsync(["store", "check"] + store)
            #expect(check.status == 0 && check.output.contains("schema version 2; 0 board(s), 0 batch(es), 0 live hub(s)"), "\(check.output) \(check.errors)")
            // The tables hold what they are for: a batch needs its board, a lease a positive epoch.
            let orphan = try await server.sql("INSERT INTO touchsync_batches VALUES ('nowhere', 1, 1, 0, '\\x00')")
            #expect(orphan.status != 0 && orphan.errors.contains("foreign key"), "\(orphan.errors)")
            let lease = try await server.sql("INSERT INTO touchsync_boards (board) VALUES ('b'); INSERT INTO touchsync_leases VALUES ('b', 'hub-a', 0, now())")
            #expect(lease.status != 0 && lease.errors.contains("check constraint"), "\(lease.errors)")

            // A store migrated by a newer touchsync is refused, not written.
            _ = try await server.sql("INSERT INTO touchsync_schema (version) VALUES (99)")
            let newer = try await touchsync(["store", "check"] + store)
            #expect(newer.status == 1 && newer.errors.contains("version 99, newer than this touchsync knows (2)"), "\(newer.errors)")
            let downgrade = try await touchsync(["store", "migrate"] + store)
            #expect(downgrade.status == 1 && downgrade.errors.contains("upgrade touchsync"), "\(downgrade.errors)")
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    /// A primary and its standbys as libpq writes them (issue 39): every
    /// server in order, default ports, IPv6 in brackets; bad lists in words.
    @Test func aStoreAddressNamesSeveralServers() throws {
        let both = try StoreAddress("postgres://touchsync@db-a:5433,db-b,[fd00::7]:6000/boards?sslmode=require", environment: [:])
        #expect(both.servers.map(\.description) == ["db-a:5433", "db-b:5432", "[fd00::7]:6000"])
        #expect(both.user == "touchsync" && both.database == "boards" && both.tls == .require)
        #expect(both.description == "postgres://touchsync@db-a:5433,db-b:5432,[fd00::7]:6000/boards?sslmode=require")
        let one = try StoreAddress("postgresql://me@127.0.0.1/db", environment: ["PGPASSWORD": "x"])
        #expect(one.servers == [.init(host: "127.0.0.1", port: 5432)] && one.password == "x")
        for (text, words) in [
            ("postgres://me@db-a,/db", "no host"), ("postgres://me@db-a:http/db", "bad port"), ("postgres://me@db-a:70000/db", "not 1-65535"),
            ("postgres://me@[fd00::7/db", "unclosed ["), ("postgres://db-a,db-b/db", "no user"), ("postgres://me:pw@db-a,db-b/db", "no password in the URL"),
        ] {
            #expect(throws: StoreError.self, "\(text)") { try StoreAddress(text, environment: [:]) }
            do { _ = try StoreAddress(text, environment: [:]) } catch { #expect("\(error)".contains(words), "\(text): \(error)") }
        }
    }

    @Test func badAddressesAndUnreachableStoresSayWhy() async throws {
        let password = try await touchsync(["store", "check", "--store", "postgres://me:secret@127.0.0.1/db"])
        #expect(password.status == 64 && password.errors.contains("no password in the URL"), "\(password.errors)")
        let scheme = try await touchsync(["store", "check", "--store", "mysql://me@127.0.0.1/db"])
        #expect(scheme.status == 64 && scheme.errors.contains("expected postgres://USER@HOST:PORT/DATABASE"), "\(scheme.errors)")
        let database = try await touchsync(["store", "check", "--store", "postgres://me@127.0.0.1:5432"])
        #expect(database.status == 64 && database.errors.contains("no database"), "\(database.errors)")
        let nobody = try TouchSyncProcess.freePorts(1)[0]
        let unreachable = try await touchsync(["store", "check", "--store", "postgres://me@127.0.0.1:\(nobody)/db"])
        #expect(unreachable.status == 1 && unreachable.errors.contains("cannot reach the board store"), "\(unreachable.errors)")

        // The hub says the same, and refuses options that make no sense with a store.
        let hub = try await touchsync(["hub", "--store", "postgres://me@127.0.0.1:\(nobody)/db", "--ingest", "tcp://127.0.0.1:\(try TouchSyncProcess.freePorts(1)[0])"])
        #expect(hub.status == 1 && hub.errors.contains("cannot reach the board store"), "\(hub.errors)")
        let memory = try await touchsync(["hub", "--store", "postgres://me@127.0.0.1/db", "--no-journal"])
        #expect(memory.status == 64 && memory.errors.contains("--store and --no-journal"), "\(memory.errors)")
        let name = try await touchsync(["hub", "--store", "postgres://me@127.0.0.1/db", "--name", "a/b"])
        #expect(name.status == 64 && name.errors.contains("--name must be 1 to 64"), "\(name.errors)")
        let lease = try await touchsync(["hub", "--store", "postgres://me@127.0.0.1/db", "--lease-timeout", "0"])
        #expect(lease.status == 64 && lease.errors.contains("--lease-timeout must be 1 to 600"), "\(lease.errors)")
        let render = try await touchsync(["render", "--board", "b", "--store", "postgres://me@127.0.0.1/db", "--data", "d"])
        #expect(render.status == 64 && render.errors.contains("either --data or --store"), "\(render.errors)")

        let server = try await PostgresServer()
        let missing = try await touchsync(["store", "migrate", "--store", "postgres://touchsync@127.0.0.1:\(server.port)/nosuchdb"])
        await server.stop()
        #expect(missing.status == 1 && missing.errors.contains("the board store refused") && missing.errors.contains("nosuchdb"), "\(missing.errors)")
    }
}

/// A board loaded ahead of its adoption and caught up at the lapse (issue
/// 39) comes out as the board loaded whole; a store whose batches no longer
/// follow on from it (history trimmed since) says load it whole.
@Suite("Board store: catching up a board loaded ahead", .timeLimit(.minutes(3)))
struct StoreCatchUpTests {
    @Test func aBoardLoadedAheadCaughtUpIsTheBoardLoadedWhole() async throws {
        let server = try await PostgresServer()
        let children = ChildProcesses()
        defer { children.killAll() }
        do {
            // Every endpoint its own free port (the history's default, 5573, is another test's hub's).
            let endpoints = try TouchSyncProcess.freePorts(4).map { "tcp://127.0.0.1:\($0)" }
            _ = try await children.startHub(
                ["hub", "--store", server.url, "--name", "hub-a", "--ingest", endpoints[0], "--publish", endpoints[1], "--snapshot", endpoints[2],
                 "--history", endpoints[3]])
            let client = ["--board", "ahead", "--hub", endpoints[0], "--publish", endpoints[1], "--snapshot", endpoints[2], "--fast"]
            let first = try await touchsync(["draw", "--seconds", "0.2"] + client)
            #expect(first.status == 0, "\(first.errors)")
            let address = try StoreAddress(server.url)
            let logger = Logger(label: "catch-up")
            let (ahead, caughtUp, whole, gap) = try await address.withConnection(logger: logger) { connection in
                let ahead = try await BoardStoreLoader.loadBoard("ahead", limits: BoardLimits(), connection: connection, logger: logger)
                let second = try await touchsync(["draw", "--seconds", "0.2"] + client)
                #expect(second.status == 0, "\(second.errors)")
                // At least two batches after what was loaded ahead (a loaded machine can fold a short
                // draw into one): the gap case below deletes the first and must leave a later one.
                for _ in 0..<5 {
                    let stored = try await connection.query("SELECT max(sequence) FROM touchsync_batches WHERE board = 'ahead'", logger: logger)
                    var last: Int64 = 0
                    for try await value in stored.decode(Int64.self) { last = value }
                    if last >= Int64(ahead.0.state.sequence) + 2 { break }
                    let more = try await touchsync(["draw", "--seconds", "0.2"] + client)
                    #expect(more.status == 0, "\(more.errors)")
                }
                let caughtUp = try await BoardStoreLoader.catchUp(ahead, limits: BoardLimits(), connection: connection, logger: logger)
                let whole = try await BoardStoreLoader.loadBoard("ahead", limits: BoardLimits(), connection: connection, logger: logger)
                // The batch right after what was loaded ahead gone (as `touchsync store trim` leaves a board): no catching up.
                _ = try await connection.query(
                    "DELETE FROM touchsync_batches WHERE board = 'ahead' AND sequence = \(Int64(ahead.0.state.sequence) + 1)", logger: logger)
                let gap = try await BoardStoreLoader.catchUp(ahead, limits: BoardLimits(), connection: connection, logger: logger)
                return (ahead, caughtUp, whole, gap)
            }
            let caught = try #require(caughtUp, "the batches follow on: it catches up")
            #expect(ahead.0.state.sequence > 0 && whole.0.state.sequence > ahead.0.state.sequence, "the second draw was stored after the first load")
            #expect(caught.0.state.sequence == whole.0.state.sequence)
            #expect(caught.0.state.digest == whole.0.state.digest)
            #expect(caught.1 == whole.1, "every agent's progress as the whole load has it")
            #expect(caught.0.damage.isEmpty)
            #expect(gap == nil, "a batch missing after what was loaded ahead: load it whole")
        } catch {
            children.killAll()
            await server.stop()
            throw error
        }
        children.killAll()
        await server.stop()
    }
}
