import TestSupport
import Foundation
import Synchronization
import Testing
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncSimulation
import TouchSyncWire
import ZeroMQ

/// Agents sharing one connection to a real hub (docs/protocol.md,
/// "Multiplexed connections"), over TCP on loopback.
@Suite("Multiplexed agents", .timeLimit(.minutes(4)))
struct MultiplexedAgentsTests {
    static func agents(_ test: TestHub, host: AgentHost, users: [String], board: String, configure: (inout AgentConfiguration) -> Void = { _ in })
        throws -> [TouchAgent]
    {
        try users.map { user in
            var configuration = AgentConfiguration(board: board, hubEndpoint: test.endpoints.ingest)
            configuration.multiplexed = true
            configuration.connectionIdentity = "gateway-1"
            configuration.delegation = (user, "")
            configuration.heartbeatInterval = .milliseconds(100)
            configuration.hubTimeout = .seconds(2)
            configuration.reconnectDelay = .milliseconds(20) ... .milliseconds(200)
            configure(&configuration)
            return try TouchAgent(configuration: configuration, context: test.context, logger: testLogger("agent"), host: host)
        }
    }

    /// Six users' simulated fingers through one connection: the hub keeps
    /// six namespaces with their own numbering, and a subscriber converges;
    /// also when the host gathers frames for 20 ms between sends (the gateway's `--hub-flush-ms`).
    @Test(arguments: [Duration.zero, .milliseconds(20)])
    func manyUsersOnOneConnectionConverge(gatherInterval: Duration) async throws {
        let test = try await TestHub.start()
        let host = try AgentHost(threads: 2, context: test.context, logger: testLogger("host"), gatherInterval: gatherInterval)
        host.start()
        let watcher = try test.subscriber(board: "wall")
        var profile = SimulationProfile()
        profile.users = 6
        profile.fingersPerUser = 2
        profile.clearRate = 0
        var simulator = SessionSimulator(seed: 31, profile: profile)
        let agents = try Self.agents(test, host: host, users: simulator.users.map { "web:" + $0.rawValue }, board: "wall")
        for agent in agents { #expect(await agent.waitUntilWelcomed(timeout: .seconds(5))) }
        var ended = 0
        for step in 0..<1200 {
            switch simulator.next() {
            case .frame(let user, let frame, _):
                ended += frame.changes.count { $0.phase == .ended }
                agents[simulator.users.firstIndex(of: user)!].send(frame.changes, alive: frame.aliveTouches)
            case .clear(let user, let scope):
                agents[simulator.users.firstIndex(of: user)!].clear(scope)
            }
            if step % 25 == 0 { try await Task.sleep(for: .milliseconds(1)) }
        }
        for agent in agents { #expect(await agent.flush(timeout: .seconds(10))) }
        let hub = try await test.board("wall")
        #expect(hub.acceptedStrokes.count == ended && ended > 10)
        #expect(Set(hub.acceptedStrokes.map(\.owner.rawValue)).isSubset(of: Set(simulator.users.map { "web:" + $0.rawValue })))
        #expect(Set(hub.acceptedStrokes.map(\.owner.rawValue)).count > 1)
        #expect(await watcher.waitUntil(sequence: hub.sequence, timeout: .seconds(10)))
        #expect(try #require(await watcher.replica()).digest == hub.digest)
        for agent in agents { await agent.stop() }
        for agent in agents {
            for await event in agent.events { if case .refused = event { Issue.record("a valid session was refused: \(event)") } }
        }
        await host.stop(goodbye: true)
        await watcher.stop()
        await test.hub.stop()
    }

    /// An agent given `onEvent` reports on its thread, in order, and its
    /// `events` stream ends at once (the gateway keeps no task per tab).
    @Test func eventsGoToTheCallbackInOrder() async throws {
        let test = try await TestHub.start()
        let host = try AgentHost(threads: 1, context: test.context, logger: testLogger("host"))
        host.start()
        let heard = Mutex<[AgentEvent]>([])
        var configuration = AgentConfiguration(board: "b", hubEndpoint: test.endpoints.ingest)
        configuration.multiplexed = true
        configuration.connectionIdentity = "gateway-events"
        configuration.delegation = ("web:cat", "")
        let agent = try TouchAgent(
            configuration: configuration, context: test.context, logger: testLogger("agent"), host: host,
            onEvent: { event in heard.withLock { $0.append(event) } })
        for await event in agent.events { Issue.record("the stream should end at once, not carry \(event)") }
        #expect(await agent.waitUntilWelcomed(timeout: .seconds(5)))
        try agent.touchesBegan([TouchInput(id: 1, coalesced: [point(1, 1, 1)])])
        try agent.touchesEnded([TouchInput(id: 1, coalesced: [point(2, 2, 2)])])
        #expect(await agent.flush())
        #expect(try await eventually { heard.withLock { $0.last } == .acknowledged(through: 2) })
        let events = heard.withLock { $0 }
        #expect(events.first.map { if case .welcomed(let user, _) = $0 { user == "web:cat" } else { false } } == true, "\(events)")
        let acknowledged = events.compactMap { if case .acknowledged(let through) = $0 { through } else { nil } }
        #expect(acknowledged == acknowledged.sorted() && !acknowledged.isEmpty, "acknowledgements in order: \(events)")
        await agent.stop()
        await host.stop(goodbye: true)
        await test.hub.stop()
    }

    /// Idle channels send nothing of their own: the connection's heartbeats
    /// keep them live past the hub's liveness time-out, with their touches
    /// down; a tab that stops saying goodbye has its touches cancelled at once.
    @Test func theConnectionKeepsIdleChannelsLive() async throws {
        let test = try await TestHub.start {
            $0.timing.livenessTimeout = .milliseconds(400)
            $0.timing.abandonTimeout = .seconds(2)
        }
        let host = try AgentHost(threads: 1, context: test.context, logger: testLogger("host"))
        host.start()
        let watcher = try test.subscriber(board: "b")
        let agents = try Self.agents(test, host: host, users: ["web:ann", "web:ben"], board: "b")
        for agent in agents { try agent.touchesBegan([TouchInput(id: 1, coalesced: [point(1, 1, 1)])]) }
        for agent in agents { #expect(await agent.flush()) }
        // Three abandon time-outs with nothing from either tab: touches stay, nobody listed silent.
        let idleUntil = ContinuousClock.now + .seconds(6)
        while ContinuousClock.now < idleUntil {
            #expect(watcher.status.silentUsers.isEmpty)
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(try await test.board("b").liveTouchCount == 2)
        await agents[0].stop(goodbye: true)
        #expect(try await eventually { try await test.board("b").liveTouchCount == 1 })
        #expect(try await test.board("b").activeStrokes.values.map(\.owner.rawValue) == ["web:ben"])
        await host.stop(goodbye: true)
        // The connection's goodbye ends the rest at once.
        #expect(try await eventually { try await test.board("b").liveTouchCount == 0 })
        await watcher.stop()
        await test.hub.stop()
    }

    /// A hub that restarts (its state gone): the link finds it silent, and
    /// every channel starts a new session there; nothing posted after is lost.
    @Test func channelsSayHelloAgainToARestartedHub() async throws {
        // Ports from the tests' registry, not ephemeral ones: another process may take those while the hub is down.
        let ports = restartableEndpoints(3)
        func onPorts(_ configuration: inout HubConfiguration) {
            configuration.ingestEndpoint = ports[0]
            configuration.publishEndpoint = ports[1]
            configuration.snapshotEndpoint = ports[2]
        }
        let first = try await TestHub.start(onPorts)
        let host = try AgentHost(threads: 1, context: first.context, logger: testLogger("host"))
        host.start()
        let agents = try Self.agents(first, host: host, users: ["web:ann", "web:ben"], board: "b") { $0.hubTimeout = .milliseconds(800) }
        for (index, agent) in agents.enumerated() {
            try agent.touchesBegan([TouchInput(id: 1, coalesced: [point(Double(index), 1, 1)])])
            try agent.touchesEnded([TouchInput(id: 1, coalesced: [point(Double(index), 5, 2)])])
        }
        for agent in agents { #expect(await agent.flush()) }
        await first.hub.stop()
        let second = try await startAgain { try await TestHub.start(onPorts) }  // the first hub's listeners close asynchronously
        for (index, agent) in agents.enumerated() {
            try agent.touchesBegan([TouchInput(id: 2, coalesced: [point(Double(index), 10, 3)])])
            try agent.touchesEnded([TouchInput(id: 2, coalesced: [point(Double(index), 15, 4)])])
        }
        for agent in agents { #expect(await agent.flush(timeout: .seconds(15))) }
        let board = try await second.board("b")
        #expect(board.acceptedStrokes.map(\.owner.rawValue).sorted() == ["web:ann", "web:ben"])
        await host.stop(goodbye: true)
        await second.hub.stop()
    }
}
