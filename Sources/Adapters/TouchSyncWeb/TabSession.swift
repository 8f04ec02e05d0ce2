import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncClient
import TouchSyncCore
import TouchSyncWebWire
import ZeroMQ

/// One browser tab's agent (a `TouchAgent`, a channel of the gateway's
/// multiplexed connection): its own namespace, numbered frames, acks and
/// resends. The rules of the tab's session (the page's numbering, acks,
/// reconnect grace, names) are `GatewayCore`'s; this holds the agent and
/// passes what it hears from the hub to the tab connected now.
final class TabSession: Sendable {
    let namespace: String
    let resumeToken: String
    let board: String
    /// The invited user it acts for (nil: a guest on a plain-text hub).
    let user: String?
    let agent: TouchAgent
    /// The current connection's outbox: where the hub's refusals and state go (nil while the tab is away).
    private let outbox = Mutex<TabOutbox?>(nil)
    private let closed = Mutex(false)

    init(namespace: String, resumeToken: String, board: String, user: String?, agent: TouchAgent) {
        self.user = user
        self.namespace = namespace
        self.resumeToken = resumeToken
        self.board = board
        self.agent = agent
    }

    /// Makes `outbox` (the tab's WebSocket) where the agent's news go; nil: the tab is away.
    func attach(_ outbox: TabOutbox?) { self.outbox.withLock { $0 = outbox } }

    /// Passes what the agent heard from the hub to the tab (while it is
    /// connected): refusals as typed errors, and the hub's state; an
    /// acknowledgement goes to `acknowledged`; `page` finds the page number
    /// of a refused post (its refusal then takes that number). On the agent's thread.
    func deliver(_ event: AgentEvent, page: (TabSession, UInt64) -> UInt64?, acknowledged: (TabSession) -> Void) {
        let message: BrowserMessage
        switch event {
        case .refused(_, let code, let text, let posted):
            if let posted, let number = page(self, posted) {
                message = .refused(n: number, code: code?.protocolName ?? "REFUSED", message: text)
            } else {
                message = .error(code: code?.protocolName ?? "REFUSED", message: text, fromHub: true)
            }
        case .busy(let retryAfter):
            message = .hub(.busy(retryAfterMilliseconds: Int64(retryAfter / .milliseconds(1))))
        case .disconnected:
            message = .hub(.unreachable)
        case .welcomed:
            message = .hub(.connected)
        case .acknowledged:
            return acknowledged(self)
        }
        outbox.withLock { $0 }?.post(message.json)
    }

    /// Ends the agent: it says goodbye, so the hub cancels this tab's live touches at once.
    func close() async {
        let wasOpen = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard wasOpen else { return }
        attach(nil)
        _ = await agent.flush(timeout: .seconds(2))
        await agent.stop(goodbye: true)
    }
}

/// Where a tab's agent sends its events, on the agent's thread: the tab's
/// session once it exists (the agent is made before it). Weak, so that the
/// agent (which holds this) and the session (which holds the agent) do not
/// hold each other.
final class TabAgentEvents: Sendable {
    private struct Target { weak var session: TabSession? }
    private let target = Mutex(Target())

    func deliver(to session: TabSession) { target.withLock { $0.session = session } }

    var session: TabSession? { target.withLock { $0.session } }
}
