import TouchSyncWaiting
import TouchSyncAccess
import Foundation
import HeapModule
import Logging
import Synchronization
import TouchSyncClientCore
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
    /// Times the agent followed its board to another hub (WRONG_HUB naming it).
    var hubMoves: UInt64 = 0
    /// Bytes handed to the socket, resends and heartbeats included.
    var bytesSent = 0
}

/// State one agent's callers and its driver thread share. Callers that
/// wait (`flush`, `waitUntilWelcomed`) wait on continuations the driver
/// resumes (outside the lock) when acknowledgements or a welcome arrive.
final class AgentShared: Sendable {
    let progress = Mutex<AgentCounters>(AgentCounters())
    /// Why the hub refused this agent's hello, when it did (a board limit, a
    /// bad board name, another protocol version): retrying will not help.
    let helloRefusal = Mutex<String?>(nil)
    /// The namespace the hub gave this agent in its last welcome (nil: never welcomed).
    let welcomedAs = Mutex<String?>(nil)

    /// Callers waiting for acknowledgements or an answer to the hello.
    let waiters = ConditionWaiters()

    /// Waits until the hub has acknowledged every message posted so far; false on time-out.
    func flush(timeout: Duration) async -> Bool {
        let target = progress.withLock { $0.posted }
        return await waiters.wait(timeout: timeout) { [self] in progress.withLock { $0.acknowledged >= target } ? true : nil } ?? false
    }

