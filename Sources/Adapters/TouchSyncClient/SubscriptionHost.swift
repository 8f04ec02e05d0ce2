import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncClientCore
import TouchSyncCore
import TouchSyncWire
import TouchSyncWaiting
import ZeroMQ

/// Where a hub publishes and serves snapshots, and how to reach it.
public struct HubFeedEndpoints: Sendable, Hashable {
    public var publish: String
    public var snapshot: String
    public var curve: CurveClientKeys?

    public init(publish: String, snapshot: String, curve: CurveClientKeys? = nil) {
        self.publish = publish
        self.snapshot = snapshot
        self.curve = curve
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.publish == b.publish && a.snapshot == b.snapshot && a.curve?.client.publicKey == b.curve?.client.publicKey
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(publish)
        hasher.combine(snapshot)
        hasher.combine(curve?.client.publicKey)
    }
}

/// What a followed board tells its owner, on the host's thread, in order.
/// Keep each call short: every board of the host waits for it.
public protocol BoardFeed: AnyObject, Sendable {
    /// A snapshot was loaded (the first, or a resync): the board now.
    func synced(_ board: BoardState)
    /// A batch was applied: the batch and the board after it.
    func applied(_ batch: DiffBatch, board: BoardState)
    /// The hub refused the board for good (FORBIDDEN, WRONG_HUB) or the connection failed.
    func failed(_ reason: String)
}

/// Many boards' live replicas on one thread: one SUB per hub, whatever the
/// number of boards, a snapshot DEALER per board, and a `ReplicaSync` per
/// board (the subscriber's rules: snapshot then live, gaps, digests, resync).
/// The thread sleeps on a `ZMQReadySet`, so a wake-up reads only the sockets
/// that have something.
/// A gateway follows every open board with it, so its threads do not grow
/// with its boards, and each board has one replica, the sync's. Snapshots
/// go on a connection per board because a hub allows each connection a few
/// snapshots a second: 200 boards asking on one connection took 40 s.
/// Every method is safe from any thread or task.
public final class SubscriptionHost: Sendable {
    private enum Command: Sendable {
        case follow(String, HubFeedEndpoints, any BoardFeed)
        case unfollow(String)
        case inspect(String, @Sendable (BoardState?) -> Void)
        case stop
    }
    private let mailbox: Mailbox<Command>
    private let thread = SocketThread(name: "touchsync-boards")
    private let context: ZMQContext
    private let logger: Logger
    private let settings: Settings

    public struct Settings: Sendable {
        /// Ask again when a snapshot has not fully arrived by then. Default 2 s.
        public var snapshotTimeout: Duration = .seconds(2)
        /// A board whose hub sent nothing (no batch, no heartbeat) for this long
        /// is asked for again, on the hub it was first followed on when another
        /// hub serves it (that hub may have died: the first names the new owner). Default 3 s.
        public var silenceTimeout: Duration = .seconds(3)
        /// Messages queued per hub before libzmq drops them (the boards then resync). Default 100,000.
        public var receiveHighWaterMark: Int32 = 100_000
        public init() {}
    }

    public init(context: ZMQContext, settings: Settings = Settings(), logger: Logger) throws {
        self.context = context
        self.logger = logger
        self.settings = settings
        mailbox = try Mailbox()
    }

    public func start() {
        let (context, mailbox, settings, logger) = (context, mailbox, settings, logger)
        thread.start {
            let loop = HostLoop(context: context, settings: settings, logger: logger)
            loop.run(mailbox: mailbox)
        }
    }

    public func stop() async {
        mailbox.post(.stop)
        await thread.finished()
    }

    /// Follows `board` on `hub`; `feed` hears its snapshots and batches.
    public func follow(_ board: String, on hub: HubFeedEndpoints, feed: any BoardFeed) {
        mailbox.post(.follow(board, hub, feed))
    }

