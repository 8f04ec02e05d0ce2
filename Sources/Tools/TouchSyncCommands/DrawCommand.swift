import ArgumentParser
import Synchronization
import Foundation
import Logging
import TouchSyncLoad
import TouchSyncClient
import TouchSyncCore

struct DrawCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "draw",
        abstract: "Draw a scripted multi-touch scene on a board, then exit.",
        discussion: """
            A few fingers touch down one after another and draw a spiral, a wave and \
            circles at 120 Hz (two coalesced samples per event, one predicted), while \
            a palm touches down and is cancelled. Exits once the hub has acknowledged \
            everything, or with an error if it does not: the last acknowledgements are \
            waited for --ack-wait seconds at a time, again while more come or the board \
            moves to another hub, up to 60 s in all (or --ack-wait if longer).
            """)

    @Option(help: "The board to draw on (created if new).") var board: String
    @OptionGroup var hub: HubAddressOptions
    @Option(help: "The identity (user namespace) to draw as; random by default.") var identity: String?
    @Option(parsing: .unconditional, help: "Fingers drawing at once (1 to 10).") var fingers = 3
    @Option(parsing: .unconditional, help: "Seconds the scene lasts.") var seconds = 2.0
    @Flag(help: "Send as fast as possible instead of in real time.") var fast = false
    @Option(parsing: .unconditional, help: "After the scene, undo this many of this user's strokes.") var undo = 0
    @Option(parsing: .unconditional, help: "Then redo this many of them.") var redo = 0
    @Option(parsing: .unconditional, help: "Seconds without progress to wait for the hub's last acknowledgements (1 to 600).")
    var ackWait = 5.0
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateBoard(board)
        guard (1...10).contains(fingers) else { throw ValidationError("--fingers must be 1 to 10") }
        guard seconds > 0 && seconds <= 600 else { throw ValidationError("--seconds must be above 0 and at most 600") }
        if let identity, identity.isEmpty || identity.utf8.count > 255 {
            throw ValidationError("--identity must be 1 to 255 bytes")
        }
        guard undo >= 0, redo >= 0, redo <= undo else { throw ValidationError("--undo and --redo are counts, and --redo at most --undo") }
        guard ackWait >= 1 && ackWait <= 600 else { throw ValidationError("--ack-wait must be 1 to 600 seconds") }
    }

    /// Waits for the hub to acknowledge everything, for as long as it makes
    /// progress: a window of `--ack-wait` in which more is acknowledged, or in
    /// which the agent follows its board to another hub (which then takes what
    /// was not acknowledged), earns another, up to 60 s in all (or `--ack-wait`).
    /// A fixed 5 s cut a failover short in the middle.
    private func waitForAcknowledgements(of agent: TouchAgent) async -> Bool {
        let window = Duration(secondsValue: ackWait)
        let deadline = ContinuousClock.now + max(.seconds(60), window)
        while true {
            let before = (agent.acknowledged.through, agent.hubMoves)
            if await agent.flush(timeout: window) { return true }
            let after = (agent.acknowledged.through, agent.hubMoves)
            if after == before || ContinuousClock.now >= deadline || Task.isCancelled { return false }
        }
    }

    func run() async throws {
        let hub = try self.hub.resolved(board: board)
        var configuration = AgentConfiguration(board: board, hubEndpoint: hub.ingest)
        configuration.curve = try hub.keys.curve()
        configuration.identity = identity
        configuration.clientName = "touchsync draw"
        let agent = try TouchAgent(configuration: configuration, logger: logging.logger("touchsync.draw"))
        agent.start()
        let scene = ScriptedScene(fingers: fingers, seconds: seconds)
        let refusals = Task {
            var refused: [String] = []
            for await event in agent.events {
                // OUT_OF_ORDER and NOT_WELCOMED refuse nothing: they ask for a resend (or a
                // hello), which the agent does; the acknowledgements say whether all arrived.
                if case .refused(let sequence, let code, let message, _) = event, code != .outOfOrder, code != .notWelcomed {
                    refused.append("message \(sequence): \(code.map { "\($0)" } ?? "?"): \(message)")
                }
            }
            return refused
        }
        // Refused at once (a refused key, a board this user may only watch): say so before drawing.
        guard await agent.waitUntilWelcomed(timeout: .seconds(10)) else {
            await agent.stop(goodbye: false)
            if let refusal = agent.helloRefusal { throw CommandFailure("the hub at \(hub.ingest) refused this agent: \(refusal)") }
            throw CommandFailure("no hub answered at \(hub.ingest) within 10 s: is it running? (nothing was drawn)")
        }
        emit("drawing on board \"\(board)\" at \(hub.ingest) as \(agent.welcomedAs ?? agent.identity)\(configuration.curve == nil ? "" : " (authenticated)"): \(fingers) finger(s) and a palm, \(seconds) s")
        agent.setStyle(StrokeStyle(rgba: 0x1565_C0FF, width: 5 * 64))
        // Touches down now, so that Ctrl-C can end them (cancelled: the hub drops their strokes).
        let down = Mutex(Set<TouchID>())
        let fast = self.fast
        let interrupted = try await untilInterrupted {
            let start = ContinuousClock.now
            for event in scene.events {
                if !fast {
                    let due = start + Duration(secondsValue: event.time)
                    if due > ContinuousClock.now { try await Task.sleep(until: due) }
                }
                try Task.checkCancellation()
                switch event.phase {
                case .began: try agent.touchesBegan(event.touches)
                case .moved: try agent.touchesMoved(event.touches)
                case .stationary: try agent.touchesStationary(event.touches)
                case .ended: try agent.touchesEnded(event.touches)
                case .cancelled: agent.touchesCancelled(event.touches.map(\.id))
                }
                down.withLock { down in
                    switch event.phase {
                    case .began: down.formUnion(event.touches.map(\.id))
                    case .ended, .cancelled: down.subtract(event.touches.map(\.id))
                    case .moved, .stationary: break
                    }
                }
            }
        }
        if interrupted {
            let live = down.withLock { Array($0).sorted() }
            if !live.isEmpty { agent.touchesCancelled(live) }
            let acknowledged = await agent.flush(timeout: .milliseconds(700))
            await agent.stop()
            emit(
                "interrupted: \(live.count) touch(es) still down cancelled; "
                    + (acknowledged ? "every message sent was acknowledged" : "\(agent.unacknowledgedCount) message(s) not acknowledged"))
            throw ExitCode.interrupted
        }
        for _ in 0..<undo { agent.undo() }
        for _ in 0..<redo { agent.redo() }
        let acknowledged = await waitForAcknowledgements(of: agent)
        let unacknowledged = agent.unacknowledgedCount
        if !acknowledged, let refusal = agent.helloRefusal {
            await agent.stop()
            throw CommandFailure("the hub at \(hub.ingest) refused this agent: \(refusal)")
        }
        await agent.stop()
        var refused = await refusals.value
        let storageFailed = refused.contains { $0.contains("storageUnavailable") }
        if storageFailed && !acknowledged {
            throw CommandFailure(
                "the hub at \(hub.ingest) cannot store board \(board)'s frames (its journal for this board failed: see the hub's log): \(unacknowledged) message(s) of this scene "
                    + "were not acknowledged, so they are not safe; they were kept and resent until now, and are dropped as draw exits")
        }
        if storageFailed {
            // The journal came back within the wait: everything is acknowledged, so durable.
            refused.removeAll { $0.contains("storageUnavailable") }
            emit("the hub's journal for board \(board) failed for a while, then stored everything")
        }
        for line in refused { emit("refused: \(line)") }
        guard acknowledged else {
            throw CommandFailure("the hub at \(hub.ingest) acknowledged nothing more of the scene for \(ackWait) s: is it running? (--ack-wait waits longer)")
        }
        emit(
            "done: \(scene.strokes) strokes (\(scene.samples) samples) and 1 cancelled touch"
                + (undo + redo > 0 ? ", \(undo) undone, \(redo) redone" : "") + ", every message acknowledged"
                + (refused.isEmpty ? "" : ", \(refused.count) refused"))
        if !refused.isEmpty { throw ExitCode.failure }
    }
}

