import TouchSyncAccess
import Foundation
import Logging
import Synchronization
import TouchSyncCore
import TouchSyncWire
import ZeroMQ

/// Counted in messages callers posted (frames, styles, clears), whatever
/// the wire carried them in: coalescing merges several into one.
struct AgentCounters: Sendable {
    /// Posted by callers (the driver thread takes them in this order).
    var posted: UInt64 = 0
    /// Taken in by the driver thread (sent, or waiting to be).
    var taken: UInt64 = 0
    /// Acknowledged by the hub.
    var acknowledged: UInt64 = 0
    /// Posted frames that went out merged into an earlier waiting frame.
    var coalesced: UInt64 = 0
    /// BUSY notices from the hub (it was behind; nothing was lost).
    var busyNotices: UInt64 = 0
    /// Bytes handed to the socket, resends and heartbeats included.
    var bytesSent = 0
}

/// State one agent's callers and its driver thread share.
final class AgentShared: Sendable {
    let progress = Mutex<AgentCounters>(AgentCounters())
    /// Why the hub refused this agent's hello, when it did (a board limit, a
    /// bad board name, another protocol version): retrying will not help.
    let helloRefusal = Mutex<String?>(nil)
    /// The namespace the hub gave this agent in its last welcome (nil: never welcomed).
    let welcomedAs = Mutex<String?>(nil)

