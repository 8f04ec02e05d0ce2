import TouchSyncWaiting
import Logging
import Synchronization
import TouchSyncCore
import ZeroMQ

/// Many agents in one process, each with its own connection and identity
/// (so the hub sees exactly what it would see from separate machines), driven
/// by a few threads instead of one thread per agent: how a load generator
/// simulates thousands of users on a small machine.
///
/// Agent `i` behaves like a `TouchAgent`: numbered frames with alive sets,
/// kept until acknowledged, resent after a reconnect. Refusals and
/// reconnects are counted, not streamed.
public final class AgentPool: Sendable {
    public let configurations: [AgentConfiguration]
    public let identities: [String]
    private let shared: [AgentShared]
    /// Driver `d` owns agents `d, d + threads, d + 2·threads, …`.
    private let mailboxes: [Mailbox<AgentCommand>]
    private let threads: [SocketThread]
    private let context: ZMQContext
    private let logger: Logger
    private let counts = Mutex<(refused: [String: Int], disconnected: Int, welcomes: Int)>(([:], 0, 0))
    /// Callers waiting for every agent's welcome (woken at each welcome or refusal).
    private let welcomes = ConditionWaiters()

    /// - Parameters:
    ///   - configurations: one per agent; each needs an `identity`, or gets a random one.
    ///   - threads: driver threads (default 2); agents are dealt to them in turn.
    ///   - context: its `maxSockets` must cover every agent (plus the caller's other sockets).
    public init(configurations: [AgentConfiguration], threads: Int = 2, context: ZMQContext, logger: Logger) throws {
        precondition(threads > 0, "an agent pool needs at least one thread")
        self.configurations = configurations
        identities = configurations.map {
            $0.identity ?? "agent-" + String((0..<12).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement()! })
        }
        shared = configurations.map { _ in AgentShared() }
        let threadCount = min(threads, max(configurations.count, 1))
        mailboxes = try (0..<threadCount).map { _ in try Mailbox<AgentCommand>() }
        self.threads = (0..<threadCount).map { SocketThread(name: "touchsync-pool\($0)") }
        self.context = context
        self.logger = logger
    }

    public var count: Int { configurations.count }

    public func start() {
        let stride = threads.count
        for (driver, thread) in threads.enumerated() {
            let members = Array(Swift.stride(from: driver, to: configurations.count, by: stride))
            thread.start { [self] in
                let connections = members.map { agent in
                    AgentConnection(
                        configuration: configurations[agent], identity: identities[agent], context: context,
                        shared: shared[agent], logger: logger, report: { [self] in self.count($0) })
                }
                AgentDriver(connections: connections, mailbox: mailboxes[driver]).run()
            }
        }
    }

    private func count(_ event: AgentEvent) {
        switch event {
        case .refused(_, let code, _, _):
            counts.withLock { $0.refused[code.map { "\($0)" } ?? "unknown", default: 0] += 1 }
            welcomes.signal()
        case .disconnected: counts.withLock { $0.disconnected += 1 }
        case .welcomed:
            counts.withLock { $0.welcomes += 1 }
            welcomes.signal()
        case .busy, .acknowledged: break  // counted per agent (`backpressure`, `acknowledged`)
        }
    }

    /// Waits until every agent has been welcomed at least once (welcomes
    /// after reconnects count too, so call it right after `start`); false on time-out.
    public func waitUntilWelcomed(timeout: Duration) async -> Bool {
        await welcomes.wait(timeout: timeout) { [self] in
            if counts.withLock({ $0.welcomes }) >= count { return true }
            return helloRefusal != nil ? false : nil
        } ?? false
    }

    /// Why the hub refused some agent's hello, if it did (the first such agent found).
    public var helloRefusal: String? {
        for (index, agent) in shared.enumerated() {
            if let refusal = agent.helloRefusal.withLock({ $0 }) { return "agent \(index): \(refusal)" }
        }
        return nil
    }

    /// Sends agent `agent`'s changes as one frame, as `TouchAgent.send(_:alive:)` does.
    public func send(agent: Int, _ changes: [TouchChange], alive: [TouchID]? = nil) {
        let stride = threads.count
        shared[agent].progress.withLock { progress in
            progress.posted += 1
            mailboxes[agent % stride].post(.frame(connection: agent / stride, changes: changes, alive: alive))
        }
    }

    /// Waits until the hub has acknowledged everything every agent sent; false on time-out.
    public func flush(timeout: Duration = .seconds(30)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        for agent in shared {
            let left = deadline - ContinuousClock.now
            guard left > .zero, await agent.flush(timeout: left) else { return false }
        }
        return true
    }

    /// Agents with messages not acknowledged yet: index, identity, messages posted and acknowledged (for diagnostics).
    public var unacknowledged: [(agent: Int, identity: String, posted: UInt64, acknowledged: UInt64)] {
        shared.indices.compactMap { index in
            let (posted, acknowledged) = shared[index].progress.withLock { ($0.posted, $0.acknowledged) }
            return acknowledged < posted ? (index, identities[index], posted, acknowledged) : nil
        }
    }

    /// Frames that went out merged into earlier ones, and BUSY notices heard, over all agents.
    public var backpressure: (coalesced: UInt64, busyNotices: UInt64) {
        shared.reduce((UInt64(0), UInt64(0))) { total, agent in
            agent.progress.withLock { (total.0 + $0.coalesced, total.1 + $0.busyNotices) }
        }
    }

    /// Bytes all agents have sent, resends and heartbeats included.
    public var bytesSent: Int { shared.reduce(0) { $0 + $1.progress.withLock { $0.bytesSent } } }

    /// Messages the hub refused (by error code), and reconnects after silence or stalled acks, over all agents.
    public var refusals: [String: Int] { counts.withLock { $0.refused } }
    public var reconnects: Int { counts.withLock { $0.disconnected } }

    /// Stops every driver and closes every connection (each says goodbye
    /// first unless `goodbye` is false); unacknowledged messages are dropped.
    public func stop(goodbye: Bool = true) async {
        for mailbox in mailboxes { mailbox.post(.stop(goodbye: goodbye)) }
        for thread in threads { await thread.finished() }
    }
}
