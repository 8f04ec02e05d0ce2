import Foundation

/// What a user may do on a board. Each role includes the ones before it.
public enum Role: String, Sendable, Codable, CaseIterable, Comparable, CustomStringConvertible {
    /// Subscribe, take snapshots, read history.
    case watch
    /// Also draw (an agent on the board) and clear one's own strokes.
    case draw
    /// Also clear the whole board.
    case admin

    private var rank: Int {
        switch self {
        case .watch: 0
        case .draw: 1
        case .admin: 2
        }
    }

    public static func < (lhs: Role, rhs: Role) -> Bool { lhs.rank < rhs.rank }
    public var description: String { rawValue }
}

/// A board-name pattern: `*` (every board), a prefix ending in `*`
/// (`team-*`), or an exact name.
public struct BoardPattern: Sendable, Hashable, Codable, CustomStringConvertible {
    public let text: String

    public init(_ text: String) throws(AccessListError) {
        guard !text.isEmpty, text.utf8.count <= 129, !text.dropLast().contains("*") else {
            throw .invalid("board pattern \"\(text)\": use *, a prefix ending in * (team-*), or an exact board name")
        }
        self.text = text
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        self = try BoardPattern(text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }

    /// How specifically the pattern matches `board` (nil: it does not):
    /// an exact name beats any prefix, a longer prefix beats a shorter one.
    public func specificity(for board: String) -> Int? {
        if text.hasSuffix("*") {
            let prefix = text.dropLast()
            return board.hasPrefix(prefix) ? prefix.utf8.count : nil
        }
        return text == board ? Int.max : nil
    }

    public var description: String { text }
}

/// One user of an authenticated hub and its role per board pattern (the
/// most specific matching pattern decides). A user proves itself with a
/// CURVE key (agents, subscribers, gateways) or, in a browser, with an
/// invitation token that a gateway presents for it (`touchsync keys invite`).
public struct AccessEntry: Sendable, Equatable, Codable {
    /// Z85, 40 characters (nil for a browser user, who has a token instead).
    public var key: String?
    public var boards: [String: Role]
    /// A browser user's secret (32 letters and digits): whoever holds it is this user.
    public var token: String?
    /// A gateway may act for namespaces starting with this prefix and a
    /// token holder's name (`web:` gives `web:ann:…`). Only with a key.
    public var actsFor: String?

    enum CodingKeys: String, CodingKey {
        case key, boards, token
        case actsFor = "acts_for"
    }

    public init(key: String, boards: [String: Role], actsFor: String? = nil) {
        self.key = key
        self.boards = boards
        self.actsFor = actsFor
    }

    public init(token: String, boards: [String: Role]) {
        self.token = token
        self.boards = boards
    }
}

public enum AccessListError: Error, Equatable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case invalid(String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read the access list \(path): \(reason)"
        case .invalid(let why): "invalid access list: \(why)"
        }
    }
}

/// Who may connect to a hub and what each user may do on which board: a JSON
/// file the hub reads at start and on SIGHUP (docs/security.md):
///
/// ```json
/// {
///   "users": {
///     "alice": { "key": "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID", "boards": { "*": "draw", "team-*": "admin" } },
///     "tv":    { "key": "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", "boards": { "*": "watch" } }
///   }
/// }
/// ```
public struct AccessList: Sendable, Equatable {
    public private(set) var users: [String: AccessEntry]
    /// User names by public key (a key belongs to one user).
    private var userByKey: [String: String]
    /// Browser users by invitation token.
    private var userByToken: [String: String]

    public init(users: [String: AccessEntry] = [:]) throws(AccessListError) {
        self.users = [:]
        userByKey = [:]
        userByToken = [:]
        for (name, entry) in users.sorted(by: { $0.key < $1.key }) { try set(name, entry) }
    }

    /// Adds or replaces `name`'s entry.
    public mutating func set(_ name: String, _ entry: AccessEntry) throws(AccessListError) {
        guard Self.isValidUserName(name) else {
            throw .invalid("user name \"\(name)\": 1 to 64 letters, digits, '-', '_' or '.'")
        }
        switch (entry.key, entry.token) {
        case (let key?, nil):
            guard Self.isZ85Key(key) else { throw .invalid("user \(name): the key must be 40 Z85 characters") }
            if let other = userByKey[key], other != name { throw .invalid("users \(other) and \(name) have the same key") }
        case (nil, let token?):
            guard Self.isToken(token) else { throw .invalid("user \(name): a token is 32 to 64 letters and digits") }
            if let other = userByToken[token], other != name { throw .invalid("users \(other) and \(name) have the same token") }
            guard entry.actsFor == nil else { throw .invalid("user \(name): acts_for needs a key (a gateway), not a token") }
        default:
            throw .invalid("user \(name): give either a key (agents, gateways) or a token (browser users), not both")
        }
        if let prefix = entry.actsFor {
            guard !prefix.isEmpty, prefix.utf8.count <= 32, prefix.utf8.allSatisfy({ Self.isNamespaceByte($0) }) else {
                throw .invalid("user \(name): acts_for is a namespace prefix of 1 to 32 letters, digits, '-', '_', '.' or ':' (web:)")
            }
        }
        guard !entry.boards.isEmpty else { throw .invalid("user \(name): no board pattern") }
        for pattern in entry.boards.keys { _ = try BoardPattern(pattern) }
        remove(name)
        users[name] = entry
        if let key = entry.key { userByKey[key] = name }
        if let token = entry.token { userByToken[token] = name }
    }

