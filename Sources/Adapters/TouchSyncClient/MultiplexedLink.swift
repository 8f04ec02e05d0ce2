import Logging
import TouchSyncAccess
import TouchSyncWire
import ZeroMQ

/// One connection to a hub that carries many agents' sessions, each on a
/// channel of its own (docs/protocol.md, "Multiplexed connections"): a
/// gateway's tabs share it instead of a socket and heartbeats each. Owned by
/// one `AgentDriver` thread with the agents it carries. What the agents send
/// in one turn of the driver leaves as one ZeroMQ message (pairs of a channel
/// part and an agent message), so several users' frames travel together.
/// The link's own heartbeats (channel 0) keep every channel's session live
/// at the hub and tell a silent hub; its agents then say hello again.
final class MultiplexedLink {
    let endpoint: String
    private let curve: CurveClientKeys?
    /// The routing id on a plain-text hub (with CURVE, a random one per socket).
    private let identity: String
    private let context: ZMQContext
    private let logger: Logger
    private let heartbeatInterval: Duration
    private let hubTimeout: Duration
    private let handshakeTimeout: Duration

    private(set) var socket: ZMQSocket? = nil
    private var monitor: ZMQHandshakeMonitor? = nil
    private var handshakeFailures = 0
    /// Set when `socket` is replaced or closed, for the driver's readiness set; the driver clears it.
    var socketChanged = false
    /// Set when something was sent since the last receive (a send can take the read signal).
    var sentSinceReceive = false
    /// Parts waiting for the end of the driver's turn: channel, message, channel, message…
    private var outgoing: [[UInt8]] = []
    private var lastSent: ContinuousClock.Instant
    private var lastHeard: ContinuousClock.Instant
    private let heartbeat: [UInt8] = {
        var message = Touchsync_V1_AgentMessage()
        message.heartbeat = Touchsync_V1_Heartbeat()
        return WireCodec.encode(message)
    }()

    init(
        endpoint: String, curve: CurveClientKeys?, identity: String, heartbeatInterval: Duration, hubTimeout: Duration,
        handshakeTimeout: Duration, context: ZMQContext, logger: Logger, now: ContinuousClock.Instant
    ) {
        self.endpoint = endpoint
        self.curve = curve
        self.identity = identity
        self.heartbeatInterval = heartbeatInterval
        self.hubTimeout = hubTimeout
        self.handshakeTimeout = handshakeTimeout
        self.context = context
        self.logger = logger
        lastSent = now
        lastHeard = now
    }

    /// Opens the socket unless it is open.
    func open(now: ContinuousClock.Instant) throws {
        guard socket == nil else { return }
        let socket = try AgentConnection.dealer(context: context, curve: curve, identity: identity, handshakeTimeout: handshakeTimeout)
        // One monitor for the connection: a refused gateway key is told to every channel in words.
        let monitor = try? ZMQHandshakeMonitor(socket, context: context)
        do { try socket.connect(endpoint) } catch {
            monitor?.close()
            socket.close()
            throw error
        }
        self.socket = socket
        self.monitor = monitor
        socketChanged = true
        lastHeard = now
        lastSent = now
        logger.info("multiplexed connection to the hub opened", metadata: ["endpoint": "\(endpoint)", "identity": "\(identity)"])
    }

    /// Whether the socket's handshakes are watched (the driver then looks every 250 ms).
    var watchesHandshakes: Bool { monitor != nil }

    /// A handshake problem since the last call, in words (nil: none).
    func handshakeProblem() -> String? {
        guard let monitor else { return nil }
        var problem: String? = nil
        for event in monitor.events() {
            if let words = AgentConnection.handshakeProblem(event, curve: curve != nil, failures: &handshakeFailures) { problem = words }
        }
        if let problem { logger.error("cannot connect to the hub", metadata: ["endpoint": "\(endpoint)", "problem": "\(problem)"]) }
        return problem
    }

    func close() {
        monitor?.close()
        monitor = nil
        if socket != nil { socketChanged = true }
        socket?.close()
        socket = nil
        outgoing.removeAll()
    }

    /// Queues `bytes` for `channel`; it leaves with the rest of the turn's (`flush`).
    func enqueue(channel: UInt32, _ bytes: [UInt8]) {
        guard socket != nil else { return }
        outgoing.append(ChannelPart.encode(channel))
        outgoing.append(bytes)
    }

    /// Sends what the turn queued, as one message. A message the socket cannot
    /// take now is dropped: its numbered parts stay unacknowledged and go again.
    func flush(now: ContinuousClock.Instant) {
        guard let socket, !outgoing.isEmpty else { return }
        defer { outgoing.removeAll(keepingCapacity: true) }
        sentSinceReceive = true
        lastSent = now
        do { _ = try socket.send(multipart: outgoing, dontWait: true) } catch {
            logger.debug("multiplexed send failed", metadata: ["error": "\(error)"])
        }
    }

    /// Reads every message waiting, handing each reply to `deliver` with its channel (0: the link's own).
    func receive(into part: ZMQMessage, now: ContinuousClock.Instant, deliver: (UInt32, Touchsync_V1_HubReply) -> Void) {
        sentSinceReceive = false
        guard let socket else { return }
        var channel: UInt32? = nil  // nil: the next part is a channel
        while (try? socket.receive(into: part, dontWait: true)) == true {
            lastHeard = now
            guard let current = channel else {
                // A channel part is followed by its reply; a lone part is not of this protocol.
                if part.hasMore { channel = part.withUnsafeBytes(ChannelPart.decode) ?? .max }
                continue
            }
            channel = nil
            let decoded = part.withUnsafeBytes { bytes in
                Result { () throws(WireError) in try WireCodec.decode(Touchsync_V1_HubReply.self, from: bytes) }
            }
            if case .success(let reply) = decoded, current != .max { deliver(current, reply) }
        }
    }

    /// When `tick` next has something to do.
    var deadline: ContinuousClock.Instant {
        guard socket != nil else { return lastSent + heartbeatInterval }
        return min(lastSent + heartbeatInterval, lastHeard + hubTimeout)
    }

    /// Heartbeats when idle; true when the hub has been silent for the time-out
    /// (the link then closes its socket: the channels say hello again on a new one).
    func tick(now: ContinuousClock.Instant) -> Bool {
        guard socket != nil else { return false }
        if now - lastHeard > hubTimeout {
            logger.info("hub silent on the multiplexed connection: reconnecting", metadata: ["endpoint": "\(endpoint)"])
            close()
            return true
        }
        if now - lastSent >= heartbeatInterval {
            enqueue(channel: 0, heartbeat)
            flush(now: now)
        }
        return false
    }

    /// Tells the hub that every channel leaves (their live touches are cancelled at once), and lets the socket deliver it briefly.
    func sayGoodbye(now: ContinuousClock.Instant) {
        guard let socket else { return }
        var message = Touchsync_V1_AgentMessage()
        message.goodbye = Touchsync_V1_Goodbye()
        enqueue(channel: 0, WireCodec.encode(message))
        flush(now: now)
        try? socket.setLinger(milliseconds: 200)
    }
}
