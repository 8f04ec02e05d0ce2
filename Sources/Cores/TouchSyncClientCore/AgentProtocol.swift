import Foundation
import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

/// The agent side of the protocol for one agent, without I/O: sessions and
/// their numbering, the in-flight window, coalescing of frames that wait,
/// BUSY and back-off, resend after a reconnect, heartbeats and goodbye.
/// Time is an argument and randomness comes in (`random` for back-off
/// jitter, `newSessionID` for session ids), so a test drives it on a manual
/// clock. The transport (`AgentConnection`: a DEALER on a driver thread)
/// carries out the actions and reports what it receives.
///
/// Flow control: at most `maxInFlight` numbered messages wait for an ack;
/// later ones wait unnumbered, and frames among them coalesce (as UIKit
/// coalesces touches when the app is busy), so a hub that falls behind gets
/// the same samples in fewer, larger messages. A hub that says BUSY is
/// alive: the agent keeps waiting instead of reconnecting.
public struct AgentProtocol: Sendable {
    public struct Settings: Sendable {
        public var board: String
        public var clientName: String
        public var heartbeatInterval: Duration
        public var hubTimeout: Duration
        public var reconnectDelay: ClosedRange<Duration>
        public var maxInFlight: Int
        /// A gateway acting for an invited user: the namespace and the invitation's token.
        public var delegation: (actAs: String, token: String)?
        /// The frames' wire format: v2 (packed, protocol 2) unless the hub speaks only v1, when the agent falls back.
        public var wireFormat: WireFormat
        /// A channel of a multiplexed connection: the connection's heartbeats
        /// keep the session live and find a silent hub (`connectionLost`), so
        /// this session sends none and does not watch for silence itself;
        /// acknowledgements that stall still make it say hello again.
        public var multiplexed = false
        /// The wall clock in microseconds since 1970, for `Heartbeat.agent_time`
        /// (the core reads no clock; nil: 0 is sent). The transport gives it.
        public var wallClock: (@Sendable () -> Int64)? = nil
        /// The most the session asks to do on its board (`Hello.role_limit`;
        /// nil: what the hub grants). A gateway's guest tabs say `.draw`.
        public var roleLimit: Role? = nil

        public init(
            board: String, clientName: String = "touchsync-agent", heartbeatInterval: Duration = .seconds(1),
            hubTimeout: Duration = .seconds(3), reconnectDelay: ClosedRange<Duration> = .milliseconds(100) ... .seconds(5),
            maxInFlight: Int = 32, delegation: (actAs: String, token: String)? = nil, wireFormat: WireFormat = .v2
        ) {
            self.wireFormat = wireFormat
            self.board = board
            self.clientName = clientName
            self.heartbeatInterval = heartbeatInterval
            self.hubTimeout = hubTimeout
            self.reconnectDelay = reconnectDelay
            self.maxInFlight = maxInFlight
            self.delegation = delegation
        }
    }

    public enum Action: Sendable, Equatable {
        /// Open a new connection to the hub, then call `connected(now:)` (or `connectFailed(now:)`).
        case connect
        /// Close the connection (the hub went silent, or still speaks but stopped acknowledging: `stalled`); a reconnect follows.
        case disconnect(stalled: Bool)
        /// Send these bytes (an `AgentMessage`) on the connection, if the transport can now.
        case send([UInt8])
        /// The hub welcomed the agent.
        case welcomed(user: String, appliedThrough: UInt64)
        /// Posted messages the hub acknowledged by this ack (a coalesced frame counts each it holds).
        case acknowledged(posted: Int)
        /// A posted frame merged into the frame waiting before it.
        case coalesced
        /// The hub is behind: nothing is lost, keep waiting at least `retryAfter`.
        case busy(retryAfter: Duration)
        /// The hub refused message `sequence` (0: the hello or an unnumbered one).
        /// `postedAhead`: when that message holds exactly one posted message,
        /// how many posted messages past those acknowledged so far it is (1:
        /// the next), so that the caller can tell which of its posts was refused.
        case refused(sequence: UInt64, code: ErrorCode?, message: String, postedAhead: Int?)
        /// The hub refused the hello for good (a limit, a bad board, another version): retrying will not help.
        case helloRefused(String)
        /// The hub cannot resume the session: a new one numbers the waiting messages from 1.
        case newSession(waiting: Int)
        /// Another hub serves the board (WRONG_HUB naming it): close the
        /// connection; the next `connect` goes to `ingest` (hub `hub`), where
        /// the session resumes.
        case redirect(ingest: String, hub: String)
        /// A WRONG_HUB named a hub that went silent on this agent lately (it
        /// died, and its lease has not lapsed yet for the others): close the
        /// connection; the next `connect`, after a short delay, goes to the
        /// next configured hub, which will name the new owner once there is one.
        case ownerSilent(hub: String)
    }

