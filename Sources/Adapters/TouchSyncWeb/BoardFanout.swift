import TouchSyncWaiting
import Logging
import NIOCore
import Synchronization
import TouchSyncClient
import TouchSyncCore
import TouchSyncWebWire

/// One WebSocket frame for a tab: JSON text, or a binary frame (docs/protocol.md,
/// "Binary frames") in a buffer that every tab of a board shares (written, never copied).
enum TabFrame: Sendable, Equatable, ExpressibleByStringLiteral {
    case text(String)
    case binary(ByteBuffer)
    init(stringLiteral text: String) { self = .text(text) }
    static func binary(_ bytes: [UInt8]) -> TabFrame { .binary(ByteBuffer(bytes: bytes)) }
}

/// The wires a tab may speak (its hello's `wire`; docs/protocol.md, "The browser wire").
enum TabWire: UInt8, Sendable {
    /// JSON text frames only.
    case json
    /// Touches, batches and acks may be binary frames ("Binary frames").
    case binary
    /// Touches chained per connection, batches packed ("Packed frames").
    case packed
    /// As `packed`, with packed2's blocks ("Packed frames", "packed2").
    case packed2

    /// The wire a hello asks for: JSON unless it names another this gateway speaks.
    init(hello wire: String?) { self = wire.flatMap { TabWire(name: $0) } ?? .json }

    init?(name: String) {
        switch name {
        case "binary": self = .binary
        case "packed": self = .packed
        case "packed2": self = .packed2
        case "json": self = .json
        default: return nil
        }
    }

    var name: String { "\(self)" }
}

/// What a tab is sent, in order. Each tab drains its own outbox, so a slow
/// tab only fills its own; past `limit` messages its queue is dropped and it
/// gets a fresh snapshot instead (the Clone pattern's resync), which bounds
/// memory per tab without slowing the board or the other tabs. Posting from
/// any thread calls the outbox's waker once until the queue has been taken
/// empty (the tab's connection then drains it on its event loop).
final class TabOutbox: Sendable {
    fileprivate struct State {
        var queue: [TabFrame] = []
        var needsSnapshot = false
        var closed = false
        /// The waker was called and the queue has not been taken empty since.
        var wakeDue = false
        var waker: (@Sendable () -> Void)? = nil
        var overflows = 0
        /// The tab's access was revoked: said to it (code, message), then its socket closes.
        var revoked: (code: String, message: String)? = nil
        /// Where each other tab's pointer waits in `queue` (by presence id): a newer one takes its place.
        var presence: [UInt64: Int] = [:]
        /// The latest acknowledgement not yet taken. Apart from the queue: a
        /// snapshot due or an overflow drops batches, never acks (a tab's first
        /// stroke on a new board, drawn while its snapshot waited, once went
        /// unacknowledged for good).
        var ackDue: UInt64? = nil
        /// Arranges `ackHoldEnded` a little later: a lone ack waits that long
        /// for a batch to go with (nil: acks go at once).
        var ackHold: (@Sendable () -> Void)? = nil
        /// An ack waits for company; `ackHoldEnded` is arranged.
        var ackHeld = false
    }
    private let state = Mutex(State())
    let limit: Int
    /// The wire the tab's welcome named: batches and acks go to it that way.
    var wire: TabWire { TabWire(rawValue: wireCode.load(ordering: .relaxed)) ?? .json }
    /// Acks go as binary frames (binary and packed wires).
    var binary: Bool { wire != .json }
    private let wireCode = Atomic<UInt8>(TabWire.json.rawValue)

    init(limit: Int, wire: TabWire = .json) {
        self.limit = limit
        wireCode.store(wire.rawValue, ordering: .relaxed)
    }

    /// Who drains the outbox: called (from the posting thread) when there is something to take.
    func wake(with waker: @escaping @Sendable () -> Void) {
        let wakeNow = state.withLock { state in
            state.waker = waker
            state.wakeDue = state.hasWork
            return state.wakeDue
        }
        if wakeNow { waker() }
    }

    /// From the welcome on, batches and acks go to this tab in `wire`.
    func speak(_ wire: TabWire) { wireCode.store(wire.rawValue, ordering: .relaxed) }

