import HubCoreHarness
import Testing
import TouchSyncAccess
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncWire

/// The hub's rules, tested on the core alone: a manual clock, no sockets,
/// no threads, no sleeps. Every time below is exact.
@Suite("HubCore")
struct HubCoreTests {
    @Test func helloWelcomesAndNumberingAppliesEachMessageOnce() throws {
        let hub = CoreHarness()
        let ann = peer("ann")
        #expect(hub.message(ann, .numbered(sequence: 1, began(1))).errors(to: ann).map(\.code) == [.notWelcomed])
        let welcome = try #require(hub.hello(ann, board: "b"))
        #expect(welcome.user == UserNamespace("ann") && welcome.appliedThrough == 0 && welcome.board == "b")

        #expect(hub.message(ann, .numbered(sequence: 1, began(1, x: 10))).isEmpty)
        let turn = hub.endTurn()
        #expect(turn.batchSequences == [1])
        #expect(turn.acks(to: ann) == [1])

        // A resend after a reconnect: acknowledged again, applied once.
        _ = hub.message(ann, .numbered(sequence: 1, began(1, x: 10)))
        let resend = hub.endTurn()
        #expect(resend.batchSequences.isEmpty && resend.acks(to: ann) == [1])
        #expect(hub.core.counters.duplicates == 1 && hub.core.counters.frames == 1 && hub.core.counters.batches == 1)
        #expect(hub.observer.observations.contains(.boardCreated(board: "b")))
        #expect(hub.observer.observations.contains { if case .agentJoined(UserNamespace("ann"), "b", _, false) = $0 { true } else { false } })

        // A gap: told once, then silence until the missing message arrives.
        #expect(hub.message(ann, .numbered(sequence: 3, moved(1, x: 30, t: 2))).errors(to: ann).map(\.code) == [.outOfOrder])
        #expect(hub.message(ann, .numbered(sequence: 4, moved(1, x: 40, t: 3))).errors(to: ann).isEmpty)
        #expect(hub.endTurn().acks(to: ann) == [1])
        _ = hub.message(ann, .numbered(sequence: 2, moved(1, x: 20, t: 1)))
        _ = hub.message(ann, .numbered(sequence: 3, moved(1, x: 30, t: 2)))
        _ = hub.message(ann, .numbered(sequence: 4, ended(1, x: 40, t: 3)))
        #expect(hub.endTurn().acks(to: ann) == [4])
        let board = try #require(hub.core.board("b"))
        #expect(board.acceptedStrokes.map { $0.samples.map(\.x) } == [[10, 20, 30, 40]])
        #expect(hub.replicas["b"] == board)

        // The same user on a new connection resumes its numbering (ROUTER_HANDOVER keeps the id).
        #expect(hub.hello(ann, board: "b", resumeAfter: 2)?.appliedThrough == 4)
    }

    /// Acks are written by hand (one a frame): byte for byte what SwiftProtobuf writes, at every varint length.
    @Test func repliesAreEncodedAsSwiftProtobufEncodesThem() throws {
        var values: [UInt64] = [0, 1, 127, 128, 300, 16_383, 16_384, UInt64(UInt32.max), UInt64.max - 1, UInt64.max]
        for bits in 0..<64 { values.append(1 << UInt64(bits)) }
        for through in values {
            let reply = HubReply.ack(through: through)
            #expect(reply.encoded == WireCodec.encode(reply.proto), "ack through \(through)")
            #expect(try WireCodec.decode(Touchsync_V1_HubReply.self, from: reply.encoded).ack.through == through)
        }
        let refusal = HubReply.error(HubRefusal(.busy, "behind", sequence: 9))
        #expect(refusal.encoded == WireCodec.encode(refusal.proto))
    }

    /// With an ack interval, an agent gets at most one ack per interval,
    /// covering everything applied so far; the core asks to be woken when
    /// the next is due, and stopping sends what is owed at once.
    @Test func acksPerIntervalCoverEverythingAppliedSoFar() throws {
        let hub = CoreHarness { $0.timing.ackInterval = .milliseconds(5) }
        let ann = peer("ann")
        try #require(hub.hello(ann, board: "b") != nil)
        _ = hub.message(ann, .numbered(sequence: 1, began(1, x: 10)))
        #expect(hub.endTurn().acks(to: ann) == [1])  // the first is due at once
        _ = hub.message(ann, .numbered(sequence: 2, moved(1, x: 20, t: 1)))
        let held = hub.endTurn()
        #expect(held.batchSequences == [2])  // published at once: only the ack waits
        #expect(held.acks(to: ann).isEmpty)
        #expect(hub.core.nextDeadline == hub.start + .milliseconds(5))
        hub.advance(.milliseconds(3))
        _ = hub.message(ann, .numbered(sequence: 3, moved(1, x: 30, t: 2)))
        #expect(hub.endTurn().acks(to: ann).isEmpty)
        hub.advance(.milliseconds(2))
        #expect(hub.endTurn().acks(to: ann) == [3])  // one ack for 2 and 3
        _ = hub.message(ann, .numbered(sequence: 4, ended(1, x: 40, t: 3)))
        #expect(hub.endTurn().acks(to: ann).isEmpty)
        #expect(hub.send(.stopping).acks(to: ann) == [4])
        // Without an interval (the default) every turn acknowledges.
        let plain = CoreHarness()
        try #require(plain.hello(ann, board: "b") != nil)
        for sequence: UInt64 in 1...2 {
            _ = plain.message(ann, .numbered(sequence: sequence, sequence == 1 ? began(1, x: 10) : moved(1, x: 20, t: 1)))
            #expect(plain.endTurn().acks(to: ann) == [sequence])
        }
    }

    @Test func refusedMessagesTakeTheirPlaceAndCarryTheirCode() {
        let hub = CoreHarness()
        let bob = peer("bob")
        hub.hello(bob, board: "b")
        let refusals = hub.message(bob, .numbered(sequence: 1, moved(7, x: 1, t: 1))).errors(to: bob)
        #expect(refusals == [HubRefusal(.unknownTouch, refusals.first?.message ?? "", sequence: 1)])
        #expect(hub.message(bob, .numbered(sequence: 2, .style(StrokeStyle(rgba: 0, width: 0)))).errors(to: bob).map(\.code) == [.invalidValue])
        #expect(hub.message(bob, .numbered(sequence: 3, .invalid(.malformed("bad")))).errors(to: bob).map(\.code) == [.malformed])
        #expect(hub.message(bob, .empty(sequence: 0)).errors(to: bob).map(\.code) == [.malformed])
        #expect(hub.endTurn().acks(to: bob) == [3])  // refused, but handled: never resent
        #expect(hub.message(peer("eve"), .hello(AgentHello(protocolVersion: 9, board: "b"))).errors(to: peer("eve")).map(\.code) == [.unsupportedVersion])
        #expect(hub.message(peer("eve"), .hello(AgentHello(board: ""))).errors(to: peer("eve")).map(\.code) == [.unknownBoard])
        #expect(hub.send(.undecodable(from: peer("eve"), .malformed("x"))).errors(to: peer("eve")).map(\.code) == [.malformed])
    }

    @Test func rateLimitsRefuseFloodsAndRefill() {
        let hub = CoreHarness { $0.limits.maxMessagesPerSecond = 10 }
        let flood = peer("flood")
        hub.hello(flood, board: "b")
        var refused = 0
        for _ in 0..<25 { refused += hub.message(flood, .heartbeat).errors(to: flood).filter { $0.code == .rateLimited }.count }
        #expect(refused == 5)  // the bucket holds two seconds' worth: 20
        hub.advance(.milliseconds(500))  // refills 5
        var admitted = 0
        for _ in 0..<8 where hub.message(flood, .heartbeat).errors(to: flood).isEmpty { admitted += 1 }
        #expect(admitted == 5)
        // A numbered message refused by the limit still takes its place.
        #expect(hub.message(flood, .numbered(sequence: 1, began(1))).errors(to: flood).map(\.sequence) == [1])
        #expect(hub.endTurn().acks(to: flood) == [1])
        // Strangers (no hello) are limited too, per connection.
        var strangerReplies = 0
        for _ in 0..<50 { strangerReplies += hub.send(.undecodable(from: peer("junk"), .malformed("x"))).errors(to: peer("junk")).count }
        #expect(strangerReplies == 20)
    }

    /// A silent agent is not a gone agent: at exactly the liveness time-out
    /// its touches are kept and heartbeats list it as silent; at exactly the
    /// abandon time-out they are cancelled. Heard again before, it carries on.
    @Test func silenceKeepsTouchesUntilTheAbandonTimeout() throws {
        let hub = CoreHarness {
            $0.timing.livenessTimeout = .seconds(3)
            $0.timing.abandonTimeout = .seconds(30)
        }
        let sam = peer("sam")
        hub.hello(sam, board: "b")
        hub.advance(.seconds(1))
        _ = hub.message(sam, .numbered(sequence: 1, began(1)))
        _ = hub.message(sam, .numbered(sequence: 2, began(2)))
        hub.endTurn()
        let lastHeard = hub.now
        #expect(hub.core.board("b")?.liveTouchCount == 2)
        // The core asks to be woken for it (heartbeats and housekeeping come first, harmlessly).
        while hub.core.nextDeadline < lastHeard + .seconds(3) {
            hub.advance(to: hub.core.nextDeadline)
            #expect(hub.endTurn().heartbeats.allSatisfy { $0.silent.isEmpty })
        }
        hub.advance(to: lastHeard + .seconds(3))
        hub.endTurn()
        hub.advance(to: lastHeard + .seconds(4))  // the next heartbeat lists sam as silent; nothing was cancelled
        let beats = hub.endTurn().heartbeats
        #expect(beats.last?.silent == ["sam"])
        #expect(hub.core.board("b")?.liveTouchCount == 2)
        #expect(hub.core.nextDeadline <= lastHeard + .seconds(30))
        hub.advance(to: lastHeard + .seconds(30) - .nanoseconds(1))
        hub.endTurn()
        #expect(hub.core.board("b")?.liveTouchCount == 2, "cancelled before the abandon time-out")
        hub.advance(to: lastHeard + .seconds(30))
        hub.endTurn()
        hub.endTurn()
        #expect(hub.core.board("b")?.liveTouchCount == 0)
        #expect(hub.replicas["b"]?.liveTouchCount == 0)
        // Heard again: live, numbering carried on, and its next touches count.
        _ = hub.message(sam, .numbered(sequence: 3, began(1)))
        #expect(hub.endTurn().acks(to: sam) == [3])
        #expect(hub.core.board("b")?.liveTouchCount == 1)
    }