    /// Redirects followed without a welcome before a WRONG_HUB is taken as final (hubs disagreeing).
    public static let maxRedirects = 8

    /// A message taken in but not numbered yet (the window is full).
    private enum Waiting: Sendable {
        /// `posted`: how many posted frames it holds; `downBefore`: the touches down before its first.
        case frame(TouchFrame, downBefore: Set<TouchID>, posted: Int)
        case other(Touchsync_V1_AgentMessage.OneOf_Body)
    }

    public let settings: Settings
    /// Whether the transport has a connection open (between `connect` and `disconnect`).
    public private(set) var isConnected = false
    public private(set) var isWelcomed = false
    /// The format frames are encoded in now: the settings' until a hub that speaks only v1 says so.
    public private(set) var frameFormat: WireFormat
    /// Writes the frames (its buffers kept from one frame to the next).
    private var frameEncoder = AgentFrameEncoder()
    private var random: SplitMixRandom
    private let newSessionID: @Sendable () -> [UInt8]
    private var sessionID: [UInt8]
    private var nextSequence: UInt64 = 1
    /// Numbered, with how many posted messages each carries.
    private var unacknowledged: [(sequence: UInt64, bytes: [UInt8], posted: Int)] = []
    private var waiting: [Waiting] = []
    private var waitingStart = 0  // consumed from here (no O(n) removeFirst)
    /// The highest number the hub acknowledged in this session.
    public private(set) var acknowledged: UInt64 = 0
    private var patientUntil: ContinuousClock.Instant
    /// Touches down as the frames queued so far leave them: each frame's alive set.
    private var liveTouches: Set<TouchID> = []
    private var lastSent: ContinuousClock.Instant
    private var lastHeard: ContinuousClock.Instant
    /// When the hub last acknowledged something new, or when the oldest message now waiting was numbered.
    private var lastProgress: ContinuousClock.Instant
    private var reconnectAt: ContinuousClock.Instant
    private var attempt = 0
    private var redirects = 0
    /// The hub endpoint that last went silent, and when (see `hubWentSilent`).
    private var silentHub: SilentHub<String>? = nil
    private var connectedAt: ContinuousClock.Instant
    /// While the agent looks for a board's new hub (after a redirect, or a
    /// hub's silence), a hello unanswered this long is asked again on a new
    /// connection: a live hub answers a hello at once (or after one statement
    /// to its board store), and in the rapid reconnects of a failover a reply
    /// can be lost. Otherwise (a first connection, a hub that may be busy) the
    /// silence time-out applies, so a loaded hub is not flooded with hellos.
    private func helloTimeout(now: ContinuousClock.Instant) -> Duration {
        let searching = redirects > 0 || silentHub?.isRecent(now: now, silenceTimeout: settings.hubTimeout) == true
        return searching ? settings.hubTimeout / 6 : settings.hubTimeout
    }

