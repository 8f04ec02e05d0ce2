import Foundation

/// Where the board store is: `postgres://USER@HOST:PORT/DATABASE`, the
/// password from `PGPASSWORD` or `--store-password-file` (never in the URL,
/// which shows up in `ps` and logs), TLS when the URL asks for it
/// (`?sslmode=require`; `disable`, the default on loopback, or `prefer`).
public struct StoreAddress: Sendable, Equatable, CustomStringConvertible {
    public enum TLSMode: String, Sendable { case disable, prefer, require }
    public var user: String
    public var host: String
    public var port: Int
    public var database: String
    public var password: String?
    public var tls: TLSMode

    /// Parses `text`; `environment` and `passwordFile` supply the password.
    public init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment, passwordFile: String? = nil) throws(StoreError) {
        guard let components = URLComponents(string: text), components.scheme == "postgres" || components.scheme == "postgresql" else {
            throw StoreError.badAddress("\(text): expected postgres://USER@HOST:PORT/DATABASE")
        }
        guard let host = components.host, !host.isEmpty else { throw StoreError.badAddress("\(text): no host") }
        guard let user = components.user, !user.isEmpty else { throw StoreError.badAddress("\(text): no user (postgres://USER@HOST/DATABASE)") }
        guard components.password == nil else {
            throw StoreError.badAddress("\(text): no password in the URL (it shows in ps and logs): set PGPASSWORD or --store-password-file")
        }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else { throw StoreError.badAddress("\(text): no database (postgres://USER@HOST/DATABASE)") }
        var tls = TLSMode.disable
        for item in components.queryItems ?? [] {
            guard item.name == "sslmode", let mode = item.value.flatMap(TLSMode.init(rawValue:)) else {
                throw StoreError.badAddress("\(text): the only option is sslmode=disable|prefer|require")
            }
            tls = mode
        }
        self.user = user
        self.host = host
        self.port = components.port ?? 5432
        self.database = database
        self.tls = tls
        if let passwordFile {
            do {
                password = try String(contentsOfFile: passwordFile, encoding: .utf8).trimmingCharacters(in: .newlines)
            } catch {
                throw StoreError.badAddress("cannot read the password file \(passwordFile): \(error.localizedDescription)")
            }
        } else {
            password = environment["PGPASSWORD"]
        }
    }

    /// The address without the password.
    public var description: String { "postgres://\(user)@\(host):\(port)/\(database)" + (tls == .disable ? "" : "?sslmode=\(tls.rawValue)") }
}

/// Why the store cannot be used, in words for the operator.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    case badAddress(String)
    case unreachable(String)
    case refused(String)
    case notMigrated(found: Int?, expected: Int)
    case newerSchema(found: Int, known: Int)
    /// The store holds nothing of this board.
    case noBoard(String)
    /// A live hub (another process, at other endpoints) holds this hub name.
    case nameTaken(name: String, endpoints: String, heardSecondsAgo: Double)

    public var description: String {
        switch self {
        case .badAddress(let why): "--store \(why)"
        case .unreachable(let why): "cannot reach the board store: \(why)"
        case .refused(let why): "the board store refused: \(why)"
        case .notMigrated(let found, let expected):
            "the board store's schema is at version \(found.map(String.init) ?? "none"), this hub needs \(expected): run `touchsync store migrate --store URL`"
        case .newerSchema(let found, let known):
            "the board store's schema is at version \(found), newer than this touchsync knows (\(known)): upgrade touchsync"
        case .noBoard(let board): "board \"\(board)\" is not in the store"
        case .nameTaken(let name, let endpoints, let ago):
            "hub name \(name) belongs to a live hub at \(endpoints) (heard \(String(format: "%.1f", ago)) s ago): give this hub another --name, or stop that one (its name is free a lease after its last heartbeat)"
        }
    }
}
