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
    /// The connection's routing id, which the hub uses as this user's
    /// namespace. Default: `agent-` and 12 random letters, new per agent.
    /// (Anyone may claim any identity until authentication lands.)
    public var identity: String? = nil
    /// Send a heartbeat after this long with nothing else to send. Default 1 s.
    public var heartbeatInterval: Duration = .seconds(1)
    /// No word from the hub for this long means the connection is gone:
    /// reconnect and resend. Default 3 s.
    public var hubTimeout: Duration = .seconds(3)
    /// Reconnect delays: doubling from the lower bound up to the upper, each with ±50% jitter.
    public var reconnectDelay: ClosedRange<Duration> = .milliseconds(100) ... .seconds(5)

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
    case refused(sequence: UInt64, code: ErrorCode?, message: String)
    /// The hub went quiet; the agent reconnects and will resend.
    case disconnected
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
    private let mailbox: Mailbox<AgentCommand>
    private let thread: SocketThread
    private let context: ZMQContext
    private let logger: Logger
    /// Touches down, as the frames sent so far leave them; guarded together
    /// with posting so frames carry alive sets in call order.
    private let liveTouches = Mutex<Set<TouchID>>([])
    private let shared = AgentShared()

    public init(configuration: AgentConfiguration, context: ZMQContext? = nil, logger: Logger) throws {
        self.configuration = configuration
        identity = configuration.identity ?? "agent-" + String((0..<12).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement()! })
        self.context = try context ?? ZMQContext()
        self.logger = logger
        mailbox = try Mailbox()
        (events, eventSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1000))
        thread = SocketThread(name: "touchsync-agent")
    }

    /// Connects (in the background: calls made before the hub answers are kept and sent then).
    public func start() {
        let (configuration, identity, context, mailbox, events, shared, logger) =
            (configuration, identity, context, mailbox, eventSink, shared, logger)
        thread.start {
            // Built here, so the loop and its socket belong to this thread only.
            AgentLoop(
                configuration: configuration, identity: identity, context: context, mailbox: mailbox, events: events,
                shared: shared, logger: logger
            ).run()
        }
    }

    /// Stops at once and closes the socket; messages not yet acknowledged are
    /// dropped. Call `flush` first to be sure everything arrived.
    public func stop() async {
        mailbox.post(.stop)
        await thread.finished()
        eventSink.finish()
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
        liveTouches.withLock { live in
            for change in changes {
                switch change.phase {
                case .began: live.insert(change.touch)
                case .ended, .cancelled: live.remove(change.touch)
                case .moved, .stationary: break
                }
            }
            if let alive { live = Set(alive) }
            let frame = TouchFrame(changes: changes, aliveTouches: alive ?? Array(live))
            postNumbered(.frame(frame.proto))
        }
    }

    private func postNumbered(_ body: Touchsync_V1_AgentMessage.OneOf_Body) {
        shared.progress.withLock { $0.posted += 1 }
        mailbox.post(.numbered(body))
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

    /// The highest message number the hub has acknowledged, and the last one sent.
    public var acknowledged: (through: UInt64, sent: UInt64) {
        shared.progress.withLock { ($0.acknowledged, $0.numbered) }
    }

    /// Bytes this agent has sent, resends and heartbeats included.
    public var bytesSent: Int { shared.progress.withLock { $0.bytesSent } }

    /// Waits until the hub has acknowledged every message sent so far; false on time-out.
    public func flush(timeout: Duration = .seconds(5)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        let target = shared.progress.withLock { $0.posted }
        while ContinuousClock.now < deadline {
            if shared.progress.withLock({ $0.acknowledged >= target }) { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return shared.progress.withLock { $0.acknowledged >= target }
    }
}

struct AgentProgress: Sendable {
    /// Numbered messages posted by callers (the agent thread numbers them in this order).
    var posted: UInt64 = 0
    /// Numbered messages the agent thread has numbered and queued.
    var numbered: UInt64 = 0
    var acknowledged: UInt64 = 0
    /// Bytes handed to the socket, resends and heartbeats included.
    var bytesSent = 0
}

/// State the agent's callers and its thread share.
final class AgentShared: Sendable {
    let progress = Mutex<AgentProgress>(AgentProgress())
}

enum AgentCommand: Sendable {
    case numbered(Touchsync_V1_AgentMessage.OneOf_Body)
    case stop
}

/// The agent's thread: owns the DEALER, numbers messages, keeps them until
/// acknowledged, reconnects and resends.
final class AgentLoop {
    private let configuration: AgentConfiguration
    private let identity: String
    private let context: ZMQContext
    private let mailbox: Mailbox<AgentCommand>
    private let events: AsyncStream<AgentEvent>.Continuation
    private let shared: AgentShared
    private let logger: Logger
    private let clock = ContinuousClock()

    private var socket: ZMQSocket? = nil
    private var welcomed = false
    private var nextSequence: UInt64 = 1
    private var unacknowledged: [(sequence: UInt64, bytes: [UInt8])] = []
    private var acknowledged: UInt64 = 0
    private var lastSent: ContinuousClock.Instant
    private var lastHeard: ContinuousClock.Instant
    /// When the hub last acknowledged something new, or when the oldest
    /// message now waiting for an ack was queued.
    private var lastProgress: ContinuousClock.Instant
    private var reconnectAt: ContinuousClock.Instant
    private var attempt = 0
    private let reply = ZMQMessage()

    init(
        configuration: AgentConfiguration, identity: String, context: ZMQContext, mailbox: Mailbox<AgentCommand>,
        events: AsyncStream<AgentEvent>.Continuation, shared: AgentShared, logger: Logger
    ) {
        self.configuration = configuration
        self.identity = identity
        self.context = context
        self.mailbox = mailbox
        self.events = events
        self.shared = shared
        self.logger = logger
        let now = clock.now
        lastSent = now
        lastHeard = now
        lastProgress = now
        reconnectAt = now
    }

    func run() {
        defer {
            socket?.close()
            _ = mailbox.close()
        }
        while true {
            let now = clock.now
            if socket == nil && now >= reconnectAt { connect() }
            var poller = ZMQPoller()
            let mailboxIndex = poller.add(fileDescriptor: mailbox.fileDescriptor)
            let socketIndex = socket.flatMap { try? poller.add($0) }
            do {
                try poller.poll(timeoutMilliseconds: pollTimeout())
            } catch {
                if error.isTerminated { return }
                continue
            }
            if poller.isReadable(mailboxIndex) {
                for command in mailbox.drain() {
                    switch command {
                    case .stop: return
                    case .numbered(let body): queue(body)
                    }
                }
            }
            if let socketIndex, poller.isReadable(socketIndex) { receiveReplies() }
            runTimers()
        }
    }

    private func pollTimeout() -> Int {
        let now = clock.now
        var deadline =
            socket == nil
            ? reconnectAt
            : min(lastSent + configuration.heartbeatInterval, lastHeard + configuration.hubTimeout)
        if socket != nil && !unacknowledged.isEmpty { deadline = min(deadline, lastProgress + configuration.hubTimeout) }
        if deadline < now { deadline = now }
        let (seconds, attoseconds) = (deadline - now).components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000) + 1
    }

    private func connect() {
        do {
            let socket = try ZMQSocket(context, type: .dealer)
            try socket.setRoutingID(Array(identity.utf8))
            try socket.setSendHighWaterMark(100_000)
            try socket.connect(configuration.hubEndpoint)
            self.socket = socket
            var hello = Touchsync_V1_Hello()
            hello.protocolVersion = touchSyncProtocolVersion
            hello.board = configuration.board
            hello.clientName = configuration.clientName
            hello.resumeAfter = acknowledged
            var message = Touchsync_V1_AgentMessage()
            message.hello = hello
            transmit(WireCodec.encode(message))
            lastHeard = clock.now
        } catch {
            logger.warning("agent cannot connect", metadata: ["endpoint": "\(configuration.hubEndpoint)", "error": "\(error)"])
            scheduleReconnect()
        }
    }

    private func scheduleReconnect() {
        socket?.close()
        socket = nil
        welcomed = false
        let lower = configuration.reconnectDelay.lowerBound
        let upper = configuration.reconnectDelay.upperBound
        var delay = lower * (1 << min(attempt, 16))
        if delay > upper { delay = upper }
        delay = delay * Double.random(in: 0.5...1.5)
        attempt += 1
        reconnectAt = clock.now + delay
    }

    private func queue(_ body: Touchsync_V1_AgentMessage.OneOf_Body) {
        var message = Touchsync_V1_AgentMessage()
        message.sequence = nextSequence
        message.body = body
        let bytes = WireCodec.encode(message)
        if unacknowledged.isEmpty { lastProgress = clock.now }
        unacknowledged.append((nextSequence, bytes))
        shared.progress.withLock { $0.numbered = nextSequence }
        nextSequence += 1
        if welcomed { transmit(bytes) }
    }

    private func transmit(_ bytes: [UInt8]) {
        guard let socket else { return }
        do {
            // Never block the agent: a message the socket cannot take now stays
            // in `unacknowledged` and goes again after the next welcome.
            if try socket.send(bytes, dontWait: true) {
                shared.progress.withLock { $0.bytesSent += bytes.count }
            }
            lastSent = clock.now
        } catch {
            logger.debug("agent send failed", metadata: ["error": "\(error)"])
        }
    }

    private func receiveReplies() {
        guard let socket else { return }
        while (try? socket.receive(into: reply, dontWait: true)) == true {
            lastHeard = clock.now
            let decoded = reply.withUnsafeBytes { bytes in
                Result { () throws(WireError) in try WireCodec.decode(Touchsync_V1_HubReply.self, from: bytes) }
            }
            guard case .success(let message) = decoded else { continue }
            switch message.body {
            case .welcome(let welcome):
                welcomed = true
                attempt = 0
                acknowledge(through: welcome.appliedThrough)
                events.yield(.welcomed(user: welcome.user, appliedThrough: welcome.appliedThrough))
                // Resend, in order, everything the hub has not applied.
                for (_, bytes) in unacknowledged { transmit(bytes) }
            case .ack(let ack):
                acknowledge(through: ack.through)
            case .error(let error):
                events.yield(.refused(sequence: error.sequence, code: ErrorCode(error.code), message: error.message))
                if error.code == .outOfOrder {
                    for (_, bytes) in unacknowledged { transmit(bytes) }
                }
            case nil:
                break
            }
        }
    }

    private func acknowledge(through sequence: UInt64) {
        guard sequence > acknowledged else { return }
        acknowledged = sequence
        lastProgress = clock.now
        if let keep = unacknowledged.firstIndex(where: { $0.sequence > sequence }) {
            unacknowledged.removeFirst(keep)
        } else {
            unacknowledged.removeAll(keepingCapacity: true)
        }
        shared.progress.withLock { $0.acknowledged = sequence }
    }

    private func runTimers() {
        let now = clock.now
        guard socket != nil else { return }
        // Silence, or replies that never acknowledge what we sent (the message
        // was lost on a connection libzmq has quietly replaced): either way,
        // reconnect; the welcome says what the hub has, and we resend the rest.
        let stalled = !unacknowledged.isEmpty && now - lastProgress > configuration.hubTimeout
        if now - lastHeard > configuration.hubTimeout || stalled {
            logger.info(
                stalled ? "acknowledgements stalled: reconnecting" : "hub silent: reconnecting",
                metadata: ["endpoint": "\(configuration.hubEndpoint)"])
            events.yield(.disconnected)
            scheduleReconnect()
            lastProgress = reconnectAt
            return
        }
        if welcomed && now - lastSent >= configuration.heartbeatInterval {
            var heartbeat = Touchsync_V1_Heartbeat()
            heartbeat.agentTime = Int64(Date().timeIntervalSince1970 * 1e6)
            var message = Touchsync_V1_AgentMessage()
            message.heartbeat = heartbeat
            transmit(WireCodec.encode(message))
        }
    }
}