    /// Queues a JSON text message; false when the queue overflowed (a snapshot is then due instead).
    @discardableResult
    func post(_ text: String) -> Bool { post(frame: .text(text)) }

    /// Lets a lone ack wait for company: `hold` arranges a call of
    /// `ackHoldEnded` a little later (on any thread). An ack is not urgent to
    /// the tab (it only frees what the tab keeps to resend), and its board's
    /// next batch usually comes within that time: the two go as one write
    /// instead of two (docs/performance.md, "Acks that wait for a batch").
    func holdAcks(with hold: @escaping @Sendable () -> Void) {
        state.withLock { $0.ackHold = hold }
    }

    /// An acknowledgement (acks are cumulative: the latest stands for those
    /// before). It wakes the tab now, or, with `holdAcks`, goes with whatever
    /// the tab is sent next, at the latest when the hold ends.
    func postAck(_ n: UInt64) {
        let (waker, hold): ((@Sendable () -> Void)?, (@Sendable () -> Void)?) = state.withLock { state in
            guard !state.closed else { return (nil, nil) }
            state.ackDue = max(state.ackDue ?? 0, n)
            if let hold = state.ackHold, !state.wakeDue, !state.hasWorkBesidesAck {
                if state.ackHeld { return (nil, nil) }
                state.ackHeld = true
                return (nil, hold)
            }
            return (state.takeWaker(), nil)
        }
        waker?()
        hold?()
    }

    /// The hold of `holdAcks` is over: an ack still waiting wakes the tab.
    func ackHoldEnded() {
        let waker = state.withLock { state -> (@Sendable () -> Void)? in
            state.ackHeld = false
            guard state.ackDue != nil, !state.closed else { return nil }
            return state.takeWaker()
        }
        waker?()
    }

    /// The acknowledgement due, in the tab's wire, taken (also while a snapshot is being fetched).
    func takeAck() -> TabFrame? {
        guard let n = state.withLock({ state -> UInt64? in
            defer {
                state.ackDue = nil
                state.wakeDue = false  // the next post wakes the tab again
            }
            return state.closed ? nil : state.ackDue
        }) else { return nil }
        return binary ? .binary(BrowserBinary.ack(n)) : .text(BrowserMessage.ack(n: n).json)
    }

    /// Queues a frame; false when the queue overflowed (a snapshot is then due instead).
    @discardableResult
    func post(frame message: TabFrame) -> Bool {
        let (waker, accepted): ((@Sendable () -> Void)?, Bool) = state.withLock { state in
            guard !state.closed else { return (nil, true) }
            if state.needsSnapshot { return (nil, false) }  // everything before the snapshot is moot
            if state.queue.count >= limit {
                state.queue.removeAll()
                state.presence.removeAll()
                state.needsSnapshot = true
                state.overflows += 1
            } else {
                state.queue.append(message)
            }
            return (state.takeWaker(), !state.needsSnapshot)
        }
        waker?()
        return accepted
    }

    /// Another tab's pointer (`presence`, by its id): it replaces the same tab's
    /// pointer still waiting in the queue, so pointers never make a slow tab
    /// fall behind (a person hovering cannot cost the others a resync).
    func post(presence text: String, from id: UInt64) {
        let waker: (@Sendable () -> Void)? = state.withLock { state in
            guard !state.closed, !state.needsSnapshot else { return nil }
            if let index = state.presence[id] {
                state.queue[index] = .text(text)
                return nil
            }
            // A full queue drops the pointer (its next move, or the page forgetting it after 10 s, makes up for it).
            guard state.queue.count < limit else { return nil }
            state.presence[id] = state.queue.count
            state.queue.append(.text(text))
            return state.takeWaker()
        }
        waker?()
    }

    /// Replaces whatever is queued by a resync (the tab is then sent a snapshot).
    func requestSnapshot() {
        let waker = state.withLock { state in
            state.queue.removeAll()
            state.presence.removeAll()
            state.needsSnapshot = true
            return state.takeWaker()
        }
        waker?()
    }

