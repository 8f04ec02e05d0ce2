import Foundation

/// Where the board store is: `postgres://USER@HOST:PORT/DATABASE`, the
/// password from `PGPASSWORD` or `--store-password-file` (never in the URL,
/// which shows up in `ps` and logs), TLS when the URL asks for it
/// (`?sslmode=require`; `disable`, the default on loopback, or `prefer`).
///
/// Several servers, as libpq writes them (`postgres://USER@HOST1:PORT1,HOST2:PORT2/DATABASE`):
/// a primary and its standbys. A connection goes to the first of them that
/// accepts writes (libpq's `target_session_attrs=read-write`), so when a
/// standby is promoted the hubs move to it at their next reconnect.
public struct StoreAddress: Sendable, Equatable, CustomStringConvertible {
    public enum TLSMode: String, Sendable { case disable, prefer, require }
    /// One server of the store.
    public struct Server: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public init(host: String, port: Int = 5432) {
            self.host = host
            self.port = port
        }
        public var description: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
    }
    public var user: String
    /// The servers in the order they are tried (at least one).
    public var servers: [Server]
    public var database: String
    public var password: String?
    public var tls: TLSMode

    /// Parses `text`; `environment` and `passwordFile` supply the password.
    public init(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment, passwordFile: String? = nil) throws(StoreError) {
        // URLComponents knows one host only: the host list is taken out and read here.
        guard let schemeEnd = text.range(of: "://") else { throw StoreError.badAddress("\(text): expected postgres://USER@HOST:PORT/DATABASE") }
        let afterScheme = text[schemeEnd.upperBound...]
        let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" } ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        let hostList = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        let single = text.replacingCharacters(in: hostList.startIndex..<hostList.endIndex, with: "placeholder")
        guard let components = URLComponents(string: single), components.scheme == "postgres" || components.scheme == "postgresql" else {
            throw StoreError.badAddress("\(text): expected postgres://USER@HOST:PORT/DATABASE")
        }
        let servers = try Self.servers(String(hostList), in: text)
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
        self.servers = servers
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

    /// `HOST[:PORT][,HOST[:PORT]...]`, an IPv6 host in brackets.
    private static func servers(_ list: String, in text: String) throws(StoreError) -> [Server] {
        var servers: [Server] = []
        for item in list.split(separator: ",", omittingEmptySubsequences: false) {
            var host = Substring(item)
            var port: Int? = nil
            if host.hasPrefix("[") {
                guard let close = host.firstIndex(of: "]") else { throw StoreError.badAddress("\(text): unclosed [ in the host \(item)") }
                let rest = host[host.index(after: close)...]
                host = host[host.index(after: host.startIndex)..<close]
                if !rest.isEmpty {
                    guard rest.hasPrefix(":"), let number = Int(rest.dropFirst()) else { throw StoreError.badAddress("\(text): bad port in \(item)") }
                    port = number
                }
            } else if let colon = host.lastIndex(of: ":") {
                guard let number = Int(host[host.index(after: colon)...]) else { throw StoreError.badAddress("\(text): bad port in \(item)") }
                port = number
                host = host[..<colon]
            }
            guard !host.isEmpty else { throw StoreError.badAddress("\(text): no host") }
            if let port, !(1...65535).contains(port) { throw StoreError.badAddress("\(text): port \(port) is not 1-65535") }
            servers.append(Server(host: String(host), port: port ?? 5432))
        }
        return servers
    }

    /// The address without the password.
    public var description: String {
        "postgres://\(user)@\(servers.map(\.description).joined(separator: ","))/\(database)" + (tls == .disable ? "" : "?sslmode=\(tls.rawValue)")
    }
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