    /// Stops following `board` (its replica goes; the hub's socket stays for the others).
    public func unfollow(_ board: String) { mailbox.post(.unfollow(board)) }

    /// The board's replica (a copy-on-write copy taken between two batches), or nil while it is not live.
    public func replica(of board: String) async -> BoardState? {
        let copy = Completion<BoardState?>()
        if !mailbox.post(.inspect(board, { copy.complete($0) })) { return nil }
        // Answered at the loop's next turn (or nil as it closes): also a cancelled task tidying up gets it.
        return await copy.join()
    }

    /// The host's thread: its sockets (a SUB per hub, a DEALER per board) and every board's sync.
    private final class HostLoop {
        private struct Link {
            let subscriber: ZMQSocket
            var watch: (token: UInt64, descriptor: Int32)? = nil
            var boards: Set<String> = []
        }
        private struct Followed {
            var sync: ReplicaSync
            let feed: any BoardFeed
            /// The hub followed now: `home`, or the one a WRONG_HUB named.
            var hub: HubFeedEndpoints
            /// The hub the board was followed on: asked again when the one named went silent.
            let home: HubFeedEndpoints
            let topic: [UInt8]
            var snapshots: ZMQSocket
            var watch: (token: UInt64, descriptor: Int32)? = nil
        }
        private let context: ZMQContext
        private let settings: Settings
        private let logger: Logger
        private var links: [HubFeedEndpoints: Link] = [:]
        private var boards: [String: Followed] = [:]
        private let clock = ContinuousClock()
        private let topic = ZMQMessage()
        private let body = ZMQMessage()

        init(context: ZMQContext, settings: Settings, logger: Logger) {
            self.context = context
            self.settings = settings
            self.logger = logger
        }

        func run(mailbox: Mailbox<Command>) {
            defer {
                for link in links.values { link.subscriber.close() }
                for followed in boards.values { followed.snapshots.close() }
                for case .inspect(_, let reply) in mailbox.close() { reply(nil) }
            }
            // Waits on epoll over the sockets' ZMQ_FD: a wake-up reads the sockets that
            // have something, not every board's (zmq_poll read two options of each).
            let ready: ZMQReadySet
            do {
                ready = try ZMQReadySet()
                try ready.add(mailbox.fileDescriptor, token: Self.mailboxToken)
            } catch {
                logger.error("board subscriptions stopped", metadata: ["error": "\(error)"])
                return
            }
            self.ready = ready
            var readable: [UInt64] = []
            while true {
                readable.removeAll(keepingCapacity: true)
                let timeout = nextDeadline.map { ZMQPoller.timeout(until: $0) } ?? -1
                do { try ready.wait(timeoutMilliseconds: timeout) { readable.append($0) } } catch {
                    logger.error("board subscriptions stopped", metadata: ["error": "\(error)"])
                    return
                }
                for token in readable {
                    if token == Self.mailboxToken {
                        for command in mailbox.drain() {
                            switch command {
                            case .stop: return
                            case .follow(let board, let hub, let feed): follow(board, hub: hub, feed: feed)
                            case .unfollow(let board): unfollow(board)
                            case .inspect(let board, let reply): reply(boards[board]?.sync.replica)
                            }
                        }
                    } else if let owner = owners[token] {
                        read(owner)
                    }
                }
                checkDeadlines()
                // Boards that sent a request: read them too (a send can take the read signal).
                while let board = unread.popFirst() { read(.board(board)) }
            }
        }

        private static let mailboxToken = UInt64.max
        private var ready: ZMQReadySet?
        /// What each watched socket is: a hub's SUB or a board's snapshot DEALER.
        private enum Owner {
            case hub(HubFeedEndpoints)
            case board(String)
        }
        private var owners: [UInt64: Owner] = [:]
        /// Boards whose snapshot socket sent since it was last read.
        private var unread = Set<String>()
        private var nextToken: UInt64 = 0

