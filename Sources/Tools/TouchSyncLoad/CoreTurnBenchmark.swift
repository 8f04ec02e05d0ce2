import TouchSyncCore
import TouchSyncHubCore
import TouchSyncSimulation
import TouchSyncWire

/// The hub's core alone, turn by turn, at the shape of a paced hub: a few
/// frames per turn from 20 agents, each turn ended (batch sealed, encoded,
/// acks decided). No sockets and no threads, so a profiler sees only the
/// hub's own work per turn (issue 26, item 4). `tabsShape()` is the shape of
/// 300 browser tabs through a gateway (issue 37): one sample a frame, 30
/// boards, a gathered message's frames a turn, a journal's progress
/// answered every turn.
public struct CoreTurnBenchmark: Sendable {
    public var agents = 20
    public var fingers = 5
    public var turns = 200_000
    /// Frames handled per turn (a paced hub at 100 k samples/s sees 1 to 2).
    public var framesPerTurn = 1
    /// Agent i draws on board i mod `boards`.
    public var boards = 1
    public var coalesced = 2
    public var format = WireFormat.v1
    /// The core journals (its appends carry each sender's progress, acks wait
    /// for the journal's progress, which the benchmark reports synced at each turn's end).
    public var journaled = false
    /// Fingers as a tab's pointer draws: down again at the next event after
    /// lifting, a sample every event, strokes of 20 to 200 samples, no force.
    public var pointerStrokes = false
    /// The hub's time between turns (its timers, heartbeats and rates follow it).
    public var turnInterval = Duration.microseconds(100)
    public var seed: UInt64 = 26

    public init() {}

    /// 300 tabs of one finger, one coalesced and one predicted sample a
    /// frame, ten a board, v2 frames as the gateway sends; 56 frames a turn
    /// (13.9 k frames a second gathered every 8 ms by a gateway's two event loops).
    public static func tabsShape() -> CoreTurnBenchmark {
        var benchmark = CoreTurnBenchmark()
        benchmark.agents = 300
        benchmark.fingers = 1
        benchmark.coalesced = 1
        benchmark.boards = 30
        benchmark.framesPerTurn = 56
        benchmark.turns = 8_000
        benchmark.format = .v2
        benchmark.journaled = true
        benchmark.turnInterval = .milliseconds(4)
        benchmark.pointerStrokes = true
        return benchmark
    }

    public struct Figures: Sendable {
        public var turns: Int
        public var frames: Int
        public var samples: Int
        /// Time in each part, per turn: decoding the frames, handling them, ending the turn.
        public var decodeNanoseconds: Double
        public var handleNanoseconds: Double
        public var turnEndNanoseconds: Double
        public var actionsPerTurn: Double
        /// Frames refused (none in a valid workload) and batches published.
        public var refusals: Int
        public var batches: Int
        /// Acknowledgements sent (with a journal, only once the journal said synced).
        public var acks = 0
        /// The whole of a turn (decode, handle, end), per frame.
        public var nanosecondsPerFrame: Double {
            (decodeNanoseconds + handleNanoseconds + turnEndNanoseconds) * Double(turns) / Double(max(frames, 1))
        }
    }

