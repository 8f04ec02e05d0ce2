import HubCoreHarness
import PropertyChecks
import Testing
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncSimulation
import TouchSyncWire

/// Random interleavings of several agents' numbered messages with what
/// networks do to them (lost messages, reconnects that drop everything in
/// flight, resends), heartbeats, timer turns and journal reports, against an
/// independent model of the numbering rule. Afterwards every message is
/// acknowledged and applied exactly once, no acknowledgement ever covered a
/// message not yet applied, and a replica fed only the published batches
/// equals the hub's board and a reference board reduced in the same order.
@Suite("HubCore under random interleavings")
struct HubCorePropertyTests {
    /// One simulated agent: its whole numbered stream, what it has sent and
    /// had acknowledged, and what is in flight on its current connection.
    struct Agent {
        let peer: Peer
        let user: UserNamespace
        var stream: [NumberedRequest]
        var acked: UInt64 = 0
        var nextToSend: UInt64 = 1
        var inFlight: [UInt64] = []
        var total: UInt64 { UInt64(stream.count) }
    }

    @Test func interleavingsLoseAndDuplicateNothing() async {
        await checkProperty(count: 80, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 1...4), Gen.int(in: 50...500)) { seed, users, steps in
            var random = SplitMix64(seed: seed)
            let policy: FsyncPolicy? = [nil, .never, .everyBatch, .interval(.milliseconds(3))][Int(seed % 4)]
            let hub = CoreHarness { configuration in
                configuration.timing.livenessTimeout = .seconds(3600)  // nobody falls silent here: the stream stays valid
                configuration.limits.maxMessagesPerSecond = 1_000_000
                configuration.journal = policy.map { policy in
                    var journal = JournalConfiguration(directory: "unused")
                    journal.fsync = policy
                    return journal
                }
            }

            // Every user's stream: its style first, then its frames and clears as the simulator made them.
            var profile = SimulationProfile()
            profile.users = users
            profile.fingersPerUser = 1 + Int(seed % 3)
            profile.clearRate = 0.02
            profile.cancelRate = 0.03
            var simulator = SessionSimulator(seed: seed, profile: profile)
            var agents = simulator.users.enumerated().map { index, user in
                Agent(peer: Peer(routingID: Array(user.rawValue.utf8)), user: user, stream: [.style(SessionSimulator.style(forUser: index))])
            }
            for _ in 0..<steps {
                switch simulator.next() {
                case .frame(let user, let frame, _): agents[simulator.users.firstIndex(of: user)!].stream.append(.frame(frame))
                case .clear(let user, let scope): agents[simulator.users.firstIndex(of: user)!].stream.append(.clear(scope))
                }
            }

            // The independent model: a message is applied when it is the next of its agent.
            var reference = BoardState()
            var styles = [UserNamespace: StrokeStyle]()
            var applied = [UserNamespace: UInt64]()
            var scratch: [StrokeDiff] = []
            var written: UInt64 = 0
            var synced: UInt64 = 0
            var reported: (written: UInt64, synced: UInt64) = (0, 0)

            func process(_ actions: [HubAction]) {
                for action in actions {
                    switch action {
                    case .reply(let to, let reply):
                        guard let index = agents.firstIndex(where: { $0.peer.id == to }) else { continue }
                        switch reply {
                        case .ack(let through):
                            #expect(through <= applied[agents[index].user, default: 0], "acknowledged a message not applied")
                            if let policy {
                                let durable = policy == .never ? reported.written : reported.synced
                                #expect(durable >= written, "acknowledged before the journal reported every batch durable")
                            }
                            agents[index].acked = max(agents[index].acked, through)
                        case .welcome(let welcome):
                            // What was acknowledged (never more than applied, never less than the agent saw).
                            #expect(welcome.appliedThrough <= applied[agents[index].user, default: 0])
                            #expect(welcome.appliedThrough >= agents[index].acked)
                            agents[index].nextToSend = welcome.appliedThrough + 1
                        case .error(let refusal):
                            #expect(refusal.code == .outOfOrder, "valid input refused: \(refusal)")
                            // As the real agent does: resend everything not acknowledged.
                            let agent = agents[index]
                            agents[index].inFlight += Array((agent.acked + 1)..<max(agent.acked + 1, agent.nextToSend))
                        }
                    case .appendToJournal(let append): written = max(written, append.ticket)
                    case .syncJournal(let through): synced = max(synced, through)
                    case .restartJournal: Issue.record("a restart asked for though no journal failed")
                    case .claimBoard, .lookUpBoard: Issue.record("a board claimed from a store the hub does not have")
                    case .publish, .sendSnapshot, .refuseSnapshot, .sendBoardList, .allowSubscription, .dropSubscription, .disconnectSubscribers: break
                    }
                }
                // The adapter reports the journal's progress after carrying out actions.
                if policy != nil && actions.contains(where: { if case .appendToJournal = $0 { true } else if case .syncJournal = $0 { true } else { false } }) {
                    reported = (written, synced)
                    process(hub.send(.journalProgress(writtenThrough: written, syncedThrough: synced)))
                }
            }

            func deliver(_ index: Int) {
                let sequence = agents[index].inFlight.removeFirst()
                let agent = agents[index]
                let request = agent.stream[Int(sequence) - 1]
                if sequence == applied[agent.user, default: 0] + 1 {
                    applied[agent.user] = sequence
                    switch request {
                    case .style(let style): styles[agent.user] = style
                    case .frame(let frame):
                        do {
                            try reference.reduce(frame, from: agent.user, style: styles[agent.user] ?? .default, into: &scratch)
                        } catch {
                            Issue.record("the reference refused valid input: \(error)")
                        }
                    case .clear(let scope): reference.clear(scope, by: agent.user, into: &scratch)
                    case .invalid, .undo, .redo, .erase, .edit: break  // not generated here
                    }
                }
                process(hub.message(agent.peer, .numbered(sequence: sequence, request)))
            }

            func reconnect(_ index: Int) {
                agents[index].inFlight.removeAll()  // whatever was in flight is lost with the connection
                process(
                    hub.message(
                        agents[index].peer,
                        .hello(AgentHello(board: "wall", resumeAfter: agents[index].acked, sessionID: Array(agents[index].user.rawValue.utf8)))))
            }

            for index in agents.indices { reconnect(index) }
            for _ in 0..<(steps * 4) {
                let index = Int.random(in: 0..<agents.count, using: &random)
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<40 where agents[index].nextToSend <= agents[index].total:
                    agents[index].inFlight.append(agents[index].nextToSend)
                    agents[index].nextToSend += 1
                case 40..<75 where !agents[index].inFlight.isEmpty:
                    deliver(index)
                case 75..<78 where !agents[index].inFlight.isEmpty:
                    agents[index].inFlight.removeFirst()  // lost on the way
                case 78..<80:
                    reconnect(index)
                case 80..<83:
                    process(hub.message(agents[index].peer, .heartbeat))
                default:
                    hub.advance(.microseconds(Int64.random(in: 0...4000, using: &random)))
                    process(hub.endTurn())
                }
            }
            // Then the network heals: every agent resends until all is acknowledged.
            for _ in 0..<20 where agents.contains(where: { $0.acked < $0.total }) {
                for index in agents.indices where agents[index].acked < agents[index].total {
                    reconnect(index)
                    agents[index].inFlight += Array(min(agents[index].nextToSend, agents[index].total + 1)..<(agents[index].total + 1))
                    agents[index].nextToSend = agents[index].total + 1
                    while !agents[index].inFlight.isEmpty { deliver(index) }
                }
                hub.advance(.milliseconds(5))
                process(hub.endTurn())
                process(hub.send(.publishNow))
            }

            for agent in agents {
                #expect(agent.acked == agent.total, "\(agent.user): acknowledged \(agent.acked) of \(agent.total)")
                #expect(applied[agent.user] == agent.total)
            }
            let board = hub.core.board("wall")
            #expect(board?.acceptedStrokes == reference.acceptedStrokes)
            #expect(board?.orderedActiveStrokes == reference.orderedActiveStrokes)
            #expect(hub.replicas["wall"] == board)
            #expect(hub.replicas["wall"]?.digest == board?.digest)
        }
    }
}