    func close() {
        let waker = state.withLock { state in
            state.closed = true
            state.queue.removeAll()
            state.presence.removeAll()
            return state.takeWaker()
        }
        waker?()
    }

    /// Ends the tab: whatever is queued is dropped, it is told why, and its socket closes.
    func revoke(code: String, message: String) {
        let waker = state.withLock { state in
            state.revoked = (code, message)
            state.queue.removeAll()
            state.presence.removeAll()
            return state.takeWaker()
        }
        waker?()
    }

    var isRevoked: Bool { state.withLock { $0.revoked != nil } }

    enum Next {
        case messages([TabFrame])
        case snapshot
        case closed
        case revoked(code: String, message: String)
    }

    /// What is next to send, or nil when nothing is (the waker is called at the next post).
    func take() -> Next? {
        state.withLock { state in
            if state.closed { return .closed }
            if let revoked = state.revoked {
                state.closed = true
                return .revoked(code: revoked.code, message: revoked.message)
            }
            if state.needsSnapshot {
                state.needsSnapshot = false
                state.wakeDue = false  // what is posted while the snapshot is fetched wakes the tab (its acks go at once)
                return .snapshot
            }
            if !state.queue.isEmpty || state.ackDue != nil {
                var messages = state.queue
                if let n = state.ackDue {
                    messages.append(binary ? .binary(BrowserBinary.ack(n)) : .text(BrowserMessage.ack(n: n).json))
                    state.ackDue = nil
                }
                state.queue.removeAll(keepingCapacity: true)
                state.presence.removeAll(keepingCapacity: true)
                return .messages(messages)
            }
            state.wakeDue = false
            return nil
        }
    }

    /// Times this tab fell so far behind that it was resynced.
    var overflows: Int { state.withLock { $0.overflows } }
}

extension TabOutbox.State {
    fileprivate var hasWork: Bool { hasWorkBesidesAck || ackDue != nil }
    fileprivate var hasWorkBesidesAck: Bool { closed || revoked != nil || needsSnapshot || !queue.isEmpty }

    /// The waker, when it is due now (once until the queue is taken empty).
    fileprivate mutating func takeWaker() -> (@Sendable () -> Void)? {
        guard !wakeDue, let waker else { return nil }
        wakeDue = true
        return waker
    }
}

/// One board's live view for the gateway: the board followed on the
/// gateway's `SubscriptionHost` (one replica per board, the host's, on its
/// thread) and the tabs watching it. Each batch is encoded once, from the
/// board after it, and posted to every tab's outbox on the host's thread; a
/// tab that joins gets a snapshot taken on that thread between two batches,
/// so it sees every later batch exactly once (sequence numbers are the hub's).
final class BoardFanout: BoardFeed, Sendable {
    let board: String
    private struct State {
        var synced = false
        var sequence: UInt64 = 0
        var acceptedStrokes = 0
        var tabs: [ObjectIdentifier: TabOutbox] = [:]
        /// When a batch last changed the board (the hub's clock, µs since the epoch).
        var lastActivity: Int64? = nil
        /// When a tab last asked for the board or left it.
        var lastUsed = ContinuousClock.now
        /// Why the hub will not serve the board (FORBIDDEN, WRONG_HUB).
        var failure: String? = nil
    }
    private let state = Mutex(State())
    /// Tabs waiting for the first snapshot.
    private let syncedWaiters = ConditionWaiters()
    private let host: SubscriptionHost
    private let hub: HubFeedEndpoints
    private let logger: Logger

    init(board: String, hub: GatewayHub, host: SubscriptionHost, logger: Logger) {
        self.board = board
        self.host = host
        self.hub = HubFeedEndpoints(publish: hub.publish, snapshot: hub.snapshot, curve: hub.curve)
        self.logger = logger
    }

    func start() { host.follow(board, on: hub, feed: self) }

    func stop() async {
        let tabs = state.withLock { state in
            defer { state.tabs.removeAll() }
            return Array(state.tabs.values)
        }
        for tab in tabs { tab.close() }
        host.unfollow(board)
    }

    // MARK: BoardFeed (on the host's thread)

