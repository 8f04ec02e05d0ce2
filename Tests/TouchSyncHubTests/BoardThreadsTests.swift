import TestSupport
import Foundation
import Testing
import TouchSyncClient
import TouchSyncCore
@testable import TouchSyncHub
import TouchSyncHubCore
import TouchSyncSimulation
import TouchSyncWire
import ZeroMQ

/// A hub whose boards are spread over several board threads behind one
/// front (`HubConfiguration.boardThreads`, `touchsync hub --threads`): real
/// sockets over TCP, a real journal folder. Clients must not see the split.
@Suite("Board threads", .timeLimit(.minutes(4)))
struct BoardThreadsTests {
    /// Boards of every thread, drawn on at once: each subscriber ends with
    /// its hub board, the board list names them all in order, and a hub
    /// started again on the folder with another thread count (the boards
    /// fall to other threads) recovers every board as it was.
    @Test func boardsOnEveryThreadAreServedAsOneHub() async throws {
        let directory = NSTemporaryDirectory() + "touchsync-threads-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let boards = (0..<6).map { "threads-\($0)" }
        let threads = BoardThreads(count: 3)
        #expect(Set(boards.map(threads.thread(of:))).count == 3, "the boards fall on every thread")

        // The hub's notices, warnings and errors, printed if the drawing stalls.
        let log = LogRecorder()
        // Acknowledgements that wait for no fsync: a full run's disks stall syncs for seconds, and
        // this test is about the threads (a stopped hub syncs what it wrote; the restart reads it).
        var journal = JournalConfiguration(directory: directory)
        journal.fsync = .never
        let test = try await TestHub.start({ [journal] in
            $0.boardThreads = 3
            $0.journal = journal
        }, logger: log.logger("hub", level: .notice))
        let subscribers = try boards.map { try test.subscriber(board: $0) }
        var profile = SimulationProfile()
        profile.users = 2
        profile.fingersPerUser = 2
        var simulators = boards.indices.map { SessionSimulator(seed: UInt64(30 + $0), profile: profile) }
        var agents: [[TouchAgent]] = []
        for (index, board) in boards.enumerated() {
            // The same two users on every board: each board's users say hello as `u0@board`…
            agents.append(try simulators[index].users.map { try test.agent(board: board, identity: "\($0.rawValue)@\(board)") })
        }
        for step in 0..<400 {
            for index in boards.indices {
                if case .frame(let user, let frame, _) = simulators[index].next() {
                    agents[index][simulators[index].users.firstIndex(of: user)!].send(frame.changes, alive: frame.aliveTouches)
                }
            }
            if step % 20 == 0 { try await Task.sleep(for: .milliseconds(1)) }
        }
        for (index, agent) in agents.joined().enumerated() where !(await agent.flush(timeout: .seconds(20))) {
            // Which part stalled: each board's sequence, and whether its thread answers a new hello.
            var probes: [String] = []
            for board in boards {
                let probe = try RawAgent(test, identity: "probe-\(board)")
                try probe.hello(board: board, session: "probe")
                let reply = try await probe.reply(timeoutMilliseconds: 3000)
                probe.socket.close()
                let sequence = await test.hub.boardState(board)?.sequence
                probes.append("\(board) (thread \(threads.thread(of: board))): sequence \(sequence.map(String.init) ?? "none"), a new hello got \(reply.map { "\($0.body.map { "\($0)".prefix(60) } ?? "nothing")" } ?? "no answer in 3 s")")
            }
            Issue.record("agent \(index)'s frames were not all acknowledged in 20 s; \(probes.joined(separator: "; ")); the hub said:\n\(log.text)")
            break
        }
        // Their goodbyes cancel what is still down: the boards as they stay.
        for agent in agents.joined() { await agent.stop() }
        var digests: [String: BoardDigest] = [:]
        for (index, board) in boards.enumerated() {
            #expect(try await eventually { try await test.board(board).liveTouchCount == 0 })
            let state = try await test.board(board)
            #expect(state.sequence > 3 && !state.acceptedStrokes.isEmpty)
            digests[board] = state.digest
            #expect(await subscribers[index].waitUntil(sequence: state.sequence, timeout: .seconds(10)))
            #expect(await subscribers[index].replica()?.digest == state.digest, "board \(board)'s subscriber differs")
        }
        // One list, merged from every thread, in name order; paged the same way.
        let all = try await BoardDirectory.list(endpoint: test.endpoints.snapshot, context: test.context)
        #expect(all.boards.map(\.board) == boards && !all.more)
        let first = try await BoardDirectory.list(endpoint: test.endpoints.snapshot, limit: 4, context: test.context)
        #expect(first.boards.map(\.board) == Array(boards.prefix(4)) && first.more)
        let rest = try await BoardDirectory.list(endpoint: test.endpoints.snapshot, after: "threads-3", context: test.context)
        #expect(rest.boards.map(\.board) == Array(boards.suffix(2)) && !rest.more)

        for subscriber in subscribers { await subscriber.stop() }
        await test.hub.stop()

        let again = try await TestHub.start {
            $0.boardThreads = 2
            $0.journal = JournalConfiguration(directory: directory)
        }
        #expect(Dictionary(uniqueKeysWithValues: again.hub.recovered.map { ($0.board, $0.digest) }) == digests)
        for board in boards {
            let subscriber = try again.subscriber(board: board)
            let state = try await again.board(board)
            #expect(state.digest == digests[board])
            #expect(await subscriber.waitUntil(sequence: state.sequence, timeout: .seconds(10)))
            #expect(await subscriber.replica()?.digest == digests[board])
            await subscriber.stop()
        }
        await again.hub.stop()
    }

