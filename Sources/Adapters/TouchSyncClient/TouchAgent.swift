import TouchSyncAccess
import Foundation
import Logging
import Synchronization
import TouchSyncCore
import TouchSyncWire
import ZeroMQ

/// How an agent reaches its hub.
public struct AgentConfiguration: Sendable {
    /// The hub's ingest endpoint. Default `tcp://127.0.0.1:5570`.
    public var hubEndpoint = "tcp://127.0.0.1:5570"
    public var board: String
    /// Shown in the hub's logs.
    public var clientName = "touchsync-agent"
    /// The connection's routing id, which a plain-text hub uses as this
    /// user's namespace (a claim: anyone may make it). Default: `agent-` and
    /// 12 random letters, new per agent. With `curve`, the hub names the
    /// namespace after the key's user instead, and this is only a label.
    public var identity: String? = nil
    /// Send a heartbeat after this long with nothing else to send. Default 1 s.
    public var heartbeatInterval: Duration = .seconds(1)
    /// No word from the hub for this long means the connection is gone:
    /// reconnect and resend. Default 3 s.
    public var hubTimeout: Duration = .seconds(3)
    /// Reconnect delays: doubling from the lower bound up to the upper, each with ±50% jitter.
    public var reconnectDelay: ClosedRange<Duration> = .milliseconds(100) ... .seconds(5)
    /// Numbered messages sent and not yet acknowledged, at most. Beyond it
    /// messages wait and frames coalesce into fewer, larger ones, so a hub
    /// that falls behind sees a bounded queue from each agent and latency,
    /// not loss. Default 32 (at 120 Hz, a quarter second of frames).
    public var maxInFlight = 32
    /// CURVE keys for an authenticated hub (its own pair, and the hub's
    /// public key). The hub then names this agent's namespace after the
    /// user its key belongs to; `identity` is only a label, and each
    /// connection uses a random routing id. Default nil: plain text.
    public var curve: CurveClientKeys? = nil
    /// How long a connection's handshake may take before libzmq drops it
    /// (a wrong hub key shows as handshakes that never finish). Default 5 s.
    public var handshakeTimeout: Duration = .seconds(5)
    /// Watch each connection's handshake (a socket monitor: two more sockets
    /// of the context), so a refused key or a CURVE mismatch becomes a clear
    /// `helloRefusal`. Default true; a load run of thousands of agents
    /// watches one of them.
    public var monitorsHandshake = true
    /// For a gateway on an authenticated hub (its key's entry has `acts_for`):
    /// act as namespace `actAs` for the browser user whose invitation
    /// `token` this is. The hub checks both. Default nil.
    public var delegation: (actAs: String, token: String)? = nil
    /// The frames' wire format (docs/protocol.md, "Wire format v2 (agents)"): v2 by default; a hub
    /// that speaks only v1 is answered in v1 (the agent falls back by itself).
    public var wireFormat: WireFormat = .v2
    /// Share one connection to the hub with the other multiplexed agents of
    /// the same `AgentHost` and hub endpoint, on a channel of its own
    /// (docs/protocol.md, "Multiplexed connections"): no socket and no
    /// heartbeats of its own. The hub must speak multiplexed connections; on
    /// a plain-text hub `identity` is then the connection's routing id
    /// (shared by its agents) and the namespace comes from `delegation`'s
    /// `actAs`. Only through an `AgentHost`. Default false.
    public var multiplexed = false
    /// The most the session asks to do on its board, below what the hub
    /// grants (docs/protocol.md, `Hello.role_limit`). A gateway's guest tabs
    /// on a plain-text hub say `.draw`, so the hub refuses their board clears
    /// and erasing others' strokes. Default nil: what the hub grants.
    public var roleLimit: Role? = nil
    /// A multiplexed agent's shared connection's routing id on a plain-text
    /// hub (the first agent of a link names it). Default: `mux-` and 12 random letters.
    public var connectionIdentity: String? = nil

    public init(board: String, hubEndpoint: String = "tcp://127.0.0.1:5570") {
        self.board = board
        self.hubEndpoint = hubEndpoint
    }
}

/// One sample as UIKit reports it: points, seconds, radians.
public struct TouchPoint: Sendable, Equatable {
    public var x: Double
    public var y: Double
    /// Seconds, the event clock (UIKit's `timestamp`).
    public var timestamp: Double
    public var force: Double?
    public var azimuth: Double?
    public var altitude: Double?
    /// UIKit's `estimationUpdateIndex`, when some values are estimates.
    public var estimationIndex: UInt32?

    public init(
        x: Double, y: Double, timestamp: Double, force: Double? = nil, azimuth: Double? = nil, altitude: Double? = nil,
        estimationIndex: UInt32? = nil
    ) {
        self.x = x
        self.y = y
        self.timestamp = timestamp
        self.force = force
        self.azimuth = azimuth
        self.altitude = altitude
        self.estimationIndex = estimationIndex
    }
}