    /// A new agent; its first timers (`tick`) connect.
    public init(settings: Settings, now: ContinuousClock.Instant, seed: UInt64, newSessionID: @escaping @Sendable () -> [UInt8]) {
        self.settings = settings
        frameFormat = settings.wireFormat
        self.newSessionID = newSessionID
        random = SplitMixRandom(seed: seed)
        sessionID = newSessionID()
        lastSent = now
        lastHeard = now
        lastProgress = now
        reconnectAt = now
        patientUntil = now
        connectedAt = now
    }

    /// Numbered messages not acknowledged yet, and messages waiting for room in the window.
    public var unacknowledgedCount: Int { unacknowledged.count }
    public var waitingCount: Int { waiting.count - waitingStart }

    /// When `tick` next has something to do.
    public var deadline: ContinuousClock.Instant {
        guard isConnected else { return reconnectAt }
        if settings.multiplexed {
            var doubt = max(lastSent, lastHeard) + .seconds(3600)  // nothing to watch: an idle wake-up an hour
            if !unacknowledged.isEmpty { doubt = lastProgress + settings.hubTimeout }
            if !isWelcomed { doubt = min(doubt, connectedAt + helloTimeout(now: connectedAt)) }
            return max(doubt, patientUntil)
        }
        var doubt = lastHeard + settings.hubTimeout
        if !unacknowledged.isEmpty { doubt = min(doubt, lastProgress + settings.hubTimeout) }
        if !isWelcomed { doubt = min(doubt, connectedAt + helloTimeout(now: connectedAt)) }
        return min(lastSent + settings.heartbeatInterval, max(doubt, patientUntil))
    }

    private var windowIsFull: Bool { unacknowledged.count >= settings.maxInFlight }

    // MARK: What the app posts

    /// A frame of touch changes; `alive` overrides the touches the agent believes are down.
    public mutating func queue(changes: [TouchChange], alive: [TouchID]?, now: ContinuousClock.Instant) -> [Action] {
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
        var actions: [Action] = []
        guard windowIsFull || waitingStart < waiting.count else {
            number(frame, posted: 1, now: now, into: &actions)
            return actions
        }
        if waitingStart < waiting.count, case .frame(let last, let lastDown, let posted) = waiting[waiting.count - 1],
            let merged = last.coalesced(with: frame, downBefore: lastDown, limits: Self.coalescingLimits)
        {
            waiting[waiting.count - 1] = .frame(merged, downBefore: lastDown, posted: posted + 1)
            actions.append(.coalesced)
        } else {
            waiting.append(.frame(frame, downBefore: downBefore, posted: 1))
        }
        return actions
    }

    /// The protocol's default frame limits (every hub accepts frames within them).
    private static let coalescingLimits = BoardLimits()

    /// Another numbered message (a style, a clear, undo, redo, erase).
    public mutating func queue(_ body: Touchsync_V1_AgentMessage.OneOf_Body, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        if windowIsFull || waitingStart < waiting.count {
            waiting.append(.other(body))
        } else {
            number(body, posted: 1, now: now, into: &actions)
        }
        return actions
    }

    // MARK: What the transport reports

    /// The connection asked for by `connect` is open: say hello.
    public mutating func connected(now: ContinuousClock.Instant) -> [Action] {
        isConnected = true
        lastHeard = now
        // A new connection gets a whole time-out for its welcome (a hub may
        // hold a hello while it takes the board's lease).
        lastProgress = max(lastProgress, now)
        connectedAt = now
        var actions: [Action] = []
        sayHello(now: now, into: &actions)
        return actions
    }

    /// The multiplexed connection this session rides found the hub silent
    /// (or was replaced): say hello again after a back-off.
    public mutating func connectionLost(now: ContinuousClock.Instant) {
        guard isConnected else { return }
        scheduleReconnect(now: now)
    }

    /// The connection could not be opened: try again after a back-off.
    public mutating func connectFailed(now: ContinuousClock.Instant) {
        scheduleReconnect(now: now)
    }