    /// A network outage shorter than the abandon time-out: the agent comes
    /// back with the same session, and its strokes simply continue.
    @Test func aSilentAgentThatResumesContinuesItsStrokes() {
        let hub = CoreHarness {
            $0.timing.livenessTimeout = .seconds(3)
            $0.timing.abandonTimeout = .seconds(30)
        }
        let ann = peer("ann")
        hub.hello(ann, board: "b")
        _ = hub.message(ann, .numbered(sequence: 1, began(1, x: 1)))
        _ = hub.message(ann, .numbered(sequence: 2, moved(1, x: 2, t: 1)))
        #expect(hub.endTurn().acks(to: ann) == [2])
        hub.advance(.seconds(20))  // twenty seconds without a word (messages 3 and 4 lost on the way)
        hub.endTurn()
        #expect(hub.core.board("b")?.liveTouchCount == 1)
        #expect(hub.hello(ann, board: "b", resumeAfter: 2)?.appliedThrough == 2)
        _ = hub.message(ann, .numbered(sequence: 3, moved(1, x: 3, t: 2)))
        _ = hub.message(ann, .numbered(sequence: 4, ended(1, x: 4, t: 3)))
        #expect(hub.endTurn().acks(to: ann) == [4])
        #expect(hub.core.board("b")?.acceptedStrokes.map { $0.samples.map(\.x) } == [[1, 2, 3, 4]])
    }

    /// Numbering belongs to the session: a new process of the same user (a
    /// new session id) starts at 1, and its first messages are applied, not
    /// dropped as duplicates; the previous session's touches end at once.
    @Test func aNewSessionOfTheSameUserStartsItsOwnNumbering() {
        let hub = CoreHarness()
        let dave = peer("dave")
        hub.hello(dave, board: "b", session: "first-run")
        _ = hub.message(dave, .numbered(sequence: 1, began(1, x: 1)))
        _ = hub.message(dave, .numbered(sequence: 2, began(2, x: 2)))
        #expect(hub.endTurn().acks(to: dave) == [2])
        // The same identity, a new process: numbering from 1 again.
        #expect(hub.hello(dave, board: "b", session: "second-run")?.appliedThrough == 0)
        _ = hub.message(dave, .numbered(sequence: 1, began(1, x: 10)))
        #expect(hub.endTurn().acks(to: dave) == [1])
        let board = hub.core.board("b")
        #expect(board?.orderedActiveStrokes.map { $0.samples.map(\.x) } == [[10]])  // the first run's touches were cancelled
        // A resume must name a session the hub knows, and not claim more than it applied.
        let poison = hub.message(dave, .hello(AgentHello(board: "b", resumeAfter: UInt64.max, sessionID: Array("second-run".utf8))))
        #expect(poison.errors(to: dave).map(\.code) == [.cannotResume])
        let stranger = hub.message(peer("erin"), .hello(AgentHello(board: "b", resumeAfter: 5, sessionID: Array("never-seen".utf8))))
        #expect(stranger.errors(to: peer("erin")).map(\.code) == [.cannotResume])
        let unnamed = hub.message(peer("erin"), .hello(AgentHello(board: "b")))
        #expect(unnamed.errors(to: peer("erin")).map(\.code) == [.malformed])
        // The poisoned hello changed nothing: the session goes on.
        _ = hub.message(dave, .numbered(sequence: 2, moved(1, x: 11, t: 1)))
        #expect(hub.endTurn().acks(to: dave) == [2])
    }

    /// Goodbye: the touches still down are cancelled at once.
    @Test func goodbyeCancelsTouchesAtOnce() {
        let hub = CoreHarness()
        let tab = peer("tab")
        hub.hello(tab, board: "b")
        _ = hub.message(tab, .numbered(sequence: 1, began(1)))
        hub.endTurn()
        _ = hub.message(tab, .goodbye)
        hub.endTurn()
        #expect(hub.core.board("b")?.liveTouchCount == 0)
        #expect(hub.core.sessionCount == 0)
    }

    @Test func aGonePeerHasItsTouchesCancelledAtOnce() {
        let hub = CoreHarness()
        let tab = peer("tab")
        hub.hello(tab, board: "b")
        _ = hub.message(tab, .numbered(sequence: 1, began(1)))
        hub.endTurn()
        hub.send(.peerGone(tab.id))
        hub.endTurn()
        #expect(hub.core.board("b")?.liveTouchCount == 0)
        #expect(hub.core.sessionCount == 0)
        #expect(hub.message(tab, .heartbeat).errors(to: tab).map(\.code) == [.notWelcomed])
    }

    @Test func acknowledgementsWaitUntilTheJournalIsDurable() {
        var configuration = JournalConfiguration(directory: "unused")
        configuration.fsync = .interval(.milliseconds(20))
        let hub = CoreHarness { $0.journal = configuration }
        let ink = peer("ink")
        hub.hello(ink, board: "b")
        hub.advance(.milliseconds(25))
        _ = hub.message(ink, .numbered(sequence: 1, began(1)))
        var turn = hub.endTurn()
        // Journaled before published; synced at once (no sync for 25 ms); no ack yet.
        #expect(turn.journalAppends.map(\.ticket) == [1])
        #expect(
            turn.journalAppends.first?.agents
                == [AgentProgress(principal: UserNamespace("ink"), appliedThrough: 1, style: .default, sessionID: Array("session-1".utf8))])
        let appendIndex = turn.firstIndex { if case .appendToJournal = $0 { true } else { false } }
        let publishIndex = turn.firstIndex { if case .publish = $0 { true } else { false } }
        #expect(appendIndex! < publishIndex!)
        #expect(turn.journalSyncs == [1])
        #expect(turn.acks(to: ink).isEmpty)
        #expect(hub.send(.journalProgress(writtenThrough: 1, syncedThrough: 0)).acks(to: ink).isEmpty, "acked before durable")
        #expect(hub.send(.journalProgress(writtenThrough: 1, syncedThrough: 1)).acks(to: ink) == [1])

