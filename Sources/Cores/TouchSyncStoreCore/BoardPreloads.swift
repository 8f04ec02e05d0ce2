/// Boards loaded ahead of their adoption (issue 39: a failover's tail was
/// the successor loading a dead hub's boards after their leases lapsed).
///
/// A hub whose heartbeat is late by two renewals may be dead: its boards
/// whose successor is this hub are loaded while their leases still run, and
/// at the lapse only the batches stored since (none, when it is dead) are
/// read. A hub that renews again was only slow: what was loaded for it is
/// dropped. At most the boards of suspected hubs are held.
///
/// A value without I/O: the store writer starts the loads this returns and
/// tells it of each result. `Loaded` is what a load gives (the writer's
/// board and agents).
public struct BoardPreloads<Loaded> {
    /// Each board loading (nil) or loaded.
    private var entries: [String: Loaded?] = [:]

    public init() {}

    /// The boards now worth loading ahead (those of suspected hubs whose
    /// successor is this hub): returns the ones to start loading; what was
    /// loaded for boards no longer suspected is dropped.
    public mutating func suspected(_ boards: some Sequence<String>) -> [String] {
        let wanted = Set(boards)
        entries = entries.filter { wanted.contains($0.key) }
        let start = wanted.filter { entries[$0] == nil }.sorted()
        for board in start { entries[board] = .some(nil) }
        return start
    }

    /// A load started by `suspected` finished; nil: it failed (the board is
    /// loaded whole if adopted). Kept only while the board is still suspected.
    public mutating func loaded(_ board: String, _ result: Loaded?) {
        guard case .some(.none) = entries[board] else { return }  // still suspected, and loading
        if let result { entries[board] = .some(result) } else { entries.removeValue(forKey: board) }
    }

    /// The board was adopted: what was loaded for it, if its load finished
    /// (then only the batches after it are read), and it is no longer held.
    public mutating func take(_ board: String) -> Loaded? {
        entries.removeValue(forKey: board) ?? nil
    }

    /// Boards loading or loaded.
    public var count: Int { entries.count }
}

extension BoardPreloads: Sendable where Loaded: Sendable {}
