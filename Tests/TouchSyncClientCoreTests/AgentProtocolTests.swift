import HubCoreHarness
import PropertyChecks
import Testing
import TouchSyncClientCore
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncSimulation
import TouchSyncWire

/// `AgentProtocol` (the agent's rules, no I/O) against `HubCore` in one
/// process, on a manual clock, over a simulated link: each connection
/// carries messages with a delay, sometimes out of order or twice, loses
/// what is in flight when it breaks, sometimes loses a message silently (a
/// connection replaced underneath), and partitions for stretches that the
/// agent must notice by its own time-outs. Afterwards every posted message is acknowledged, and
/// the hub's board holds exactly the strokes a reference board reduced from
/// the same stream: nothing lost, nothing applied twice.
@Suite("AgentProtocol over a faulty link")
struct AgentProtocolTests {
    @Test func nothingAcknowledgedIsLostNorAppliedTwice() async {
        await checkProperty(count: 40, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 30...250)) { seed, steps in
            var random = SplitMix64(seed: seed)
            let hub = CoreHarness { configuration in
                configuration.limits.maxMessagesPerSecond = 1_000_000
                configuration.timing.livenessTimeout = .seconds(3600)
                configuration.timing.abandonTimeout = .seconds(3600)
            }
            let peer = Peer(routingID: Array("agent".utf8))
            var settings = AgentProtocol.Settings(board: "wall", hubTimeout: .milliseconds(300), maxInFlight: 1 + Int(seed % 8))
            settings.heartbeatInterval = .milliseconds(100)
            settings.reconnectDelay = .milliseconds(10) ... .milliseconds(200)
            var agent = AgentProtocol(settings: settings, now: hub.now, seed: seed) {
                (0..<16).map { _ in UInt8.random(in: 0...255) }
            }
            let loss = [0, 0.02, 0.1][Int(seed % 3)]
            let duplication = [0, 0.05][Int(seed / 3 % 2)]
            let reorders = seed / 6 % 2 == 1
            // The link: messages in flight each way, with the step they arrive at; a connection number.
            var toHub: [(due: Int, bytes: [UInt8])] = []
            var toAgent: [(due: Int, reply: Touchsync_V1_HubReply)] = []
            var connected = false
            var partitionedUntil = 0
            var posted = 0
            var acknowledged = 0
            var reconnects = 0
            var failures: [String] = []

            var profile = SimulationProfile()
            profile.users = 1
            profile.fingersPerUser = 1 + Int(seed % 3)
            profile.cancelRate = 0.03
            profile.clearRate = 0.02
            var simulator = SessionSimulator(seed: seed, profile: profile)
            var reference = BoardState()
            var scratch: [StrokeDiff] = []
            let user = UserNamespace("agent")

            func carryOut(_ actions: [AgentProtocol.Action], step: Int) {
                for action in actions {
                    switch action {
                    case .connect:
                        connected = step >= partitionedUntil
                        toHub.removeAll()
                        toAgent.removeAll()
                        if connected {
                            carryOut(agent.connected(now: hub.now), step: step)
                        } else {
                            reconnects += 1  // a partition met before any connection: noticed as a failed connect
                            agent.connectFailed(now: hub.now)
                        }
                    case .disconnect:
                        reconnects += 1
                        connected = false
                        toHub.removeAll()
                        toAgent.removeAll()  // the hub is not told: a ROUTER cannot tell
                    case .send(let bytes):
                        guard connected, Double.random(in: 0..<1, using: &random) >= loss else { continue }
                        toHub.append((step + Int(random.next() % 3), bytes))
                        if Double.random(in: 0..<1, using: &random) < duplication { toHub.append((step + Int(random.next() % 4), bytes)) }
                    case .acknowledged(let count): acknowledged += count
                    case .refused(let sequence, let code, let message, _):
                        if code != .outOfOrder && code != .notWelcomed && code != .cannotResume {
                            failures.append("refused \(sequence): \(String(describing: code)) \(message)")
                        }
                    case .helloRefused(let why): failures.append(why)
                    case .welcomed, .coalesced, .busy: break
                    case .newSession: failures.append("the hub could not resume the session")
                    case .redirect(let ingest, _): failures.append("redirected to \(ingest) by a hub that holds every board")
                    case .ownerSilent(let hub): failures.append("told \(hub) is the owner by a hub that holds every board")
                    }
                }
            }

            func routeReplies(_ actions: [HubAction], step: Int) {
                for reply in actions.replies(to: peer) {
                    guard connected, step >= partitionedUntil, Double.random(in: 0..<1, using: &random) >= loss else { continue }
                    toAgent.append((step + Int(random.next() % 3), reply.proto))
                    if Double.random(in: 0..<1, using: &random) < duplication { toAgent.append((step + Int(random.next() % 4), reply.proto)) }
                }
            }

            func deliver(step: Int) {
                // Whatever is due arrives, in the order of when it is due: a
                // later message with a shorter delay overtakes an earlier one.
                if reorders {
                    toHub = toHub.enumerated().sorted { ($0.element.due, $0.offset) < ($1.element.due, $1.offset) }.map(\.element)
                    toAgent = toAgent.enumerated().sorted { ($0.element.due, $0.offset) < ($1.element.due, $1.offset) }.map(\.element)
                }
                while let first = toHub.first, first.due <= step {
                    toHub.removeFirst()
                    let request = first.bytes.withUnsafeBytes { AgentRequest.decode($0) }
                    guard case .success(let decoded) = request else {
                        failures.append("undecodable message")
                        continue
                    }
                    routeReplies(hub.send(.agentMessage(from: peer, decoded, bytes: first.bytes.count)), step: step)
                }
                while let first = toAgent.first, first.due <= step {
                    toAgent.removeFirst()
                    carryOut(agent.received(first.reply, now: hub.now), step: step)
                }
            }

            for step in 0..<steps {
                // One partition in every run (longer than the agent's 300 ms time-out), more at random.
                if step == steps / 2 || Double.random(in: 0..<1, using: &random) < 0.01 {
                    // A partition: what is in flight is lost, and nothing passes for a while.
                    partitionedUntil = step + 60 + Int(random.next() % 60)
                    toHub.removeAll()
                    toAgent.removeAll()
                }
                if step >= partitionedUntil || !connected {
                    switch simulator.next() {
                    case .frame(_, let frame, _):
                        posted += 1
                        carryOut(agent.queue(changes: frame.changes, alive: frame.aliveTouches, now: hub.now), step: step)
                        do { try reference.reduce(frame, from: user, style: .default, into: &scratch) } catch { failures.append("the reference refused: \(error)") }
                    case .clear(_, let scope):
                        posted += 1
                        var message = Touchsync_V1_Clear()
                        message.scope = scope == .own ? .own : .board
                        carryOut(agent.queue(.clear(message), now: hub.now), step: step)
                        reference.clear(scope, by: user, into: &scratch)
                    }
                }
                if step < partitionedUntil { toHub.removeAll(); toAgent.removeAll() }
                hub.advance(.milliseconds(10))
                deliver(step: step)
                carryOut(agent.tick(now: hub.now), step: step)
                routeReplies(hub.endTurn(), step: step)
            }
            // No more input: once any partition ends, the agent must get everything acknowledged on its own.
            var step = steps
            while (acknowledged < posted || step < partitionedUntil) && step < steps + 3000 {
                hub.advance(.milliseconds(10))
                deliver(step: step)
                carryOut(agent.tick(now: hub.now), step: step)
                routeReplies(hub.endTurn(), step: step)
                step += 1
            }
            #expect(failures.isEmpty, "seed \(seed): \(failures.prefix(3))")
            #expect(reconnects >= 1, "seed \(seed), \(steps) steps: the partition went unnoticed")
            #expect(acknowledged == posted, "seed \(seed): \(acknowledged) of \(posted) posted messages acknowledged")
            let board = hub.core.board("wall") ?? BoardState()
            let strokes = { (state: BoardState) in state.acceptedStrokes.map { Array($0.samples) } }
            #expect(strokes(board) == strokes(reference), "seed \(seed): the hub's accepted strokes differ from the stream's")
            #expect(board.orderedActiveStrokes.map { Array($0.samples) } == reference.orderedActiveStrokes.map { Array($0.samples) })
        }
    }
}

