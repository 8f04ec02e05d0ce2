import Testing
import TouchSyncAccess
import TouchSyncCore
@testable import TouchSyncHubCore

/// The session table alone: resuming, room, liveness, acknowledgements, delegations and strangers.
@Suite("SessionTable")
struct SessionTableTests {
    let start = Moment(nanoseconds: 0)  // the core's own time type

    func session(_ name: String, board: String = "b", slot: Int = 0, connection: String? = nil, id: UInt8 = 1) -> AgentSession {
        AgentSession(
            principal: UserNamespace(name), peer: PeerID(Array((connection ?? name).utf8)), sessionID: [id], board: board, boardSlot: slot,
            appliedThrough: 0, now: start, messagesPerSecond: 100, samplesPerSecond: 1000, bytesPerSecond: 100_000)
    }

    @Test func aSessionResumesOnANewConnectionNoFurtherThanItApplied() {
        var table = SessionTable(strangerRate: 10)
        var ann = session("ann")
        _ = ann.numbering.skip(1)
        _ = ann.numbering.skip(2)
        table.open(ann, liveness: .seconds(2), now: start)
        let newConnection = PeerID(Array("ann-2".utf8))
        let name = UserNamespace("ann")
        guard
            case .refused(let refusal) = table.resume(
                name, sessionID: [1], board: "b", resumeAfter: 3, on: newConnection, role: .draw, delegation: nil, now: start)
        else {
            Issue.record("resumed beyond what was applied")
            return
        }
        #expect(refusal.code == .cannotResume)
        if case .notKnown = table.resume(name, sessionID: [9], board: "b", resumeAfter: 0, on: newConnection, role: .draw, delegation: nil, now: start) {
        } else {
            Issue.record("another session id resumed this one")
        }
        if case .notKnown = table.resume(name, sessionID: [1], board: "c", resumeAfter: 0, on: newConnection, role: .draw, delegation: nil, now: start) {
        } else {
            Issue.record("a hello for another board resumed this one")
        }
        guard
            case .resumed(let wasSilent) = table.resume(
                name, sessionID: [1], board: "b", resumeAfter: 2, on: newConnection, role: .watch, delegation: nil, now: start)
        else {
            Issue.record("not resumed")
            return
        }
        #expect(!wasSilent)
        #expect(table[name]?.peer == newConnection && table[name]?.role == .watch)
        #expect(table.principal(connectedAs: newConnection) == name)
        #expect(table.principal(connectedAs: PeerID(Array("ann".utf8))) == nil)
    }

    @Test func sessionsFallSilentThenAreAbandoned() {
        var table = SessionTable(strangerRate: 10)
        table.open(session("ann", slot: 3), liveness: .seconds(2), now: start)
        #expect(table.livenessDue == start + .seconds(2))
        let early = table.checkLiveness(now: start + .seconds(1), liveness: .seconds(2), abandon: .seconds(6))
        #expect(early.isEmpty)
        let silent = table.checkLiveness(now: start + .seconds(2), liveness: .seconds(2), abandon: .seconds(6))
        #expect(silent == [.silent(UserNamespace("ann"), slot: 3)])
        #expect(table.livenessDue == start + .seconds(6))
        let gone = table.checkLiveness(now: start + .seconds(6), liveness: .seconds(2), abandon: .seconds(6))
        #expect(gone == [.abandoned(UserNamespace("ann"), slot: 3)])
        #expect(table.livenessDue == nil)
        // Abandoned sessions make room for new users; live ones do not.
        var room = table.makeRoom(for: UserNamespace("bob"), limit: 1)
        #expect(room && table.count == 0)
        table.open(session("bob"), liveness: .seconds(2), now: start)
        room = table.makeRoom(for: UserNamespace("cy"), limit: 1)
        #expect(!room)
        room = table.makeRoom(for: UserNamespace("bob"), limit: 1)
        #expect(room)  // its own place
    }

    @Test func eachSessionIsQueuedForOneAcknowledgement() {
        var table = SessionTable(strangerRate: 10)
        var ann = session("ann")
        table.open(ann, liveness: .seconds(2), now: start)
        table.open(session("bob", board: "other"), liveness: .seconds(2), now: start)
        _ = ann.numbering.skip(1)
        table.requestAck(&ann)
        table.requestAck(&ann)
        table[UserNamespace("ann")] = ann
        table.requestAcks(onBoard: "other")
        table.requestAcks(onBoard: "other")
        #expect(table.ackQueue == [UserNamespace("ann"), UserNamespace("bob")])
        let withheld = table.withholdAcks { $0.board == "other" }
        #expect(withheld.map(\.principal) == [UserNamespace("bob")])
        var actions: [HubAction] = []
        table.acknowledge(into: &actions)
        #expect(actions.count == 1)
        if case .reply(let to, .ack(let through)) = actions.first { #expect(to == ann.peer && through == 1) }
        #expect(table.ackQueue.isEmpty && table[UserNamespace("ann")]?.acknowledged == 1)
        // A board that moved takes its sessions and their queued acks with it.
        table.requestAcks(onBoard: "other")
        let removed = table.removeAll(onSlot: 0)
        #expect(removed.count == 2)
        #expect(table.ackQueue.isEmpty && table.count == 0)
    }

    @Test func delegatedConnectionsActInTheirNamespaceAndStrangersAreRateLimited() {
        var table = SessionTable(strangerRate: 3)
        let gate = Peer(id: PeerID(Array("tab-1".utf8)), principal: UserNamespace("gate"))
        table.delegate(gate.id, Delegation(gateway: UserNamespace("gate"), user: "bob", token: "t", namespace: UserNamespace("web:bob:1")))
        #expect(table.acting(gate).principal == UserNamespace("web:bob:1"))
        // Another principal on the same routing id does not inherit it.
        let other = Peer(id: gate.id, principal: UserNamespace("eve"))
        #expect(table.acting(other) == other)
        table.connectionClosed(gate.id)
        #expect(table.acting(gate) == gate)
        let stranger = PeerID([9])
        let admitted = (0..<10).filter { _ in table.admitStranger(stranger, now: start) }.count
        #expect(admitted == 6)  // a burst of two seconds at the rate, then none within the same instant
        table.forgetStrangers()
        let again = table.admitStranger(stranger, now: start)
        #expect(again)
    }
}