    /// Waits until the hub welcomes (true) or refuses (false) this agent; false on time-out.
    func waitUntilWelcomed(timeout: Duration) async -> Bool {
        await waiters.wait(timeout: timeout) { [self] in
            if welcomedAs.withLock({ $0 }) != nil { return true }
            if helloRefusal.withLock({ $0 }) != nil { return false }
            return nil
        } ?? false
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
    case detach(connection: Int, goodbye: Bool, done: (@Sendable () -> Void)? = nil)
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
/// (which owns the socket): the transport of an `AgentProtocol` (the rules:
/// numbering, the window, coalescing, acks, back-off, resend), which it
/// feeds with what the socket receives and whose actions it carries out.
final class AgentConnection {
    let configuration: AgentConfiguration
    let identity: String
    private let context: ZMQContext
    private let report: @Sendable (AgentEvent) -> Void
    let shared: AgentShared
    private let logger: Logger
    private var rules: AgentProtocol
    /// The hubs configured (`hubEndpoint` may list several, comma-separated:
    /// hubs sharing a board store); after silence the agent tries the next.
    private let configuredHubs: [String]
    private var configuredIndex = 0
    /// The hub connected to: a configured one, or the one a WRONG_HUB named.
    private var hubEndpoint: String

    private(set) var socket: ZMQSocket? = nil
    /// A multiplexed agent's shared connection (then `socket` stays nil), and its channel there.
    var link: MultiplexedLink? = nil
    var channel: UInt32 = 0
    /// A multiplexed agent's driver's shared connection to a hub endpoint (nil: an agent with a socket of its own).
    var linkFor: ((String) -> MultiplexedLink)? = nil
    /// Set when `socket` is replaced or closed, for the driver's readiness set; the driver clears it.
    var socketChanged = false
    /// Set when something was sent since the last receive: a send can take
    /// the socket's read signal, so the driver receives after it.
    var sentSinceReceive = false
    /// Handshake events of `socket`: how a refused key or a plain-text/CURVE
    /// mismatch becomes a clear error instead of silence.
    private var monitor: ZMQHandshakeMonitor? = nil
    private var handshakeFailures = 0

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
        configuredHubs = configuration.hubEndpoint.split(separator: ",").map { String($0) }.filter { !$0.isEmpty }
        hubEndpoint = configuredHubs.first ?? configuration.hubEndpoint
        var settings = AgentProtocol.Settings(
            board: configuration.board, clientName: configuration.clientName, heartbeatInterval: configuration.heartbeatInterval,
            hubTimeout: configuration.hubTimeout, reconnectDelay: configuration.reconnectDelay, maxInFlight: configuration.maxInFlight,
            delegation: configuration.delegation, wireFormat: configuration.wireFormat)
        settings.multiplexed = configuration.multiplexed
        settings.roleLimit = configuration.roleLimit
        settings.wallClock = { Int64(Date().timeIntervalSince1970 * 1e6) }
        rules = AgentProtocol(settings: settings, now: .now, seed: UInt64.random(in: 0...UInt64.max), newSessionID: Self.newSessionID)
    }

    func close() {
        if socket != nil { socketChanged = true }
        socket?.close()
        socket = nil
        monitor?.close()
        monitor = nil
    }

    /// When `runTimers` next has something to do (every 250 ms at most while
    /// a handshake monitor may have news).
    func deadline(now: ContinuousClock.Instant) -> ContinuousClock.Instant {
        let deadline = Self.deadline(of: &rules)
        return monitor == nil ? deadline : min(deadline, now + .milliseconds(250))
    }

    /// The rules' deadline, read in place: a plain read of this class's
    /// struct property for a getter of another module copied the whole
    /// protocol state (its queue, its names) for every connection at every turn.
    private static func deadline(of rules: inout AgentProtocol) -> ContinuousClock.Instant { rules.deadline }

    func queue(changes: [TouchChange], alive: [TouchID]?, now: ContinuousClock.Instant) {
        shared.progress.withLock { $0.taken += 1 }
        perform(rules.queue(changes: changes, alive: alive, now: now), now: now)
    }

    func queue(_ body: Touchsync_V1_AgentMessage.OneOf_Body, now: ContinuousClock.Instant) {
        shared.progress.withLock { $0.taken += 1 }
        perform(rules.queue(body, now: now), now: now)
    }

    /// Carries out what the rules decided.
    private func perform(_ actions: [AgentProtocol.Action], now: ContinuousClock.Instant) {
        for action in actions {
            switch action {
            case .connect:
                connect(now: now)
            case .disconnect(let stalled):
                logger.info(
                    stalled ? "acknowledgements stalled: reconnecting" : "hub silent: reconnecting",
                    metadata: ["endpoint": "\(hubEndpoint)", "agent": "\(identity)"])
                report(.disconnected)
                // A hub to pass over (another configured one, or a redirect's owner): with
                // one hub and no redirect there is nowhere else to look, so no searching either.
                if !stalled && configuredHubs != [hubEndpoint] { rules.hubWentSilent(hubEndpoint, now: now) }
                close()
                tryAnotherHub(now: now)
            case .send(let bytes) where link != nil:
                link!.enqueue(channel: channel, bytes)
                shared.progress.withLock { $0.bytesSent += bytes.count + 6 }  // its channel part and framing
            case .send(let bytes):
                guard let socket else { continue }
                do {
                    // Never block the driver: a message the socket cannot take now stays
                    // unacknowledged and goes again after the next welcome.
                    sentSinceReceive = true
                    if try socket.send(bytes, dontWait: true) { shared.progress.withLock { $0.bytesSent += bytes.count } }
                } catch {
                    logger.debug("agent send failed", metadata: ["error": "\(error)"])
                }
            case .welcomed(let user, let appliedThrough):
                shared.helloRefusal.withLock { $0 = nil }
                shared.welcomedAs.withLock { $0 = user }
                shared.waiters.signal()
                report(.welcomed(user: user, appliedThrough: appliedThrough))
            case .acknowledged(let posted):
                let through = shared.progress.withLock { progress in
                    progress.acknowledged += UInt64(posted)
                    return progress.acknowledged
                }
                shared.waiters.signal()
                report(.acknowledged(through: through))
            case .coalesced:
                shared.progress.withLock { $0.coalesced += 1 }
            case .busy(let retry):
                shared.progress.withLock { $0.busyNotices += 1 }
                report(.busy(retryAfter: retry))
            case .refused(let sequence, let code, let message, let postedAhead):
                let posted = postedAhead.map { ahead in shared.progress.withLock { $0.acknowledged } + UInt64(ahead) }
                report(.refused(sequence: sequence, code: code, message: message, posted: posted))
            case .helloRefused(let why):
                shared.helloRefusal.withLock { $0 = why }
                shared.waiters.signal()
            case .redirect(let ingest, let hub):
                logger.notice(
                    "another hub serves the board: following it", metadata: ["from": "\(hubEndpoint)", "to": "\(ingest)", "hub": "\(hub)"])
                shared.progress.withLock { $0.hubMoves += 1 }
                report(.disconnected)
                close()
                hubEndpoint = ingest
            case .ownerSilent(let hub):
                logger.info(
                    "the board's owner went silent here: asking the hubs again", metadata: ["from": "\(hubEndpoint)", "owner": "\(hub)"])
                report(.disconnected)
                close()
                tryAnotherHub(now: now)
            case .newSession(let waiting):
                logger.notice(
                    "the hub cannot resume this agent's session: starting a new one",
                    metadata: ["agent": "\(identity)", "waiting": "\(waiting)"])
            }
        }
    }

    private func connect(now: ContinuousClock.Instant) {
        if let linkFor {
            // The shared connection to the hub this agent looks for now (a redirect or a silent hub moves it).
            let link = linkFor(hubEndpoint)
            self.link = link
            do { try link.open(now: now) } catch {
                logger.warning("agent cannot connect", metadata: ["endpoint": "\(link.endpoint)", "error": "\(error)"])
                rules.connectFailed(now: now)
                return
            }
            perform(rules.connected(now: now), now: now)
            return
        }
        do {
            let socket = try Self.dealer(
                context: context, curve: configuration.curve, identity: identity, handshakeTimeout: configuration.handshakeTimeout)
            if configuration.monitorsHandshake { monitor = try? ZMQHandshakeMonitor(socket, context: context) }
            try socket.connect(hubEndpoint)
            self.socket = socket
            socketChanged = true
            perform(rules.connected(now: now), now: now)
        } catch {
            logger.warning(
                "agent cannot connect", metadata: ["endpoint": "\(hubEndpoint)", "error": "\(error)"])
            close()
            rules.connectFailed(now: now)
            tryAnotherHub()
        }
    }

    /// After silence or a failed connection: the next configured hub (the
    /// same one when only one is configured; back to the configured ones
    /// after a redirect's hub went silent), passing over one that went
    /// silent lately.
    private func tryAnotherHub(now: ContinuousClock.Instant = .now) {
        guard !configuredHubs.isEmpty else { return }
        guard configuredHubs.count > 1 || hubEndpoint != configuredHubs[configuredIndex] else { return }
        if hubEndpoint == configuredHubs[configuredIndex] { configuredIndex = (configuredIndex + 1) % configuredHubs.count }
        if configuredHubs.count > 1 && rules.wentSilentLately(configuredHubs[configuredIndex], now: now) {
            configuredIndex = (configuredIndex + 1) % configuredHubs.count
        }
        hubEndpoint = configuredHubs[configuredIndex]
    }

    /// Reads every reply waiting into `reply` (the driver's reusable message),
    /// until the socket has none (and again if answering them sent something,
    /// which may have taken the read signal).
    func receiveReplies(into reply: ZMQMessage, now: ContinuousClock.Instant) {
        repeat {
            sentSinceReceive = false
            while let socket, (try? socket.receive(into: reply, dontWait: true)) == true {
                let decoded = reply.withUnsafeBytes { bytes in
                    Result { () throws(WireError) in try WireCodec.decode(Touchsync_V1_HubReply.self, from: bytes) }
                }
                guard case .success(let message) = decoded else {
                    rules.heard(now: now)
                    continue
                }
                perform(rules.received(message, now: now), now: now)
            }
        } while sentSinceReceive && socket != nil
    }

    /// A reply the shared connection received on this agent's channel.
    func received(_ reply: Touchsync_V1_HubReply, now: ContinuousClock.Instant) {
        perform(rules.received(reply, now: now), now: now)
    }

    /// The shared connection found the hub silent: this channel says hello again after a back-off.
    func connectionLost(now: ContinuousClock.Instant) {
        rules.connectionLost(now: now)
        report(.disconnected)
        if configuredHubs != [hubEndpoint] { rules.hubWentSilent(hubEndpoint, now: now) }
        tryAnotherHub(now: now)
    }

    /// A DEALER for a hub's ingest, set up as every agent connection is (not
    /// connected yet): CURVE keys and a random routing id, or the plain
    /// routing id `identity`; a deep send queue; the handshake's time limit.
    static func dealer(context: ZMQContext, curve: CurveClientKeys?, identity: String, handshakeTimeout: Duration) throws -> ZMQSocket {
        let socket = try ZMQSocket(context, type: .dealer)
        if let curve {
            try socket.setCurveServerKey(curve.serverPublicKey)
            try socket.setCurvePublicKey(curve.client.publicKey)
            try socket.setCurveSecretKey(curve.client.secretKey)
            // The key names the user; a random routing id per connection cannot be claimed by anyone else.
            try socket.setRoutingID(newSessionID())
        } else {
            try socket.setRoutingID(Array(identity.utf8))
        }
        try socket.setSendHighWaterMark(100_000)
        try socket.setHandshakeInterval(milliseconds: Int32(clamping: handshakeTimeout.components.seconds * 1000))
        return socket
    }

    static func newSessionID() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Tells the hub this agent leaves on purpose, and lets the socket
    /// deliver it (briefly) when it closes.
    func sayGoodbye(now: ContinuousClock.Instant) {
        let actions = rules.goodbye(now: now)
        guard !actions.isEmpty else { return }
        perform(actions, now: now)
        link?.flush(now: now)
        try? socket?.setLinger(milliseconds: 200)
    }

    /// Turns handshake failures into a refusal callers can show: retrying
    /// with the same keys will not help.
    private func checkHandshakes() {
        guard let monitor else { return }
        for event in monitor.events() {
            guard let problem = Self.handshakeProblem(event, curve: configuration.curve != nil, failures: &handshakeFailures) else { continue }
            logger.error("cannot connect to the hub", metadata: ["agent": "\(identity)", "problem": "\(problem)"])
            handshakeFailed(problem)
        }
    }

    /// The hub will not take this agent's key (or speaks the other of plain text and CURVE).
    func handshakeFailed(_ problem: String) {
        shared.helloRefusal.withLock { $0 = problem }
        shared.waiters.signal()
        report(.refused(sequence: 0, code: nil, message: problem, posted: nil))
    }

    /// A handshake event in words, or nil when it is no problem (yet: one failure may be a network blip).
    static func handshakeProblem(_ event: ZMQHandshakeEvent, curve: Bool, failures: inout Int) -> String? {
        switch event {
        case .succeeded:
            failures = 0
            return nil
        case .refused(let code):
            return "the hub refused this key (authentication status \(code)): ask its operator to allow it (touchsync keys allow)"
        case .protocolError:
            return curve
                ? "the hub does not speak CURVE (a plain-text hub?): drop --key and --hub-key, or check the endpoint"
                : "the hub requires CURVE: pass --key and --hub-key"
        case .failed:
            // A wrong hub key (the hub cannot decrypt our hello), or plain text to a CURVE hub.
            failures += 1
            guard failures >= 2 else { return nil }
            return curve
                ? "the CURVE handshake with the hub fails: is --hub-key the hub's public key?"
                : "the hub refuses the handshake: it probably requires CURVE (pass --key and --hub-key)"
        }
    }

    /// Connects when due, reconnects on silence, sends heartbeats when idle.
    func runTimers(now: ContinuousClock.Instant) {
        if socket != nil { checkHandshakes() }
        perform(rules.tick(now: now), now: now)
    }
}

/// A thread that owns and drives agent connections, one or many: other
/// threads only post commands to its mailbox, so every socket stays on this
/// thread from creation to close.
///
/// The thread sleeps on a `ZMQReadySet` (epoll over each socket's signal
/// descriptor and the mailbox), so a wake-up costs the sockets that have
/// something, not all of them: `zmq_poll` over hundreds of sockets, or
/// reading each every few milliseconds, kept a gateway with 2,000 idle tabs
/// at half a core.
final class AgentDriver {
    /// nil: a detached agent's place (an `AgentHost` reuses it).
    private var connections: [AgentConnection?]
    /// The signal descriptor watched for each connection's socket.
    private var watched: [Int32?] = []
    /// Connections by when their timers are due. An entry is current when it
    /// matches `scheduled` for its connection; others are skipped when popped.
    private var due = Heap<Due>()
    private var scheduled: [ContinuousClock.Instant?] = []
    private struct Due: Comparable {
        let deadline: ContinuousClock.Instant
        let index: Int
        static func < (a: Due, b: Due) -> Bool { a.deadline < b.deadline }
    }
    private let mailbox: Mailbox<AgentCommand>
    private let reply = ZMQMessage()
    private static let mailboxToken = UInt64.max
    /// Shared connections of multiplexed agents, one per hub endpoint; watched as `linkToken(i)`.
    private var links: [MultiplexedLink] = []
    private var watchedLinks: [Int32?] = []
    private static func linkToken(_ index: Int) -> UInt64 { UInt64.max - 1 - UInt64(index) }
    private static let firstLinkToken = UInt64.max - 1 - 65_536