        /// Watches `socket`, and reads what came before the watch began (it signalled no one).
        private func watch(_ socket: ZMQSocket, as owner: Owner) -> (token: UInt64, descriptor: Int32)? {
            guard let ready, let descriptor = try? ZMQReadySet.signalDescriptor(of: socket) else { return nil }
            nextToken += 1
            do { try ready.add(descriptor, token: nextToken) } catch {
                logger.warning("a board socket cannot be watched", metadata: ["error": "\(error)"])
                return nil
            }
            owners[nextToken] = owner
            return (nextToken, descriptor)
        }

        /// Stops watching a socket about to close (before it closes: its descriptor number can be reused).
        private func unwatch(_ watch: (token: UInt64, descriptor: Int32)?) {
            guard let watch else { return }
            ready?.remove(watch.descriptor)
            owners[watch.token] = nil
        }

        /// Reads everything waiting on the socket (ZMQ_FD signals once for many messages).
        private func read(_ owner: Owner) {
            switch owner {
            case .hub(let hub):
                guard let link = links[hub] else { return }
                do { try drainPublished(link.subscriber) } catch {
                    if !error.isTerminated { logger.warning("board subscription socket failed", metadata: ["hub": "\(hub.publish)", "error": "\(error)"]) }
                }
            case .board(let board):
                guard let socket = boards[board]?.snapshots else { return }
                do { try drainSnapshots(socket, of: board) } catch {
                    if !error.isTerminated { logger.warning("board snapshot socket failed", metadata: ["board": "\(board)", "error": "\(error)"]) }
                }
            }
        }

        /// The earliest of the boards' own deadlines (a snapshot's time-out, a silence time-out).
        private var nextDeadline: ContinuousClock.Instant? {
            var next: ContinuousClock.Instant? = nil
            forEachDeadline { _, deadline in next = min(next ?? deadline, deadline) }
            return next
        }

        /// Each board's own deadline, read in place: iterating copies of
        /// `Followed` retained and released each board's whole replica at every
        /// turn; and the indices are walked by hand, because a dictionary's
        /// `indices` hold its storage and a modify access beside them copied it whole.
        private func forEachDeadline(_ body: (Dictionary<String, Followed>.Index, ContinuousClock.Instant) -> Void) {
            func deadline(of followed: inout Followed) -> ContinuousClock.Instant? { followed.sync.nextDeadline }
            var index = boards.startIndex
            while index != boards.endIndex {
                if let deadline = deadline(of: &boards.values[index]) { body(index, deadline) }
                index = boards.index(after: index)
            }
        }

        private func checkDeadlines() {
            let now = clock.now
            var due: [String] = []
            forEachDeadline { index, deadline in if deadline <= now { due.append(boards.keys[index]) } }
            for board in due {
                guard let followed = boards[board] else { continue }
                if case .syncing(_, _, _, let deadline) = followed.sync.phase, now >= deadline, followed.hub != followed.home {
                    // A snapshot the hub named did not come: that hub may be gone; home names the owner now.
                    move(board, to: followed.home)
                }
                change(board) { $0.tick(now: now) }
            }
        }