    @discardableResult
    public mutating func remove(_ name: String) -> AccessEntry? {
        guard let entry = users.removeValue(forKey: name) else { return nil }
        if let key = entry.key { userByKey[key] = nil }
        if let token = entry.token { userByToken[token] = nil }
        return entry
    }

    /// The user who holds `publicKey` (Z85), if any.
    public func user(withKey publicKey: String) -> String? { userByKey[publicKey] }

    /// The browser user whose invitation token this is, if any.
    public func user(withToken token: String) -> String? { userByToken[token] }

    /// The namespace a gateway `principal` may use for the holder of `token`
    /// (its `acts_for` prefix, the user's name, a colon): nil when the
    /// principal may not act for others or the token is unknown.
    public func delegatedPrefix(for principal: String, token: String) -> (user: String, prefix: String)? {
        guard let actsFor = users[principal]?.actsFor, let user = userByToken[token] else { return nil }
        return (user, actsFor + user + ":")
    }

    /// What a delegated session may do on `board`: the lower of the gateway's and the user's roles.
    public func role(of user: String, through principal: String, on board: String) -> Role? {
        guard let own = role(of: user, on: board), let gateway = role(of: principal, on: board) else { return nil }
        return min(own, gateway)
    }

    /// Whether `user` may watch every board whose name starts with
    /// `prefix` (a subscription by prefix: a relay following `team-*` or
    /// every board): one of its patterns is a prefix pattern (`*`, `team-*`)
    /// that every such name matches. Every role includes watching, so any
    /// more specific pattern for one of those boards still lets it watch.
    /// `prefix` is UTF-8 bytes, cut anywhere (a subscription is bytes).
    public func mayWatchEvery(startingWith prefix: some Collection<UInt8>, user: String) -> Bool {
        guard let entry = users[user] else { return false }
        return entry.boards.keys.contains { text in text.hasSuffix("*") && prefix.starts(with: text.dropLast().utf8) }
    }

    /// Whether `user` may act for others (`acts_for`: a gateway's key).
    public func actsForOthers(_ user: String) -> Bool { users[user]?.actsFor != nil }

    /// What `user` may do on `board` (nil: nothing, or no such user).
    public func role(of user: String, on board: String) -> Role? {
        guard let entry = users[user] else { return nil }
        var best: (specificity: Int, role: Role)? = nil
        for (text, role) in entry.boards {
            guard let pattern = try? BoardPattern(text), let specificity = pattern.specificity(for: board) else { continue }
            if best == nil || specificity > best!.specificity || (specificity == best!.specificity && role > best!.role) {
                best = (specificity, role)
            }
        }
        return best?.role
    }

    // MARK: The file

    private struct File: Codable {
        var users: [String: AccessEntry]
    }

    public init(json: Data) throws(AccessListError) {
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: json)
        } catch {
            throw .invalid(Self.describe(error))
        }
        try self.init(users: file.users)
    }

    public var json: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return (try? encoder.encode(File(users: users))) ?? Data("{\"users\":{}}".utf8)
    }

    public static func isValidUserName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64
            && name.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || byte == 0x2D || byte == 0x2E || byte == 0x5F
            }
    }

    /// An invitation token: 32 to 64 ASCII letters and digits.
    public static func isToken(_ text: String) -> Bool {
        (32...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
    }

    static func isNamespaceByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x3A
    }

    /// 40 characters of the Z85 alphabet (a 32-byte CURVE key).
    public static func isZ85Key(_ text: String) -> Bool {
        text.utf8.count == 40 && text.utf8.allSatisfy { z85Alphabet.contains($0) }
    }

    private static let z85Alphabet = Set(
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context):
            return "not valid JSON" + (context.codingPath.isEmpty ? "" : " at \(path(context.codingPath))") + ": \(context.debugDescription)"
        case DecodingError.keyNotFound(let key, let context):
            return "missing \"\(key.stringValue)\"" + (context.codingPath.isEmpty ? "" : " in \(path(context.codingPath))")
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong type at \(path(context.codingPath)): \(context.debugDescription)"
        default:
            if let error = error as? AccessListError, case .invalid(let why) = error { return why }
            return "\(error)"
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.map(\.stringValue).joined(separator: ".")
    }
}
