/// Board store: the hellos waiting for their board's claim (its lease and
/// load) and the snapshot requests waiting for its look-up, by board, each
/// bounded (per board and in all) so a flood of them is refused, not kept.
struct StoreWaits {
    /// Hellos, and snapshot requests, waiting in all at most.
    static let maxWaiting = 10_000
    static let maxHellosPerBoard = 256
    static let maxSnapshotsPerBoard = 64

    struct ParkedHello {
        var peer: Peer
        var hello: AgentHello
        var bytes: Int
    }

    struct ParkedSnapshot {
        var peer: PeerID
        var requestID: UInt64
    }

    private var hellos: [String: [ParkedHello]] = [:]
    private var snapshots: [String: [ParkedSnapshot]] = [:]
    private(set) var waitingHellos = 0
    private(set) var waitingSnapshots = 0

    enum Parking: Equatable {
        /// Waiting now; `askStore`: the first for its board (the core asks the store for it).
        case parked(askStore: Bool)
        /// Past a bound: refused.
        case full
    }

    /// A hello waits for its board's claim.
    mutating func park(_ hello: ParkedHello) -> Parking {
        let board = hello.hello.board
        guard waitingHellos < Self.maxWaiting, hellos[board, default: []].count < Self.maxHellosPerBoard else { return .full }
        let first = hellos[board] == nil
        hellos[board, default: []].append(hello)
        waitingHellos += 1
        return .parked(askStore: first)
    }

    /// A snapshot request waits for its board's look-up (none is asked when a claim is under way: it answers both).
    mutating func park(_ request: ParkedSnapshot, board: String) -> Parking {
        guard waitingSnapshots < Self.maxWaiting, snapshots[board, default: []].count < Self.maxSnapshotsPerBoard else { return .full }
        let first = snapshots[board] == nil && hellos[board] == nil
        snapshots[board, default: []].append(request)
        waitingSnapshots += 1
        return .parked(askStore: first)
    }

    /// Something waits for the store's answer about `board`.
    func isWaiting(for board: String) -> Bool { hellos[board] != nil || snapshots[board] != nil }

    /// The hellos that waited for `board`, in arrival order; none wait afterwards.
    mutating func takeHellos(for board: String) -> [ParkedHello] {
        guard let waiting = hellos.removeValue(forKey: board) else { return [] }
        waitingHellos -= waiting.count
        return waiting
    }

    /// The snapshot requests that waited for `board`, in arrival order; none wait afterwards.
    mutating func takeSnapshots(for board: String) -> [ParkedSnapshot] {
        guard let waiting = snapshots.removeValue(forKey: board) else { return [] }
        waitingSnapshots -= waiting.count
        return waiting
    }
}