/// One touch of a UIKit callback: its id (stable while the finger is down),
/// `event.coalescedTouches(for:)` (the event's own sample last) and
/// `event.predictedTouches(for:)`.
public struct TouchInput: Sendable {
    public var id: TouchID
    public var coalesced: [TouchPoint]
    public var predicted: [TouchPoint]

    public init(id: TouchID, coalesced: [TouchPoint], predicted: [TouchPoint] = []) {
        self.id = id
        self.coalesced = coalesced
        self.predicted = predicted
    }
}

/// What happened to an agent's connection and messages.
public enum AgentEvent: Sendable, Equatable {
    /// The hub accepted the connection: our namespace and what it had applied.
    case welcomed(user: String, appliedThrough: UInt64)
    /// The hub refused message `sequence` (nothing of it was applied).
    /// `posted`: which post it was, counted as `postedCount` counts (1: the
    /// first), when the message held one post (a frame merged with others
    /// holds several: nil).
    case refused(sequence: UInt64, code: ErrorCode?, message: String, posted: UInt64?)
    /// The hub went quiet; the agent reconnects and will resend.
    case disconnected
    /// The hub is behind: our messages are queued, not lost; the agent keeps
    /// the connection and waits at least `retryAfter` before doubting it.
    case busy(retryAfter: Duration)
    /// The hub acknowledged more: `through` posted messages so far (as `acknowledged.through`).
    case acknowledged(through: UInt64)
}

/// An agent: forwards one app's touch events to a hub, shaped like UIKit's
/// touch handling, so a view forwards its callbacks in a few lines:
///
/// ```swift
/// override func touchesMoved(_ touches: Set<UITouch>, with event: UIEvent?) {
///     try? agent.touchesMoved(touches.map { TouchInput(id: id(for: $0), coalesced: …, predicted: …) })
/// }
/// ```
///
/// Every call becomes one numbered frame carrying the set of touches still
/// down. Frames stay buffered until the hub acknowledges them and are resent
/// after a reconnect (the hub drops what it already applied), so a dropped
/// connection loses nothing and duplicates nothing. A thread owned by the
/// agent does all socket work; every method here is safe from any thread or task.
public final class TouchAgent: Sendable {
    public let configuration: AgentConfiguration
    public let identity: String
    /// Connection events and refusals, as they happen (the newest 1,000 are kept if not read).
    public let events: AsyncStream<AgentEvent>
    private let eventSink: AsyncStream<AgentEvent>.Continuation
    /// Where events go: `eventSink`, or the `onEvent` given at init.
    private let report: @Sendable (AgentEvent) -> Void
    /// Where the agent's connection lives: a thread of its own, or a place on a host's driver.
    private enum Placement: Sendable {
        case own(SocketThread, Mailbox<AgentCommand>)
        case hosted(AgentHost, HostedPlace)
    }
    /// A hosted agent's driver and index there (nil before `start` and after `stop`).
    private final class HostedPlace: Sendable {
        let value = Mutex<(driver: Int, index: Int)?>(nil)
    }
    private let placement: Placement
    private let context: ZMQContext
    private let logger: Logger
    private let shared = AgentShared()