    /// The least time between two turns that take the mailbox: a command
    /// waits in it until `gatherInterval` has passed since the last such turn
    /// (at once when that was longer ago), so a busy driver sends many
    /// agents' frames per turn and a quiet one adds no delay (zero: always at once).
    private let gatherInterval: Duration

    init(connections: [AgentConnection], mailbox: Mailbox<AgentCommand>, gatherInterval: Duration = .zero) {
        self.connections = connections.map { $0 }
        self.mailbox = mailbox
        self.gatherInterval = gatherInterval
    }

    func run() {
        defer {
            for case let connection? in connections { connection.close() }
            for link in links { link.close() }
            // Whoever waits for a detach that came too late is told it is done: the connection is closed.
            for case .detach(_, _, let done?) in mailbox.close() { done() }
        }
        let clock = ContinuousClock()
        let ready: ZMQReadySet
        do {
            ready = try ZMQReadySet()
            try ready.add(mailbox.fileDescriptor, token: Self.mailboxToken)
        } catch {
            return
        }
        var touched: [Int] = connections.indices.map { $0 }  // connections that sent, changed sockets or moved their deadlines
        var readable: [Int] = []
        var mailboxReady = false
        /// Commands wait in the mailbox until then (with a gather interval).
        var mailboxDue: ContinuousClock.Instant? = nil
        var mailboxTaken = clock.now - gatherInterval
        for index in connections.indices { schedule(index, at: clock.now) }
        while true {
            var now = clock.now
            // Only connections whose timers are due run them: a wake-up with
            // thousands of quiet connections does not scan them all.
            while let first = due.min, first.deadline <= now {
                due.removeMin()
                guard first.index < scheduled.count, scheduled[first.index] == first.deadline else { continue }
                scheduled[first.index] = nil  // also for a detached place: an agent attached there later must be scheduled
                guard let connection = connections[first.index] else { continue }
                if connection.deadline(now: now) <= now { connection.runTimers(now: now) }
                touched.append(first.index)
                schedule(first.index, at: max(connection.deadline(now: now), now + .milliseconds(1)))
            }
            for link in links {
                guard let problem = link.handshakeProblem() else { continue }
                for connection in connections where connection?.link === link { connection?.handshakeFailed(problem) }
            }
            for link in links where link.deadline <= now && link.tick(now: now) {
                for (index, connection) in connections.enumerated() where connection?.link === link {
                    connection?.connectionLost(now: now)
                    touched.append(index)
                }
            }
            settle(&touched, ready: ready, now: now)
            mailboxReady = false
            readable.removeAll(keepingCapacity: true)
            var nextDue = due.min?.deadline
            for link in links where link.socket != nil { nextDue = min(nextDue ?? link.deadline, link.deadline) }
            if links.contains(where: \.watchesHandshakes) { nextDue = min(nextDue ?? now + .milliseconds(250), now + .milliseconds(250)) }
            if let mailboxDue { nextDue = min(nextDue ?? mailboxDue, mailboxDue) }
            let wakeUp = nextDue.map { ZMQPoller.timeout(until: $0, now: now) } ?? -1
            var readableLinks: [Int] = []
            do {
                try ready.wait(timeoutMilliseconds: wakeUp) { token in
                    if token == Self.mailboxToken {
                        mailboxReady = true
                    } else if token >= Self.firstLinkToken {
                        readableLinks.append(Int(UInt64.max - 1 - token))
                    } else {
                        readable.append(Int(token))
                    }
                }
            } catch {
                return  // not EINTR (that returns no tokens): waiting again would spin
            }
            now = clock.now
            for linkIndex in readableLinks where linkIndex < links.count { receive(on: links[linkIndex], now: now, touched: &touched) }
            for index in readable where index < connections.count {
                connections[index]?.receiveReplies(into: reply, now: now)
                touched.append(index)
            }
            if mailboxReady {
                mailbox.clearSignal()
                if mailboxDue == nil { mailboxDue = max(now, mailboxTaken + gatherInterval) }
            }
            if let due = mailboxDue, due <= now {
                mailboxDue = nil
                mailboxTaken = now
                for command in mailbox.take() {
                    switch command {
                    case .stop(let goodbye):
                        if goodbye {
                            for case let connection? in connections { connection.sayGoodbye(now: now) }
                            for link in links { link.sayGoodbye(now: now) }
                        }
                        return
                    case .frame(let index, let changes, let alive):
                        connections[index]?.queue(changes: changes, alive: alive, now: now)
                        touched.append(index)
                    case .numbered(let index, let body):
                        connections[index]?.queue(body, now: now)
                        touched.append(index)
                    case .attach(let index, let seed):
                        while connections.count <= index { connections.append(nil) }
                        connections[index]?.close()
                        let connection = AgentConnection(
                            configuration: seed.configuration, identity: seed.identity, context: seed.context, shared: seed.shared,
                            logger: seed.logger, report: seed.report)
                        if seed.configuration.multiplexed {
                            connection.linkFor = { [unowned self] endpoint in self.link(to: endpoint, for: seed, now: clock.now) }
                            connection.channel = UInt32(index + 1)
                        }
                        connections[index] = connection
                        touched.append(index)  // it connects at its first timers, now
                    case .detach(let index, let goodbye, let done):
                        defer { done?() }
                        guard index < connections.count, let connection = connections[index] else { break }
                        if goodbye { connection.sayGoodbye(now: now) }
                        connection.close()
                        connections[index] = nil
                        touched.append(index)
                    }
                }
            }
        }
    }

