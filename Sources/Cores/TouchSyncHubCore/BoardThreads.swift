import TouchSyncAccessModel
import TouchSyncCore

/// Which of a hub's board threads holds a board (`touchsync hub --threads N`):
/// FNV-1a 64 over the name's UTF-8 bytes, modulo the thread count. Every
/// board lives on exactly one thread, which owns its state, its journal
/// files and its publishing; nothing outside the hub sees the split.
public struct BoardThreads: Sendable, Equatable {
    public let count: Int

    public init(count: Int) {
        precondition(count >= 1, "a hub has at least one board thread")
        self.count = count
    }

    public func thread(of board: String) -> Int {
        guard count > 1 else { return 0 }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in board.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return Int(hash % UInt64(count))
    }

    /// A hub-wide bound, as each thread keeps it: its share, rounded up
    /// (the threads together never allow more than `count` rounding steps past it).
    public func share(of limit: Int) -> Int {
        guard count > 1, limit > 0 else { return limit }
        return (limit + count - 1) / count
    }
}

/// The front thread's routing of a hub with several board threads, as a
/// state machine apart from its sockets: where each agent message goes, and
/// when a session that moved to another thread's board must end on the
/// thread it left (one session per user namespace, docs/protocol.md
/// "Sessions": a new session ends the user's previous one, whichever board
/// it was on).
///
/// A connection (or a multiplexed connection's channel) goes where its last
/// hello went. Before any hello its messages go to thread 0, which answers
/// them as any hub answers a stranger. Channel 0 of a multiplexed
/// connection (its heartbeat, its goodbye) concerns sessions on every thread.
public struct FrontRouting: Sendable {
    public let threads: BoardThreads

    /// Where a connection or channel says hello to the hub.
    public enum Destination: Equatable, Sendable {
        case thread(Int)
        case everyThread
    }

    /// A session to end with a goodbye on the thread it was on, sent as
    /// from its connection (`sender`: the connection's authenticated user,
    /// which the thread checks, on an authenticated hub).
    public struct Departure: Equatable, Sendable {
        public let thread: Int
        public let peer: PeerID
        public let sender: UserNamespace?

        public init(thread: Int, peer: PeerID, sender: UserNamespace? = nil) {
            self.thread = thread
            self.peer = peer
            self.sender = sender
        }
    }

    private struct Located: Equatable {
        var peer: PeerID
        var thread: Int
        var sender: UserNamespace?
    }

    /// The thread each connection or channel said its last hello to.
    private var routes: [PeerID: Int] = [:]
    /// Each user namespace's newest welcomed session.
    private var sessions: [UserNamespace: Located] = [:]
    /// Hellos sent to a thread and not answered yet: whose session each
    /// starts, and where the connection went before (restored if refused).
    private var pending: [PeerID: (principal: UserNamespace, thread: Int, before: Int?, sender: UserNamespace?)] = [:]
    /// Routes and sessions kept at most (a flood of connections that say
    /// hello once must not grow the front without bound): past it the
    /// oldest knowledge is dropped, and such a connection's next message
    /// reaches thread 0, which answers NOT_WELCOMED (the agent says hello again).
    private let capacity: Int

    public init(threads: BoardThreads, capacity: Int = 131_072) {
        self.threads = threads
        self.capacity = capacity
    }

    public var hasPendingHellos: Bool { !pending.isEmpty }

    /// Where `peer`'s message other than a hello goes.
    public func destination(of peer: PeerID) -> Destination {
        if peer.channel == 0 { return .everyThread }
        return .thread(routes[peer] ?? 0)
    }

    /// A hello from `peer`, acting for `principal`, for `board`: the thread
    /// it goes to. Whether it ends a session elsewhere is known from its answer.
    public mutating func hello(from peer: PeerID, principal: UserNamespace, board: String, sender: UserNamespace? = nil) -> Int {
        let thread = threads.thread(of: board)
        if routes.count >= capacity { routes.removeAll(keepingCapacity: true) }
        let before = routes.updateValue(thread, forKey: peer)
        if pending.count >= capacity { pending.removeAll(keepingCapacity: true) }
        pending[peer] = (principal, thread, pending[peer]?.before ?? before, sender)
        return thread
    }

    /// Whether `peer` is to hear an answer from `thread`: yes from the thread
    /// it is routed to, from any while its hello waits for an answer, and
    /// when the front knows no route for it; no from a thread it left since
    /// (answers about what it sent before its hello moved it, which would
    /// reach it after the new thread's welcome and contradict it).
    public func delivers(answerTo peer: PeerID, from thread: Int) -> Bool {
        guard let route = routes[peer] else { return true }
        return route == thread || pending[peer] != nil
    }

    /// Whether an answer from `thread` to `peer` may be the one the routing
    /// waits for (the thread its hello went to; another thread's answers to
    /// the same connection are about what it sent there before).
    public func awaitsAnswer(to peer: PeerID, from thread: Int) -> Bool { pending[peer]?.thread == thread }

    /// The thread `peer`'s hello went to answered it: welcomed, its user's
    /// previous session, on another thread, is returned to be ended there;
    /// refused, nothing changes for the user's session, and the connection's
    /// messages go where they went before the hello.
    public mutating func answered(_ peer: PeerID, welcomed: Bool) -> Departure? {
        guard let (principal, thread, before, sender) = pending.removeValue(forKey: peer) else { return nil }
        guard welcomed else {
            routes[peer] = before
            return nil
        }
        let previous = sessions[principal]
        if sessions.count >= capacity { sessions.removeAll(keepingCapacity: true) }
        sessions[principal] = Located(peer: peer, thread: thread, sender: sender)
        guard let previous, previous.thread != thread else { return nil }
        // The connection it left no longer speaks there (its route moved with the hello).
        return Departure(thread: previous.thread, peer: previous.peer, sender: previous.sender)
    }
}

extension FrontRouting {
    /// One board list from the lists of every board thread, each the
    /// thread's boards after the same cursor, in name order and at most
    /// `limit` long: the first `limit` names of them all (byte order of
    /// their UTF-8, as each thread sorts), and whether more follow.
    public static func mergedBoardLists<Entry>(
        _ lists: [(entries: [Entry], more: Bool)], limit: Int, name: (Entry) -> String
    ) -> (entries: [Entry], more: Bool) {
        var all = lists.flatMap(\.entries)
        all.sort { name($0).utf8.lexicographicallyPrecedes(name($1).utf8) }
        let more = lists.contains { $0.more } || all.count > limit
        return (Array(all.prefix(limit)), more)
    }
}