    func synced(_ board: BoardState) {
        // A first snapshot or a resync: every tab starts again from the board.
        let tabs = state.withLock { state in
            state.synced = true
            state.sequence = board.sequence
            state.acceptedStrokes = board.acceptedStrokes.count
            return Array(state.tabs.values)
        }
        syncedWaiters.signal()
        for tab in tabs { tab.requestSnapshot() }
    }

    func applied(_ batch: DiffBatch, board: BoardState) {
        let tabs = state.withLock { state in
            state.sequence = board.sequence
            state.acceptedStrokes = board.acceptedStrokes.count
            if !batch.diffs.isEmpty { state.lastActivity = batch.hubTime }
            return Array(state.tabs.values)
        }
        guard !tabs.isEmpty else { return }
        // Encoded once per wire its tabs read (at the first tab that reads it), the same frame for each of them.
        var text: TabFrame? = nil, binary: TabFrame? = nil, packed: TabFrame? = nil, packed2: TabFrame? = nil
        func binaryBatch() -> TabFrame {
            binary = binary ?? .binary(BrowserBinary.encode(BrowserWire.model(batch, after: board)))
            return binary!
        }
        for tab in tabs {
            switch tab.wire {
            case .json:
                text = text ?? .text(BrowserWire.batch(batch, after: board))
                tab.post(frame: text!)
            case .binary:
                tab.post(frame: binaryBatch())
            case .packed:
                packed = packed ?? PackedBatch.encode(batch, after: board).map(TabFrame.binary) ?? binaryBatch()
                tab.post(frame: packed!)
            case .packed2:
                packed2 = packed2 ?? PackedBatch.encode(batch, after: board, blocks: .packed2).map(TabFrame.binary) ?? binaryBatch()
                tab.post(frame: packed2!)
            }
        }
    }

    /// A tab's pointer (`presence` text) for the board's other tabs (docs/protocol.md, "Presence").
    func post(presence text: String, from id: UInt64, except sender: TabOutbox) {
        let tabs = state.withLock { Array($0.tabs.values) }
        for tab in tabs where tab !== sender { tab.post(presence: text, from: id) }
    }

    func failed(_ reason: String) {
        state.withLock { $0.failure = reason }
        logger.warning("board not served", metadata: ["board": "\(board)", "why": "\(reason)"])
        syncedWaiters.signal()
    }

    // MARK: Tabs

    /// Adds a tab; it will be sent a snapshot first.
    func join(_ outbox: TabOutbox) {
        state.withLock { $0.tabs[ObjectIdentifier(outbox)] = outbox }
        outbox.requestSnapshot()
    }

    func leave(_ outbox: TabOutbox) {
        state.withLock { state in
            _ = state.tabs.removeValue(forKey: ObjectIdentifier(outbox))
            state.lastUsed = .now
        }
    }

    /// A tab is about to join: the board is in use.
    func touch() { state.withLock { $0.lastUsed = .now } }

    /// No tab for `grace` (the gateway then stops following the board).
    func isIdle(for grace: Duration, now: ContinuousClock.Instant) -> Bool {
        state.withLock { $0.tabs.isEmpty && now - $0.lastUsed >= grace }
    }

    /// The board now, for a tab's snapshot, a thumbnail or an erase check: the
    /// host's replica, taken on its thread between two batches (so the batches
    /// posted to a tab after it are exactly those after its sequence); nil
    /// until the board is live.
    func snapshot() async -> BoardState? { await host.replica(of: board) }

    var tabCount: Int { state.withLock { $0.tabs.count } }
    /// When the board last changed while this gateway watched it (ms since the epoch), or nil.
    var lastActivityMilliseconds: Int64? { state.withLock { $0.lastActivity.map { $0 / 1000 } } }
    var status: (sequence: UInt64, acceptedStrokes: Int) { state.withLock { ($0.sequence, $0.acceptedStrokes) } }

    /// Waits until the board is live (true) or `timeout` passes or the hub refused it.
    func waitUntilSynced(timeout: Duration) async -> Bool {
        await syncedWaiters.wait(timeout: timeout) { [self] in
            state.withLock { $0.synced ? true : ($0.failure != nil ? false : nil) }
        } ?? false
    }
}
