import ArgumentParser
import Foundation
import Logging
import Synchronization
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncRender
import TouchSyncSimulation
import ZeroMQ

/// What the demo proved.
public struct DemoResult: Sendable {
    public var hubDigest: BoardDigest
    public var spectatorDigest: BoardDigest?
    public var hubSequence: UInt64
    public var samples: Int
    public var acceptedStrokes: Int
    public var spectatorJoinedAt: UInt64
    public var spectatorResyncs: Int
    /// The hub's board at the end, for the image.
    public var board: BoardState
    /// Input events simulated: `steps`, or fewer when the scene ended first or the run was interrupted.
    public var stepsRun: Int
    /// The run was cancelled (Ctrl-C) before its last step.
    public var interrupted = false
    public var converged: Bool { spectatorDigest == hubDigest }

    /// A hash of every user's strokes taken one user at a time, each in that
    /// user's own order (accepted, then in progress): what the seed decides,
    /// without the interleaving of users that the board digest also covers.
    public var sceneFingerprint: String {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        func mix(_ value: Int64) {
            for shift in stride(from: 0, to: 64, by: 8) {
                hash = (hash ^ UInt64(truncatingIfNeeded: value >> Int64(shift)) & 0xFF) &* 0x0000_0100_0000_01B3
            }
        }
        let owners = Set(board.acceptedStrokes.map(\.owner) + board.orderedActiveStrokes.map(\.owner)).sorted()
        for owner in owners {
            for (marker, strokes) in [(1, board.acceptedStrokes), (2, board.orderedActiveStrokes)] {
                mix(Int64(marker))
                for stroke in strokes where stroke.owner == owner {
                    mix(Int64(stroke.samples.count))
                    for sample in stroke.samples {
                        mix(Int64(sample.x))
                        mix(Int64(sample.y))
                        mix(sample.time)
                    }
                }
            }
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// The embedded default scene: a hub in this process on free loopback
/// ports, simulated users each drawing with several fingers through their
/// own agent connection, and a spectator that joins half-way (snapshot plus
/// diffs). It ends by comparing the spectator's digest with the hub's.
public struct DemoScene: Sendable {
    public var users = 3
    public var fingers = 3
    public var steps = 3000
    public var seed: UInt64 = 2026
    public var board = "demo"

    public init() {}

    public func run(logger: Logger, report: @Sendable (String) -> Void) async throws -> DemoResult {
        let context = try ZMQContext()
        let hub = try TouchSyncHub(configuration: .loopbackEphemeral(), logger: logger, context: context)
        let endpoints = try await hub.start()
        report("TouchSync demo: a hub on \(endpoints.ingest), \(users) users x \(fingers) fingers drawing on board \"\(board)\" (seed \(seed), \(self.steps) input events)")

        // People drawing things: words, a spiral, a house and a sun; paced so
        // that the last strokes are still in progress when the demo ends.
        var simulator = SketchSession(seed: seed, users: users, fingers: fingers, events: self.steps)
        var agents: [TouchAgent] = []
        for (index, user) in simulator.users.enumerated() {
            var configuration = AgentConfiguration(board: board, hubEndpoint: endpoints.ingest)
            configuration.identity = user.rawValue
            configuration.clientName = "touchsync demo"
            let agent = try TouchAgent(configuration: configuration, context: context, logger: logger)
            agent.start()
            agent.setStyle(SessionSimulator.style(forUser: index))  // each user its own colour and width
            agents.append(agent)
        }

        // The scene ends when every figure is drawn: at the slowest pace that
        // takes a few thousand events, so a larger --steps is cut to it (said, not silent).
        var probe = simulator
        var steps = 0
        while steps < self.steps && !probe.isComplete {
            _ = probe.next()
            steps += 1
        }
        if steps < self.steps {
            report("  the scene is \(steps) input events long (every figure drawn by then): drawing \(steps), not \(self.steps)")
        }
        var spectator: BoardSubscriber? = nil
        var samples = 0
        var joinedAt: UInt64 = 0
        var stepsRun = 0
        var interrupted = false
        for step in 1...steps {
            // Cancelled (Ctrl-C): stop drawing; the agents' goodbyes below end their touches.
            if Task.isCancelled {
                interrupted = true
                report("  interrupted after event \(stepsRun) of \(steps): the users' touches still down are cancelled")
                break
            }
            stepsRun = step
            switch simulator.next() {
            case .frame(let user, let frame, _):
                samples += frame.changes.reduce(0) { $0 + $1.samples.count }
                agents[simulator.users.firstIndex(of: user)!].send(frame.changes, alive: frame.aliveTouches)
            case .clear(let user, let scope):
                agents[simulator.users.firstIndex(of: user)!].clear(scope)
            }
            // Paced a little, so the hub publishes while the spectator joins.
            if step % 20 == 0 { try? await Task.sleep(for: .milliseconds(1)) }
            if step == steps / 2 {
                let configuration = SubscriberConfiguration(
                    board: board, publishEndpoint: endpoints.publish, snapshotEndpoint: endpoints.snapshot)
                let subscriber = try BoardSubscriber(configuration: configuration, context: context, logger: logger)
                subscriber.start()
                spectator = subscriber
                for await event in subscriber.events {
                    if case .synced(let sequence, let digest, let chunks) = event {
                        joinedAt = sequence
                        report("  [spectator] joined after event \(step): snapshot at sequence \(sequence) in \(chunks) chunk(s), digest \(digest)")
                        break
                    }
                }
            }
            if step % max(1, steps / 4) == 0 {
                let status = await hub.boardState(board)
                report("  [hub] event \(step): sequence \(status?.sequence ?? 0), \(status?.liveTouchCount ?? 0) strokes in progress, \(status?.acceptedStrokes.count ?? 0) accepted")
            }
        }
        if interrupted {
            // Goodbyes: the hub cancels the touches still down at once.
            for agent in agents { await agent.stop(goodbye: true) }
        } else {
            for agent in agents {
                guard await agent.flush(timeout: .seconds(15)) else { throw CommandFailure("an agent's frames were not acknowledged") }
            }
        }
        guard let state = await hub.boardState(board) else { throw CommandFailure("the hub lost the board") }
        var result = DemoResult(
            hubDigest: state.digest, spectatorDigest: nil, hubSequence: state.sequence, samples: samples,
            acceptedStrokes: state.acceptedStrokes.count, spectatorJoinedAt: joinedAt, spectatorResyncs: 0,
            board: state, stepsRun: stepsRun, interrupted: interrupted)
        if let spectator {
            // Interrupted, the goodbyes' cancellations may still be on their way: no comparison.
            if !interrupted {
                _ = await spectator.waitUntil(sequence: state.sequence, timeout: .seconds(15))
                result.spectatorDigest = await spectator.replica()?.digest
                result.spectatorResyncs = spectator.status.resyncs
            }
            await spectator.stop()
        }
        for agent in agents { await agent.stop() }
        await hub.stop()

        report("  \(samples) samples sent; \(state.acceptedStrokes.count) strokes accepted, \(state.liveTouchCount) in progress")
        report("  scene fingerprint: \(result.sceneFingerprint) (each user's strokes in that user's order: fixed by the seed)")
        report("  hub digest:       \(result.hubDigest) at sequence \(result.hubSequence)")
        if interrupted {
            report("  interrupted: the spectator's board was not compared")
            return result
        }
        report("  spectator digest: \(result.spectatorDigest?.description ?? "none") (joined at sequence \(joinedAt))")
        report(
            result.converged
                ? "  converged: the spectator shows exactly the hub's board"
                : "  DIVERGED: the spectator's board differs from the hub's")
        return result
    }
}

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the embedded default: a hub, simulated users drawing, a spectator joining half-way.")

    @Option(parsing: .unconditional, help: "Simulated users (each its own agent connection).") var users = 3
    @Option(parsing: .unconditional, help: "Fingers per user.") var fingers = 3
    @Option(parsing: .unconditional, help: "Input events to simulate.") var steps = 3000
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Seed for the simulated fingers.",
            discussion: """
                The same seed draws the same strokes for every user (same samples, same \
                accepted and in-progress strokes, the same scene fingerprint). The order in \
                which the hub interleaves different users' input comes from real timing over \
                TCP, so the board digest, which covers that order, may differ between runs.
                """))
    var seed: UInt64 = 2026
    @Option(help: "Write the final board here (.svg; .png too when rsvg-convert is installed).")
    var image = Self.defaultImage
    static let defaultImage = "demo-output/demo-board.svg"
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (1...200).contains(users) else { throw ValidationError("--users must be 1 to 200") }
        guard (1...10).contains(fingers) else { throw ValidationError("--fingers must be 1 to 10") }
        guard steps >= 8 else { throw ValidationError("--steps must be at least 8") }
    }

    func run() async throws {
        var scene = DemoScene()
        scene.users = users
        scene.fingers = fingers
        scene.steps = steps
        scene.seed = seed
        let logger = logging.logger("touchsync.demo")
        let configured = scene
        let outcome = Mutex<Result<DemoResult, any Error>?>(nil)
        _ = try await untilInterrupted {
            do {
                let result = try await configured.run(logger: logger) { emit($0) }
                outcome.withLock { $0 = .success(result) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
        }
        guard let result = try outcome.withLock({ $0 })?.get() else { throw ExitCode.interrupted }
        var renderer = BoardRenderer()
        renderer.caption = "TouchSync demo: board \"\(scene.board)\" at batch \(result.hubSequence), digest \(result.hubDigest)"
        if image == Self.defaultImage {
            // The default's folder is ours to make; a folder the user names must exist.
            try FileManager.default.createDirectory(atPath: "demo-output", withIntermediateDirectories: true)
        }
        let written = try BoardImage.write(renderer.svg(of: result.board), to: image, png: true)
        emit("  board image: " + written.joined(separator: " and "))
        if image.hasSuffix(".svg") && BoardImage.rsvgConvert == nil { emit("  \(BoardImage.pngHint)") }
        if result.interrupted { throw ExitCode.interrupted }
        if !result.converged { throw ExitCode.failure }
    }
}