        /// Returns whether sockets were added (the poller is then made again).
        private func follow(_ board: String, hub given: HubFeedEndpoints, feed: any BoardFeed) {
            guard boards[board] == nil else { return }
            // Several hubs listed (comma-separated, publish and snapshot in the same order): the sync
            // follows the board over them (`ReplicaSync.hubs`), starting with the first.
            let listed = zip(given.publish.split(separator: ","), given.snapshot.split(separator: ",")).map {
                ReplicaSync.Hub(publish: $0.trimmingCharacters(in: .whitespaces), snapshot: $1.trimmingCharacters(in: .whitespaces))
            }
            let hub = listed.first.map { HubFeedEndpoints(publish: $0.publish, snapshot: $0.snapshot, curve: given.curve) } ?? given
            let snapshots: ZMQSocket
            do {
                if links[hub] == nil {
                    let subscriber = try socket(.sub, to: hub.publish, of: hub)
                    links[hub] = Link(subscriber: subscriber, watch: watch(subscriber, as: .hub(hub)))
                }
                snapshots = try socket(.dealer, to: hub.snapshot, of: hub)
            } catch {
                feed.failed("cannot connect to \(hub.publish): \(error)")
                return
            }
            let topic = publishTopic(board: board)
            do { try links[hub]!.subscriber.subscribe(topic) } catch {
                snapshots.close()
                feed.failed("cannot subscribe to \(board): \(error)")
                return
            }
            links[hub]!.boards.insert(board)
            let (sync, actions) = ReplicaSync.start(
                board: board, snapshotTimeout: settings.snapshotTimeout, silenceTimeout: settings.silenceTimeout, hubs: listed, now: clock.now)
            boards[board] = Followed(
                sync: sync, feed: feed, hub: hub, home: hub, topic: topic, snapshots: snapshots, watch: watch(snapshots, as: .board(board)))
            perform(actions, board: board)
            read(.hub(hub))  // changing the subscription may have taken the SUB's read signal
        }

        private func unfollow(_ board: String) {
            guard let followed = boards.removeValue(forKey: board) else { return }
            unwatch(followed.watch)
            followed.snapshots.close()
            unread.remove(board)
            leave(followed.hub, board: board, topic: followed.topic)
        }

        /// Takes `board` off `hub`'s SUB; the SUB closes with its last board.
        private func leave(_ hub: HubFeedEndpoints, board: String, topic: [UInt8]) {
            guard var link = links[hub] else { return }
            try? link.subscriber.unsubscribe(topic)
            link.boards.remove(board)
            if link.boards.isEmpty {
                unwatch(link.watch)
                link.subscriber.close()
                links[hub] = nil
            } else {
                links[hub] = link
            }
        }

        /// Moves `board` to `hub` (a WRONG_HUB named it, or back home): its
        /// topic on that hub's SUB, a new snapshot DEALER there. The sync's
        /// next snapshot request goes to it.
        private func move(_ board: String, to hub: HubFeedEndpoints) {
            guard var followed = boards[board], followed.hub != hub else { return }
            let snapshots: ZMQSocket
            do {
                if links[hub] == nil {
                    let subscriber = try socket(.sub, to: hub.publish, of: hub)
                    links[hub] = Link(subscriber: subscriber, watch: watch(subscriber, as: .hub(hub)))
                }
                try links[hub]!.subscriber.subscribe(followed.topic)
                snapshots = try socket(.dealer, to: hub.snapshot, of: hub)
            } catch {
                logger.warning("cannot follow the board to its hub", metadata: ["board": "\(board)", "hub": "\(hub.publish)", "error": "\(error)"])
                return  // the snapshot time-out asks again where it is
            }
            links[hub]!.boards.insert(board)
            leave(followed.hub, board: board, topic: followed.topic)
            unwatch(followed.watch)
            followed.snapshots.close()
            followed.snapshots = snapshots
            followed.hub = hub
            followed.watch = watch(snapshots, as: .board(board))
            boards[board] = followed
            read(.hub(hub))  // changing the subscription may have taken the SUB's read signal
        }

        private func socket(_ type: ZMQSocketType, to endpoint: String, of hub: HubFeedEndpoints) throws(ZMQError) -> ZMQSocket {
            let socket = try ZMQSocket(context, type: type)
            do {
                try socket.setLinger(milliseconds: 0)
                if let curve = hub.curve {
                    try socket.setCurveServerKey(curve.serverPublicKey)
                    try socket.setCurvePublicKey(curve.client.publicKey)
                    try socket.setCurveSecretKey(curve.client.secretKey)
                }
                try socket.setHandshakeInterval(milliseconds: 5000)
                if type == .sub { try socket.setReceiveHighWaterMark(settings.receiveHighWaterMark) }
                try socket.connect(endpoint)
            } catch {
                socket.close()
                throw error
            }
            return socket
        }