    /// Clients connect as soon as the public sockets are bound, while the
    /// board threads still start one by one (each loading its boards) and
    /// connect to the front: the front reads nothing until it is told every
    /// thread is there, so a hello sent in that moment reaches its thread
    /// instead of a PAIR nobody has connected yet, which drops it. (A hub
    /// restarted on a board store under load lost samples this way: the
    /// dropped hellos' agents came back in an order that ended sessions.)
    @Test func aHelloSentBeforeTheBoardThreadsConnectReachesItsThread() async throws {
        let context = try ZMQContext()
        let threads = BoardThreads(count: 2)
        let board = try #require((0..<100).map { "early-\($0)" }.first { threads.thread(of: $0) == 1 })
        let mailbox = try Mailbox<FrontCommand>()
        let hubID = "early-\(UInt32.random(in: 0...UInt32.max))"
        let frontThread = SocketThread(name: "test-front")
        let endpoints = try await frontThread.start {
            let sockets = try HubSockets(configuration: .loopbackEphemeral(), context: context)
            let front = try HubFront(
                sockets: sockets, threads: threads, hubID: hubID, context: context, logger: testLogger("front"),
                maxMessagesPerTurn: 64, mailbox: mailbox, access: nil)
            return (sockets.endpoints, front.run)
        }
        let agent = try ZMQSocket(context, type: .dealer)
        try agent.setRoutingID(Array("early-agent".utf8))
        try agent.connect(endpoints.ingest)
        var hello = Touchsync_V1_AgentMessage()
        hello.hello.protocolVersion = 1
        hello.hello.board = board
        hello.hello.sessionID = Data("early".utf8)
        try agent.send(WireCodec.encode(hello))
        // Time for the hello to reach the front's socket while no thread is connected (with
        // the front reading at once, it would be read and dropped now; the assertion below
        // holds however long this is).
        try await Task.sleep(for: .milliseconds(200))
        let boardSockets = try (0..<threads.count).map { try HubSockets(boardThread: $0, hubID: hubID, endpoints: endpoints, context: context) }
        mailbox.post(.serve)
        let threadOne = boardSockets[1].ingest
        let received = try await offThePool { try threadOne.receiveBytes(timeoutMilliseconds: 5000) }
        #expect(received?.count == 3, "the hello did not reach its board's thread")
        if let parts = received {
            #expect(parts[0] == Array("early-agent".utf8))
            #expect(try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: parts[2]).hello.board == board)
        }
        mailbox.post(.stop)
        await frontThread.finished()
        for sockets in boardSockets { sockets.close() }
        agent.close()
    }