    /// The transport closed the connection to `endpoint` after a `disconnect`
    /// for silence. For twice the hub time-out, a WRONG_HUB naming that
    /// endpoint is not followed (`ownerSilent`): the hubs still count it live
    /// until its lease lapses, and following them back to it would cost
    /// another silence time-out.
    public mutating func hubWentSilent(_ endpoint: String, now: ContinuousClock.Instant) {
        silentHub = SilentHub(key: endpoint, since: now)
    }

    /// Whether `endpoint` went silent within the last two hub time-outs (an
    /// agent given several hubs tries the others first).
    public func wentSilentLately(_ endpoint: String, now: ContinuousClock.Instant) -> Bool {
        silentHub?.covers(endpoint, now: now, silenceTimeout: settings.hubTimeout) == true
    }

    /// Something arrived from the hub that is not a reply it understands: the hub is alive.
    public mutating func heard(now: ContinuousClock.Instant) { lastHeard = now }

    /// A reply from the hub (anything received counts as hearing from it).
    public mutating func received(_ message: Touchsync_V1_HubReply, now: ContinuousClock.Instant) -> [Action] {
        lastHeard = now
        var actions: [Action] = []
        switch message.body {
        case .welcome(let welcome) where frameFormat == .v2 && welcome.protocolVersion < 2:
            // Welcomed in v1 (a hub that does not speak v2 frames): resend nothing packed.
            fallBackToV1()
            fallthrough
        case .welcome(let welcome):
            isWelcomed = true
            attempt = 0
            redirects = 0
            actions.append(.welcomed(user: welcome.user, appliedThrough: welcome.appliedThrough))
            acknowledge(through: welcome.appliedThrough, now: now, into: &actions)
            // Resend, in order, everything the hub has not applied.
            for entry in unacknowledged { transmit(entry.bytes, now: now, into: &actions) }
        case .ack(let ack):
            acknowledge(through: ack.through, now: now, into: &actions)
        case .error(let error) where error.code == .busy:
            // Not a refusal: the hub is alive and behind, our messages are queued.
            let retry = Duration.milliseconds(Int64(max(error.retryAfterMs, 1000)))
            patientUntil = max(patientUntil, now + retry)
            lastProgress = now
            actions.append(.busy(retryAfter: retry))
        case .error(let error)
        where error.code == .wrongHub && wentSilentLately(error.owner.ingest, now: now):
            // Not followed, not counted as a redirect: ask again shortly (a hello to a live hub is cheap).
            actions.append(.ownerSilent(hub: error.owner.name))
            isConnected = false
            isWelcomed = false
            reconnectAt = now + settings.reconnectDelay.lowerBound * 2 * Double.random(in: 0.5...1.5, using: &random)
        case .error(let error) where error.code == .wrongHub && !error.owner.ingest.isEmpty && redirects < Self.maxRedirects:
            // Another hub serves the board: go there at once, keeping the session and every unacknowledged message.
            // Not a refusal of any message: nothing is lost, everything goes to the owner.
            redirects += 1
            actions.append(.redirect(ingest: error.owner.ingest, hub: error.owner.name))
            isConnected = false
            isWelcomed = false
            reconnectAt = now
        case .error(let error) where !isWelcomed && error.sequence == 0 && error.code == .unsupportedVersion && frameFormat == .v2:
            // A hub that speaks only protocol 1: the same session in v1, nothing lost.
            fallBackToV1()
            sayHello(now: now, into: &actions)
        case .error(let error):
            // The final refusal first: whoever hears of the refusal finds it recorded.
            if !isWelcomed, error.sequence == 0, let code = ErrorCode(error.code),
                [.unsupportedVersion, .unknownBoard, .malformed, .rateLimited, .forbidden, .wrongHub].contains(code)
            {
                actions.append(.helloRefused("\(code): \(error.message)"))
            }
            var postedAhead: Int? = nil
            if error.sequence > 0, let index = unacknowledged.firstIndex(where: { $0.sequence == error.sequence }),
                unacknowledged[index].posted == 1
            {
                postedAhead = unacknowledged[...index].reduce(0) { $0 + $1.posted }
            }
            actions.append(.refused(sequence: error.sequence, code: ErrorCode(error.code), message: error.message, postedAhead: postedAhead))
            if error.code == .outOfOrder {
                for entry in unacknowledged { transmit(entry.bytes, now: now, into: &actions) }
            } else if error.code == .cannotResume {
                startNewSession(now: now, into: &actions)
            } else if error.code == .notWelcomed && isWelcomed {
                // The hub does not know us: it restarted (the transport reconnected
                // underneath). Say hello again at once; the welcome says what it
                // has (from its journal) and we resend the rest.
                isWelcomed = false
                sayHello(now: now, into: &actions)
            }
        case nil:
            break
        }
        return actions
    }

