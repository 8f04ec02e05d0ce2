import Logging
import Synchronization
import TouchSyncCore
import ZeroMQ

/// Agents that come and go at run time, each with its own connection and
/// identity, on a few shared driver threads instead of a thread each (a
/// bridge serving many sources: 1,500 spoofed TUIO sources once made 1,508
/// threads). Each agent behaves like a `TouchAgent`: numbered frames with
/// alive sets, kept until acknowledged, resent after a reconnect.
public final class AgentHost: Sendable {
    /// One agent of the host.
    public final class Agent: Sendable {
        let driver: Int
        let index: Int
        let shared: AgentShared
        public let identity: String

        init(driver: Int, index: Int, identity: String, shared: AgentShared) {
            self.driver = driver
            self.index = index
            self.identity = identity
            self.shared = shared
        }

        /// Why the hub refused this agent's hello, if it did.
        public var helloRefusal: String? { shared.helloRefusal.withLock { $0 } }
        /// Messages posted and not yet acknowledged.
        public var unacknowledgedCount: Int { shared.progress.withLock { Int($0.posted - $0.acknowledged) } }
    }

    private let mailboxes: [Mailbox<AgentCommand>]
    private let threads: [SocketThread]
    private let context: ZMQContext
    private let logger: Logger
    /// Per driver: its agents' count and the indices freed by removed agents.
    private let places: Mutex<[(live: Int, next: Int, free: [Int])]>

    private let gatherInterval: Duration

    /// - Parameter gatherInterval: the least time between two turns of a
    ///   driver that send its agents' frames: what is posted sooner waits and
    ///   goes with the others in one turn (on a multiplexed connection, one
    ///   ZeroMQ message); a frame posted after a quiet spell goes at once. Zero: every frame at once.
    public init(threads: Int = 2, context: ZMQContext, logger: Logger, gatherInterval: Duration = .zero) throws {
        precondition(threads > 0, "an agent host needs at least one thread")
        self.gatherInterval = gatherInterval
        mailboxes = try (0..<threads).map { _ in try Mailbox<AgentCommand>() }
        self.threads = (0..<threads).map { SocketThread(name: "touchsync-host\($0)") }
        places = Mutex(Array(repeating: (0, 0, []), count: threads))
        self.context = context
        self.logger = logger
    }

    public func start() {
        for (driver, thread) in threads.enumerated() {
            thread.start { [mailboxes, gatherInterval] in
                AgentDriver(connections: [], mailbox: mailboxes[driver], gatherInterval: gatherInterval).run()
            }
        }
    }

    /// A new agent, on the driver thread with the fewest; it connects at once.
    public func add(_ configuration: AgentConfiguration) -> Agent {
        let identity = configuration.identity ?? "agent-" + String((0..<12).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement()! })
        let shared = AgentShared()
        let (driver, index) = attach(configuration, identity: identity, shared: shared, report: { _ in })
        return Agent(driver: driver, index: index, identity: identity, shared: shared)
    }

    /// Places a connection on the driver with the fewest: its driver and index there.
    func attach(
        _ configuration: AgentConfiguration, identity: String, shared: AgentShared, report: @escaping @Sendable (AgentEvent) -> Void
    ) -> (driver: Int, index: Int) {
        // Multiplexed agents of one hub share its connection, which one driver owns: they all go there.
        let endpoint = configuration.hubEndpoint.split(separator: ",").first.map(String.init) ?? configuration.hubEndpoint
        let linkDriver = configuration.multiplexed ? endpoint.utf8.reduce(0) { ($0 &* 31 &+ Int($1)) & 0xFFFF } % mailboxes.count : nil
        let (driver, index) = places.withLock { places in
            let driver = linkDriver ?? places.indices.min { places[$0].live < places[$1].live }!
            places[driver].live += 1
            if let reused = places[driver].free.popLast() { return (driver, reused) }
            places[driver].next += 1
            return (driver, places[driver].next - 1)
        }
        let seed = AgentSeed(configuration: configuration, identity: identity, context: context, shared: shared, logger: logger, report: report)
        mailboxes[driver].post(.attach(connection: index, seed))
        return (driver, index)
    }

    /// The mailbox of driver `driver` (a hosted `TouchAgent` posts to it).
    func mailbox(of driver: Int) -> Mailbox<AgentCommand> { mailboxes[driver] }

    /// Ends the connection at `index` of `driver` (saying goodbye first with
    /// `goodbye`); `done` runs on the driver once it is closed.
    func detach(driver: Int, index: Int, goodbye: Bool, done: (@Sendable () -> Void)? = nil) {
        // A driver that has stopped takes nothing more: its connections are closed already.
        if !mailboxes[driver].post(.detach(connection: index, goodbye: goodbye, done: done)) { done?() }
        places.withLock { places in
            places[driver].live -= 1
            places[driver].free.append(index)  // reused only after the detach, which the mailbox delivers first
        }
    }

    /// Sends `agent`'s changes as one frame, as `TouchAgent.send(_:alive:)` does.
    public func send(_ agent: Agent, _ changes: [TouchChange], alive: [TouchID]? = nil) {
        agent.shared.progress.withLock { progress in
            progress.posted += 1
            mailboxes[agent.driver].post(.frame(connection: agent.index, changes: changes, alive: alive))
        }
    }

    /// Waits until the hub has acknowledged everything `agent` sent; false on time-out.
    public func flush(_ agent: Agent, timeout: Duration = .seconds(5)) async -> Bool {
        await agent.shared.flush(timeout: timeout)
    }

    /// Ends `agent` (saying goodbye first unless `goodbye` is false): what it has not delivered is dropped.
    public func remove(_ agent: Agent, goodbye: Bool = true) {
        detach(driver: agent.driver, index: agent.index, goodbye: goodbye)
    }

    /// Stops every driver and closes every connection (each says goodbye first unless `goodbye` is false).
    public func stop(goodbye: Bool = true) async {
        for mailbox in mailboxes { mailbox.post(.stop(goodbye: goodbye)) }
        for thread in threads { await thread.finished() }
    }
}