/// WRONG_HUB naming the hub that serves the board: the agent goes there at
/// once with its session and everything unacknowledged, and says hello
/// resuming it; hubs that keep sending it elsewhere make it give up.
@Suite("AgentProtocol follows WRONG_HUB")
struct AgentRedirectTests {
    func wrongHub(to ingest: String, sequence: UInt64 = 0) -> Touchsync_V1_HubReply {
        var error = Touchsync_V1_Error(code: .wrongHub, message: "board b is served by hub hub-b", sequence: sequence)
        error.owner.name = "hub-b"
        error.owner.ingest = ingest
        error.owner.publish = "tcp://b:2"
        error.owner.snapshot = "tcp://b:3"
        var reply = Touchsync_V1_HubReply()
        reply.error = error
        return reply
    }

    @Test func aWrongHubNamingTheOwnerIsFollowedWithTheSession() throws {
        let start = ContinuousClock.now
        var agent = AgentProtocol(settings: .init(board: "b"), now: start, seed: 1) { Array("session".utf8) }
        #expect(agent.tick(now: start) == [.connect])
        _ = agent.connected(now: start)
        var welcome = Touchsync_V1_HubReply()
        welcome.welcome.user = "ann"
        _ = agent.received(welcome, now: start)
        _ = agent.queue(changes: [TouchChange(touch: TouchID(1), phase: .began, samples: [Sample(x: 1, y: 1, time: 0)])], alive: nil, now: start)
        #expect(agent.unacknowledgedCount == 1)

        let moved = agent.received(wrongHub(to: "tcp://b:1"), now: start)
        #expect(moved.contains(.redirect(ingest: "tcp://b:1", hub: "hub-b")))
        #expect(!moved.contains { if case .helloRefused = $0 { true } else { false } })
        #expect(!agent.isConnected && agent.unacknowledgedCount == 1)
        #expect(agent.tick(now: start) == [.connect], "at once, not after a back-off")
        let hello = agent.connected(now: start)
        guard case .send(let bytes) = try #require(hello.first) else { Issue.record("no hello"); return }
        let message = try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: bytes)
        #expect(Array(message.hello.sessionID) == Array("session".utf8) && message.hello.board == "b")
        // Welcomed there: what was not acknowledged goes again.
        let resent = agent.received(welcome, now: start)
        #expect(resent.filter { if case .send = $0 { true } else { false } }.count == 1)
    }

    /// Wire format v2 is asked for in the hello; a hub that speaks only
    /// protocol 1 refuses it with UNSUPPORTED_VERSION, and the agent says
    /// hello again in v1 on the same session, resending its frames in v1
    /// (not packed): nothing lost, no refusal reported. A hub that welcomes
    /// v2 gets packed frames.
    @Test func anAgentFallsBackToV1ForAHubThatSpeaksOnlyV1() throws {
        let start = ContinuousClock.now
        let began = TouchChange(touch: TouchID(1), phase: .began, samples: [Sample(x: 64, y: 64, time: 1000)])
        let moved = TouchChange(touch: TouchID(1), phase: .moved, samples: [Sample(x: 80, y: 70, time: 9000)])
        func sent(_ actions: [AgentProtocol.Action]) throws -> [Touchsync_V1_AgentMessage] {
            try actions.compactMap { if case .send(let bytes) = $0 { bytes } else { nil } }
                .map { try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: $0) }
        }
        var agent = AgentProtocol(settings: .init(board: "b"), now: start, seed: 1) { Array("session".utf8) }
        _ = agent.tick(now: start)
        let hello = try sent(agent.connected(now: start))
        #expect(hello.map(\.hello.protocolVersion) == [2])
        _ = agent.queue(changes: [began], alive: nil, now: start)  // numbered before any welcome: packed
        var refusal = Touchsync_V1_HubReply()
        refusal.error = Touchsync_V1_Error(code: .unsupportedVersion, message: "this hub speaks protocol 1, not 2", sequence: 0)
        let answer = agent.received(refusal, now: start)
        #expect(!answer.contains { if case .helloRefused = $0 { true } else { false } }, "\(answer)")
        #expect(!answer.contains { if case .refused = $0 { true } else { false } }, "\(answer)")
        #expect(try sent(answer).map(\.hello.protocolVersion) == [1], "hello again, in v1")
        #expect(agent.frameFormat == .v1 && agent.unacknowledgedCount == 1)
        var welcome = Touchsync_V1_HubReply()
        welcome.welcome.user = "ann"
        welcome.welcome.protocolVersion = 1
        let resent = try sent(agent.received(welcome, now: start))
        #expect(resent.count == 1 && resent[0].sequence == 1)
        #expect(resent.first?.frame.packedChanges.isEmpty == true && resent.first?.frame.changes.count == 1, "resent in v1")
        #expect(try TouchFrame(resent[0].frame, sequence: 1).changes == [began])
        #expect(try sent(agent.queue(changes: [moved], alive: nil, now: start)).first?.frame.changes.count == 1)

        // A hub that speaks v2 welcomes it: frames go packed.
        var modern = AgentProtocol(settings: .init(board: "b"), now: start, seed: 2) { Array("other".utf8) }
        _ = modern.tick(now: start)
        _ = modern.connected(now: start)
        welcome.welcome.protocolVersion = 2
        _ = modern.received(welcome, now: start)
        let frames = try sent(modern.queue(changes: [began], alive: nil, now: start))
        #expect(frames.count == 1 && !frames[0].frame.packedChanges.isEmpty && frames[0].frame.changes.isEmpty)
        #expect(try TouchFrame(frames[0].frame, sequence: 1).changes == [began])
        #expect(modern.frameFormat == .v2)
    }

    /// The owner died: the other hubs still name it until its lease lapses.
    /// An agent that just found it silent does not go back to it (another
    /// silence time-out), nor count the refusals towards giving up: it asks
    /// the hubs again shortly, and follows once they name someone else, or
    /// the same hub once the silence is two time-outs old.
    @Test func aWrongHubNamingAHubThatJustWentSilentIsAskedAgainNotFollowed() {
        let start = ContinuousClock.now
        var agent = AgentProtocol(settings: .init(board: "b"), now: start, seed: 1) { Array("session".utf8) }
        _ = agent.tick(now: start)
        _ = agent.connected(now: start)
        let silence = start + agent.settings.hubTimeout + .milliseconds(1)
        #expect(agent.tick(now: silence) == [.disconnect(stalled: false)])
        agent.hubWentSilent("tcp://dead:1", now: silence)
        var now = silence
        for _ in 0..<(AgentProtocol.maxRedirects * 3) {
            now = agent.deadline
            #expect(agent.tick(now: now) == [.connect])
            _ = agent.connected(now: now)
            let answer = agent.received(wrongHub(to: "tcp://dead:1"), now: now)
            #expect(answer == [.ownerSilent(hub: "hub-b")], "\(answer)")
            #expect(!agent.isConnected)
            #expect(agent.deadline > now && agent.deadline <= now + agent.settings.reconnectDelay.lowerBound * 3, "soon, without a back-off")
        }
        // Another owner named: followed.
        now = agent.deadline
        _ = agent.tick(now: now)
        _ = agent.connected(now: now)
        #expect(agent.received(wrongHub(to: "tcp://c:1"), now: now).contains(.redirect(ingest: "tcp://c:1", hub: "hub-b")))
        // Two time-outs after the silence the named hub is followed again (it may have come back).
        let later = silence + agent.settings.hubTimeout * 2 + .milliseconds(1)
        _ = agent.tick(now: later)
        _ = agent.connected(now: later)
        #expect(agent.received(wrongHub(to: "tcp://dead:1"), now: later).contains(.redirect(ingest: "tcp://dead:1", hub: "hub-b")))
    }

    /// While an agent looks for a board's new hub (a hub just went silent),
    /// a hello unanswered for a sixth of the hub time-out is asked again on a
    /// new connection (a reply can be lost in a failover's reconnects); the
    /// hub is not taken for silent. A first connection waits the whole
    /// time-out instead (a busy hub is not flooded with hellos).
    @Test func anUnansweredHelloIsAskedAgainOnANewConnectionWhileSearching() {
        let start = ContinuousClock.now
        var agent = AgentProtocol(settings: .init(board: "b"), now: start, seed: 1) { Array("session".utf8) }
        let timeout = agent.settings.hubTimeout
        _ = agent.tick(now: start)
        _ = agent.connected(now: start)
        #expect(agent.tick(now: start + timeout * 0.9).isEmpty, "a first hello waits the whole time-out")
        let silence = start + timeout + .milliseconds(1)
        #expect(agent.tick(now: silence) == [.disconnect(stalled: false)])
        agent.hubWentSilent("tcp://dead:1", now: silence)

        let next = agent.deadline
        #expect(agent.tick(now: next) == [.connect])
        _ = agent.connected(now: next)
        #expect(agent.deadline <= next + timeout / 6)
        #expect(agent.tick(now: next + timeout / 6 - .milliseconds(1)).isEmpty)
        #expect(agent.tick(now: next + timeout / 6 + .milliseconds(1)) == [.disconnect(stalled: true)])
        #expect(!agent.wentSilentLately("tcp://other:1", now: next + timeout / 6))
        // Welcomed on the next connection: no more hello time-out.
        let again = agent.deadline
        #expect(agent.tick(now: again) == [.connect])
        _ = agent.connected(now: again)
        var welcome = Touchsync_V1_HubReply()
        welcome.welcome.user = "ann"
        _ = agent.received(welcome, now: again)
        #expect(!agent.tick(now: again + timeout / 6 * 2).contains { if case .disconnect = $0 { true } else { false } })
    }

    @Test func hubsThatKeepRedirectingAreGivenUpOn() {
        let start = ContinuousClock.now
        var agent = AgentProtocol(settings: .init(board: "b"), now: start, seed: 1) { Array("session".utf8) }
        var redirects = 0
        var refusedForGood = false
        for _ in 0..<20 where !refusedForGood {
            for action in agent.tick(now: start) where action == .connect { _ = agent.connected(now: start) }
            for action in agent.received(wrongHub(to: "tcp://elsewhere:1"), now: start) {
                if case .redirect = action { redirects += 1 }
                if case .helloRefused = action { refusedForGood = true }
            }
        }
        #expect(redirects == AgentProtocol.maxRedirects && refusedForGood)
        // Without an address a WRONG_HUB is final at once.
        var plain = AgentProtocol(settings: .init(board: "b"), now: start, seed: 2) { Array("s".utf8) }
        _ = plain.tick(now: start)
        _ = plain.connected(now: start)
        var bare = Touchsync_V1_HubReply()
        bare.error = Touchsync_V1_Error(code: .wrongHub, message: "not here", sequence: 0)
        #expect(plain.received(bare, now: start).contains { if case .helloRefused = $0 { true } else { false } })
    }
}


