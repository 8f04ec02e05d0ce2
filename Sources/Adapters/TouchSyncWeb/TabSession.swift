import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncClient
import TouchSyncCore
import TouchSyncWebWire
import ZeroMQ

/// One browser tab as an agent of the hub: its own namespace (`web:` and a
/// name the gateway chose), its own numbered frames, acks and resends (a
/// `TouchAgent`). The page numbers its messages too and keeps each until this
/// session says the hub acknowledged it; the session outlives a dropped
/// WebSocket for `reconnectGrace`, so a tab that comes back with its resume
/// token continues its strokes, and messages it sends again that were already
/// handed to the agent are skipped (the agent delivers those itself).
final class TabSession: Sendable {
    let namespace: String
    let resumeToken: String
    let board: String
    /// The name others see (a guest may change it with a `name` message).
    var displayName: String { state.withLock { $0.displayName } }
    /// The colour of the tab's last style (0xRRGGBBAA), for the users list.
    var colour: UInt32? { state.withLock { $0.colour } }
    /// The invited user it acts for (nil: a guest on a plain-text hub).
    let user: String?
    let agent: TouchAgent

    private struct State {
        /// The highest page number handed to the agent (or refused): resends at or below it are skipped.
        var handledThrough: UInt64 = 0
        /// Page numbers waiting for the hub's ack, with the agent's message count they need acknowledged.
        var waiting: [(page: UInt64, agentMessages: UInt64)] = []
        /// The highest page number the hub has acknowledged (or that was refused).
        var ackedThrough: UInt64 = 0
        var connection: ObjectIdentifier? = nil
        /// The current connection's outbox: where the hub's refusals and state go.
        var outbox: TabOutbox? = nil
        var detachedAt: ContinuousClock.Instant? = nil
        var closed = false
        /// The highest ack told to the current connection (its welcome said `ackedThrough` then).
        var ackSent: UInt64 = 0
        var displayName: String
        var colour: UInt32? = nil
    }
    private let state: Mutex<State>

    init(namespace: String, resumeToken: String, board: String, displayName: String, user: String?, agent: TouchAgent) {
        self.user = user
        self.namespace = namespace
        self.resumeToken = resumeToken
        self.board = board
        self.state = Mutex(State(displayName: displayName))
        self.agent = agent
    }

    func rename(_ name: String) { state.withLock { $0.displayName = name } }
    func setColour(_ rgba: UInt32) { state.withLock { $0.colour = rgba } }

    /// The page number the hub has acknowledged through.
    var ackedThrough: UInt64 { state.withLock { $0.ackedThrough } }

    /// Makes `connection` the tab's current WebSocket (a reconnect replaces the old one).
    func attach(_ connection: ObjectIdentifier, outbox: TabOutbox? = nil) {
        state.withLock {
            $0.connection = connection
            $0.outbox = outbox
            $0.detachedAt = nil
            $0.ackSent = $0.ackedThrough
        }
    }

    /// Passes what the agent hears from the hub to the tab (while it is
    /// connected): refusals as typed errors, and the hub's state. Runs until
    /// the agent stops.
    func forwardAgentEvents() async {
        for await event in agent.events {
            let message: BrowserMessage
            switch event {
            case .refused(_, let code, let text):
                message = .error(code: code?.protocolName ?? "REFUSED", message: text, fromHub: true)
            case .busy(let retryAfter):
                message = .hub(.busy(retryAfterMilliseconds: Int64(retryAfter / .milliseconds(1))))
            case .disconnected:
                message = .hub(.unreachable)
            case .welcomed:
                message = .hub(.connected)
            case .acknowledged:
                pushAcks()
                continue
            }
            state.withLock { $0.outbox }?.post(message.json)
        }
    }

    /// The WebSocket ended; true if it was the current one (the session then waits `reconnectGrace` for the tab).
    func detach(_ connection: ObjectIdentifier) -> Bool {
        state.withLock {
            guard $0.connection == connection else { return false }
            $0.connection = nil
            $0.outbox = nil
            $0.detachedAt = .now
            return true
        }
    }

    func isCurrent(_ connection: ObjectIdentifier) -> Bool { state.withLock { $0.connection == connection } }

    /// Since when no tab is connected to it (nil: one is).
    var detachedSince: ContinuousClock.Instant? { state.withLock { $0.detachedAt } }

    /// Detached for longer than `grace`.
    func expired(grace: Duration, now: ContinuousClock.Instant) -> Bool {
        state.withLock { state in
            guard let detachedAt = state.detachedAt else { return false }
            return now - detachedAt >= grace
        }
    }

    /// Hands numbered page message `number` to the agent once: `body` posts it
    /// (or throws to refuse it). Returns false for a resend already handled.
    func handle(_ number: UInt64, _ body: (TouchAgent) throws(BrowserWireError) -> Void) throws(BrowserWireError) -> Bool {
        try state.withLock { (state: inout State) throws(BrowserWireError) -> Bool in
            guard !state.closed, number > state.handledThrough else { return false }
            guard number == state.handledThrough + 1 else {
                throw BrowserWireError("OUT_OF_ORDER", "message \(number) after \(state.handledThrough): messages are numbered 1, 2, 3… and resent in order")
            }
            state.handledThrough = number
            do throws(BrowserWireError) {
                try body(agent)
            } catch {
                // Refused here: nothing reached the hub, so it is done once what came before is.
                state.waiting.append((number, agent.postedCount))
                throw error
            }
            state.waiting.append((number, agent.postedCount))
            return true
        }
    }

    /// Tells the tab what the hub has acknowledged since it last heard: called
    /// when the agent reports an acknowledgement and after each handled page
    /// message (a refused one is done as soon as what came before is).
    func pushAcks() {
        let (outbox, ack): (TabOutbox?, UInt64?) = state.withLock { state in
            // Read under the session's lock (the order `handle` takes them in), so no entry is missed.
            let through = agent.acknowledged.through
            while let first = state.waiting.first, first.agentMessages <= through {
                state.waiting.removeFirst()
                state.ackedThrough = first.page
            }
            guard state.ackedThrough > state.ackSent, let outbox = state.outbox else { return (nil, nil) }
            state.ackSent = state.ackedThrough
            return (outbox, state.ackedThrough)
        }
        if let outbox, let ack { outbox.postAck(ack) }
    }

    /// Ends the session: the agent says goodbye, so the hub cancels this tab's live touches at once.
    func close() async {
        let wasOpen = state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        guard wasOpen else { return }
        _ = await agent.flush(timeout: .seconds(2))
        await agent.stop(goodbye: true)
    }
}
