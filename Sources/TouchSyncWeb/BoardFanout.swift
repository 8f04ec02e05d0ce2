import Logging
import Synchronization
import TouchSyncClient
import TouchSyncCore
import TouchSyncWebWire
import ZeroMQ

/// What a tab is sent, in order. Each tab drains its own outbox, so a slow
/// tab only fills its own; past `limit` messages its queue is dropped and it
/// gets a fresh snapshot instead (the Clone pattern's resync), which bounds
/// memory per tab without slowing the board or the other tabs.
final class TabOutbox: Sendable {
    private struct State {
        var queue: [String] = []
        var needsSnapshot = false
        var closed = false
        var waiter: CheckedContinuation<Void, Never>? = nil
        var overflows = 0
        /// The tab's access was revoked: said to it (code, message), then its socket closes.
        var revoked: (code: String, message: String)? = nil
    }
    private let state = Mutex(State())
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Queues a message; false when the queue overflowed (a snapshot is then due instead).
    @discardableResult
    func post(_ message: String) -> Bool {
        let (waiter, accepted): (CheckedContinuation<Void, Never>?, Bool) = state.withLock { state in
            guard !state.closed else { return (nil, true) }
            if state.needsSnapshot { return (nil, false) }  // everything before the snapshot is moot
            if state.queue.count >= limit {
                state.queue.removeAll()
                state.needsSnapshot = true
                state.overflows += 1
            } else {
                state.queue.append(message)
            }
            let waiter = state.waiter
            state.waiter = nil
            return (waiter, !state.needsSnapshot)
        }
        waiter?.resume()
        return accepted
    }

    /// Replaces whatever is queued by a resync (the tab is then sent a snapshot).
    func requestSnapshot() {
        let waiter = state.withLock { state in
            state.queue.removeAll()
            state.needsSnapshot = true
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func close() {
        let waiter = state.withLock { state in
            state.closed = true
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Ends the tab: whatever is queued is dropped, it is told why, and its socket closes.
    func revoke(code: String, message: String) {
        let waiter = state.withLock { state in
            state.revoked = (code, message)
            state.queue.removeAll()
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    var isRevoked: Bool { state.withLock { $0.revoked != nil } }

    enum Next {
        case messages([String])
        case snapshot
        case closed
        case revoked(code: String, message: String)
    }

    /// Waits for what is next to send.
    func next() async -> Next {
        while true {
            let ready: Next? = state.withLock { state in
                if state.closed { return .closed }
                if let revoked = state.revoked {
                    state.closed = true
                    return .revoked(code: revoked.code, message: revoked.message)
                }
                if state.needsSnapshot {
                    state.needsSnapshot = false
                    return .snapshot
                }
                if !state.queue.isEmpty {
                    let messages = state.queue
                    state.queue.removeAll(keepingCapacity: true)
                    return .messages(messages)
                }
                return nil
            }
            if let ready { return ready }
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state in
                    if state.closed || state.revoked != nil || state.needsSnapshot || !state.queue.isEmpty { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    /// Times this tab fell so far behind that it was resynced.
    var overflows: Int { state.withLock { $0.overflows } }
}

/// One board's live view for the gateway: a single subscriber to the hub,
/// an exact copy of its replica, and the tabs watching it. Each batch is
/// encoded once and posted to every tab's outbox; a tab that joins gets the
/// copy as a snapshot, taken under the same lock as the posting, so it sees
/// every later batch exactly once (sequence numbers are the hub's).
final class BoardFanout: Sendable {
    let board: String
    private struct State {
        var replica: BoardState? = nil
        var tabs: [ObjectIdentifier: TabOutbox] = [:]
        /// When a batch last changed the board (the hub's clock, µs since the epoch).
        var lastActivity: Int64? = nil
        /// When a tab last asked for the board or left it.
        var lastUsed = ContinuousClock.now
    }
    /// Shared with the subscriber's callbacks (which run on its thread).
    private final class Shared: Sendable {
        let state = Mutex(State())
        /// Tabs waiting for the first snapshot.
        let synced = ConditionWaiters()
    }
    private let shared = Shared()
    private let subscriber: BoardSubscriber
    private let logger: Logger

    init(board: String, hub: GatewayHub, context: ZMQContext, logger: Logger) throws {
        self.board = board
        self.logger = logger
        var configuration = SubscriberConfiguration(
            board: board, publishEndpoint: hub.publish, snapshotEndpoint: hub.snapshot)
        configuration.curve = hub.curve
        configuration.reportsEvents = false  // the copy below is kept from the callbacks; nobody reads the events
        let shared = self.shared
        configuration.onSynced = { board in
            // A first snapshot or a resync: every tab starts again from it.
            let tabs = shared.state.withLock { state in
                state.replica = board
                return Array(state.tabs.values)
            }
            shared.synced.signal()
            for tab in tabs { tab.requestSnapshot() }
        }
        configuration.onApplied = { batch in
            let (message, tabs): (String, [TabOutbox]) = shared.state.withLock { state in
                // Encoded against the board before the batch (samples continue each stroke's delta chain).
                let message = BrowserWire.batch(batch, before: state.replica)
                if !batch.diffs.isEmpty { state.lastActivity = batch.hubTime }
                if state.replica != nil {
                    do {
                        try state.replica!.apply(batch)
                    } catch {
                        // Cannot happen while the subscriber's replica is right; resync the tabs from its next snapshot.
                        state.replica = nil
                    }
                }
                return (message, Array(state.tabs.values))
            }
            for tab in tabs { tab.post(message) }
        }
        subscriber = try BoardSubscriber(configuration: configuration, context: context, logger: logger)
    }

    func start() { subscriber.start() }

    func stop() async {
        let tabs = shared.state.withLock { state in
            defer { state.tabs.removeAll() }
            return Array(state.tabs.values)
        }
        for tab in tabs { tab.close() }
        await subscriber.stop()
    }

    /// Adds a tab; it will be sent a snapshot first.
    func join(_ outbox: TabOutbox) {
        shared.state.withLock { $0.tabs[ObjectIdentifier(outbox)] = outbox }
        outbox.requestSnapshot()
    }

    func leave(_ outbox: TabOutbox) {
        shared.state.withLock { state in
            _ = state.tabs.removeValue(forKey: ObjectIdentifier(outbox))
            state.lastUsed = .now
        }
    }

    /// A tab is about to join: the board is in use.
    func touch() { shared.state.withLock { $0.lastUsed = .now } }

    /// No tab for `grace` (the gateway then stops following the board).
    func isIdle(for grace: Duration, now: ContinuousClock.Instant) -> Bool {
        shared.state.withLock { $0.tabs.isEmpty && now - $0.lastUsed >= grace }
    }

    /// The board now, for a tab's snapshot: nil until the subscriber has synced.
    /// Taken under the lock batches are posted under, so the batches queued after
    /// it for this tab are exactly those after its sequence.
    func snapshot() -> BoardState? { shared.state.withLock { $0.replica } }

    var tabCount: Int { shared.state.withLock { $0.tabs.count } }
    /// When the board last changed while this gateway watched it (ms since the epoch), or nil.
    var lastActivityMilliseconds: Int64? { shared.state.withLock { $0.lastActivity.map { $0 / 1000 } } }
    var status: SubscriberStatus { subscriber.status }

    /// Waits until the subscriber has a board (true) or `timeout` passes.
    func waitUntilSynced(timeout: Duration) async -> Bool {
        await shared.synced.wait(timeout: timeout) { [shared] in shared.state.withLock { $0.replica != nil } ? true : nil } ?? false
    }
}
