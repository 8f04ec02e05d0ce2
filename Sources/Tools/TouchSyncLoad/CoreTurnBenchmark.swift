import TouchSyncCore
import TouchSyncHubCore
import TouchSyncSimulation
import TouchSyncWire

/// The hub's core alone, turn by turn, at the shape of a paced hub: a few
/// frames per turn from 20 agents, each turn ended (batch sealed, encoded,
/// acks decided). No sockets and no threads, so a profiler sees only the
/// hub's own work per turn (issue 26, item 4).
public struct CoreTurnBenchmark: Sendable {
    public var agents = 20
    public var fingers = 5
    public var turns = 200_000
    /// Frames handled per turn (a paced hub at 100 k samples/s sees 1 to 2).
    public var framesPerTurn = 1
    public var seed: UInt64 = 26

    public init() {}

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
    }

    public func run() throws -> Figures {
        var configuration = HubConfiguration()
        configuration.limits.maxMessagesPerSecond = 100_000_000
        configuration.limits.maxSamplesPerSecond = 1_000_000_000
        configuration.limits.maxBytesPerSecond = 1 << 40
        configuration.timing.livenessTimeout = .seconds(3600)
        configuration.timing.abandonTimeout = .seconds(3600)
        configuration.limits.boardLimits.maxSamplesPerStroke = .max
        var now = ContinuousClock.now
        var core = HubCore(configuration: configuration, now: now, wallClockMicroseconds: 1_700_000_000_000_000)
        var profile = SimulationProfile()
        profile.users = agents
        profile.fingersPerUser = fingers
        profile.coalesced = 2...2
        profile.predicted = 1...1
        profile.clearRate = 0
        var simulator = SessionSimulator(seed: seed, profile: profile)
        var peers: [UserNamespace: Peer] = [:]
        var actions: [HubAction] = []
        for user in simulator.users {
            let peer = Peer(id: PeerID(Array(user.rawValue.utf8)), principal: user)
            peers[user] = peer
            core.handle(
                .agentMessage(from: peer, .hello(AgentHello(board: "bench", sessionID: Array(user.rawValue.utf8))), bytes: 40),
                now: now, into: &actions)
        }
        // The frames as the agents would send them, numbered per agent.
        var numbers: [UserNamespace: UInt64] = [:]
        var messages: [(peer: Peer, bytes: [UInt8], samples: Int)] = []
        messages.reserveCapacity(turns * framesPerTurn)
        while messages.count < turns * framesPerTurn {
            guard case .frame(let user, let frame, _) = simulator.next() else { continue }
            numbers[user, default: 0] += 1
            var message = Touchsync_V1_AgentMessage()
            message.sequence = numbers[user]!
            message.frame = frame.proto
            messages.append((peers[user]!, WireCodec.encode(message), frame.changes.reduce(0) { $0 + $1.samples.count }))
        }
        var decode = Duration.zero, handle = Duration.zero, turnEnd = Duration.zero
        var actionCount = 0, refusals = 0, batches = 0
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
            now += .microseconds(100)
            core.handle(.turnEnded(inputWaiting: false), now: now, into: &actions)
            let t3 = clock.now
            decode += t1 - t0
            handle += t2 - t1
            turnEnd += t3 - t2
            actionCount += actions.count
            for action in actions {
                if case .reply(_, .error) = action { refusals += 1 }
                if case .publish(let publication) = action, case .batch = publication.kind { batches += 1 }
            }
        }
        func perTurn(_ duration: Duration) -> Double { Double(duration.components.attoseconds) / 1e9 / Double(turns) + Double(duration.components.seconds) * 1e9 / Double(turns) }
        return Figures(
            turns: turns, frames: messages.count, samples: messages.reduce(0) { $0 + $1.samples },
            decodeNanoseconds: perTurn(decode), handleNanoseconds: perTurn(handle), turnEndNanoseconds: perTurn(turnEnd),
            actionsPerTurn: Double(actionCount) / Double(turns), refusals: refusals, batches: batches)
    }
}