    /// Connects when due, reconnects on silence or stalled acknowledgements, sends heartbeats when idle.
    public mutating func tick(now: ContinuousClock.Instant) -> [Action] {
        guard isConnected else {
            return now >= reconnectAt ? [.connect] : []
        }
        // Silence, or replies that never acknowledge what we sent (the message
        // was lost on a connection the transport has quietly replaced): either
        // way, reconnect; the welcome says what the hub has, and we resend the rest.
        let silent = !settings.multiplexed && now - lastHeard > settings.hubTimeout
        let stalled = (!unacknowledged.isEmpty && now - lastProgress > settings.hubTimeout) || (!isWelcomed && now - connectedAt > helloTimeout(now: connectedAt))
        if now >= patientUntil && (silent || stalled) {
            scheduleReconnect(now: now)
            // Damped: never sooner than a BUSY hint asked (and then with back-off and jitter).
            reconnectAt = max(reconnectAt, patientUntil)
            lastProgress = reconnectAt
            return [.disconnect(stalled: !silent)]
        }
        var actions: [Action] = []
        if isWelcomed && !settings.multiplexed && now - lastSent >= settings.heartbeatInterval {
            var heartbeat = Touchsync_V1_Heartbeat()
            heartbeat.agentTime = settings.wallClock?() ?? 0
            var message = Touchsync_V1_AgentMessage()
            message.heartbeat = heartbeat
            transmit(WireCodec.encode(message), now: now, into: &actions)
        }
        return actions
    }

    /// The agent leaves on purpose: the hub cancels its live touches at once.
    public mutating func goodbye(now: ContinuousClock.Instant) -> [Action] {
        guard isWelcomed, isConnected else { return [] }
        var message = Touchsync_V1_AgentMessage()
        message.goodbye = Touchsync_V1_Goodbye()
        var actions: [Action] = []
        transmit(WireCodec.encode(message), now: now, into: &actions)
        return actions
    }

    // MARK: Rules

    private mutating func sayHello(now: ContinuousClock.Instant, into actions: inout [Action]) {
        var hello = Touchsync_V1_Hello()
        hello.protocolVersion = UInt32(frameFormat.rawValue)
        hello.board = settings.board
        hello.clientName = settings.clientName
        hello.resumeAfter = acknowledged
        hello.sessionID = Data(sessionID)
        if let delegation = settings.delegation {
            hello.actAs = delegation.actAs
            hello.token = delegation.token
        }
        switch settings.roleLimit {
        case nil: hello.roleLimit = .unspecified
        case .watch: hello.roleLimit = .watch
        case .draw: hello.roleLimit = .draw
        case .admin: hello.roleLimit = .admin
        }
        var message = Touchsync_V1_AgentMessage()
        message.hello = hello
        transmit(WireCodec.encode(message), now: now, into: &actions)
    }

    private mutating func scheduleReconnect(now: ContinuousClock.Instant) {
        isConnected = false
        isWelcomed = false
        let lower = settings.reconnectDelay.lowerBound
        let upper = settings.reconnectDelay.upperBound
        var delay = lower * (1 << min(attempt, 16))
        if delay > upper { delay = upper }
        delay = delay * Double.random(in: 0.5...1.5, using: &random)
        attempt += 1
        reconnectAt = now + delay
    }