    /// The shared connection to `endpoint`, made on first use (the seed's keys and timings).
    private func link(to endpoint: String, for seed: AgentSeed, now: ContinuousClock.Instant) -> MultiplexedLink {
        if let existing = links.first(where: { $0.endpoint == endpoint }) { return existing }
        let made = MultiplexedLink(
            endpoint: endpoint, curve: seed.configuration.curve, identity: seed.configuration.connectionIdentity ?? "mux-" + String((0..<12).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement()! }),
            heartbeatInterval: seed.configuration.heartbeatInterval, hubTimeout: seed.configuration.hubTimeout,
            handshakeTimeout: seed.configuration.handshakeTimeout, context: seed.context, logger: seed.logger, now: now)
        links.append(made)
        return made
    }

    /// Hands each reply the link received to the agent on its channel.
    private func receive(on link: MultiplexedLink, now: ContinuousClock.Instant, touched: inout [Int]) {
        link.receive(into: reply, now: now) { channel, message in
            guard channel > 0 else { return }  // the link's own (an answer to its heartbeat)
            let index = Int(channel) - 1
            guard index < connections.count, let connection = connections[index], connection.link === link else { return }
            connection.received(message, now: now)
            touched.append(index)
        }
    }

    /// Puts connection `index`'s timers at `deadline` unless an entry at or
    /// before it is current (popping that one schedules it again).
    private func schedule(_ index: Int, at deadline: ContinuousClock.Instant) {
        while scheduled.count <= index { scheduled.append(nil) }
        if let current = scheduled[index], current <= deadline { return }
        scheduled[index] = deadline
        due.insert(Due(deadline: deadline, index: index))
    }

