import Foundation
import Synchronization
import Testing
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncJournal
import ZeroMQ

/// Relays (issue 13): hub -> relay -> relay -> subscriber, real sockets.
@Suite("Relays", .timeLimit(.minutes(4)))
struct RelayTests {
    /// A subscriber behind two chained relays converges on the hub's digest
    /// while an agent draws, through a restart of the hub (on its journal,
    /// same ports) and a restart of the second relay.
    @Test func aRelayChainConvergesThroughRestarts() async throws {
        let data = NSTemporaryDirectory() + "touchsync-relay-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: data) }
        // The hub and the second relay come back on the same ports.
        let ports = restartableEndpoints(5)
        var hubConfiguration = HubConfiguration.loopbackEphemeral()
        hubConfiguration.timing.heartbeatInterval = .milliseconds(200)
        hubConfiguration.journal = JournalConfiguration(directory: data)
        (hubConfiguration.ingestEndpoint, hubConfiguration.publishEndpoint, hubConfiguration.snapshotEndpoint) = (ports[0], ports[1], ports[2])
        let context = try ZMQContext()
        var hub = try TouchSyncHub(configuration: hubConfiguration, logger: testLogger("hub"), context: context)
        let endpoints = try await hub.start()
        func relay(upstream: (String, String), serving: (String, String)) async throws -> (BoardRelay, (publish: String, snapshot: String)) {
            var configuration = RelayConfiguration()
            configuration.upstreamPublish = upstream.0
            configuration.upstreamSnapshot = upstream.1
            configuration.publishEndpoint = serving.0
            configuration.snapshotEndpoint = serving.1
            configuration.snapshotTimeout = .milliseconds(500)
            let relay = try BoardRelay(configuration: configuration, logger: testLogger("relay"), context: context)
            return (relay, try await relay.start())
        }
        let (first, firstEndpoints) = try await relay(upstream: (endpoints.publish, endpoints.snapshot), serving: ("tcp://127.0.0.1:*", "tcp://127.0.0.1:*"))
        var (second, secondEndpoints) = try await relay(
            upstream: (firstEndpoints.publish, firstEndpoints.snapshot), serving: (ports[3], ports[4]))
        var subscriberConfiguration = SubscriberConfiguration(
            board: "b", publishEndpoint: secondEndpoints.publish, snapshotEndpoint: secondEndpoints.snapshot)
        subscriberConfiguration.snapshotTimeout = .milliseconds(500)
        let subscriber = try BoardSubscriber(configuration: subscriberConfiguration, context: context, logger: testLogger("subscriber"))
        subscriber.start()

        var agentConfiguration = AgentConfiguration(board: "b", hubEndpoint: endpoints.ingest)
        agentConfiguration.identity = "pen"
        agentConfiguration.heartbeatInterval = .milliseconds(100)
        agentConfiguration.hubTimeout = .milliseconds(800)
        agentConfiguration.reconnectDelay = .milliseconds(20) ... .milliseconds(200)
        let agent = try TouchAgent(configuration: agentConfiguration, context: context, logger: testLogger("agent"))
        agent.start()
        // What the agent went through, said when a flush runs out (a fresh
        // clone once saw one run out after the hub's restart, not reproduced).
        let eventLog = EventLines()
        let eventReader = Task { [agent] in
            for await event in agent.events { eventLog.lines.withLock { $0.append("\(ContinuousClock.now): \(event)") } }
        }
        defer { eventReader.cancel() }
        func flushed(_ timeout: Duration, _ stage: String) async -> Bool {
            if await agent.flush(timeout: timeout) { return true }
            let events = eventLog.lines.withLock { $0.suffix(30) }.joined(separator: "\n")
            Issue.record("\(stage): the agent was not acknowledged in \(timeout): acknowledged \(agent.acknowledged), \(agent.unacknowledgedCount) unacknowledged, its last events:\n\(events)")
            return false
        }
        var time = 1.0
        func stroke(_ id: TouchID) async throws {
            try agent.touchesBegan([TouchInput(id: id, coalesced: [TouchPoint(x: 10, y: Double(id) * 10, timestamp: time)])])
            for step in 1...30 {
                time += 0.01
                try agent.touchesMoved([TouchInput(id: id, coalesced: [TouchPoint(x: 10 + Double(step), y: Double(id) * 10, timestamp: time)])])
                if step % 10 == 0 { try await Task.sleep(for: .milliseconds(5)) }
            }
            time += 0.01
            try agent.touchesEnded([TouchInput(id: id, coalesced: [TouchPoint(x: 50, y: Double(id) * 10, timestamp: time)])])
        }
        func converged() async -> Bool {
            guard let state = await hub.boardState("b") else { return false }
            for _ in 0..<200 {
                if let replica = await subscriber.replica(), replica.sequence == state.sequence, replica.digest == state.digest { return true }
                try? await Task.sleep(for: .milliseconds(25))
            }
            return false
        }
        for id in 1...3 { try await stroke(TouchID(id)) }
        _ = await flushed(.seconds(10), "at first")
        #expect(await converged(), "the chain did not converge")
        #expect(first.status.forwarded > 0 && second.status.snapshotsServed >= 1)

        // The hub restarts on its journal, on the same ports; the agent resumes, the chain follows.
        await hub.stop()
        hub = try await startAgain {
            let again = try TouchSyncHub(configuration: hubConfiguration, logger: testLogger("hub"), context: context)
            _ = try await again.start()
            return again
        }
        for id in 4...5 { try await stroke(TouchID(id)) }
        _ = await flushed(.seconds(15), "after the hub restarted")
        #expect(await converged(), "the chain did not converge after the hub restarted")

        // The second relay restarts on its ports; the subscriber resyncs from it.
        await second.stop()
        (second, secondEndpoints) = try await startAgain {
            try await relay(
                upstream: (firstEndpoints.publish, firstEndpoints.snapshot), serving: (secondEndpoints.publish, secondEndpoints.snapshot))
        }
        for id in 6...7 { try await stroke(TouchID(id)) }
        _ = await flushed(.seconds(10), "after the relay restarted")
        #expect(await converged(), "the chain did not converge after the relay restarted")
        #expect(await subscriber.replica()?.acceptedStrokes.count == 7)

        await agent.stop()
        await subscriber.stop()
        await second.stop()
        await first.stop()
        await hub.stop()
    }
}

/// Lines a test keeps from another task, said if it fails.
final class EventLines: Sendable {
    let lines = Mutex<[String]>([])
}
