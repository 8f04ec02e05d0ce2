import Foundation
import Synchronization
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL server of its own for a test: Debian's binaries, a cluster
/// in a temporary folder owned by the `postgres` user (initdb refuses root),
/// trust authentication on loopback, stopped and removed at the end.
public final class PostgresServer {
    public let folder: String
    public let port: Int
    /// The address it listens on (loopback, or a test host's address in `namespace`).
    public let host: String
    public let namespace: String?
    private let binaries: String
    private let asPostgres: [String]

    /// The URL of the cluster's default database, as user `touchsync`.
    public var url: String { "postgres://touchsync@\(host):\(port)/postgres" }

    /// - Parameters:
    ///   - namespace: run the server in this network namespace (a test host), listening on `host` there.
    ///   - port: the port (default: a free one).
    public init(namespace: String? = nil, host: String = "127.0.0.1", port: Int? = nil) async throws {
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
        self.port = try port ?? TouchSyncProcess.freePorts(1)[0]
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

    /// A streaming standby of `primary` on loopback (pg_basebackup -R), its
    /// `application_name` `name` (what `synchronous_standby_names` names).
    public init(standbyOf primary: PostgresServer, name: String) async throws {
        host = "127.0.0.1"
        namespace = nil
        binaries = primary.binaries
        asPostgres = getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] : []
        folder = "/tmp/touchsync-postgres-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        port = try TouchSyncProcess.freePorts(1)[0]
        extraOptions = " -c cluster_name=\(name)"
        do {
            if getuid() == 0 {
                let chown = try await runToEnd("/usr/bin/chown", ["-R", "postgres:postgres", folder])
                guard chown.status == 0 else { throw TestFailure("chown: \(chown.errors)") }
            }
            let copy = try await run(
                "pg_basebackup", ["-h", primary.host, "-p", "\(primary.port)", "-U", "touchsync", "-D", folder + "/data", "-R", "-X", "stream", "--no-sync"],
                limit: 120)
            guard copy.status == 0 else { throw TestFailure("pg_basebackup failed: \(copy.output) \(copy.errors)") }
            try await startServer()
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    /// A standby becomes a primary (pg_ctl promote, waiting until it accepts writes).
    public func promote() async throws {
        let promote = try await run("pg_ctl", ["-D", folder + "/data", "-w", "-t", "60", "promote"], limit: 90)
        guard promote.status == 0 else { throw TestFailure("pg_ctl promote: \(promote.output) \(promote.errors)") }
    }

    /// Server options beyond the common ones (a standby's name).
    private var extraOptions = ""

    private func startServer() async throws {
        let start = try await run(
            "pg_ctl",
            ["-D", folder + "/data", "-l", folder + "/server.log", "-w", "-t", "60", "start", "-o",
             "-p \(port) -k \(folder) -c listen_addresses=\(host) -c fsync=off -c full_page_writes=off" + extraOptions], limit: 90)
        guard start.status == 0 else {
            let log = (try? String(contentsOfFile: folder + "/server.log", encoding: .utf8)) ?? ""
            throw TestFailure("PostgreSQL did not start: \(start.output) \(start.errors) \(log)")
        }
    }

    /// Runs one of the server's programs as the cluster's owner.
    public func run(_ program: String, _ arguments: [String], limit: Double = 60) async throws -> Outcome {
        let command = asPostgres + [binaries + "/" + program] + arguments
        return try await runToEnd(command[0], Array(command.dropFirst()), limit: limit)
    }

    /// Runs SQL as the superuser `touchsync` (in `database`, default the cluster's `postgres`).
    public func sql(_ statement: String, database: String = "postgres") async throws -> Outcome {
        let psql = ["/usr/bin/psql", "-h", host, "-p", "\(port)", "-U", "touchsync", "-d", database, "-X", "-q", "-t", "-A", "-c", statement]
        guard let namespace else { return try await runToEnd(psql[0], Array(psql.dropFirst())) }
        return try await runToEnd("/usr/bin/env", ["ip", "netns", "exec", namespace] + psql)
    }

    /// Stops the server as a crash would (immediate: no checkpoint) and starts it again after `downFor`.
    public func restart(downFor: Duration) async throws {
        try await crash()
        try await Task.sleep(for: downFor)
        try await startAgain()
    }

    /// Stops the server as a crash would (immediate: no checkpoint), until `startAgain`.
    public func crash() async throws {
        let stop = try await run("pg_ctl", ["-D", folder + "/data", "-m", "immediate", "-w", "stop"])
        guard stop.status == 0 else { throw TestFailure("pg_ctl stop: \(stop.output) \(stop.errors)") }
    }

    public func startAgain() async throws { try await startServer() }

    /// Stops the server at once, blocking (for a `defer`).
    public func stopNow() {
        _ = try? touchsyncShell(asPostgres + [binaries + "/pg_ctl", "-D", folder + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: folder)
    }

    public func stop() async {
        _ = try? await run("pg_ctl", ["-D", folder + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: folder)
    }
}

/// The PostgreSQL board store's schema through `touchsync store` (issue 25,
/// first part): created, versioned, checked, refused when it is not usable.