    /// After a turn: reads from connections that sent (a send can take the
    /// read signal), then watches the signal descriptors of sockets that
    /// changed. All removals come before all additions: a closed socket's
    /// descriptor number can already be a new socket's.
    private func settle(_ touched: inout [Int], ready: ZMQReadySet, now: ContinuousClock.Instant) {
        while !touched.isEmpty {
            let indexes = touched
            touched.removeAll(keepingCapacity: true)
            while watched.count < connections.count { watched.append(nil) }
            for index in indexes {
                guard index < connections.count, let connection = connections[index] else { continue }
                if connection.sentSinceReceive { connection.receiveReplies(into: reply, now: now) }
                schedule(index, at: max(connection.deadline(now: now), now + .milliseconds(1)))  // never a spin on a past deadline
            }
            // What the turn's agents queued on shared connections leaves now, one message per link.
            for (linkIndex, link) in links.enumerated() {
                link.flush(now: now)
                if link.sentSinceReceive { receive(on: link, now: now, touched: &touched) }
                while watchedLinks.count < links.count { watchedLinks.append(nil) }
                guard link.socketChanged else { continue }
                link.socketChanged = false
                if let old = watchedLinks[linkIndex] { ready.remove(old) }
                watchedLinks[linkIndex] = nil
                if let socket = link.socket, let descriptor = try? ZMQReadySet.signalDescriptor(of: socket) {
                    if (try? ready.add(descriptor, token: Self.linkToken(linkIndex))) != nil { watchedLinks[linkIndex] = descriptor }
                    receive(on: link, now: now, touched: &touched)
                }
            }
            var changed = Set<Int>()
            for index in indexes where index < connections.count {
                let connection = connections[index]
                if connection?.socketChanged ?? true || (connection?.socket == nil && watched[index] != nil) { changed.insert(index) }
            }
            for index in changed {
                if let old = watched[index] { ready.remove(old) }
                watched[index] = nil
            }
            for index in changed {
                guard let connection = connections[index] else { continue }
                connection.socketChanged = false
                guard let socket = connection.socket, let descriptor = try? ZMQReadySet.signalDescriptor(of: socket) else { continue }
                do {
                    try ready.add(descriptor, token: UInt64(index))
                    watched[index] = descriptor
                } catch {
                    // Not watched (epoll full): it is still read after each of its sends,
                    // a heartbeat a second at least, so replies are late, never lost.
                }
                // Replies that came before the watch began signalled no one.
                connection.receiveReplies(into: reply, now: now)
                if connection.socketChanged { touched.append(index) }
            }
        }
    }
}
