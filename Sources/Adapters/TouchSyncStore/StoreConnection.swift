import Logging
import NIOSSL
import PostgresNIO

extension StoreAddress {
    /// A new connection to the store (TLS as the URL asks), or why not.
    func connect(logger: Logger, timeout: TimeAmount = .seconds(5)) async throws(StoreError) -> PostgresConnection {
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: user, password: password, database: database, tls: .disable)
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
