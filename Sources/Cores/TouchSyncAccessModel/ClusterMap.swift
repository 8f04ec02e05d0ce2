import Foundation

/// Boards sharded over hubs: a cluster file lists the hubs, and every client
/// and hub maps a board to its hub by rendezvous (highest random weight)
/// hashing, so adding a hub moves only the boards the new hub wins, and
/// removing one moves only its own boards.
///
/// ```json
/// { "hubs": [
///     { "name": "a", "ingest": "tcp://10.0.0.1:5570", "publish": "tcp://10.0.0.1:5571", "snapshot": "tcp://10.0.0.1:5572" },
///     { "name": "b", "ingest": "tcp://10.0.0.2:5570", "publish": "tcp://10.0.0.2:5571", "snapshot": "tcp://10.0.0.2:5572" } ] }
/// ```
public struct ClusterMap: Sendable, Equatable, Codable {
    public struct Hub: Sendable, Equatable, Codable {
        public var name: String
        public var ingest: String
        public var publish: String
        public var snapshot: String
        /// Served when the hub journals. Optional.
        public var history: String?

        public init(name: String, ingest: String, publish: String, snapshot: String, history: String? = nil) {
            self.name = name
            self.ingest = ingest
            self.publish = publish
            self.snapshot = snapshot
            self.history = history
        }
    }

    public private(set) var hubs: [Hub]

    public init(hubs: [Hub]) throws(ClusterFileError) {
        guard !hubs.isEmpty else { throw .invalid("a cluster needs at least one hub") }
        var names = Set<String>()
        for hub in hubs {
            guard AccessList.isValidUserName(hub.name) else { throw .invalid("hub name \"\(hub.name)\": 1 to 64 letters, digits, '-', '_' or '.'") }
            guard names.insert(hub.name).inserted else { throw .invalid("two hubs are named \(hub.name)") }
        }
        self.hubs = hubs
    }

    /// The hub that holds `board`: the one with the highest weight for it.
    public func hub(for board: String) -> Hub {
        var best = hubs[0]
        var bestWeight = Self.weight(hub: best.name, board: board)
        for hub in hubs.dropFirst() {
            let weight = Self.weight(hub: hub.name, board: board)
            if weight > bestWeight || (weight == bestWeight && hub.name < best.name) {
                best = hub
                bestWeight = weight
            }
        }
        return best
    }

    /// A stable 64-bit weight of (hub, board): FNV-1a over both names, then a
    /// SplitMix64 finaliser (the same in every process and language: no seeded hashing).
    public static func weight(hub: String, board: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in hub.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        hash ^= 0
        hash &*= 0x100_0000_01b3
        for byte in board.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        hash ^= hash >> 30
        hash &*= 0xbf58_476d_1ce4_e5b9
        hash ^= hash >> 27
        hash &*= 0x94d0_49bb_1331_11eb
        hash ^= hash >> 31
        return hash
    }
}

/// A cluster file that cannot be used (docs/protocol.md, "Sharded boards").
public enum ClusterFileError: Error, Equatable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case invalid(String)

    public var reason: String {
        switch self {
        case .unreadable(_, let reason): reason
        case .invalid(let why): why
        }
    }

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read the cluster file \(path): \(reason)"
        case .invalid(let why): "invalid cluster file: \(why)"
        }
    }
}
