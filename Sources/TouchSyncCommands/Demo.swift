import Foundation
import ArgumentParser
import TouchSyncCore
import TouchSyncSimulation
import TouchSyncWire

/// What the demo proved.
public struct DemoResult: Sendable {
    public var hubDigest: BoardDigest
    public var spectatorDigest: BoardDigest
    public var batches: Int
    public var samples: Int
    public var snapshotChunks: Int
    public var agentBytes: Int
    public var publishBytes: Int
    public var converged: Bool { hubDigest == spectatorDigest }
}

/// The embedded default scene: simulated users draw with several fingers on
/// one board; every input goes through the wire encoding into the hub's
/// reducer, and a spectator joins half-way from a chunked snapshot plus the
/// encoded diff batches. It ends by comparing the spectator's digest with the
/// hub's. (Issue #3 moves hub and spectator onto ZeroMQ sockets.)
public struct DemoScene: Sendable {
    public var users = 3
    public var fingers = 3
    public var steps = 4000
    public var seed: UInt64 = 2026
    public var board = "demo"

    public init() {}

    public func run(report: (String) -> Void) throws -> DemoResult {
        var profile = SimulationProfile()
        profile.users = users
        profile.fingersPerUser = fingers
        profile.withForce = false
        var simulator = SessionSimulator(seed: seed, profile: profile)
        var hub = BoardState()
        var spectator: BoardState? = nil
        var publishLog: [[UInt8]] = []
        var agentSequence: [UserNamespace: UInt64] = [:]
        var encoder = DiffStreamEncoder(board: board)
        var coalescer = DiffCoalescer()
        // One batch per tick, as the hub publishes: about two input events per user.
        let eventsPerTick = users * 2
        var result = DemoResult(
            hubDigest: hub.digest, spectatorDigest: BoardDigest(rawValue: 0), batches: 0, samples: 0,
            snapshotChunks: 0, agentBytes: 0, publishBytes: 0)
        let joinAt = steps / 2

        report("TouchSync demo: \(users) users x \(fingers) fingers drawing on board \"\(board)\" (seed \(seed), \(steps) input events)")
        for step in 1...steps {
            var diffs: [StrokeDiff] = []
            let input = simulator.next()
            // Each input crosses the wire exactly as an agent would send it.
            var message = Touchsync_V1_AgentMessage()
            switch input {
            case .frame(let user, let frame, _):
                agentSequence[user, default: 0] += 1
                message.sequence = agentSequence[user]!
                message.frame = frame.proto
            case .clear(let user, let scope):
                agentSequence[user, default: 0] += 1
                message.sequence = agentSequence[user]!
                var clear = Touchsync_V1_Clear()
                clear.scope = scope == .own ? .own : .board
                message.clear = clear
            }
            let bytes = WireCodec.encode(message)
            result.agentBytes += bytes.count
            let received = try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: bytes)
            switch (input, received.body) {
            case (.frame(let user, _, let style), .frame(let frame)):
                let decoded = try TouchFrame(frame, sequence: received.sequence)
                result.samples += decoded.changes.reduce(0) { $0 + $1.samples.count }
                try hub.reduce(decoded, from: user, style: style, into: &diffs)
            case (.clear(let user, _), .clear(let clear)):
                hub.clear(clear.scope == .own ? .own : .board, by: user, into: &diffs)
            default:
                throw ValidationError("the demo's own message did not round-trip")
            }
            coalescer.add(contentsOf: diffs)
            let published = (step % eventsPerTick == 0 || step == joinAt || step == steps) && !coalescer.isEmpty
            if published {
                let batch = hub.sealBatch(coalescer.take(), hubTime: Int64(step) * 8_333)
                var publish = Touchsync_V1_PublishMessage()
                publish.batch = encoder.encode(batch)
                let encoded = WireCodec.encode(publish)
                result.publishBytes += encoded.count
                publishLog.append(encoded)
                result.batches += 1
            }

            if step == joinAt {
                // Clone pattern: the spectator is already subscribed, so it holds the last few
                // batches too; then it loads the snapshot and skips what the snapshot includes.
                let chunks = SnapshotCodec.chunks(of: hub.snapshot(), board: board, digest: hub.digest, samplesPerChunk: 4096)
                let wire = try chunks.map { try WireCodec.decode(Touchsync_V1_SnapshotChunk.self, from: WireCodec.encode($0)) }
                let (snapshot, digest) = try SnapshotCodec.assemble(wire)
                var joined = try BoardState(snapshot: snapshot)
                guard joined.digest == digest else { throw ValidationError("snapshot digest mismatch") }
                for bytes in publishLog.suffix(5) {
                    try joined.applyIfNew(WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes).batch)
                }
                spectator = joined
                result.snapshotChunks = chunks.count
                report("  [spectator] joins at event \(step): snapshot at sequence \(snapshot.sequence) in \(chunks.count) chunks, \(joined.storedSampleCount) samples, digest \(digest)")
            } else if var joined = spectator, let last = publishLog.last, published {
                try joined.apply(WireCodec.decode(Touchsync_V1_PublishMessage.self, from: last).batch)
                spectator = joined
            }
            if step % (steps / 4) == 0 {
                report("  [hub] event \(step): sequence \(hub.sequence), \(hub.liveTouchCount) strokes in progress, \(hub.acceptedStrokes.count) accepted, \(hub.storedSampleCount) samples stored")
            }
        }
        result.hubDigest = hub.digest
        result.spectatorDigest = spectator?.digest ?? BoardDigest(rawValue: 0)
        report("  hub digest:       \(result.hubDigest) at sequence \(hub.sequence)")
        report("  spectator digest: \(result.spectatorDigest) at sequence \(spectator?.sequence ?? 0)")
        report(result.converged ? "  converged: the spectator shows exactly the hub's board" : "  DIVERGED: the spectator's board differs from the hub's")
        let perSample = { (bytes: Int) in String(format: "%.2f", Double(bytes) / Double(max(result.samples, 1))) }
        report("  wire: \(result.samples) samples; agent to hub \(perSample(result.agentBytes)) bytes/sample, hub to subscribers \(perSample(result.publishBytes)) bytes/sample (one batch per \(eventsPerTick) input events)")
        return result
    }
}

struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the embedded default scene and prove a late spectator converges on the hub.")

    @Option(help: "Simulated users.") var users = 3
    @Option(help: "Fingers per user.") var fingers = 3
    @Option(help: "Input events to simulate.") var steps = 4000
    @Option(help: "Seed for the simulated fingers (same seed, same scene).") var seed: UInt64 = 2026

    func validate() throws {
        guard (1...1000).contains(users) else { throw ValidationError("--users must be 1 to 1000") }
        guard (1...20).contains(fingers) else { throw ValidationError("--fingers must be 1 to 20") }
        guard steps >= 4 else { throw ValidationError("--steps must be at least 4") }
    }

    func run() throws {
        var scene = DemoScene()
        scene.users = users
        scene.fingers = fingers
        scene.steps = steps
        scene.seed = seed
        let result = try scene.run { print($0) }
        if !result.converged { throw ExitCode.failure }
    }
}
