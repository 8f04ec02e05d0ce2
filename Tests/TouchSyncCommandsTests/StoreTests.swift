import TestSupport
import Foundation
import Testing

/// A PostgreSQL server of its own for a test: Debian's binaries, a cluster
/// in a temporary folder owned by the `postgres` user (initdb refuses root),
/// trust authentication on loopback, stopped and removed at the end.
final class PostgresServer {
    let folder: String
    let port: Int
    /// The address it listens on (loopback, or a test host's address in `namespace`).
    let host: String
    let namespace: String?
    private let binaries: String
    private let asPostgres: [String]

    /// The URL of the cluster's default database, as user `touchsync`.
    var url: String { "postgres://touchsync@\(host):\(port)/postgres" }

    /// - Parameters:
    ///   - namespace: run the server in this network namespace (a test host), listening on `host` there.
    ///   - port: the port (default: a free one).
    init(namespace: String? = nil, host: String = "127.0.0.1", port: Int? = nil) async throws {
        self.host = host
        self.namespace = namespace
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        guard let version = versions.compactMap(Int.init).max() else {
            throw TestFailure("PostgreSQL is not installed (make test installs Debian's postgresql)")
        }
        binaries = "/usr/lib/postgresql/\(version)/bin"
        asPostgres = (namespace.map { ["/usr/bin/env", "ip", "netns", "exec", $0] } ?? [])
            + (getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] : [])
        // Under /tmp itself: the test run's own temporary folder is root's alone
        // (mode 0700), which the postgres user cannot enter.
        folder = "/tmp/touchsync-postgres-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        self.port = try port ?? ProcessTests.freePorts(1)[0]
        do { try await startCluster() } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    private func startCluster() async throws {
        if getuid() == 0 {
            let chown = try await runToEnd("/usr/bin/chown", ["-R", "postgres:postgres", folder])
            guard chown.status == 0 else { throw TestFailure("chown: \(chown.errors)") }
        }
        let initdb = try await run("initdb", ["-D", folder + "/data", "-U", "touchsync", "-A", "trust", "--no-sync", "-E", "UTF8"])
        guard initdb.status == 0 else { throw TestFailure("initdb failed: \(initdb.output) \(initdb.errors)") }
        if host != "127.0.0.1" {
            // Another test host connects: trusted too (the test's own network only).
            let rules = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/data/pg_hba.conf"))
            rules.seekToEndOfFile()
            rules.write(Data("host all all 10.0.0.0/8 trust\n".utf8))
            try rules.close()
        }
        try await startServer()
    }

    private func startServer() async throws {
        let start = try await run(
            "pg_ctl",
            ["-D", folder + "/data", "-l", folder + "/server.log", "-w", "-t", "60", "start", "-o",
             "-p \(port) -k \(folder) -c listen_addresses=\(host) -c fsync=off -c full_page_writes=off"], limit: 90)
        guard start.status == 0 else {
            let log = (try? String(contentsOfFile: folder + "/server.log", encoding: .utf8)) ?? ""
            throw TestFailure("PostgreSQL did not start: \(start.output) \(start.errors) \(log)")
        }
    }

    /// Runs one of the server's programs as the cluster's owner.
    func run(_ program: String, _ arguments: [String], limit: Double = 60) async throws -> Outcome {
        let command = asPostgres + [binaries + "/" + program] + arguments
        return try await runToEnd(command[0], Array(command.dropFirst()), limit: limit)
    }

    /// Runs SQL as the superuser `touchsync` (in `database`, default the cluster's `postgres`).
    func sql(_ statement: String, database: String = "postgres") async throws -> Outcome {
        let psql = ["/usr/bin/psql", "-h", host, "-p", "\(port)", "-U", "touchsync", "-d", database, "-X", "-q", "-t", "-A", "-c", statement]
        guard let namespace else { return try await runToEnd(psql[0], Array(psql.dropFirst())) }
        return try await runToEnd("/usr/bin/env", ["ip", "netns", "exec", namespace] + psql)
    }

    /// Stops the server as a crash would (immediate: no checkpoint) and starts it again after `downFor`.
    func restart(downFor: Duration) async throws {
        try await crash()
        try await Task.sleep(for: downFor)
        try await startAgain()
    }

    /// Stops the server as a crash would (immediate: no checkpoint), until `startAgain`.
    func crash() async throws {
        let stop = try await run("pg_ctl", ["-D", folder + "/data", "-m", "immediate", "-w", "stop"])
        guard stop.status == 0 else { throw TestFailure("pg_ctl stop: \(stop.output) \(stop.errors)") }
    }

    func startAgain() async throws { try await startServer() }

    /// Stops the server at once, blocking (for a `defer`).
    func stopNow() {
        _ = try? touchsyncShell(asPostgres + [binaries + "/pg_ctl", "-D", folder + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: folder)
    }

    func stop() async {
        _ = try? await run("pg_ctl", ["-D", folder + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: folder)
    }
}

/// The PostgreSQL board store's schema through `touchsync store` (issue 25,
/// first part): created, versioned, checked, refused when it is not usable.
@Suite("Board store: schema", .timeLimit(.minutes(3)))
struct StoreTests {
    /// A newcomer's PostgreSQL (issue 39): scripts/local-postgres.sh starts a
    /// throw-away server as the tests do and prints the --store URL, a store
    /// migrates there, and Ctrl-C stops it and removes its folder; a store
    /// nobody listens at afterwards is refused in words that say what to do.
    @Test func aThrowAwayStoreStartsForTryingAndGoesAway() async throws {
        let port = try ProcessTests.freePorts(1)[0]
        let output = try ChildOutput()
        let errors = open(output.errorLog, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(errors) }
        let script = DeploymentTests.root.path + "/scripts/local-postgres.sh"
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

    @Test func badAddressesAndUnreachableStoresSayWhy() async throws {
        let password = try await touchsync(["store", "check", "--store", "postgres://me:secret@127.0.0.1/db"])
        #expect(password.status == 64 && password.errors.contains("no password in the URL"), "\(password.errors)")
        let scheme = try await touchsync(["store", "check", "--store", "mysql://me@127.0.0.1/db"])
        #expect(scheme.status == 64 && scheme.errors.contains("expected postgres://USER@HOST:PORT/DATABASE"), "\(scheme.errors)")
        let database = try await touchsync(["store", "check", "--store", "postgres://me@127.0.0.1:5432"])
        #expect(database.status == 64 && database.errors.contains("no database"), "\(database.errors)")
        let nobody = try ProcessTests.freePorts(1)[0]
        let unreachable = try await touchsync(["store", "check", "--store", "postgres://me@127.0.0.1:\(nobody)/db"])
        #expect(unreachable.status == 1 && unreachable.errors.contains("cannot reach the board store"), "\(unreachable.errors)")

        // The hub says the same, and refuses options that make no sense with a store.
        let hub = try await touchsync(["hub", "--store", "postgres://me@127.0.0.1:\(nobody)/db", "--ingest", "tcp://127.0.0.1:\(try ProcessTests.freePorts(1)[0])"])
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
