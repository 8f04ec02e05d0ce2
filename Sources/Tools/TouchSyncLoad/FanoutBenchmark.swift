import Foundation
import Logging
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import ZeroMQ

/// Fan-out (issue 13): one hub, one board drawn at a steady rate, S
/// subscribers either on the hub itself or spread over R relays. Measures the
/// hub thread's CPU per batch (what fan-out costs the hub) and checks that
/// every subscriber ends at the hub's digest.
public struct FanoutBenchmark: Sendable {
    public var subscriberCounts = [10, 100, 300]
    public var relayCounts = [0, 1, 4]
    /// Drawing time per run.
    public var duration: Duration = .seconds(3)

    public struct Row: Sendable {
        public var subscribers: Int
        public var relays: Int
        public var batches: UInt64
        public var hubMicrosecondsPerBatch: Double
        public var relayMicrosecondsPerBatch: Double
        public var converged: Bool
    }

    public init() {}

    public func run(logger: Logger, report: (Row) -> Void) async throws {
        for relays in relayCounts {
            for subscribers in subscriberCounts {
                report(try await runOnce(subscribers: subscribers, relays: relays, logger: logger))
            }
        }
    }

    private func runOnce(subscribers: Int, relays: Int, logger: Logger) async throws -> Row {
        let hubContext = try ZMQContext()
        var configuration = HubConfiguration.loopbackEphemeral()
        configuration.timing.heartbeatInterval = .milliseconds(500)
        let hub = try TouchSyncHub(configuration: configuration, logger: logger, context: hubContext)
        let endpoints = try await hub.start()
        let context = try ZMQContext(maxSockets: Int32(subscribers * 4 + relays * 8 + 64) * 2)
        var relayEndpoints: [(publish: String, snapshot: String)] = []
        var relayServers: [BoardRelay] = []
        for _ in 0..<relays {
            var settings = RelayConfiguration()
            settings.upstreamPublish = endpoints.publish
            settings.upstreamSnapshot = endpoints.snapshot
            settings.publishEndpoint = "tcp://127.0.0.1:*"
            settings.snapshotEndpoint = "tcp://127.0.0.1:*"
            settings.boards = ["fanout"]
            let relay = try BoardRelay(configuration: settings, logger: logger, context: context)
            relayEndpoints.append(try await relay.start())
            relayServers.append(relay)
        }
        var followers: [BoardSubscriber] = []
        for index in 0..<subscribers {
            let source = relays == 0 ? (endpoints.publish, endpoints.snapshot) : relayEndpoints[index % relays]
            let subscriber = try BoardSubscriber(
                configuration: SubscriberConfiguration(board: "fanout", publishEndpoint: source.0, snapshotEndpoint: source.1),
                context: context, logger: logger)
            subscriber.start()
            followers.append(subscriber)
        }
        for subscriber in followers { _ = await subscriber.waitUntil(sequence: 0, timeout: .seconds(20)) }

        let agent = try TouchAgent(configuration: AgentConfiguration(board: "fanout", hubEndpoint: endpoints.ingest), context: context, logger: logger)
        agent.start()
        let hubBefore = threadCPUSeconds(named: "touchsync-hub") ?? 0
        let relayBefore = threadCPUSeconds(named: "touchsync-relay") ?? 0
        let sequenceBefore = await hub.boardState("fanout")?.sequence ?? 0
        // Three fingers at 120 Hz, a new stroke every half second.
        let clock = ContinuousClock()
        let start = clock.now
        var tick = 0
        while clock.now - start < duration {
            let t = Double(tick) / 120
            let phase = tick % 60
            let inputs = (0..<3).map { finger in
                TouchInput(id: TouchID(finger), coalesced: [TouchPoint(x: Double(phase) * 10, y: Double(finger) * 100, timestamp: t)])
            }
            if phase == 0 {
                try agent.touchesBegan(inputs)
            } else if phase == 59 {
                try agent.touchesEnded(inputs)
            } else {
                try agent.touchesMoved(inputs)
            }
            tick += 1
            try await Task.sleep(until: start + .microseconds(Int64(tick) * 1_000_000 / 120))
        }
        _ = await agent.flush(timeout: .seconds(20))
        let final = await hub.boardState("fanout")
        var converged = final != nil
        for subscriber in followers {
            guard let final, await subscriber.waitUntil(sequence: final.sequence, timeout: .seconds(20)),
                await subscriber.replica()?.digest == final.digest
            else {
                converged = false
                continue
            }
        }
        let batches = (final?.sequence ?? 0) - sequenceBefore
        let hubCPU = (threadCPUSeconds(named: "touchsync-hub") ?? 0) - hubBefore
        let relayCPU = (threadCPUSeconds(named: "touchsync-relay") ?? 0) - relayBefore
        await agent.stop()
        for subscriber in followers { await subscriber.stop() }
        for relay in relayServers { await relay.stop() }
        await hub.stop()
        return Row(
            subscribers: subscribers, relays: relays, batches: batches,
            hubMicrosecondsPerBatch: hubCPU * 1e6 / Double(max(batches, 1)),
            relayMicrosecondsPerBatch: relays == 0 ? 0 : relayCPU * 1e6 / Double(max(batches, 1)) / Double(relays), converged: converged)
    }
}
