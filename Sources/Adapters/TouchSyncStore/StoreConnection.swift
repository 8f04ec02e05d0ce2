import Logging
import NIOSSL
import PostgresNIO

extension StoreAddress {
    /// A new connection to the store (TLS as the URL asks), or why not. With
    /// several servers, the first that accepts writes: one in recovery (a
    /// standby) is closed and the next tried.
    func connect(logger: Logger, timeout: TimeAmount = .seconds(5)) async throws(StoreError) -> PostgresConnection {
        if servers.count == 1 { return try await connect(to: servers[0], logger: logger, timeout: timeout) }
        var failures: [String] = []
        for server in servers {
            let connection: PostgresConnection
            do {
                connection = try await connect(to: server, logger: logger, timeout: timeout)
            } catch {
                failures.append("\(server): \(error)")
                continue
            }
            do {
                let rows = try await connection.query("SELECT pg_is_in_recovery()", logger: logger).collect()
                if let inRecovery = try rows.first?.decode(Bool.self), !inRecovery { return connection }
                failures.append("\(server): a standby (read-only)")
            } catch {
                failures.append("\(server): \(BoardStoreAdmin.storeError(error))")
            }
            try? await connection.close()
        }
        throw StoreError.unreachable("no server of the store accepts writes (\(failures.joined(separator: "; ")))")
    }

    private func connect(to server: Server, logger: Logger, timeout: TimeAmount) async throws(StoreError) -> PostgresConnection {
        var configuration = PostgresConnection.Configuration(
            host: server.host, port: server.port, username: user, password: password, database: database, tls: .disable)
        do {
            switch tls {
            case .disable: break
            case .prefer: configuration.tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require: configuration.tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
        } catch {
            throw StoreError.unreachable("TLS: \(error)")
        }
        configuration.options.connectTimeout = timeout
        do {
            return try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        } catch {
            throw BoardStoreAdmin.storeError(error)
        }
    }

    /// Runs `body` on a new connection, closed when it returns; its errors in words.
    func withConnection<Value: Sendable>(
        logger: Logger, _ body: (PostgresConnection) async throws -> Value
    ) async throws(StoreError) -> Value {
        let connection = try await connect(logger: logger)
        do {
            let value = try await body(connection)
            try? await connection.close()
            return value
        } catch {
            try? await connection.close()
            throw BoardStoreAdmin.storeError(error)
        }
    }
}