/// The scripted scene `draw` sends: UIKit-shaped callbacks with times.
public struct ScriptedScene: Sendable {
    public struct Event: Sendable {
        public var time: Double
        public var phase: TouchPhase
        public var touches: [TouchInput]
    }

    public private(set) var events: [Event] = []
    public private(set) var samples = 0
    /// Fingers that touch down (in a very short scene the last ones have no time to).
    public private(set) var strokes = 0

    public init(fingers: Int, seconds: Double, hz: Double = 120) {
        let step = 1 / hz
        let palm: TouchID = 99
        var time = 0.0
        var down = Set<TouchID>()
        var palmDown = false
        var lastTime = 0.0
        while time <= seconds + 1e-9 {
            var began: [TouchInput] = [], moved: [TouchInput] = [], ended: [TouchInput] = []
            for finger in 0..<fingers {
                let id = TouchID(finger + 1)
                // Fingers touch down one after another and lift in turn, all within the scene
                // (touch-down in the first 30%, lift-off in the last 20%), whatever its length.
                let share = Double(finger) / Double(fingers)
                let touchDown = seconds * 0.3 * share
                let liftOff = seconds - seconds * 0.2 * share
                guard time >= touchDown && time <= liftOff + 1e-9 else { continue }
                let input = TouchInput(
                    id: id,
                    coalesced: [Self.point(finger, time - step / 2), Self.point(finger, time)],
                    predicted: [Self.point(finger, time + step)])
                if !down.contains(id) {
                    down.insert(id)
                    strokes += 1
                    began.append(TouchInput(id: id, coalesced: [Self.point(finger, time)]))
                    samples += 1
                } else if time + step > liftOff + 1e-9 {
                    down.remove(id)
                    ended.append(TouchInput(id: id, coalesced: input.coalesced))
                    samples += 2
                } else {
                    moved.append(input)
                    samples += 2
                }
            }
            // A palm rests on the screen for a moment; the system cancels it (palm rejection).
            if abs(time - min(0.5, seconds / 3)) < step / 2 && !palmDown {
                began.append(TouchInput(id: palm, coalesced: [TouchPoint(x: 900, y: 900, timestamp: time + 1)]))
                palmDown = true
            }
            if !began.isEmpty { events.append(Event(time: time, phase: .began, touches: began)) }
            if !moved.isEmpty { events.append(Event(time: time, phase: .moved, touches: moved)) }
            if !ended.isEmpty { events.append(Event(time: time, phase: .ended, touches: ended)) }
            if abs(time - min(0.8, seconds / 2)) < step / 2 && palmDown {
                events.append(Event(time: time, phase: .cancelled, touches: [TouchInput(id: palm, coalesced: [])]))
                palmDown = false
            }
            lastTime = time
            time += step
        }
        // A scene ends every touch it began, however short it is: fingers lift, the palm is rejected.
        if !down.isEmpty {
            let lifting = down.sorted().map { id in
                TouchInput(id: id, coalesced: [Self.point(Int(id) - 1, lastTime + step / 2)])
            }
            events.append(Event(time: lastTime, phase: .ended, touches: lifting))
            samples += lifting.count
        }
        if palmDown { events.append(Event(time: lastTime, phase: .cancelled, touches: [TouchInput(id: palm, coalesced: [])])) }
    }

    /// Finger 0 draws a spiral, 1 a wave, the others circles of growing size.
    static func point(_ finger: Int, _ time: Double) -> TouchPoint {
        let originX = 250.0 + Double(finger) * 320
        let originY = 400.0
        let x: Double, y: Double
        switch finger {
        case 0:
            let radius = 20 + 40 * time
            (x, y) = (originX + radius * cos(4 * time), originY + radius * sin(4 * time))
        case 1:
            (x, y) = (originX - 120 + 120 * time, originY + 80 * sin(6 * time))
        default:
            let radius = 60.0 + 15 * Double(finger)
            (x, y) = (originX + radius * cos(3 * time), originY + radius * sin(3 * time))
        }
        // UIKit timestamps count from boot, not from zero.
        return TouchPoint(x: x, y: y, timestamp: 1 + time, force: nil)
    }
}