        /// Runs one of `board`'s sync rules and carries out what it decided.
        private func change(_ board: String, _ rule: (inout ReplicaSync) -> [ReplicaSync.Action]) {
            guard var followed = boards.removeValue(forKey: board) else { return }  // the sync uniquely referenced while it changes
            let actions = rule(&followed.sync)
            boards[board] = followed
            perform(actions, board: board)
        }

        private func perform(_ actions: [ReplicaSync.Action], board: String) {
            for action in actions {
                // The frequent ones first, read in place (a copy of `Followed` retains the board's whole replica).
                switch action {
                case .applied(let batch):
                    guard let index = boards.index(forKey: board) else { return }
                    let (feed, state) = Self.feedAndReplica(of: &boards.values[index])
                    if let state { feed.applied(batch, board: state) }
                    continue
                case .heartbeat:
                    continue
                default:
                    break
                }
                guard let followed = boards[board] else { return }
                switch action {
                case .requestSnapshot(let request):
                    _ = try? followed.snapshots.send(followed.sync.snapshotRequest(request), dontWait: true)
                    unread.insert(board)  // the send may have taken the socket's read signal
                case .resyncing(let reason):
                    logger.info("resyncing", metadata: ["board": "\(board)", "reason": "\(reason)"])
                case .synced(let state, _, _):
                    followed.feed.synced(state)
                case .applied, .heartbeat:
                    break  // above
                case .failed(let reason):
                    logger.warning("board refused", metadata: ["board": "\(board)", "error": "\(reason)"])
                    followed.feed.failed(reason)
                case .redirect(let publish, let snapshot, let hub):
                    logger.notice("another hub serves the board: following it", metadata: ["board": "\(board)", "hub": "\(hub)", "publish": "\(publish)"])
                    move(board, to: HubFeedEndpoints(publish: publish, snapshot: snapshot, curve: followed.hub.curve))
                case .silent:
                    // The hub went quiet on this board (it died, or the board moved): ask again, at home if
                    // away. A sync following several hubs asks the next one itself (a `redirect`).
                    guard followed.sync.hubs.count < 2 else { break }
                    if followed.hub != followed.home { move(board, to: followed.home) }
                    change(board) { $0.resync(reason: "nothing from the hub for \(settings.silenceTimeout)", now: clock.now) }
                }
            }
        }

        private static func feedAndReplica(of followed: inout Followed) -> (any BoardFeed, BoardState?) { (followed.feed, followed.sync.replica) }

        /// The board's snapshot replies; its sync ignores those of requests it gave up.
        private func drainSnapshots(_ socket: ZMQSocket, of board: String) throws(ZMQError) {
            while try socket.receive(into: body, dontWait: true) {
                let now = clock.now
                // A WRONG_HUB naming the owner moves the board there (`redirect`).
                guard let reply = body.withUnsafeBytes({ ReplicaSync.SnapshotReply.read($0) }) else { continue }
                change(board) { $0.received(reply, now: now) }
            }
        }

        private func drainPublished(_ socket: ZMQSocket) throws(ZMQError) {
            while try socket.receive(into: topic, dontWait: true) {
                guard topic.hasMore, try socket.receive(into: body, dontWait: true) else { continue }
                while body.hasMore { _ = try socket.receive(into: body, dontWait: true) }
                let board: String? = topic.withUnsafeBytes { bytes in
                    guard bytes.last == 0 else { return nil }
                    return validUTF8Text(UnsafeRawBufferPointer(rebasing: bytes.dropLast()))
                }
                guard let board, boards.index(forKey: board) != nil else { continue }
                let now = clock.now
                change(board) { sync in body.withUnsafeBytes { sync.received(published: $0, now: now) } }
            }
        }
    }
}