/// A refusal says which post it was, so a gateway can tell its tab which of
/// its numbered messages the hub refused; and a hello can ask for less than
/// the hub grants (`role_limit`).
@Suite("AgentProtocol refusals and role limits")
struct AgentRefusalTests {
    @Test func aRefusalOfAMessageHoldingOnePostSaysWhichPostItWas() throws {
        let start = ContinuousClock.now
        var settings = AgentProtocol.Settings(board: "b")
        settings.roleLimit = .draw
        var agent = AgentProtocol(settings: settings, now: start, seed: 1) { Array("session".utf8) }
        _ = agent.tick(now: start)
        let hello = agent.connected(now: start)
        guard case .send(let bytes) = try #require(hello.first) else { Issue.record("no hello"); return }
        #expect(try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: bytes).hello.roleLimit == .draw)
        var welcome = Touchsync_V1_HubReply()
        welcome.welcome.user = "ann"
        _ = agent.received(welcome, now: start)
        var erase = Touchsync_V1_Erase()
        erase.strokeIds = [7]
        for _ in 0..<3 { _ = agent.queue(.erase(erase), now: start) }  // sequences 1, 2, 3: one post each
        var ack = Touchsync_V1_HubReply()
        ack.ack.through = 1
        _ = agent.received(ack, now: start)
        var refusal = Touchsync_V1_HubReply()
        refusal.error = Touchsync_V1_Error(code: .forbidden, message: "stroke 7 is another user's", sequence: 3)
        let actions = agent.received(refusal, now: start)
        // Post 1 is acknowledged; sequence 3 is the second post past it.
        #expect(actions.contains(.refused(sequence: 3, code: .forbidden, message: "stroke 7 is another user's", postedAhead: 2)), "\(actions)")
    }
}