    /// Waits until the hub has acknowledged every message posted so far; false on time-out.
    func flush(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        let target = progress.withLock { $0.posted }
        while ContinuousClock.now < deadline {
            if progress.withLock({ $0.acknowledged >= target }) { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return progress.withLock { $0.acknowledged >= target }
    }
}

enum AgentCommand: Sendable {
    /// Changes for connection `connection`; the driver numbers them and adds the alive set.
    case frame(connection: Int, changes: [TouchChange], alive: [TouchID]?)
    case numbered(connection: Int, Touchsync_V1_AgentMessage.OneOf_Body)
    /// Stop the driver; with `goodbye`, each connection tells the hub first
    /// (its live touches are cancelled at once instead of after the abandon time-out).
    case stop(goodbye: Bool)
    /// A new agent for this driver, at `connection` (an `AgentHost`'s agents come and go).
    case attach(connection: Int, AgentSeed)
    /// End agent `connection` (saying goodbye first with `goodbye`); its index may be reused after.
    case detach(connection: Int, goodbye: Bool)
}

/// What a driver thread needs to make an agent's connection (on its own thread, which owns the socket).
struct AgentSeed: Sendable {
    let configuration: AgentConfiguration
    let identity: String
    let context: ZMQContext
    let shared: AgentShared
    let logger: Logger
    let report: @Sendable (AgentEvent) -> Void
}

/// One agent's connection to its hub, driven by an `AgentDriver` thread
/// (which owns the socket): numbers messages, keeps them until acknowledged,
/// reconnects on silence or stalled acks, and resends what the hub has not
/// applied.
///
/// Flow control: at most `maxInFlight` numbered messages wait for an ack;
/// later ones wait unnumbered, and frames among them coalesce (as UIKit
/// coalesces touches when the app is busy), so a hub that falls behind gets
/// the same samples in fewer, larger messages and the queue ahead of it
/// stays bounded. A hub that says BUSY is alive: the agent keeps waiting
/// instead of reconnecting (which would only add resends to its queue).
final class AgentConnection {
    /// A message taken in but not numbered yet (the window is full).
    private enum Waiting {
        /// `posted`: how many posted frames it holds; `downBefore`: the touches down before its first.
        case frame(TouchFrame, downBefore: Set<TouchID>, posted: Int)
        case other(Touchsync_V1_AgentMessage.OneOf_Body)
    }

    let configuration: AgentConfiguration
    let identity: String
    private let context: ZMQContext
    private let report: @Sendable (AgentEvent) -> Void
    let shared: AgentShared
    private let logger: Logger

    private(set) var socket: ZMQSocket? = nil
    /// Handshake events of `socket`: how a refused key or a plain-text/CURVE
    /// mismatch becomes a clear error instead of silence.
    private var monitor: ZMQHandshakeMonitor? = nil
    private var handshakeFailures = 0
    private var welcomed = false
    /// The agent session: numbering belongs to it. A new one starts (and the
    /// waiting messages are numbered again from 1) only when the hub cannot
    /// resume this one (it restarted without it).
    private var sessionID = AgentConnection.newSessionID()
    private var nextSequence: UInt64 = 1
    /// Numbered and sent, with how many posted messages each carries.
    private var unacknowledged: [(sequence: UInt64, bytes: [UInt8], posted: Int)] = []
    private var waiting: [Waiting] = []
    private var waitingStart = 0  // `waiting` is consumed from here (no O(n) removeFirst)
    /// The highest number the hub acknowledged in this session.
    private var acknowledged: UInt64 = 0
    /// The hub said BUSY: it is alive and behind, so slow acks and silence
    /// do not mean a lost connection until then.
    private var patientUntil: ContinuousClock.Instant
    /// Touches down as the frames queued so far leave them: each frame's alive set.
    private var liveTouches: Set<TouchID> = []
    private var lastSent: ContinuousClock.Instant
    private var lastHeard: ContinuousClock.Instant
    /// When the hub last acknowledged something new, or when the oldest
    /// message now waiting for an ack was queued.
    private var lastProgress: ContinuousClock.Instant
    private var reconnectAt: ContinuousClock.Instant
    private var attempt = 0

    init(
        configuration: AgentConfiguration, identity: String, context: ZMQContext, shared: AgentShared,
        logger: Logger, report: @escaping @Sendable (AgentEvent) -> Void
    ) {
        self.configuration = configuration
        self.identity = identity
        self.context = context
        self.shared = shared
        self.logger = logger
        self.report = report
        let now = ContinuousClock.now
        lastSent = now
        lastHeard = now
        lastProgress = now
        reconnectAt = now
        patientUntil = now
    }

    func close() {
        socket?.close()
        socket = nil
        monitor?.close()
        monitor = nil
    }

    /// When `runTimers` next has something to do.
    var deadline: ContinuousClock.Instant {
        guard socket != nil else { return reconnectAt }
        var doubt = lastHeard + configuration.hubTimeout
        if !unacknowledged.isEmpty { doubt = min(doubt, lastProgress + configuration.hubTimeout) }
        return min(lastSent + configuration.heartbeatInterval, max(doubt, patientUntil))
    }

    private func connect(now: ContinuousClock.Instant) {
        do {
            let socket = try ZMQSocket(context, type: .dealer)
            if let curve = configuration.curve {
                try socket.setCurveServerKey(curve.serverPublicKey)
                try socket.setCurvePublicKey(curve.client.publicKey)
                try socket.setCurveSecretKey(curve.client.secretKey)
                // The key names the user; a random routing id per connection cannot be claimed by anyone else.
                try socket.setRoutingID(Self.newSessionID())
            } else {
                try socket.setRoutingID(Array(identity.utf8))
            }
            try socket.setSendHighWaterMark(100_000)
            try socket.setHandshakeInterval(milliseconds: Int32(clamping: configuration.handshakeTimeout.components.seconds * 1000))
            if configuration.monitorsHandshake { monitor = try? ZMQHandshakeMonitor(socket, context: context) }
            try socket.connect(configuration.hubEndpoint)
            self.socket = socket
            sayHello(now: now)
            lastHeard = now
        } catch {
            logger.warning(
                "agent cannot connect", metadata: ["endpoint": "\(configuration.hubEndpoint)", "error": "\(error)"])
            scheduleReconnect(now: now)
        }
    }

    private func sayHello(now: ContinuousClock.Instant) {
        var hello = Touchsync_V1_Hello()
        hello.protocolVersion = touchSyncProtocolVersion
        hello.board = configuration.board
        hello.clientName = configuration.clientName
        hello.resumeAfter = acknowledged
        hello.sessionID = Data(sessionID)
        if let delegation = configuration.delegation {
            hello.actAs = delegation.actAs
            hello.token = delegation.token
        }
        var message = Touchsync_V1_AgentMessage()
        message.hello = hello
        transmit(WireCodec.encode(message), now: now)
    }

    private func scheduleReconnect(now: ContinuousClock.Instant) {
        close()
        welcomed = false
        let lower = configuration.reconnectDelay.lowerBound
        let upper = configuration.reconnectDelay.upperBound
        var delay = lower * (1 << min(attempt, 16))
        if delay > upper { delay = upper }
        delay = delay * Double.random(in: 0.5...1.5)
        attempt += 1
        reconnectAt = now + delay
    }

    private var windowIsFull: Bool { unacknowledged.count >= configuration.maxInFlight }

    func queue(changes: [TouchChange], alive: [TouchID]?, now: ContinuousClock.Instant) {
        let downBefore = liveTouches
        for change in changes {
            switch change.phase {
            case .began: liveTouches.insert(change.touch)
            case .ended, .cancelled: liveTouches.remove(change.touch)
            case .moved, .stationary: break
            }
        }
        if let alive { liveTouches = Set(alive) }
        let frame = TouchFrame(changes: changes, aliveTouches: alive ?? Array(liveTouches))
        shared.progress.withLock { $0.taken += 1 }
        guard windowIsFull || waitingStart < waiting.count else {
            send(.frame(frame.proto), posted: 1, now: now)
            return
        }
        if waitingStart < waiting.count, case .frame(let last, let lastDown, let posted) = waiting[waiting.count - 1],
            let merged = last.coalesced(with: frame, downBefore: lastDown, limits: Self.coalescingLimits)
        {
            waiting[waiting.count - 1] = .frame(merged, downBefore: lastDown, posted: posted + 1)
            shared.progress.withLock { $0.coalesced += 1 }
        } else {
            waiting.append(.frame(frame, downBefore: downBefore, posted: 1))
        }
    }

    /// The protocol's default frame limits (every hub accepts frames within them).
    private static let coalescingLimits = BoardLimits()

    func queue(_ body: Touchsync_V1_AgentMessage.OneOf_Body, now: ContinuousClock.Instant) {
        shared.progress.withLock { $0.taken += 1 }
        if windowIsFull || waitingStart < waiting.count {
            waiting.append(.other(body))
        } else {
            send(body, posted: 1, now: now)
        }
    }

    /// Numbers a message, keeps it until acknowledged, and sends it when welcomed.
    private func send(_ body: Touchsync_V1_AgentMessage.OneOf_Body, posted: Int, now: ContinuousClock.Instant) {
        var message = Touchsync_V1_AgentMessage()
        message.sequence = nextSequence
        message.body = body
        let bytes = WireCodec.encode(message)
        if unacknowledged.isEmpty { lastProgress = now }
        unacknowledged.append((nextSequence, bytes, posted))
        nextSequence += 1
        if welcomed { transmit(bytes, now: now) }
    }

    /// Numbers and sends waiting messages while the window has room.
    private func sendWaiting(now: ContinuousClock.Instant) {
        while !windowIsFull && waitingStart < waiting.count {
            switch waiting[waitingStart] {
            case .frame(let frame, _, let posted): send(.frame(frame.proto), posted: posted, now: now)
            case .other(let body): send(body, posted: 1, now: now)
            }
            waitingStart += 1
        }
        if waitingStart == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingStart = 0
        } else if waitingStart > 1024 && waitingStart * 2 > waiting.count {
            waiting.removeFirst(waitingStart)
            waitingStart = 0
        }
    }

    private func transmit(_ bytes: [UInt8], now: ContinuousClock.Instant) {
        guard let socket else { return }
        do {
            // Never block the driver: a message the socket cannot take now stays
            // in `unacknowledged` and goes again after the next welcome.
            if try socket.send(bytes, dontWait: true) {
                shared.progress.withLock { $0.bytesSent += bytes.count }
            }
            lastSent = now
        } catch {
            logger.debug("agent send failed", metadata: ["error": "\(error)"])
        }
    }

    /// Reads every reply waiting on the socket into `reply` (the driver's reusable message).
    func receiveReplies(into reply: ZMQMessage, now: ContinuousClock.Instant) {
        guard let socket else { return }
        while (try? socket.receive(into: reply, dontWait: true)) == true {
            lastHeard = now
            let decoded = reply.withUnsafeBytes { bytes in
                Result { () throws(WireError) in try WireCodec.decode(Touchsync_V1_HubReply.self, from: bytes) }
            }
            guard case .success(let message) = decoded else { continue }
            switch message.body {
            case .welcome(let welcome):
                welcomed = true
                attempt = 0
                shared.helloRefusal.withLock { $0 = nil }
                shared.welcomedAs.withLock { $0 = welcome.user }
                acknowledge(through: welcome.appliedThrough, now: now)
                report(.welcomed(user: welcome.user, appliedThrough: welcome.appliedThrough))
                // Resend, in order, everything the hub has not applied.
                for entry in unacknowledged { transmit(entry.bytes, now: now) }
            case .ack(let ack):
                acknowledge(through: ack.through, now: now)
            case .error(let error) where error.code == .busy:
                // Not a refusal: the hub is alive and behind, our messages are queued.
                let retry = Duration.milliseconds(Int64(max(error.retryAfterMs, 1000)))
                patientUntil = max(patientUntil, now + retry)
                lastProgress = now
                shared.progress.withLock { $0.busyNotices += 1 }
                report(.busy(retryAfter: retry))
            case .error(let error):
                report(.refused(sequence: error.sequence, code: ErrorCode(error.code), message: error.message))
                if !welcomed, error.sequence == 0, let code = ErrorCode(error.code),
                    [.unsupportedVersion, .unknownBoard, .malformed, .rateLimited, .forbidden, .wrongHub].contains(code)
                {
                    shared.helloRefusal.withLock { $0 = "\(code): \(error.message)" }
                }
                if error.code == .outOfOrder {
                    for entry in unacknowledged { transmit(entry.bytes, now: now) }
                } else if error.code == .cannotResume {
                    startNewSession(now: now)
                } else if error.code == .notWelcomed && welcomed {
                    // The hub does not know us: it restarted (libzmq reconnected
                    // underneath). Say hello again at once; the welcome says what
                    // it has (from its journal) and we resend the rest.
                    welcomed = false
                    sayHello(now: now)
                }
            case nil:
                break
            }
        }
    }

    private func acknowledge(through sequence: UInt64, now: ContinuousClock.Instant) {
        guard sequence > acknowledged else { return }
        acknowledged = sequence
        lastProgress = now
        let keep = unacknowledged.firstIndex(where: { $0.sequence > sequence }) ?? unacknowledged.count
        let posted = unacknowledged[..<keep].reduce(0) { $0 + $1.posted }
        unacknowledged.removeFirst(keep)
        shared.progress.withLock { $0.acknowledged += UInt64(posted) }
        sendWaiting(now: now)
    }

    /// The hub cannot resume this session (it restarted without it, or
    /// forgot it): start a new one and number the waiting messages from 1.
    private func startNewSession(now: ContinuousClock.Instant) {
        logger.notice(
            "the hub cannot resume this agent's session: starting a new one",
            metadata: ["agent": "\(identity)", "waiting": "\(unacknowledged.count)"])
        sessionID = Self.newSessionID()
        acknowledged = 0
        var sequence: UInt64 = 0
        unacknowledged = unacknowledged.map { entry in
            sequence += 1
            guard var message = try? WireCodec.decode(Touchsync_V1_AgentMessage.self, from: entry.bytes) else { return entry }
            message.sequence = sequence
            return (sequence, WireCodec.encode(message), entry.posted)
        }
        nextSequence = sequence + 1
        welcomed = false
        lastProgress = now
        sayHello(now: now)
    }

    static func newSessionID() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Tells the hub this agent leaves on purpose, and lets the socket
    /// deliver it (briefly) when it closes.
    func sayGoodbye(now: ContinuousClock.Instant) {
        guard welcomed, let socket else { return }
        var message = Touchsync_V1_AgentMessage()
        message.goodbye = Touchsync_V1_Goodbye()
        transmit(WireCodec.encode(message), now: now)
        try? socket.setLinger(milliseconds: 200)
    }

    /// Turns handshake failures into a refusal callers can show: retrying
    /// with the same keys will not help.
    private func checkHandshakes() {
        guard let monitor else { return }
        for event in monitor.events() {
            let problem: String
            switch event {
            case .succeeded:
                handshakeFailures = 0
                continue
            case .refused(let code):
                problem = "the hub refused this key (authentication status \(code)): ask its operator to allow it (touchsync keys allow)"
            case .protocolError:
                problem =
                    configuration.curve == nil
                    ? "the hub requires CURVE: pass --key and --hub-key"
                    : "the hub does not speak CURVE (a plain-text hub?): drop --key and --hub-key, or check the endpoint"
            case .failed:
                // A wrong hub key (the hub cannot decrypt our hello), or plain text to a CURVE hub. Once may be a network blip.
                handshakeFailures += 1
                guard handshakeFailures >= 2 else { continue }
                problem =
                    configuration.curve == nil
                    ? "the hub refuses the handshake: it probably requires CURVE (pass --key and --hub-key)"
                    : "the CURVE handshake with the hub fails: is --hub-key the hub's public key?"
            }
            logger.error("cannot connect to the hub", metadata: ["agent": "\(identity)", "problem": "\(problem)"])
            shared.helloRefusal.withLock { $0 = problem }
            report(.refused(sequence: 0, code: nil, message: problem))
        }
    }

    /// Connects when due, reconnects on silence, sends heartbeats when idle.
    func runTimers(now: ContinuousClock.Instant) {
        guard socket != nil else {
            if now >= reconnectAt { connect(now: now) }
            return
        }
        checkHandshakes()
        // Silence, or replies that never acknowledge what we sent (the message
        // was lost on a connection libzmq has quietly replaced): either way,
        // reconnect; the welcome says what the hub has, and we resend the rest.
        let stalled = !unacknowledged.isEmpty && now - lastProgress > configuration.hubTimeout
        if now >= patientUntil && (now - lastHeard > configuration.hubTimeout || stalled) {
            logger.info(
                stalled ? "acknowledgements stalled: reconnecting" : "hub silent: reconnecting",
                metadata: ["endpoint": "\(configuration.hubEndpoint)", "agent": "\(identity)"])
            report(.disconnected)
            scheduleReconnect(now: now)
            // Damped: never sooner than a BUSY hint asked (and then with back-off and jitter).
            reconnectAt = max(reconnectAt, patientUntil)
            lastProgress = reconnectAt
            return
        }
        if welcomed && now - lastSent >= configuration.heartbeatInterval {
            var heartbeat = Touchsync_V1_Heartbeat()
            heartbeat.agentTime = Int64(Date().timeIntervalSince1970 * 1e6)
            var message = Touchsync_V1_AgentMessage()
            message.heartbeat = heartbeat
            transmit(WireCodec.encode(message), now: now)
        }
    }
}

/// A thread that owns and drives agent connections, one or many: other
/// threads only post commands to its mailbox, so every socket stays on this
/// thread from creation to close.
///
/// A few connections are polled with the mailbox. Many are not: `zmq_poll`
/// costs two option reads per socket on every wake-up, and replies (acks)
/// arrive all the time, so a poll over hundreds of sockets would spend the
/// thread on polling. Instead the thread sleeps on the mailbox alone and reads
/// every socket without waiting once per `sweepInterval`: replies only move
/// acknowledgements and timers, which tolerate a few milliseconds.
final class AgentDriver {
    /// nil: a detached agent's place (an `AgentHost` reuses it).
    private var connections: [AgentConnection?]
    private let mailbox: Mailbox<AgentCommand>
    private let reply = ZMQMessage()
    /// Up to this many connections are polled; more are swept.
    static let maxPolledConnections = 16
    static let sweepInterval: Duration = .milliseconds(5)