        // The next batch within the interval waits for the interval's sync.
        hub.advance(.milliseconds(1))
        _ = hub.message(ink, .numbered(sequence: 2, moved(1, x: 5, t: 1)))
        turn = hub.endTurn()
        #expect(turn.journalAppends.map(\.ticket) == [2] && turn.journalSyncs.isEmpty)
        #expect(hub.send(.journalProgress(writtenThrough: 2, syncedThrough: 1)).acks(to: ink).isEmpty)
        #expect(hub.core.nextDeadline <= hub.start + .milliseconds(45))
        hub.advance(to: hub.start + .milliseconds(45) - .nanoseconds(1))
        #expect(hub.endTurn().journalSyncs.isEmpty)
        hub.advance(to: hub.start + .milliseconds(45))
        turn = hub.endTurn()
        #expect(turn.journalSyncs == [2] && turn.acks(to: ink).isEmpty)
        #expect(hub.send(.journalProgress(writtenThrough: 2, syncedThrough: 2)).acks(to: ink) == [2])

    }

    /// A numbered message that changes no stroke (a refused frame, whose
    /// number is taken; a style) still moves its session's progress: on a
    /// durable hub that progress is journaled, as a batch without diffs,
    /// before the message is acknowledged. Acknowledged before, a crash left
    /// the hub recording less than the agent was told, its resume was refused
    /// (CANNOT_RESUME), and its new session cancelled its strokes in progress
    /// (a SIGKILL test on the board store lost 489 samples that way).
    @Test func progressWithoutDiffsIsJournaledBeforeItsAck() {
        var configuration = JournalConfiguration(directory: "unused")
        configuration.fsync = .everyBatch
        let hub = CoreHarness { $0.journal = configuration }
        let ink = peer("ink")
        hub.hello(ink, board: "b")
        _ = hub.message(ink, .numbered(sequence: 1, began(1)))
        #expect(hub.endTurn().journalAppends.map(\.ticket) == [1])
        #expect(hub.send(.journalProgress(writtenThrough: 1, syncedThrough: 1)).acks(to: ink) == [1])
        // A frame for a touch that is not down: refused, its number taken.
        #expect(hub.message(ink, .numbered(sequence: 2, moved(7, x: 5, t: 1))).errors(to: ink).map(\.code) == [.unknownTouch])
        var turn = hub.endTurn()
        #expect(turn.acks(to: ink).isEmpty, "acknowledged before its progress was journaled")
        #expect(turn.journalAppends.flatMap(\.agents).map(\.appliedThrough) == [2], "\(turn.journalAppends)")
        #expect(turn.batchSequences == [2])
        #expect(hub.send(.journalProgress(writtenThrough: 2, syncedThrough: 2)).acks(to: ink) == [2])
        // A style: no diff either.
        _ = hub.message(ink, .numbered(sequence: 3, .style(StrokeStyle(rgba: 0xFF00_00FF, width: 512))))
        turn = hub.endTurn()
        #expect(turn.acks(to: ink).isEmpty)
        #expect(turn.journalAppends.flatMap(\.agents).map(\.appliedThrough) == [3])
        #expect(turn.journalAppends.flatMap(\.agents).map(\.style.width) == [512])
        #expect(hub.send(.journalProgress(writtenThrough: 3, syncedThrough: 3)).acks(to: ink) == [3])
        // The replicas took the batches without diffs in their stride.
        #expect(hub.replicas["b"]?.sequence == 3 && hub.replicas["b"]?.digest == hub.core.board("b")?.digest)
    }

    /// An ack interval on a journal that syncs every 20 ms: an ack that is
    /// due but waits for the sync is no deadline of its own (the loop polled
    /// with no time-out until the sync, 10,000 times a second, and the hub
    /// spent 3.5 times the CPU per browser sample); the sync's progress sends it.
    @Test func anAckWaitingForTheJournalIsNoDeadline() {
        var configuration = JournalConfiguration(directory: "unused")
        configuration.fsync = .interval(.milliseconds(20))
        let hub = CoreHarness {
            $0.journal = configuration
            $0.timing.ackInterval = .milliseconds(5)
        }
        let ink = peer("ink")
        hub.hello(ink, board: "b")
        hub.advance(.milliseconds(25))
        _ = hub.message(ink, .numbered(sequence: 1, began(1)))
        #expect(hub.endTurn().journalSyncs == [1])
        #expect(hub.send(.journalProgress(writtenThrough: 1, syncedThrough: 1)).acks(to: ink) == [1])
        // Within the sync interval: the next frame's ack is due in 5 ms, its sync in 20.
        hub.advance(.milliseconds(1))
        _ = hub.message(ink, .numbered(sequence: 2, moved(1, x: 5, t: 1)))
        #expect(hub.endTurn().acks(to: ink).isEmpty)
        #expect(hub.send(.journalProgress(writtenThrough: 2, syncedThrough: 1)).acks(to: ink).isEmpty)
        hub.advance(.milliseconds(10))  // the ack interval is over, the sync is not
        #expect(hub.endTurn().acks(to: ink).isEmpty)
        #expect(hub.core.nextDeadline > hub.now, "a deadline already past: the loop would spin until the sync")
        #expect(hub.core.nextDeadline == hub.start + .milliseconds(45), "the sync's")
        hub.advance(to: hub.start + .milliseconds(45))
        #expect(hub.endTurn().journalSyncs == [2])
        #expect(hub.send(.journalProgress(writtenThrough: 2, syncedThrough: 2)).acks(to: ink) == [2])
    }

    /// A journal fault is one board's (issue 22: one long board name stopped
    /// every acknowledgement on the hub): its agents are told and not
    /// acknowledged, the other boards' agents are, and the failed board is
    /// restarted from a checkpoint every retry interval until that works.
    @Test func aJournalFaultStopsOnlyItsBoard() {
        var configuration = JournalConfiguration(directory: "unused")
        configuration.fsync = .everyBatch
        let hub = CoreHarness {
            $0.journal = configuration
            $0.timing.journalRetryInterval = .seconds(5)
        }
        let ink = peer("ink")
        let pen = peer("pen")
        hub.hello(ink, board: "broken")
        hub.hello(pen, board: "fine")
        _ = hub.message(ink, .numbered(sequence: 1, began(1)))
        _ = hub.message(pen, .numbered(sequence: 1, began(1)))
        var turn = hub.endTurn()
        #expect(turn.journalAppends.map(\.board).sorted() == ["broken", "fine"])
        // The report: broken's write failed, everything else is durable.
        turn = hub.send(.journalFailed(board: "broken", reason: "write: ENAMETOOLONG"))
            + hub.send(.journalProgress(writtenThrough: 2, syncedThrough: 2))
        #expect(turn.acks(to: pen) == [1], "the other board is acknowledged")
        #expect(turn.acks(to: ink).isEmpty)
        #expect(turn.errors(to: ink).map(\.code) == [.storageUnavailable])
        #expect(turn.errors(to: ink).first?.message.contains("board broken") == true)

        // Both keep drawing: only the fine board's agent is acknowledged; broken's batches are still published.
        hub.advance(.seconds(2))
        _ = hub.message(ink, .numbered(sequence: 2, moved(1, x: 6, t: 2)))
        _ = hub.message(pen, .numbered(sequence: 2, moved(1, x: 6, t: 2)))
        turn = hub.endTurn()
        #expect(turn.batchSequences.sorted() == [2, 2])
        turn = turn + hub.send(.journalProgress(writtenThrough: 4, syncedThrough: 4))
        #expect(turn.acks(to: pen) == [2] && turn.acks(to: ink).isEmpty)
        #expect(turn.errors(to: ink).map(\.code) == [.storageUnavailable], "told again (a second later)")
        #expect(!turn.contains { if case .restartJournal = $0 { true } else { false } }, "retried before the interval")

        // The retry interval passes: a restart from the board as published.
        #expect(hub.core.nextDeadline <= hub.start + .seconds(5))
        hub.advance(to: hub.start + .seconds(5))
        turn = hub.endTurn()
        let restarts = turn.compactMap { action -> (String, UInt64)? in
            if case .restartJournal(let board, let state, _) = action { (board, state.sequence) } else { nil }
        }
        #expect(restarts.map(\.0) == ["broken"] && restarts.map(\.1) == [2])
        // It fails again: still not acknowledged; then it works: everything applied is acknowledged.
        turn = hub.send(.journalFailed(board: "broken", reason: "restart: ENOSPC"))
        #expect(turn.acks(to: ink).isEmpty)
        turn = hub.send(.journalRestored(board: "broken"))
        #expect(turn.acks(to: ink) == [2])
        hub.advance(.seconds(6))
        #expect(!hub.endTurn().contains { if case .restartJournal = $0 { true } else { false } }, "restored boards are not retried")
    }

    @Test(arguments: [FsyncPolicy.never, .everyBatch])
    func otherFsyncPolicies(policy: FsyncPolicy) {
        var configuration = JournalConfiguration(directory: "unused")
        configuration.fsync = policy
        let hub = CoreHarness { $0.journal = configuration }
        let ink = peer("ink")
        hub.hello(ink, board: "b")
        _ = hub.message(ink, .numbered(sequence: 1, began(1)))
        let turn = hub.endTurn()
        #expect(turn.journalSyncs == (policy == .never ? [] : [1]))
        #expect(hub.send(.journalProgress(writtenThrough: 1, syncedThrough: 0)).acks(to: ink) == (policy == .never ? [1] : []))
        // Stopping syncs whatever the policy.
        _ = hub.message(ink, .numbered(sequence: 2, moved(1, x: 1, t: 1)))
        #expect(hub.send(.stopping).journalSyncs == [2])
    }

    @Test func snapshotIsTheStateAfterItsBatch() throws {
        let hub = CoreHarness()
        let pen = peer("pen")
        let spectator = PeerID(Array("spectator".utf8))
        hub.hello(pen, board: "b")
        _ = hub.message(pen, .numbered(sequence: 1, began(1, x: 1)))
        hub.endTurn()
        _ = hub.message(pen, .numbered(sequence: 2, moved(1, x: 2, t: 1)))
        // Pending diffs are published first: the snapshot is exactly batch 2's state.
        let actions = hub.send(.snapshotRequested(by: spectator, user: nil, board: "b", requestID: 7))
        #expect(actions.batchSequences == [2])
        guard case .sendSnapshot(let to, let requestID, let board, let state, let digest)? = actions.last else {
            Issue.record("no snapshot sent: \(actions)")
            return
        }
        #expect(to == spectator && requestID == 7 && board == "b")
        #expect(state.sequence == 2 && state == hub.replicas["b"] && digest == state.digest)
        // A board nobody drew on: empty at sequence 0, and not created.
        guard case .sendSnapshot(_, _, _, let empty, _)? = hub.send(.snapshotRequested(by: spectator, user: nil, board: "new", requestID: 8)).last else {
            Issue.record("no snapshot of an unused board")
            return
        }
        #expect(empty.sequence == 0 && hub.core.board("new") == nil)
        guard case .refuseSnapshot(_, 9, let refusal)? = hub.send(.snapshotRequested(by: spectator, user: nil, board: "", requestID: 9)).last else {
            Issue.record("an invalid board name was not refused")
            return
        }
        #expect(refusal.code == .unknownBoard)
    }

    /// Many connections of one address, each within its own allowance (300
    /// of them made a hub encode 1,500 snapshots a second for nobody), share
    /// four times one requester's allowance on a plain hub; another address
    /// is served meanwhile.
    @Test func snapshotRequestsAreBoundedPerAddressOnAPlainHub() {
        let hub = CoreHarness { $0.limits.maxSnapshotsPerSecond = 5 }
        var sent = 0, limited: [String] = []
        for index in 0..<300 {
            let connection = PeerID(Array("hoarder-\(index)".utf8))
            switch hub.send(.snapshotRequested(by: connection, user: nil, board: "b", requestID: 1, address: "10.0.0.7")).last {
            case .sendSnapshot?: sent += 1
            case .refuseSnapshot(_, _, let refusal)? where refusal.code == .rateLimited: limited.append(refusal.message)
            default: break
            }
        }
        #expect(sent == 20 && limited.count == 280, "\(sent) sent")
        #expect(limited.first?.contains("from address 10.0.0.7") == true, "\(limited.first ?? "")")
        let elsewhere = hub.send(.snapshotRequested(by: PeerID(Array("other".utf8)), user: nil, board: "b", requestID: 1, address: "10.0.0.8"))
        #expect(elsewhere.contains { if case .sendSnapshot = $0 { true } else { false } }, "another address is served")
        // A board another hub serves is answered WRONG_HUB all the same (no snapshot to spend the
        // allowance on: followers ask round the hubs during a failover), also past the allowance.
        let store = CoreHarness {
            $0.storeCommits = true
            $0.limits.maxSnapshotsPerSecond = 5
        }
        _ = store.send(.boardMoved(board: "theirs", owner: "hub-b"))
        for index in 0..<40 {
            let refused = store.send(.snapshotRequested(by: PeerID(Array("seeker-\(index)".utf8)), user: nil, board: "theirs", requestID: 1, address: "10.0.0.7"))
            #expect(refused.contains { if case .refuseSnapshot(_, _, let refusal) = $0 { refusal.code == .wrongHub } else { false } }, "\(index): \(refused)")
        }
        hub.advance(.seconds(1))
        let later = hub.send(.snapshotRequested(by: PeerID(Array("hoarder-0".utf8)), user: nil, board: "b", requestID: 2, address: "10.0.0.7"))
        #expect(later.contains { if case .sendSnapshot = $0 { true } else { false } }, "a new second, a new allowance")
    }

    /// A watcher flooding snapshot requests (129,416 in 20 s took the hub to
    /// 1.86 GB) is refused past its allowance per second, per requester: an
    /// authenticated user whatever its connections, else a connection; others are served.
    @Test func snapshotRequestsAreBoundedPerRequester() {
        let hub = CoreHarness { $0.limits.maxSnapshotsPerSecond = 5 }
        let flooder = PeerID(Array("flooder".utf8))
        let honest = PeerID(Array("honest".utf8))
        func outcomes(_ peer: PeerID, user: UserNamespace? = nil, _ count: Int) -> (sent: Int, limited: Int) {
            var sent = 0, limited = 0
            for index in 0..<count {
                switch hub.send(.snapshotRequested(by: peer, user: user, board: "b", requestID: UInt64(index))).last {
                case .sendSnapshot?: sent += 1
                case .refuseSnapshot(_, _, let refusal)? where refusal.code == .rateLimited: limited += 1
                default: break
                }
            }
            return (sent, limited)
        }
        #expect(outcomes(flooder, 100) == (5, 95))
        #expect(outcomes(honest, 1) == (1, 0), "another requester is served")
        hub.advance(.milliseconds(999))
        #expect(outcomes(flooder, 1) == (0, 1))
        hub.advance(.milliseconds(1))
        #expect(outcomes(flooder, 6) == (5, 1), "a new second, a new allowance")
        // One user over two connections shares one allowance.
        hub.advance(.seconds(1))
        let mallory = UserNamespace("mallory")
        #expect(outcomes(PeerID(Array("m1".utf8)), user: mallory, 3) == (3, 0))
        #expect(outcomes(PeerID(Array("m2".utf8)), user: mallory, 3) == (2, 1))
    }

    /// A gateway (a key with `acts_for`) asking for its own boards' snapshots
    /// keeps one replica per board for all its tabs: 24 boards opened at once
    /// are all served, within twenty times a user's allowance; a user asking
    /// for itself, or through the gateway, keeps the user's.
    @Test func aGatewayOpeningManyBoardsAtOnceIsServed() throws {
        let list = try AccessList(users: [
            "gateway": AccessEntry(key: String(repeating: "g", count: 40), boards: ["*": .admin], actsFor: "web:"),
            "plain": AccessEntry(key: String(repeating: "p", count: 40), boards: ["*": .admin]),
        ])
        let hub = CoreHarness({ $0.limits.maxSnapshotsPerSecond = 5 }, access: list)
        func outcomes(_ user: String, boards: Int, from first: Int = 0) -> (sent: Int, limited: Int) {
            var sent = 0, limited = 0
            for index in first..<first + boards {
                let request = HubEvent.snapshotRequested(
                    by: PeerID(Array("\(user)-\(index)".utf8)), user: UserNamespace(user), board: "board-\(index)", requestID: 1)
                switch hub.send(request).last {
                case .sendSnapshot?: sent += 1
                case .refuseSnapshot(_, _, let refusal)? where refusal.code == .rateLimited: limited += 1
                default: break
                }
            }
            return (sent, limited)
        }
        #expect(outcomes("gateway", boards: 24) == (24, 0))
        #expect(outcomes("gateway", boards: 80, from: 24) == (76, 4), "twenty times five a second")
        #expect(outcomes("plain", boards: 24) == (5, 19), "a user without acts_for: five a second")
        hub.advance(.seconds(1))
        #expect(outcomes("gateway", boards: 24, from: 200) == (24, 0), "a new second")
    }

    /// One user cannot fill the hub's board table (11,000 hellos on new boards
    /// reached the 10,000-board maximum for good): boards it creates are
    /// capped per minute and in total; boards that exist stay open to it, and
    /// other users create theirs.
    @Test func boardsCreatedAreBoundedPerUser() {
        let hub = CoreHarness {
            $0.limits.maxBoardsCreatedPerUser = 5
            $0.limits.maxBoardsCreatedPerUserPerMinute = 3
        }
        let flooder = peer("flooder")
        func create(_ board: String) -> Bool { hub.hello(flooder, board: board, session: board) != nil }
        #expect(["b0", "b1", "b2"].map(create) == [true, true, true])
        #expect(!create("b3"), "a fourth board in one minute")
        let refusal = hub.send(
            .agentMessage(from: flooder, .hello(AgentHello(board: "b3", sessionID: Array("again".utf8))), bytes: 40)).errors(to: flooder).last
        #expect(refusal?.code == .rateLimited && refusal?.message.contains("in the last minute") == true, "\(String(describing: refusal))")
        #expect(create("b0"), "a board that exists stays open")
        hub.advance(.seconds(60))
        #expect(["b3", "b4", "b5"].map(create) == [true, true, false], "five in total")
        #expect(hub.hello(peer("someone-else"), board: "theirs") != nil, "another user is not affected")
        #expect(hub.core.board("b5") == nil && hub.core.board("theirs") != nil)
    }

    /// On a plain hub a user is a connection: one client with a new routing id
    /// per board filled the 10,000-board table in 3.5 minutes. Its address is
    /// counted too, at four times a user's quota; another address is not held back.
    @Test func boardsCreatedAreBoundedPerAddressOnAPlainHub() {
        let hub = CoreHarness {
            $0.limits.maxBoardsCreatedPerUser = 5
            $0.limits.maxBoardsCreatedPerUserPerMinute = 2
        }
        func create(_ index: Int, from address: String) -> HubRefusal? {
            var hello = AgentHello(board: "\(address)-\(index)", sessionID: Array("s\(index)".utf8))
            hello.remoteAddress = address
            let flooder = peer("conn-\(address)-\(index)")
            return hub.send(.agentMessage(from: flooder, .hello(hello), bytes: 40)).errors(to: flooder).last
        }
        #expect((0..<8).map { create($0, from: "10.0.0.9") == nil } == Array(repeating: true, count: 8), "8 connections, one board each")
        let refused = create(8, from: "10.0.0.9")
        #expect(refused?.code == .rateLimited && refused?.message.contains("address 10.0.0.9 created 8 boards") == true, "\(String(describing: refused))")
        #expect(create(0, from: "10.0.0.10") == nil, "another address is not held back")
        hub.advance(.seconds(60))
        #expect((9..<21).map { create($0, from: "10.0.0.9") == nil }.filter { $0 }.count == 8, "then 8 a minute, 20 in all")
    }

    /// Hellos alone do not fill the board table: a board nobody drew on, with
    /// no agent and no subscriber for the idle time-out, is forgotten and its
    /// place taken by the next; drawn boards, and boards with an agent or a
    /// subscriber, stay.
    @Test func idleEmptyBoardsAreForgotten() {
        let hub = CoreHarness {
            $0.limits.maxBoards = 3
            $0.timing.idleEmptyBoardTimeout = .seconds(60)
        }
        let (empty, drawn, watched, present) = (peer("empty"), peer("drawn"), peer("watched"), peer("present"))
        hub.hello(empty, board: "empty")
        hub.hello(drawn, board: "drawn")
        hub.hello(watched, board: "watched")
        _ = hub.message(drawn, .numbered(sequence: 1, began(1)))
        _ = hub.endTurn()
        _ = hub.send(.subscribed(topic: publishTopic(board: "watched"), by: nil))
        for (who, board) in [(empty, "empty"), (drawn, "drawn"), (watched, "watched")] {
            _ = hub.message(who, .goodbye)
            #expect(hub.core.board(board) != nil)
        }
        let full = hub.message(present, .hello(AgentHello(board: "fourth", sessionID: [1]))).errors(to: present).first
        #expect(full?.code == .unknownBoard, "the table is full")
        hub.advance(.seconds(61))
        _ = hub.endTurn()
        #expect(hub.core.board("empty") == nil, "the empty board was kept")
        #expect(hub.core.board("drawn") != nil && hub.core.board("watched") != nil)
        #expect(Set(hub.core.boardNames) == ["drawn", "watched"])
        #expect(!hub.endTurn().heartbeats.contains { $0.board.isEmpty }, "a forgotten slot sends heartbeats")
        #expect(hub.hello(present, board: "fourth") != nil, "its place is free again")
        _ = hub.message(present, .numbered(sequence: 1, began(2)))
        hub.advance(.seconds(61))
        let beats = hub.endTurn().heartbeats.map(\.board)
        #expect(Set(beats) == ["drawn", "watched", "fourth"], "\(beats)")
        #expect(hub.replicas["fourth"]?.liveTouchCount == 1)
    }

    /// A user's samples over all boards are bounded (issue 22: per-user
    /// storage; accepted strokes everywhere plus the user's strokes in
    /// progress where it draws): at the quota a new stroke gets BOARD_FULL on any board
    /// while a stroke under way may finish; clearing makes room; other users
    /// are not affected; a restarted hub counts what it recovered.
    @Test func samplesPerUserAreBoundedOverAllBoards() {
        let hub = CoreHarness { $0.limits.maxSamplesPerUser = 4 }
        let ann = peer("ann")
        hub.hello(ann, board: "a")
        _ = hub.message(ann, .numbered(sequence: 1, began(1)))
        _ = hub.message(ann, .numbered(sequence: 2, moved(1, x: 1, t: 1)))
        _ = hub.message(ann, .numbered(sequence: 3, ended(1, x: 2, t: 2)))
        _ = hub.endTurn()
        hub.hello(ann, board: "b", session: "session-2")
        #expect(hub.message(ann, .numbered(sequence: 1, began(1))).errors(to: ann).isEmpty, "3 of 4 stored")
        let full = hub.message(ann, .numbered(sequence: 2, began(2))).errors(to: ann).first
        #expect(full?.code == .boardFull && full?.message.contains("over this hub's boards") == true, "\(String(describing: full))")
        #expect(hub.message(ann, .numbered(sequence: 3, moved(1, x: 5, t: 5))).errors(to: ann).isEmpty, "a stroke under way finishes")
        #expect(hub.message(ann, .numbered(sequence: 4, ended(1, x: 6, t: 6))).errors(to: ann).isEmpty)
        #expect(hub.hello(peer("bob"), board: "b") != nil)
        #expect(hub.message(peer("bob"), .numbered(sequence: 1, began(1))).errors(to: peer("bob")).isEmpty, "bob has his own quota")
        _ = hub.message(ann, .numbered(sequence: 5, .clear(.own)))
        #expect(hub.message(ann, .numbered(sequence: 6, began(3))).errors(to: ann).isEmpty, "clearing made room")
        _ = hub.endTurn()

        // After a restart the quota counts what the journal gave back.
        let recovered = ["a", "b"].compactMap { name in hub.core.board(name).map { RecoveredBoard(name: name, state: $0, agents: []) } }
        let restarted = CoreHarness({ $0.limits.maxSamplesPerUser = 3 }, recovered: recovered)
        restarted.hello(ann, board: "c", session: "session-3")
        #expect(restarted.message(ann, .numbered(sequence: 1, began(1))).errors(to: ann).first?.code == .boardFull, "board a still holds 3 accepted")
    }

    /// Edits through the hub (issue 38): copies count against the editing
    /// user's quota (at it, a copy is BOARD_FULL), and an undo that puts back
    /// another user's stroke an edit deleted counts it for its owner again.
    @Test func editsKeepEveryUsersQuota() {
        let hub = CoreHarness { $0.limits.maxSamplesPerUser = 6 }
        let (ann, bob) = (peer("ann"), peer("bob"))
        hub.hello(ann, board: "a")
        hub.hello(bob, board: "a")
        _ = hub.message(ann, .numbered(sequence: 1, began(1)))
        _ = hub.message(ann, .numbered(sequence: 2, moved(1, x: 1, t: 1)))
        _ = hub.message(ann, .numbered(sequence: 3, ended(1, x: 2, t: 2)))  // stroke 1: ann's, 3 samples
        _ = hub.message(bob, .numbered(sequence: 1, began(1)))
        _ = hub.message(bob, .numbered(sequence: 2, moved(1, x: 1, t: 1)))
        _ = hub.message(bob, .numbered(sequence: 3, ended(1, x: 2, t: 2)))  // stroke 2: bob's, 3 samples
        let copy = StrokeEdit(strokes: [StrokeID(1)], change: .duplicate(StrokeTransform(offsetX: 64)))
        #expect(hub.message(ann, .numbered(sequence: 4, .edit(copy))).errors(to: ann).isEmpty, "3 of 6: the copy fits")
        #expect(hub.message(ann, .numbered(sequence: 5, .edit(copy))).errors(to: ann).first?.code == .boardFull, "6 of 6: no more copies")
        // On a hub without an access list ann may edit bob's stroke: she deletes it, then undoes that.
        let delete = StrokeEdit(strokes: [StrokeID(2)], change: .delete)
        #expect(hub.message(ann, .numbered(sequence: 6, .edit(delete))).errors(to: ann).isEmpty)
        #expect(hub.core.board("a")?.acceptedStrokes.map(\.id.rawValue) == [1, 3])
        _ = hub.message(ann, .numbered(sequence: 7, .undo))
        #expect(hub.core.board("a")?.acceptedStrokes.map(\.id.rawValue) == [1, 2, 3], "bob's stroke is back in its place")
        // bob holds 3 again: a stroke of 3 more fits, and then no other begins.
        _ = hub.message(bob, .numbered(sequence: 4, began(2, x: 9, t: 9)))
        _ = hub.message(bob, .numbered(sequence: 5, moved(2, x: 10, t: 10)))
        #expect(hub.message(bob, .numbered(sequence: 6, ended(2, x: 11, t: 11))).errors(to: bob).isEmpty)
        #expect(hub.message(bob, .numbered(sequence: 7, began(3, x: 20, t: 20))).errors(to: bob).first?.code == .boardFull, "bob's undone stroke counts again")
        let bad = StrokeEdit(strokes: [StrokeID(1)], change: .transform(StrokeTransform(scale: .nan)))
        #expect(hub.message(ann, .numbered(sequence: 8, .edit(bad))).errors(to: ann).first?.code == .invalidValue)
    }

    @Test func heartbeatsEveryIntervalAndAtOnceForANewSubscriber() {
        let hub = CoreHarness { $0.timing.heartbeatInterval = .seconds(1) }
        let pen = peer("pen")
        hub.hello(pen, board: "b")
        _ = hub.message(pen, .numbered(sequence: 1, began(1)))
        _ = hub.message(pen, .numbered(sequence: 2, .clear(.own)))
        // The first subscriber: pending diffs published, then a heartbeat at that sequence.
        let subscribed = hub.send(.subscribed(topic: publishTopic(board: "b"), by: nil))
        #expect(subscribed.batchSequences == [1])
        #expect(subscribed.heartbeats.map(\.sequence) == [1])
        #expect(subscribed.heartbeats.first?.digest == hub.replicas["b"]?.digest)
        #expect(hub.send(.subscribed(topic: publishTopic(board: "nobody-draws-here"), by: nil)).isEmpty)
        hub.advance(.milliseconds(999))
        #expect(hub.endTurn().heartbeats.isEmpty)
        hub.advance(.milliseconds(1))
        let beats = hub.endTurn().heartbeats
        #expect(beats.map(\.board) == ["b"] && beats.first?.sequence == 1)
    }

    /// A heartbeat says the board's digest at its sequence. With a publish
    /// interval, diffs wait between batches; a periodic heartbeat in that wait
    /// once carried the digest of the board with them at the sequence before
    /// them, and every subscriber took it for a divergence and resynced (a
    /// browser run with `--publish-interval-ms 16` sent its tabs snapshots).
    @Test func aHeartbeatWithinThePublishIntervalCarriesThePublishedBoardsDigest() {
        let hub = CoreHarness {
            $0.timing.heartbeatInterval = .seconds(1)
            $0.timing.publishInterval = .milliseconds(400)
        }
        let pen = peer("pen")
        hub.hello(pen, board: "b")
        _ = hub.send(.subscribed(topic: publishTopic(board: "b"), by: nil))
        _ = hub.message(pen, .numbered(sequence: 1, began(1)))
        #expect(hub.endTurn().batchSequences == [1])  // the first batch goes at once
        hub.advance(.milliseconds(800))
        _ = hub.message(pen, .numbered(sequence: 2, moved(1, x: 5, t: 5)))
        #expect(hub.endTurn().batchSequences == [2])  // the interval had passed
        hub.advance(.milliseconds(200))
        _ = hub.message(pen, .numbered(sequence: 3, moved(1, x: 9, t: 9)))
        let turn = hub.endTurn()  // 1 s: the periodic heartbeat, within the interval since batch 2
        let beat = turn.heartbeats.first
        #expect(beat != nil)
        #expect(beat?.digest == hub.replicas["b"]?.digest, "the heartbeat's digest is the board the subscribers hold at its sequence")
        #expect(beat?.sequence == hub.replicas["b"]?.sequence)
        #expect(hub.replicas["b"] == hub.core.board("b"), "nothing drawn is held back from the subscribers past the heartbeat")
    }

    @Test func recoveredUsersWhoDoNotReturnAreCancelled() throws {
        var state = BoardState()
        var diffs: [StrokeDiff] = []
        try state.reduce(TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [Sample(x: 0, y: 0, time: 0)])]), from: UserNamespace("gone"), style: .default, into: &diffs)
        try state.reduce(TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [Sample(x: 0, y: 0, time: 0)])]), from: UserNamespace("back"), style: .default, into: &diffs)
        _ = state.sealBatch(diffs, hubTime: 0)
        let recovered = RecoveredBoard(
            name: "b", state: state,
            agents: [
                AgentProgress(principal: UserNamespace("back"), appliedThrough: 7, style: .default, sessionID: Array("session-1".utf8))
            ],
            damage: [], recordsApplied: 1)
        let hub = CoreHarness(
            {
                $0.timing.livenessTimeout = .seconds(3)
                $0.timing.abandonTimeout = .seconds(30)
            }, recovered: [recovered])
        // The same session resumes where the journal says; a stranger to the journal cannot claim more.
        #expect(hub.message(peer("back"), .hello(AgentHello(board: "b", resumeAfter: 8, sessionID: Array("session-1".utf8)))).errors(to: peer("back")).map(\.code) == [.cannotResume])
        #expect(hub.hello(peer("back"), board: "b", resumeAfter: 7)?.appliedThrough == 7)
        hub.advance(.seconds(29))
        _ = hub.message(peer("back"), .heartbeat)
        hub.endTurn()
        #expect(hub.core.board("b")?.touches[UserNamespace("gone")]?.count == 1, "cancelled before the abandon time-out")
        hub.advance(.seconds(1))
        hub.endTurn()
        let board = hub.core.board("b")
        #expect(board?.touches[UserNamespace("gone")]?.isEmpty ?? true)
        #expect(board?.touches[UserNamespace("back")]?.count == 1)
    }

    /// One user may not make the hub store more than its sample allowance,
    /// whatever its message rate: a frame beyond it is refused whole.
    @Test func sampleQuotaRefusesFloodsOfLargeFrames() {
        let hub = CoreHarness { $0.limits.maxSamplesPerSecond = 100 }  // a bucket of 200
        let big = peer("big")
        hub.hello(big, board: "b")
        func frame(_ touch: UInt64, samples: Int, from start: Int) -> NumberedRequest {
            .frame(TouchFrame(changes: [TouchChange(touch: TouchID(touch), phase: .began, samples: (0..<samples).map { Sample(x: Int32(start + $0), y: 0, time: Int64(start + $0)) })]))
        }
        #expect(hub.message(big, .numbered(sequence: 1, frame(1, samples: 150, from: 0))).errors(to: big).isEmpty)
        let refused = hub.message(big, .numbered(sequence: 2, frame(2, samples: 150, from: 1000))).errors(to: big)
        #expect(refused.map(\.code) == [.rateLimited] && refused.first?.sequence == 2)
        hub.advance(.seconds(1))  // refills 100
        #expect(hub.message(big, .numbered(sequence: 3, frame(3, samples: 140, from: 2000))).errors(to: big).isEmpty)
        #expect(hub.endTurn().acks(to: big) == [3])
        #expect(hub.core.board("b")?.liveTouchCount == 2)
    }

    /// Sessions are bounded: at the limit the longest-abandoned one makes
    /// room; with none abandoned a new session is refused.
    @Test func sessionsAreCappedAndReclaimed() {
        let hub = CoreHarness {
            $0.limits.maxSessions = 2
            $0.timing.livenessTimeout = .seconds(1)
            $0.timing.abandonTimeout = .seconds(2)
        }
        hub.hello(peer("a"), board: "b")
        hub.hello(peer("b"), board: "b")
        let refused = hub.message(peer("c"), .hello(AgentHello(board: "b", sessionID: [1])))
        #expect(refused.errors(to: peer("c")).map(\.code) == [.rateLimited])
        hub.advance(.seconds(1))
        _ = hub.message(peer("b"), .heartbeat)  // b stays; a falls silent, then is abandoned
        hub.endTurn()
        hub.advance(.seconds(1))
        _ = hub.message(peer("b"), .heartbeat)
        hub.endTurn()
        #expect(hub.hello(peer("c"), board: "b") != nil)
        #expect(hub.core.sessionCount == 2)
        #expect(hub.message(peer("a"), .heartbeat).errors(to: peer("a")).map(\.code) == [.notWelcomed])  // a was forgotten
    }

    /// A flood of subscriptions to a board makes one heartbeat at once and
    /// one at the end of the interval, not one each.
    @Test func subscriptionFloodsDoNotFloodHeartbeats() {
        let hub = CoreHarness { $0.timing.subscribeHeartbeatInterval = .milliseconds(100) }
        hub.hello(peer("pen"), board: "b")
        _ = hub.message(peer("pen"), .numbered(sequence: 1, began(1)))
        var beats = 0
        for _ in 0..<1000 {
            beats += hub.send(.subscribed(topic: publishTopic(board: "b"), by: nil)).heartbeats.count
            beats += hub.send(.unsubscribed(topic: publishTopic(board: "b"), by: nil)).heartbeats.count
        }
        #expect(beats == 1)
        #expect(hub.core.nextDeadline <= hub.start + .milliseconds(100))
        hub.advance(.milliseconds(100))
        #expect(hub.endTurn().heartbeats.map(\.board) == ["b"])  // the newcomers since then are told too
        hub.advance(.milliseconds(100))
        #expect(hub.endTurn().heartbeats.isEmpty)
    }

    @Test func boardLimitRefusesNewBoards() {
        let hub = CoreHarness { $0.limits.maxBoards = 1 }
        hub.hello(peer("a"), board: "one")
        let refusal = hub.message(peer("b"), .hello(AgentHello(board: "two", sessionID: [1]))).errors(to: peer("b")).first
        #expect(refusal?.code == .unknownBoard)
        #expect(refusal?.message.contains("maximum of 1 boards") == true)
    }

    /// Overload degrades to latency: while every turn ends with input still
    /// waiting, nobody is declared silent (their messages may be queued), and
    /// after `busyAfter` every agent hears BUSY with a retry hint, at most
    /// once per interval. Caught up, liveness resumes from what was heard.
    @Test func behindTheHubTellsAgentsBusyAndSilencesNobody() {
        let hub = CoreHarness {
            $0.timing.livenessTimeout = .seconds(3)
            $0.timing.busyAfter = .milliseconds(250)
            $0.timing.busyNoticeInterval = .seconds(1)
        }
        let (ann, bob) = (peer("ann"), peer("bob"))
        hub.hello(ann, board: "b")
        hub.hello(bob, board: "b")
        _ = hub.message(ann, .numbered(sequence: 1, began(1)))
        _ = hub.message(bob, .numbered(sequence: 1, began(1)))
        hub.endTurn()
        let lastHeard = hub.now
        #expect(hub.endTurn(inputWaiting: true).errors(to: ann).isEmpty, "one full turn is not overload")
        hub.advance(.milliseconds(250))
        let first = hub.endTurn(inputWaiting: true)
        #expect(first.errors(to: ann).map(\.code) == [.busy] && first.errors(to: bob).map(\.code) == [.busy])
        #expect(first.errors(to: ann).first?.retryAfterMilliseconds == 1000)
        #expect(first.errors(to: ann).first?.sequence == 1)
        hub.advance(.milliseconds(500))
        #expect(hub.endTurn(inputWaiting: true).errors(to: ann).isEmpty, "at most one notice per interval")
        // Far past the liveness time-out, still behind: nobody is silent, nothing cancelled.
        var notices = 1
        while hub.now < lastHeard + .seconds(8) {
            hub.advance(.milliseconds(100))
            let turn = hub.endTurn(inputWaiting: true)
            notices += turn.errors(to: ann).count
            #expect(turn.heartbeats.allSatisfy { $0.silent.isEmpty })
        }
        #expect(notices == 8)
        #expect(hub.core.board("b")?.liveTouchCount == 2)
        // The queue drains and holds ann's message; bob said nothing more: only bob falls silent.
        _ = hub.message(ann, .heartbeat)
        hub.endTurn()
        hub.advance(.seconds(1))
        let caughtUp = hub.endTurn()
        #expect(caughtUp.errors(to: ann).isEmpty)
        #expect(caughtUp.heartbeats.last?.silent == ["bob"])
        #expect(hub.core.board("b")?.liveTouchCount == 2, "silent keeps touches")
    }

    @Test func byteQuotaRefusesBigSendersAndCountsTheirPlace() {
        let hub = CoreHarness { $0.limits.maxBytesPerSecond = 10_000 }
        let big = peer("big")
        hub.hello(big, board: "b")  // 40 bytes paid
        var codes: [ErrorCode] = []
        for sequence in 1...5 {
            codes += hub.message(big, .numbered(sequence: UInt64(sequence), .style(.default)), bytes: 5_000).errors(to: big).map(\.code)
        }
        #expect(codes == [.byteRateLimited])  // the bucket holds 20,000 bytes
        #expect(hub.endTurn().acks(to: big) == [5], "refused but handled: never resent")
        hub.advance(.milliseconds(500))  // refills 5,000
        #expect(hub.message(big, .numbered(sequence: 6, .style(.default)), bytes: 4_900).errors(to: big).isEmpty)
        // Another user has its own quota.
        let small = peer("small")
        hub.hello(small, board: "b")
        #expect(hub.message(small, .numbered(sequence: 1, began(1)), bytes: 100).errors(to: small).isEmpty)
    }

    @Test func aFullBoardRefusesNewStrokesWithATypedError() throws {
        let hub = CoreHarness { $0.limits.boardLimits.maxSamplesPerBoard = 2 }
        let ann = peer("ann")
        hub.hello(ann, board: "b")
        _ = hub.message(ann, .numbered(sequence: 1, began(1)))
        _ = hub.message(ann, .numbered(sequence: 2, ended(1, x: 1, t: 1)))
        let refused = hub.message(ann, .numbered(sequence: 3, began(2))).errors(to: ann)
        #expect(refused.map(\.code) == [.boardFull] && refused.first?.sequence == 3)
        _ = hub.message(ann, .numbered(sequence: 4, .clear(.own)))
        #expect(hub.message(ann, .numbered(sequence: 5, began(2))).errors(to: ann).isEmpty)
        #expect(hub.endTurn().acks(to: ann) == [5])
        #expect(hub.replicas["b"]?.liveTouchCount == 1)
    }

    /// Authenticated, every path asks the user's role: a hello to draw needs
    /// draw, a board clear admin, a subscription or snapshot watch; a reload
    /// that takes a role away applies at once.
    @Test func rolesAreEnforcedOnEveryPath() throws {
        let keys = (0..<3).map { index in String(repeating: "abcdefghij"[String.Index(utf16Offset: index, in: "abcdefghij")], count: 40) }
        var list = try AccessList(users: [
            "ann": AccessEntry(key: keys[0], boards: ["*": .draw]),
            "tv": AccessEntry(key: keys[1], boards: ["team-*": .watch]),
            "boss": AccessEntry(key: keys[2], boards: ["*": .admin]),
        ])
        let hub = CoreHarness(access: list)
        let (ann, tv, boss) = (peer("ann"), peer("tv"), peer("boss"))
        #expect(hub.hello(ann, board: "team-1") != nil)
        #expect(hub.hello(tv, board: "team-1") == nil)
        #expect(hub.take().errors(to: tv).map(\.code) == [.forbidden])
        _ = hub.message(ann, .numbered(sequence: 1, began(1)))
        #expect(hub.message(ann, .numbered(sequence: 2, .clear(.board))).errors(to: ann).map(\.code) == [.forbidden])
        #expect(hub.message(ann, .numbered(sequence: 3, .clear(.own))).errors(to: ann).isEmpty)
        hub.hello(boss, board: "team-1")
        #expect(hub.message(boss, .numbered(sequence: 1, .clear(.board))).errors(to: boss).isEmpty)
        // Subscriptions: whole topics of boards the user may watch, or prefixes only such boards match.
        let topic = publishTopic(board: "team-1")
        func allowed(_ topic: [UInt8], _ user: String?) -> Bool {
            hub.send(.subscribed(topic: topic, by: user.map(UserNamespace.init))).contains { if case .allowSubscription(topic) = $0 { true } else { false } }
        }
        #expect(allowed(topic, "tv"))
        #expect(!allowed(publishTopic(board: "other"), "tv"))
        #expect(!allowed([], "tv"), "every board: tv may watch team-* only")
        #expect(!allowed(Array("team".utf8), "tv"), "team… also matches teammate-1")
        #expect(allowed(Array("team-".utf8), "tv") && allowed(Array("team-1".utf8), "tv"), "only team-* boards start so")
        #expect(!allowed(Array("team-1".utf8) + [0, 0x41], "tv"), "a stream byte inside: neither a board's topic nor a prefix of one")
        #expect(allowed([], "boss") && allowed([0xC3], "boss"), "boss may watch every board, whatever the cut")
        #expect(!allowed(topic, nil))
        // Snapshots.
        let refused = hub.send(.snapshotRequested(by: tv.id, user: UserNamespace("tv"), board: "other", requestID: 1))
        #expect(refused.contains { if case .refuseSnapshot(_, 1, let refusal) = $0 { refusal.code == .forbidden } else { false } })
        // A reload that makes ann a watcher: her touches are cancelled and her frames refused.
        #expect(hub.core.board("team-1")?.liveTouchCount == 1)
        try list.set("ann", AccessEntry(key: keys[0], boards: ["*": .watch]))
        hub.send(.accessChanged(list))
        hub.endTurn()
        #expect(hub.core.board("team-1")?.liveTouchCount == 0)
        #expect(hub.message(ann, .numbered(sequence: 4, began(2))).errors(to: ann).map(\.code) == [.forbidden])
        // A watcher by prefix whose pattern is narrowed loses its stream (its subscriptions cannot be dropped one by one).
        try list.set("tv", AccessEntry(key: keys[1], boards: ["team-1": .watch]))
        #expect(hub.send(.accessChanged(list)).contains { if case .disconnectSubscribers(let users) = $0 { users == ["tv"] } else { false } })
        // Removed altogether: the session ends.
        list.remove("ann")
        hub.send(.accessChanged(list))
        #expect(hub.message(ann, .numbered(sequence: 5, began(2))).errors(to: ann).map(\.code) == [.notWelcomed])
    }

    /// A board list: the boards with their counts, in name order (UTF-8
    /// bytes), by prefix, in pages after a name; on an authenticated hub only
    /// those the requester may watch; counted against the snapshot allowance.
    @Test func boardListsPageThroughTheBoards() throws {
        let keys = (0..<2).map { index in String(repeating: "ab"[String.Index(utf16Offset: index, in: "ab")], count: 40) }
        let list = try AccessList(users: [
            "ann": AccessEntry(key: keys[0], boards: ["*": .draw]),
            "tv": AccessEntry(key: keys[1], boards: ["team-*": .watch]),
        ])
        let hub = CoreHarness({ $0.limits.maxSnapshotsPerSecond = 4 }, access: list)
        let ann = peer("ann")
        for board in ["team-b", "白板", "team-a", "other"] { #expect(hub.hello(ann, board: board, session: board) != nil) }
        _ = hub.message(ann, .numbered(sequence: 1, began(1)))  // on "other", the last hello
        hub.endTurn()
        func listed(_ user: String, prefix: String = "", after: String = "", limit: Int = 0) -> (names: [String], boards: [BoardSummary], more: Bool)? {
            let actions = hub.send(
                .boardListRequested(by: PeerID(Array(user.utf8)), user: UserNamespace(user), prefix: prefix, after: after, limit: limit, requestID: 5))
            guard case .sendBoardList(_, 5, let boards, let more)? = actions.last else { return nil }
            return (boards.map(\.board), boards, more)
        }
        let all = try #require(listed("ann"))
        #expect(all.names == ["other", "team-a", "team-b", "白板"] && !all.more)
        let other = try #require(all.boards.first)
        #expect(other.sequence == 1 && other.activeStrokes == 1 && other.acceptedStrokes == 0 && other.lastChangeTime > 0)
        #expect(all.boards.map(\.agents).reduce(0, +) == 1, "ann's one session, on its last board")
        let first = try #require(listed("ann", prefix: "team-", limit: 1))
        #expect(first.names == ["team-a"] && first.more)
        let second = try #require(listed("ann", prefix: "team-", after: "team-a", limit: 1))
        #expect(second.names == ["team-b"] && !second.more)
        #expect(listed("tv")?.names == ["team-a", "team-b"], "only what tv may watch")
        // tv's fifth request in the second: refused like a fifth snapshot.
        for _ in 0..<3 { #expect(listed("tv") != nil) }
        #expect(listed("tv") == nil)
        hub.advance(.seconds(1))
        #expect(listed("tv") != nil)
    }

    /// A gateway (a key with acts_for) acts for invited browser users: each
    /// connection in a namespace of its own under PREFIX+USER:, with the
    /// lower of the two roles; nobody else's namespace, no unknown token; a
    /// reload that revokes the invitation ends the session.
    @Test func gatewaysActOnlyForTheirInvitedUsers() throws {
        let gatewayKey = String(repeating: "g", count: 40)
        let annToken = String(repeating: "a", count: 32)
        let bobToken = String(repeating: "b", count: 32)
        var list = try AccessList(users: [
            "gateway": AccessEntry(key: gatewayKey, boards: ["*": .admin], actsFor: "web:"),
            "plain": AccessEntry(key: String(repeating: "p", count: 40), boards: ["*": .admin]),
            "ann": AccessEntry(token: annToken, boards: ["team-*": .draw]),
            "bob": AccessEntry(token: bobToken, boards: ["other": .draw]),
        ])
        let hub = CoreHarness(access: list)
        func delegatedHello(_ connection: String, by principal: String, as namespace: String, token: String, board: String = "team-1")
            -> (Peer, AgentWelcome?)
        {
            let peer = Peer(id: PeerID(Array(connection.utf8)), principal: UserNamespace(principal))
            let hello = AgentHello(board: board, sessionID: Array(connection.utf8), actAs: namespace, token: token)
            for case .reply(_, .welcome(let welcome)) in hub.send(.agentMessage(from: peer, .hello(hello), bytes: 60)) { return (peer, welcome) }
            return (peer, nil)
        }
        let (tab1, welcome1) = delegatedHello("c1", by: "gateway", as: "web:ann:t1", token: annToken)
        let (_, welcome2) = delegatedHello("c2", by: "gateway", as: "web:ann:t2", token: annToken)
        #expect(welcome1?.user == UserNamespace("web:ann:t1") && welcome2?.user == UserNamespace("web:ann:t2"), "a namespace per tab")
        // Frames from the connection act in its namespace.
        #expect(hub.message(tab1, .numbered(sequence: 1, began(1))).errors(to: tab1).isEmpty)
        #expect(hub.core.board("team-1")?.touches[UserNamespace("web:ann:t1")]?.count == 1)
        // The lower role: ann draws, so the gateway's admin does not let her clear the board.
        #expect(hub.message(tab1, .numbered(sequence: 2, .clear(.board))).errors(to: tab1).map(\.code) == [.forbidden])
        // Refused: another user's namespace, an unknown token, a board the user may not draw on, a key without acts_for.
        for (principal, namespace, token, board) in [
            ("gateway", "web:bob:t3", annToken, "team-1"), ("gateway", "web:ann:t4", String(repeating: "z", count: 32), "team-1"),
            ("gateway", "web:bob:t5", bobToken, "team-1"), ("plain", "web:ann:t6", annToken, "team-1"), ("gateway", "web:ann", annToken, "team-1"),
        ] {
            let (peer, welcome) = delegatedHello("x-" + namespace, by: principal, as: namespace, token: token, board: board)
            #expect(welcome == nil, "\(principal) as \(namespace)")
            #expect(hub.take().errors(to: peer).map(\.code).contains(.forbidden), "\(principal) as \(namespace)")
        }
        // A reload that keeps ann keeps her sessions; one that replaces her invitation ends them.
        try list.set("plain", AccessEntry(key: String(repeating: "q", count: 40), boards: ["*": .watch]))
        hub.send(.accessChanged(list))
        #expect(hub.message(tab1, .numbered(sequence: 3, .clear(.own))).errors(to: tab1).isEmpty)
        try list.set("ann", AccessEntry(token: String(repeating: "c", count: 32), boards: ["team-*": .draw]))
        hub.send(.accessChanged(list))
        hub.endTurn()
        #expect(hub.core.board("team-1")?.touches[UserNamespace("web:ann:t1")] == nil, "her touches cancelled")
        #expect(hub.message(tab1, .numbered(sequence: 4, began(2))).errors(to: tab1).map(\.code) == [.notWelcomed])
    }

    /// Sharded: a hub holds only the boards the cluster map gives it; others
    /// are refused (hello and snapshot) with WRONG_HUB naming the right hub.
    @Test func aShardedHubRefusesOtherHubsBoards() throws {
        let map = try ClusterMap(hubs: ["a", "b"].map { ClusterMap.Hub(name: $0, ingest: "tcp://\($0):5570", publish: "p", snapshot: "s") })
        let ours = try #require((0..<50).map { "board-\($0)" }.first { map.hub(for: $0).name == "a" })
        let theirs = try #require((0..<50).map { "board-\($0)" }.first { map.hub(for: $0).name == "b" })
        let hub = CoreHarness { $0.cluster = (map, "a") }
        #expect(hub.hello(peer("ann"), board: ours) != nil)
        #expect(hub.hello(peer("bob"), board: theirs) == nil)
        let refusal = try #require(hub.take().errors(to: peer("bob")).first)
        #expect(refusal.code == .wrongHub && refusal.message.contains("lives on hub b (tcp://b:5570)"), "\(refusal)")
        let snapshot = hub.send(.snapshotRequested(by: peer("tv").id, user: nil, board: theirs, requestID: 3))
        #expect(snapshot.contains { if case .refuseSnapshot(_, 3, let refusal) = $0 { refusal.code == .wrongHub } else { false } })
    }

    /// Undo, redo and erase through the core: numbered, acknowledged,
    /// published; erasing another user's stroke needs the board-clearing role.
    @Test func undoRedoAndEraseAreNumberedAndAuthorised() throws {
        let keys = (0..<2).map { String(repeating: ["x", "y"][$0], count: 40) }
        let list = try AccessList(users: [
            "ann": AccessEntry(key: keys[0], boards: ["*": .draw]),
            "boss": AccessEntry(key: keys[1], boards: ["*": .admin]),
        ])
        let hub = CoreHarness(access: list)
        let (ann, boss) = (peer("ann"), peer("boss"))
        hub.hello(ann, board: "b")
        hub.hello(boss, board: "b")
        _ = hub.message(ann, .numbered(sequence: 1, began(1)))
        _ = hub.message(ann, .numbered(sequence: 2, ended(1, x: 1, t: 1)))
        _ = hub.message(boss, .numbered(sequence: 1, began(1)))
        _ = hub.message(boss, .numbered(sequence: 2, ended(1, x: 1, t: 1)))
        hub.endTurn()
        #expect(hub.core.board("b")?.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(2)])
        _ = hub.message(ann, .numbered(sequence: 3, .undo))
        #expect(hub.endTurn().acks(to: ann) == [3])
        #expect(hub.core.board("b")?.acceptedStrokes.map(\.id) == [StrokeID(2)])
        _ = hub.message(ann, .numbered(sequence: 4, .redo))
        hub.endTurn()
        #expect(hub.core.board("b")?.acceptedStrokes.map(\.id) == [StrokeID(1), StrokeID(2)])
        #expect(hub.replicas["b"] == hub.core.board("b"))
        let refused = hub.message(ann, .numbered(sequence: 5, .erase([StrokeID(2)]))).errors(to: ann)
        #expect(refused.map(\.code) == [.forbidden] && refused.first?.sequence == 5)
        #expect(hub.message(ann, .numbered(sequence: 6, .erase([StrokeID(9)]))).errors(to: ann).map(\.code) == [.unknownStroke])
        #expect(hub.message(boss, .numbered(sequence: 3, .erase([StrokeID(1)]))).errors(to: boss).isEmpty)
        #expect(hub.endTurn().acks(to: ann) == [6])
        #expect(hub.core.board("b")?.acceptedStrokes.map(\.id) == [StrokeID(2)])
        #expect(hub.replicas["b"] == hub.core.board("b"))
    }
}

/// The core's side of the board store (issue 25): a hello for a board the
/// hub does not hold waits for the board's claim; commits stand for syncs;
/// a board whose lease moved is refused, its agents told where it went; the
/// live hubs decide where boards not held here belong.
@Suite("HubCore on a board store")
struct HubCoreStoreTests {
    /// A hello on a store hub: the board claimed, adopted empty, then welcomed.
    func welcomed(_ hub: CoreHarness, _ peer: Peer, board: String) throws {
        let claimed = hub.send(.agentMessage(from: peer, .hello(AgentHello(board: board, sessionID: Array("s".utf8))), bytes: 40))
        try #require(claimed.contains { if case .claimBoard(board) = $0 { true } else { false } })
        try #require(claimed.replies(to: peer).isEmpty, "answered before the claim")
        let adopted = hub.send(.boardAdopted(RecoveredBoard(name: board, state: BoardState(), agents: [])))
        try #require(adopted.contains { if case .reply(peer.id, .welcome) = $0 { true } else { false } })
    }

    /// A snapshot request for a board a store hub does not hold is not
    /// answered with an empty board (the store may hold it: its hub died) but
    /// waits for the board's look-up, which never creates it: answered with
    /// the board as adopted, the empty board when the store has none, a
    /// WRONG_HUB when another hub holds it, STORAGE_UNAVAILABLE when the
    /// store cannot be reached.
    @Test func aSnapshotOfABoardNotHeldWaitsForItsLookUp() throws {
        let hub = CoreHarness { $0.storeCommits = true }
        let spectator = PeerID(Array("spectator".utf8))
        func ask(_ board: String, _ request: UInt64) -> [HubAction] {
            hub.send(.snapshotRequested(by: spectator, user: nil, board: board, requestID: request))
        }
        func snapshots(_ actions: [HubAction]) -> [(UInt64, BoardState)] {
            actions.compactMap { if case .sendSnapshot(_, let request, _, let state, _) = $0 { (request, state) } else { nil } }
        }
        // Stored: two requests wait for one look-up, then both get the adopted board.
        let first = ask("stored", 1)
        #expect(first.contains { if case .lookUpBoard("stored") = $0 { true } else { false } } && snapshots(first).isEmpty)
        let second = ask("stored", 2)
        #expect(!second.contains { if case .lookUpBoard = $0 { true } else { false } } && snapshots(second).isEmpty, "one look-up per board")
        var stored = BoardState()
        try stored.apply(DiffBatch(sequence: 1, hubTime: 1, diffs: []))
        let adopted = snapshots(hub.send(.boardAdopted(RecoveredBoard(name: "stored", state: stored, agents: []))))
        #expect(adopted.map(\.0) == [1, 2] && adopted.allSatisfy { $0.1.sequence == 1 })
        // Not in the store: the empty board, and nothing created.
        _ = ask("never", 3)
        let absent = snapshots(hub.send(.boardAbsent(board: "never")))
        #expect(absent.map(\.0) == [3] && absent.first?.1.sequence == 0 && hub.core.board("never") == nil)
        // Held by another hub: WRONG_HUB.
        _ = ask("elsewhere", 4)
        let moved = hub.send(.boardMoved(board: "elsewhere", owner: "hub-b"))
        #expect(moved.contains { if case .refuseSnapshot(_, 4, let refusal) = $0 { refusal.code == .wrongHub } else { false } })
        // The store unreachable: try again.
        _ = ask("down", 5)
        let failed = hub.send(.journalFailed(board: "down", reason: "connection refused"))
        #expect(failed.contains { if case .refuseSnapshot(_, 5, let refusal) = $0 { refusal.code == .storageUnavailable } else { false } })
        // A held board is answered at once (a second later: a peer has a few snapshots a second).
        hub.advance(.seconds(1))
        #expect(snapshots(ask("stored", 6)).map(\.0) == [6])
    }

    @Test func acknowledgementsWaitForTheCommit() throws {
        let hub = CoreHarness { $0.storeCommits = true }
        let ann = peer("ann")
        try welcomed(hub, ann, board: "b")
        _ = hub.message(ann, .numbered(sequence: 1, began(1, x: 10)))
        let turn = hub.endTurn()
        #expect(turn.contains { if case .appendToJournal(let append) = $0 { append.ticket == 1 } else { false } })
        #expect(turn.acks(to: ann).isEmpty, "acknowledged before the commit")
        #expect(hub.send(.journalProgress(writtenThrough: 1, syncedThrough: 0)).acks(to: ann).isEmpty)
        #expect(hub.send(.journalProgress(writtenThrough: 1, syncedThrough: 1)).acks(to: ann) == [1])
    }

    /// An adopted board is the store's: an agent resumes its session from the numbers the store holds.
    @Test func anAdoptedBoardResumesItsAgentsFromTheStore() throws {
        let hub = CoreHarness { $0.storeCommits = true }
        let ann = peer("ann")
        // A board another hub served: one stroke of ann's, message 7 its last.
        let other = CoreHarness()
        try #require(other.hello(ann, board: "b") != nil)
        _ = other.message(ann, .numbered(sequence: 1, began(1, x: 10)))
        _ = other.endTurn()
        let state = try #require(other.core.board("b"))
        let progress = AgentProgress(principal: UserNamespace("ann"), appliedThrough: 7, style: .default, sessionID: Array("s".utf8))
        _ = hub.send(.agentMessage(from: ann, .hello(AgentHello(board: "b", resumeAfter: 7, sessionID: Array("s".utf8))), bytes: 40))
        let adopted = hub.send(.boardAdopted(RecoveredBoard(name: "b", state: state, agents: [progress])))
        let welcome = try #require(adopted.replies(to: ann).compactMap { if case .welcome(let welcome) = $0 { welcome } else { nil } }.first)
        #expect(welcome.appliedThrough == 7)
        #expect(hub.core.board("b")?.digest == state.digest)
    }

    @Test func aClaimThatFailsOrFindsAnotherOwnerAnswersTheHello() throws {
        let hub = CoreHarness { $0.storeCommits = true }
        let ann = peer("ann")
        let bob = peer("bob")
        _ = hub.send(.agentMessage(from: ann, .hello(AgentHello(board: "down", sessionID: Array("s".utf8))), bytes: 40))
        let failed = hub.send(.journalFailed(board: "down", reason: "cannot reach the board store"))
        #expect(failed.errors(to: ann).map(\.code) == [.storageUnavailable])
        _ = hub.send(.agentMessage(from: bob, .hello(AgentHello(board: "theirs", sessionID: Array("s".utf8))), bytes: 40))
        let moved = hub.send(.boardMoved(board: "theirs", owner: "hub-b"))
        #expect(moved.errors(to: bob).map(\.code) == [.wrongHub])
        #expect(hub.core.board("down") == nil && hub.core.board("theirs") == nil)
    }

    @Test func aMovedBoardIsRefusedWithItsOwnerAndForgotten() throws {
        let hub = CoreHarness { $0.storeCommits = true }
        let ann = peer("ann")
        let bob = peer("bob")
        try welcomed(hub, ann, board: "moving")
        try welcomed(hub, bob, board: "staying")
        _ = hub.message(ann, .numbered(sequence: 1, began(1, x: 10)))
        _ = hub.message(bob, .numbered(sequence: 1, began(1, x: 10)))
        _ = hub.endTurn()

        let moved = hub.send(.boardMoved(board: "moving", owner: "hub-b"))
        #expect(moved.errors(to: ann).map(\.code) == [.wrongHub])
        #expect(moved.errors(to: ann).first?.message.contains("hub-b") == true)
        #expect(moved.errors(to: bob).isEmpty)
        #expect(hub.core.board("moving") == nil && hub.core.board("staying") != nil)
        // The commit that follows acknowledges the board that stayed, not the one that left.
        let committed = hub.send(.journalProgress(writtenThrough: 2, syncedThrough: 2))
        #expect(committed.acks(to: bob) == [1] && committed.acks(to: ann).isEmpty)
        // Asked again, by anyone, it is the other hub's.
        let carl = peer("carl")
        #expect(hub.message(carl, .hello(AgentHello(board: "moving", sessionID: Array("s".utf8)))).errors(to: carl).map(\.code) == [.wrongHub])
        let snapshot = hub.send(.snapshotRequested(by: carl.id, user: nil, board: "moving", requestID: 7))
        #expect(snapshot.contains { if case .refuseSnapshot(_, 7, let refusal) = $0 { refusal.code == .wrongHub } else { false } })
    }

    /// Boards not held here go to the live hub with the highest weight; a board held here stays.
    @Test func theLiveHubsDecideWhereBoardsNotHeldBelong() throws {
        let hub = CoreHarness {
            $0.storeCommits = true
            $0.storeHubName = "hub-a"
        }
        let members = try ClusterMap(hubs: [
            .init(name: "hub-a", ingest: "tcp://a:1", publish: "tcp://a:2", snapshot: "tcp://a:3"),
            .init(name: "hub-b", ingest: "tcp://b:1", publish: "tcp://b:2", snapshot: "tcp://b:3"),
        ])
        let boards = (0..<40).map { "board-\($0)" }
        let theirs = try #require(boards.first { members.hub(for: $0).name == "hub-b" })
        let ours = try #require(boards.first { members.hub(for: $0).name == "hub-a" })
        let ann = peer("ann")
        try welcomed(hub, ann, board: theirs)  // held before the membership said otherwise
        _ = hub.send(.membershipChanged(members))
        let bob = peer("bob")
        let carl = peer("carl")
        #expect(hub.message(bob, .hello(AgentHello(board: theirs, sessionID: Array("s".utf8)))).contains { if case .reply(bob.id, .welcome) = $0 { true } else { false } })
        let refused = hub.message(carl, .hello(AgentHello(board: theirs + "x", sessionID: Array("s".utf8))))
        if members.hub(for: theirs + "x").name == "hub-b" {
            #expect(refused.errors(to: carl).first?.message.contains("hub-b (tcp://b:1)") == true)
        }
        let claimed = hub.message(carl, .hello(AgentHello(board: ours, sessionID: Array("t".utf8))))
        #expect(claimed.contains { if case .claimBoard(ours) = $0 { true } else { false } })
    }

    /// A board this hub learned was hub-c's (a claim refused while hub-c held
    /// its lease) is not sent back to hub-c once hub-c has left the live hubs
    /// (it died): the live hubs decide again, naming the one the board now
    /// belongs to, or claiming it here (issue 39: agents followed such
    /// WRONG_HUBs to the dead hub, or, its endpoints gone, gave up).
    @Test func aDeadOwnersBoardsAreDecidedByTheLiveHubsAgain() throws {
        let hub = CoreHarness {
            $0.storeCommits = true
            $0.storeHubName = "hub-a"
        }
        let hubs = ["a", "b", "c"].map { ClusterMap.Hub(name: "hub-\($0)", ingest: "tcp://\($0):1", publish: "tcp://\($0):2", snapshot: "tcp://\($0):3") }
        _ = hub.send(.membershipChanged(try ClusterMap(hubs: hubs)))
        let live = try ClusterMap(hubs: Array(hubs.prefix(2)))
        let boards = (0..<60).map { "board-\($0)" }
        let theirs = try #require(boards.first { live.hub(for: $0).name == "hub-b" })
        let ours = try #require(boards.first { live.hub(for: $0).name == "hub-a" })
        for board in [theirs, ours] { _ = hub.send(.boardMoved(board: board, owner: "hub-c")) }
        let ann = peer("ann")
        let named = hub.message(ann, .hello(AgentHello(board: theirs, sessionID: Array("s".utf8)))).errors(to: ann)
        #expect(named.first?.owner?.name == "hub-c", "while hub-c lives, the board is hub-c's")
        // hub-c dies: it leaves the live hubs.
        _ = hub.send(.membershipChanged(live))
        let bob = peer("bob")
        let refused = hub.message(bob, .hello(AgentHello(board: theirs, sessionID: Array("s".utf8)))).errors(to: bob)
        #expect(refused.map(\.code) == [.wrongHub] && refused.first?.owner?.name == "hub-b" && refused.first?.owner?.ingest == "tcp://b:1", "\(refused)")
        let carl = peer("carl")
        let claimed = hub.message(carl, .hello(AgentHello(board: ours, sessionID: Array("t".utf8))))
        #expect(claimed.contains { if case .claimBoard(ours) = $0 { true } else { false } }, "the board is this hub's to claim now")
    }
}