    /// One session per user, whichever thread its board is on: a user's new
    /// session on a board of another thread ends the old one at once (its
    /// touch is cancelled), as on a hub with one thread, not after the
    /// abandon time-out.
    /// With one thread the same steps give the same answers.
    @Test(arguments: [1, 2])
    func aUsersNewSessionOnAnotherThreadsBoardEndsTheOldOne(boardThreads: Int) async throws {
        let threads = BoardThreads(count: 2)
        let first = "mover-a"
        let second = try #require((0..<100).map { "mover-b\($0)" }.first { threads.thread(of: $0) != threads.thread(of: first) })
        let test = try await TestHub.start {
            $0.boardThreads = boardThreads
            $0.timing.abandonTimeout = .seconds(60)
            $0.timing.livenessTimeout = .seconds(30)
        }
        let agent = try RawAgent(test, identity: "mover")
        defer { agent.socket.close() }
        try agent.hello(board: first, session: "session-1")
        #expect(try await agent.nextWelcome() != nil)
        try agent.frame(1, [TouchChange(touch: TouchID(1), phase: .began, samples: [Sample(x: 64, y: 64, time: 1000)])])
        #expect(try await eventually { try await test.board(first).liveTouchCount == 1 })

        try agent.hello(board: second, session: "session-2")
        let welcome = try #require(try await agent.nextWelcome())
        #expect(welcome.board == second && welcome.appliedThrough == 0)
        #expect(try await eventually(timeout: .seconds(5)) { try await test.board(first).liveTouchCount == 0 })
        // The new session draws on its board.
        try agent.frame(1, [TouchChange(touch: TouchID(1), phase: .began, samples: [Sample(x: 64, y: 64, time: 1000)])])
        #expect(try await eventually { try await test.board(second).liveTouchCount == 1 })
        await test.hub.stop()
    }