    /// Numbers a message, keeps it until acknowledged, and sends it when welcomed.
    private mutating func number(
        _ body: Touchsync_V1_AgentMessage.OneOf_Body, posted: Int, now: ContinuousClock.Instant, into actions: inout [Action]
    ) {
        var message = Touchsync_V1_AgentMessage()
        message.sequence = nextSequence
        message.body = body
        numbered(WireCodec.encode(message), posted: posted, now: now, into: &actions)
    }

    /// Numbers and sends a frame (written straight from the model: the hot path).
    private mutating func number(_ frame: TouchFrame, posted: Int, now: ContinuousClock.Instant, into actions: inout [Action]) {
        numbered(frameEncoder.message(frame, sequence: nextSequence, format: frameFormat), posted: posted, now: now, into: &actions)
    }

    /// Keeps the message numbered `nextSequence` until acknowledged, and sends it when welcomed.
    private mutating func numbered(_ bytes: [UInt8], posted: Int, now: ContinuousClock.Instant, into actions: inout [Action]) {
        if unacknowledged.isEmpty { lastProgress = now }
        unacknowledged.append((nextSequence, bytes, posted))
        nextSequence += 1
        if isWelcomed { transmit(bytes, now: now, into: &actions) }
    }

    /// Numbers and sends waiting messages while the window has room.
    private mutating func numberWaiting(now: ContinuousClock.Instant, into actions: inout [Action]) {
        while !windowIsFull && waitingStart < waiting.count {
            switch waiting[waitingStart] {
            case .frame(let frame, _, let posted): number(frame, posted: posted, now: now, into: &actions)
            case .other(let body): number(body, posted: 1, now: now, into: &actions)
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

    private mutating func transmit(_ bytes: [UInt8], now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard isConnected else { return }
        actions.append(.send(bytes))
        lastSent = now
    }

    private mutating func acknowledge(through sequence: UInt64, now: ContinuousClock.Instant, into actions: inout [Action]) {
        guard sequence > acknowledged else { return }
        acknowledged = sequence
        lastProgress = now
        let keep = unacknowledged.firstIndex(where: { $0.sequence > sequence }) ?? unacknowledged.count
        let posted = unacknowledged[..<keep].reduce(0) { $0 + $1.posted }
        unacknowledged.removeFirst(keep)
        actions.append(.acknowledged(posted: posted))
        numberWaiting(now: now, into: &actions)
    }

    /// Frames from now on in v1, and the packed ones waiting for an ack re-encoded in v1.
    private mutating func fallBackToV1() {
        frameFormat = .v1
        unacknowledged = unacknowledged.map { entry in
            guard var message = try? WireCodec.decode(Touchsync_V1_AgentMessage.self, from: entry.bytes),
                case .frame(let proto) = message.body, !proto.packedChanges.isEmpty,
                let frame = try? TouchFrame(proto, sequence: message.sequence)
            else { return entry }
            message.frame = frame.proto(.v1)
            return (entry.sequence, WireCodec.encode(message), entry.posted)
        }
    }

    /// The hub cannot resume this session (it restarted without it, or
    /// forgot it): start a new one and number the waiting messages from 1.
    private mutating func startNewSession(now: ContinuousClock.Instant, into actions: inout [Action]) {
        actions.append(.newSession(waiting: unacknowledged.count))
        sessionID = newSessionID()
        acknowledged = 0
        var sequence: UInt64 = 0
        unacknowledged = unacknowledged.map { entry in
            sequence += 1
            guard var message = try? WireCodec.decode(Touchsync_V1_AgentMessage.self, from: entry.bytes) else { return entry }
            message.sequence = sequence
            return (sequence, WireCodec.encode(message), entry.posted)
        }
        nextSequence = sequence + 1
        isWelcomed = false
        lastProgress = now
        sayHello(now: now, into: &actions)
    }
}

/// SplitMix64: the agent's back-off jitter, seeded (a test replays it).
struct SplitMixRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