    init(connections: [AgentConnection], mailbox: Mailbox<AgentCommand>) {
        self.connections = connections.map { $0 }
        self.mailbox = mailbox
    }

    func run() {
        defer {
            for case let connection? in connections { connection.close() }
            _ = mailbox.close()
        }
        let clock = ContinuousClock()
        var sweeping = connections.count > Self.maxPolledConnections
        // Timers of every connection run together, when the earliest is due,
        // so a turn with many connections does not scan them all.
        var timersDue = clock.now
        var nextSweep = clock.now
        var poller = ZMQPoller()
        var polled: [Int] = []  // connection index of each socket entry after the mailbox
        var pollerStale = true
        while true {
            var now = clock.now
            if now >= timersDue {
                var next = now + .milliseconds(250)
                for case let connection? in connections {
                    let hadSocket = connection.socket != nil
                    connection.runTimers(now: now)
                    if hadSocket != (connection.socket != nil) { pollerStale = true }
                    next = min(next, connection.deadline)
                }
                timersDue = max(next, now + .milliseconds(1))
            }
            if pollerStale {
                poller = ZMQPoller()
                polled.removeAll(keepingCapacity: true)
                poller.add(fileDescriptor: mailbox.fileDescriptor)
                sweeping = connections.count { $0 != nil } > Self.maxPolledConnections
                if !sweeping {
                    for (index, connection) in connections.enumerated() {
                        if let socket = connection?.socket, (try? poller.add(socket)) != nil { polled.append(index) }
                    }
                }
                pollerStale = false
            }
            let wakeUp = sweeping ? min(timersDue, nextSweep) : timersDue
            do {
                try poller.poll(timeoutMilliseconds: ZMQPoller.timeout(until: wakeUp, now: now))
            } catch {
                if error.isTerminated { return }
                continue
            }
            now = clock.now
            if poller.isReadable(0) {
                for command in mailbox.drain() {
                    switch command {
                    case .stop(let goodbye):
                        if goodbye { for case let connection? in connections { connection.sayGoodbye(now: now) } }
                        return
                    case .frame(let index, let changes, let alive):
                        connections[index]?.queue(changes: changes, alive: alive, now: now)
                    case .numbered(let index, let body):
                        connections[index]?.queue(body, now: now)
                    case .attach(let index, let seed):
                        while connections.count <= index { connections.append(nil) }
                        connections[index]?.close()
                        connections[index] = AgentConnection(
                            configuration: seed.configuration, identity: seed.identity, context: seed.context, shared: seed.shared,
                            logger: seed.logger, report: seed.report)
                        timersDue = now  // it connects at its first timers
                        pollerStale = true
                    case .detach(let index, let goodbye):
                        guard index < connections.count, let connection = connections[index] else { break }
                        if goodbye { connection.sayGoodbye(now: now) }
                        connection.close()
                        connections[index] = nil
                        pollerStale = true
                    }
                }
            }
            if sweeping {
                if now >= nextSweep {
                    for case let connection? in connections { connection.receiveReplies(into: reply, now: now) }
                    nextSweep = now + Self.sweepInterval
                }
            } else {
                for (entry, index) in polled.enumerated() where poller.isReadable(entry + 1) {
                    connections[index]?.receiveReplies(into: reply, now: now)
                }
            }
        }
    }
}