    /// - Parameters:
    ///   - host: run on `host`'s driver threads instead of a thread of
    ///     this agent's own (a gateway with a thousand tabs needs a few threads,
    ///     not a thousand); such an agent connects when created.
    ///   - onEvent: called with each event on the agent's thread, instead of
    ///     `events` (which then ends at once): no task or buffer per agent. It
    ///     must not block.
    public init(
        configuration: AgentConfiguration, context: ZMQContext? = nil, logger: Logger, host: AgentHost? = nil,
        onEvent: (@Sendable (AgentEvent) -> Void)? = nil
    ) throws {
        self.configuration = configuration
        identity = configuration.identity ?? "agent-" + String((0..<12).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement()! })
        self.context = try context ?? ZMQContext()
        self.logger = logger
        (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1000))
        if onEvent != nil { eventSink.finish() }
        let report: @Sendable (AgentEvent) -> Void = onEvent ?? { [eventSink] in eventSink.yield($0) }
        self.report = report
        if let host {
            // Placed at once, so nothing posted before `start` is lost (it connects now, not at `start`).
            let place = HostedPlace()
            let (identity, shared) = (identity, shared)
            place.value.withLock { place in
                place = host.attach(configuration, identity: identity, shared: shared, report: report)
            }
            placement = .hosted(host, place)
        } else {
            placement = .own(SocketThread(name: "touchsync-agent"), try Mailbox())
        }
    }

    /// Connects (in the background: calls made before the hub answers are kept and sent then).
    public func start() {
        let (configuration, identity, context, report, shared, logger) = (configuration, identity, context, report, shared, logger)
        switch placement {
        case .own(let thread, let mailbox):
            thread.start {
                // Built here, so the connection and its socket belong to this thread only.
                let connection = AgentConnection(
                    configuration: configuration, identity: identity, context: context, shared: shared, logger: logger,
                    report: report)
                AgentDriver(connections: [connection], mailbox: mailbox).run()
            }
        case .hosted:
            break  // placed on its host's driver when created
        }
    }

    /// Stops at once and closes the socket; messages not yet acknowledged are
    /// dropped. Call `flush` first to be sure everything arrived.
    /// - Parameter goodbye: tell the hub this agent leaves (default), so its
    ///   touches still down are cancelled at once; false leaves as a network
    ///   failure would (the hub keeps them until its abandon time-out).
    public func stop(goodbye: Bool = true) async {
        switch placement {
        case .own(let thread, let mailbox):
            mailbox.post(.stop(goodbye: goodbye))
            await thread.finished()
        case .hosted(let host, let place):
            let placed = place.value.withLock { place in
                defer { place = nil }
                return place
            }
            if let (driver, index) = placed {
                // Returns once the driver said goodbye and closed the connection, as a thread of its own would.
                await withCheckedContinuation { (closed: CheckedContinuation<Void, Never>) in
                    host.detach(driver: driver, index: index, goodbye: goodbye) { closed.resume() }
                }
            }
        }
        eventSink.finish()
    }

    /// Posts `command` for this agent's connection (dropped before `start` or after `stop` on a host).
    private func post(_ command: (Int) -> AgentCommand) {
        switch placement {
        case .own(_, let mailbox): mailbox.post(command(0))
        case .hosted(let host, let place):
            place.value.withLock { place in
                guard let (driver, index) = place else { return }
                host.mailbox(of: driver).post(command(index))
            }
        }
    }

    // MARK: UIKit-shaped input

    public func touchesBegan(_ touches: [TouchInput]) throws(SampleError) {
        try send(touches, phase: .began)
    }

    public func touchesMoved(_ touches: [TouchInput]) throws(SampleError) {
        try send(touches, phase: .moved)
    }

    /// Touches that are down but did not move (predictions may still change).
    public func touchesStationary(_ touches: [TouchInput]) throws(SampleError) {
        try send(touches, phase: .stationary)
    }

    public func touchesEnded(_ touches: [TouchInput]) throws(SampleError) {
        try send(touches, phase: .ended)
    }

    public func touchesCancelled(_ touchIDs: [TouchID]) {
        send(touchIDs.map { TouchChange(touch: $0, phase: .cancelled) })
    }

    /// Final values for samples sent with an estimation index
    /// (`touchesEstimatedPropertiesUpdated`). Position and time must be the
    /// original ones; the touch must still be down.
    public func touchesEstimatedPropertiesUpdated(_ updates: [(touch: TouchID, point: TouchPoint)]) throws(SampleError) {
        var changes: [TouchChange] = []
        for (touch, point) in updates {
            let sample = try Self.quantize(point, coalesced: false)
            if let index = changes.firstIndex(where: { $0.touch == touch }) {
                changes[index].amendments.append(sample)
            } else {
                changes.append(TouchChange(touch: touch, phase: .stationary, amendments: [sample]))
            }
        }
        send(changes)
    }

    /// The style of strokes begun from now on.
    public func setStyle(_ style: StrokeStyle) {
        var message = Touchsync_V1_SetStyle()
        message.style = style.proto
        postNumbered(.style(message))
    }

    /// Removes this user's most recent accepted stroke still on the board.
    public func undo() { postNumbered(.undo(Touchsync_V1_Undo())) }

    /// Puts back this user's most recently undone stroke (until it accepts a new one).
    public func redo() { postNumbered(.redo(Touchsync_V1_Redo())) }

    /// Removes accepted strokes by id: this user's own, or anyone's with the right to clear the board.
    public func erase(_ strokes: [StrokeID]) {
        var message = Touchsync_V1_Erase()
        message.strokeIds = strokes.map(\.rawValue)
        postNumbered(.erase(message))
    }

    /// Moves, scales, recolours, deletes or copies accepted strokes as one
    /// operation (undone by one `undo`): the same strokes `erase` may name.
    public func edit(_ edit: StrokeEdit) {
        var message = Touchsync_V1_Edit()
        message.strokeIds = edit.strokes.map(\.rawValue)
        func transform(_ transform: StrokeTransform) -> Touchsync_V1_Transform {
            var proto = Touchsync_V1_Transform()
            proto.offsetX = transform.offsetX
            proto.offsetY = transform.offsetY
            proto.scale = transform.scale == 1 ? 0 : Float(transform.scale)
            proto.originX = transform.originX
            proto.originY = transform.originY
            return proto
        }
        switch edit.change {
        case .transform(let move): message.change = .transform(transform(move))
        case .duplicate(let move): message.change = .duplicate(transform(move))
        case .recolour(let rgba): message.change = .rgba(rgba)
        case .delete: message.change = .delete(true)
        }
        postNumbered(.edit(message))
    }

    /// Removes accepted strokes: this user's, or the whole board's.
    public func clear(_ scope: ClearScope) {
        var message = Touchsync_V1_Clear()
        message.scope = scope == .own ? .own : .board
        postNumbered(.clear(message))
    }

    /// Sends already-quantized changes as one frame (any phases, any order).
    /// The frame's alive set is the touches this agent has down afterwards;
    /// pass `alive` to state it instead (touches missing from it are cancelled
    /// by the hub, and forgotten here).
    public func send(_ changes: [TouchChange], alive: [TouchID]? = nil) {
        // Counted and posted under one lock, so the driver numbers messages in posting order.
        shared.progress.withLock { progress in
            progress.posted += 1
            post { .frame(connection: $0, changes: changes, alive: alive) }
        }
    }

    private func postNumbered(_ body: Touchsync_V1_AgentMessage.OneOf_Body) {
        shared.progress.withLock { progress in
            progress.posted += 1
            post { .numbered(connection: $0, body) }
        }
    }

    private func send(_ touches: [TouchInput], phase: TouchPhase) throws(SampleError) {
        var changes: [TouchChange] = []
        changes.reserveCapacity(touches.count)
        for touch in touches {
            var samples: [Sample] = []
            for (index, point) in touch.coalesced.enumerated() {
                samples.append(try Self.quantize(point, coalesced: index < touch.coalesced.count - 1))
            }
            var predicted: [Sample] = []
            for point in touch.predicted { predicted.append(try Self.quantize(point, coalesced: false)) }
            changes.append(TouchChange(touch: touch.id, phase: phase, samples: samples, predicted: predicted))
        }
        send(changes)
    }

    static func quantize(_ point: TouchPoint, coalesced: Bool) throws(SampleError) -> Sample {
        try Sample(
            x: point.x, y: point.y, timestamp: point.timestamp, force: point.force, azimuth: point.azimuth,
            altitude: point.altitude, coalesced: coalesced, estimationIndex: point.estimationIndex)
    }

    // MARK: Progress

    /// Messages (frames, styles, clears) the hub has acknowledged, and those
    /// sent or waiting to be, counted as posted (coalesced frames count each).
    public var acknowledged: (through: UInt64, sent: UInt64) {
        shared.progress.withLock { ($0.acknowledged, $0.taken) }
    }

    /// Messages posted so far (every call that sends counts one, coalesced or
    /// not): once `acknowledged.through` reaches this count, the hub has
    /// acknowledged everything posted up to now.
    public var postedCount: UInt64 { shared.progress.withLock { $0.posted } }

    /// Frames that went out merged into an earlier one (the hub was behind), and BUSY notices heard.
    public var backpressure: (coalesced: UInt64, busyNotices: UInt64) {
        shared.progress.withLock { ($0.coalesced, $0.busyNotices) }
    }

    /// Times this agent followed its board to another hub (the board moved:
    /// a failover, or a cluster or board store naming its owner).
    public var hubMoves: UInt64 { shared.progress.withLock { $0.hubMoves } }

    /// Bytes this agent has sent, resends and heartbeats included.
    public var bytesSent: Int { shared.progress.withLock { $0.bytesSent } }

    /// Waits until the hub has acknowledged every message sent so far; false on time-out.
    public func flush(timeout: Duration = .seconds(5)) async -> Bool {
        await shared.flush(timeout: timeout)
    }

    /// Waits until the hub welcomes this agent (true), refuses it for good
    /// (`helloRefusal`: a refused key, a board it may not draw on) or `timeout` passes.
    public func waitUntilWelcomed(timeout: Duration) async -> Bool {
        await shared.waitUntilWelcomed(timeout: timeout)
    }

    /// The namespace (user) the hub gave this agent when it last welcomed it:
    /// the identity on a plain-text hub, the key's user on an authenticated one.
    public var welcomedAs: String? { shared.welcomedAs.withLock { $0 } }

    /// Why the hub refused this agent's hello (nil: it did not, or it has welcomed it since).
    public var helloRefusal: String? { shared.helloRefusal.withLock { $0 } }

    /// Numbered messages sent and not yet acknowledged by the hub (kept, and resent after a reconnect).
    public var unacknowledgedCount: Int {
        shared.progress.withLock { Int($0.posted - min($0.posted, $0.acknowledged)) }
    }
}