    /// A hello the other thread refuses does not end the session the user has.
    @Test(arguments: [1, 2])
    func aRefusedHelloElsewhereKeepsTheSession(boardThreads: Int) async throws {
        let test = try await TestHub.start {
            $0.boardThreads = boardThreads
            $0.timing.abandonTimeout = .seconds(60)
        }
        let agent = try RawAgent(test, identity: "stayer")
        defer { agent.socket.close() }
        try agent.hello(board: "stay-here", session: "session-1")
        #expect(try await agent.nextWelcome() != nil)
        try agent.frame(1, [TouchChange(touch: TouchID(1), phase: .began, samples: [Sample(x: 64, y: 64, time: 1000)])])
        #expect(try await eventually { try await test.board("stay-here").liveTouchCount == 1 })
        // A resume the other board's thread cannot honour: CANNOT_RESUME.
        let elsewhere = try #require((0..<100).map { "elsewhere-\($0)" }.first {
            BoardThreads(count: 2).thread(of: $0) != BoardThreads(count: 2).thread(of: "stay-here")
        })
        try agent.hello(board: elsewhere, session: "session-2", resumeAfter: 5)
        #expect(try await agent.nextError()?.code == .cannotResume)
        // The session goes on where it was: its next frame is applied there.
        try agent.frame(2, [TouchChange(touch: TouchID(1), phase: .ended, samples: [Sample(x: 128, y: 64, time: 2000)])])
        #expect(try await eventually { try await test.board("stay-here").acceptedStrokes.count == 1 })
        #expect(try await test.board("stay-here").liveTouchCount == 0)
        await test.hub.stop()
    }

    /// A user's quota of stored samples counts over the whole hub, not per
    /// thread: samples accepted on a board of one thread leave no room for a
    /// new stroke on a board of another (as on a hub with one thread).
    @Test(arguments: [1, 2])
    func aUsersStoredSamplesCountOverEveryThread(boardThreads: Int) async throws {
        let threads = BoardThreads(count: 2)
        let first = "hoard-a"
        let second = try #require((0..<100).map { "hoard-b\($0)" }.first { threads.thread(of: $0) != threads.thread(of: first) })
        let test = try await TestHub.start {
            $0.boardThreads = boardThreads
            $0.limits.maxSamplesPerUser = 100
        }
        let agent = try RawAgent(test, identity: "hoarder")
        defer { agent.socket.close() }
        func samples(_ range: Range<Int>) -> [Sample] { range.map { Sample(x: Int32(64 * $0), y: 64, time: Int64(1000 * ($0 + 1))) } }
        try agent.hello(board: first, session: "session-1")
        #expect(try await agent.nextWelcome() != nil)
        try agent.frame(1, [TouchChange(touch: TouchID(1), phase: .began, samples: samples(0..<60))])
        try agent.frame(2, [TouchChange(touch: TouchID(1), phase: .ended, samples: samples(60..<110))])
        #expect(try await eventually { try await test.board(first).acceptedStrokes.count == 1 })
        try agent.hello(board: second, session: "session-2")
        #expect(try await agent.nextWelcome() != nil)
        try agent.frame(1, [TouchChange(touch: TouchID(1), phase: .began, samples: samples(0..<5))])
        let refusal = try #require(try await agent.nextError(), "a new stroke past the user's quota was taken")
        #expect(refusal.code == .boardFull && refusal.message.contains("100"), "\(refusal)")
        await test.hub.stop()
    }

    /// A connection's snapshot allowance counts over the whole hub: twelve
    /// requests at once for boards of four threads get the allowance's three
    /// (six at most, should a second pass between them), where each thread
    /// counting its own would have let up to twelve through.
    @Test func snapshotRequestsCountInOneAllowanceOverEveryThread() async throws {
        let threads = BoardThreads(count: 4)
        var boards: [String] = []
        for thread in 0..<4 { boards += (0..<400).map { "view-\($0)" }.filter { threads.thread(of: $0) == thread }.prefix(3) }
        let test = try await TestHub.start {
            $0.boardThreads = 4
            $0.limits.maxSnapshotsPerSecond = 3
        }
        let socket = try ZMQSocket(test.context, type: .dealer)
        defer { socket.close() }
        try socket.connect(test.endpoints.snapshot)
        for (index, board) in boards.enumerated() {
            var request = Touchsync_V1_SnapshotRequest()
            request.board = board
            request.requestID = UInt64(index + 1)
            _ = try socket.send(WireCodec.encode(request))
        }
        var answered: Set<UInt64> = []
        var refused = 0
        while answered.count + refused < boards.count,
            let parts = try await offThePool({ try socket.receiveBytes(timeoutMilliseconds: 5000) })
        {
            let reply = try WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: parts[0])
            if case .error(let error) = reply.body {
                #expect(error.code == .rateLimited, "\(error)")
                refused += 1
            } else {
                answered.insert(reply.requestID)
            }
        }
        #expect(answered.count + refused == boards.count)
        #expect(answered.count >= 3 && answered.count <= 6, "\(answered.count) of 12 served")
        await test.hub.stop()
    }

    /// `--max-boards` is split between the threads: each holds its share, and
    /// its refusal says so (the number is the thread's, not the hub's).
    @Test func aThreadsShareOfTheBoardsIsItsOwnAndItsRefusalSaysSo() async throws {
        let threads = BoardThreads(count: 2)
        let names = (0..<100).map { "share-\($0)" }
        let first = names[0]
        let sameThread = try #require(names.dropFirst().first { threads.thread(of: $0) == threads.thread(of: first) })
        let otherThread = try #require(names.first { threads.thread(of: $0) != threads.thread(of: first) })
        let test = try await TestHub.start {
            $0.boardThreads = 2
            $0.limits.maxBoards = 2
        }
        func hello(_ board: String, as identity: String) async throws -> Touchsync_V1_HubReply? {
            let agent = try RawAgent(test, identity: identity)
            defer { agent.socket.close() }
            try agent.hello(board: board, session: identity)
            return try await agent.reply()
        }
        #expect(try await hello(first, as: "one")?.welcome.board == first)
        let refused = try #require(try await hello(sameThread, as: "two"))
        #expect(refused.error.code == .unknownBoard && refused.error.message.contains("maximum of 1 boards on this board's thread"), "\(refused)")
        #expect(try await hello(otherThread, as: "three")?.welcome.board == otherThread)
        await test.hub.stop()
    }
}