    public func run() throws -> Figures {
        var configuration = HubConfiguration()
        configuration.limits.maxMessagesPerSecond = 100_000_000
        configuration.limits.maxSamplesPerSecond = 1_000_000_000
        configuration.limits.maxBytesPerSecond = 1 << 40
        configuration.timing.livenessTimeout = .seconds(3600)
        configuration.timing.abandonTimeout = .seconds(3600)
        configuration.limits.boardLimits.maxSamplesPerStroke = .max
        // Never opened: the core is sans-I/O, its appends are actions.
        if journaled { configuration.journal = JournalConfiguration(directory: "/nonexistent/core-turn-benchmark") }
        var now = ContinuousClock.now
        var core = HubCore(configuration: configuration, now: now, wallClockMicroseconds: 1_700_000_000_000_000)
        var profile = SimulationProfile()
        profile.users = agents
        profile.fingersPerUser = fingers
        profile.coalesced = coalesced...coalesced
        profile.predicted = 1...1
        profile.clearRate = 0
        if pointerStrokes {
            profile.beginRate = 1
            profile.idleRate = 0
            profile.strokeLength = 20...200
            profile.withForce = false
        }
        var simulator = SessionSimulator(seed: seed, profile: profile)
        var peers: [UserNamespace: Peer] = [:]
        var actions: [HubAction] = []
        for (index, user) in simulator.users.enumerated() {
            let peer = Peer(id: PeerID(Array(user.rawValue.utf8)), principal: user)
            peers[user] = peer
            var hello = AgentHello(board: "bench-\(index % boards)", sessionID: Array(user.rawValue.utf8))
            hello.protocolVersion = format == .v2 ? 2 : 1
            core.handle(.agentMessage(from: peer, .hello(hello), bytes: 40), now: now, into: &actions)
        }
        guard !actions.contains(where: { if case .reply(_, .error) = $0 { true } else { false } }) else {
            throw CodecBenchmark.Mismatch("a hello was refused: \(actions)")
        }
        // The frames as the agents would send them, numbered per agent.
        var numbers: [UserNamespace: UInt64] = [:]
        var messages: [(peer: Peer, bytes: [UInt8], samples: Int)] = []
        messages.reserveCapacity(turns * framesPerTurn)
        while messages.count < turns * framesPerTurn {
            guard case .frame(let user, let frame, _) = simulator.next() else { continue }
            numbers[user, default: 0] += 1
            messages.append(
                (peers[user]!, frame.encodedMessage(sequence: numbers[user]!, format: format), frame.changes.reduce(0) { $0 + $1.samples.count }))
        }
        var decode = Duration.zero, handle = Duration.zero, turnEnd = Duration.zero
        var actionCount = 0, refusals = 0, batches = 0, acks = 0
        var requests: [AgentRequest] = []
        requests.reserveCapacity(framesPerTurn)
        let clock = ContinuousClock()
        for turn in 0..<turns {
            actions.removeAll(keepingCapacity: true)
            requests.removeAll(keepingCapacity: true)
            let slice = messages[(turn * framesPerTurn)..<((turn + 1) * framesPerTurn)]
            let t0 = clock.now
            for message in slice {
                requests.append(try message.bytes.withUnsafeBytes { try AgentRequest.decode($0).get() })
            }
            let t1 = clock.now
            for (message, request) in zip(slice, requests) {
                core.handle(.agentMessage(from: message.peer, request, bytes: message.bytes.count), now: now, into: &actions)
            }
            let t2 = clock.now
            now += turnInterval
            core.handle(.turnEnded(inputWaiting: false), now: now, into: &actions)
            if journaled {
                // The journal thread's answer: everything appended so far written and synced.
                var ticket: UInt64 = 0
                for case .appendToJournal(let append) in actions { ticket = max(ticket, append.ticket) }
                if ticket > 0 { core.handle(.journalProgress(writtenThrough: ticket, syncedThrough: ticket), now: now, into: &actions) }
            }
            let t3 = clock.now
            decode += t1 - t0
            handle += t2 - t1
            turnEnd += t3 - t2
            actionCount += actions.count
            for action in actions {
                if case .reply(_, .error) = action { refusals += 1 }
                if case .reply(_, .ack) = action { acks += 1 }
                if case .publish(let publication) = action, case .batch = publication.kind { batches += 1 }
            }
        }
        func perTurn(_ duration: Duration) -> Double { Double(duration.components.attoseconds) / 1e9 / Double(turns) + Double(duration.components.seconds) * 1e9 / Double(turns) }
        return Figures(
            turns: turns, frames: messages.count, samples: messages.reduce(0) { $0 + $1.samples },
            decodeNanoseconds: perTurn(decode), handleNanoseconds: perTurn(handle), turnEndNanoseconds: perTurn(turnEnd),
            actionsPerTurn: Double(actionCount) / Double(turns), refusals: refusals, batches: batches, acks: acks)
    }
}
