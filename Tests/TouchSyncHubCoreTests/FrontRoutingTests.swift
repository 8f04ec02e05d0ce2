import Testing
import TouchSyncCore
import TouchSyncHubCore

/// The front's routing of a hub with several board threads, apart from its sockets.
@Suite struct FrontRoutingTests {
    let threads = BoardThreads(count: 4)

    /// Two boards that fall on different threads.
    func boardsOnTwoThreads() -> (String, String) {
        let names = (0..<100).map { "board-\($0)" }
        let first = names[0]
        return (first, names.first { threads.thread(of: $0) != threads.thread(of: first) }!)
    }

    @Test func boardsSpreadOverEveryThreadAndStayPut() {
        let names = (0..<400).map { "b\($0)" }
        var counts = [Int](repeating: 0, count: 4)
        for name in names { counts[threads.thread(of: name)] += 1 }
        #expect(counts.allSatisfy { $0 > 60 }, "\(counts)")
        #expect(names.map(threads.thread(of:)) == names.map(BoardThreads(count: 4).thread(of:)))
        #expect(BoardThreads(count: 1).thread(of: "anything") == 0)
        #expect(threads.share(of: 10_000) == 2_500 && threads.share(of: 10) == 3 && BoardThreads(count: 1).share(of: 7) == 7)
    }

    @Test func aConnectionGoesWhereItsHelloWent() {
        var routing = FrontRouting(threads: threads)
        let (board, other) = boardsOnTwoThreads()
        let peer = PeerID(Array("agent".utf8))
        #expect(routing.destination(of: peer) == .thread(0), "a stranger's messages: thread 0 answers them")
        let thread = routing.hello(from: peer, principal: UserNamespace("agent"), board: board)
        #expect(thread == threads.thread(of: board) && routing.destination(of: peer) == .thread(thread))
        #expect(routing.answered(peer, welcomed: true) == nil, "no earlier session")
        #expect(!routing.hasPendingHellos)
        // Channel 0 of a multiplexed connection speaks for sessions on every thread.
        #expect(routing.destination(of: PeerID(Array("gateway".utf8), channel: 0)) == .everyThread)
        // A refused hello elsewhere leaves the connection where it was.
        _ = routing.hello(from: peer, principal: UserNamespace("agent"), board: other)
        #expect(routing.destination(of: peer) == .thread(threads.thread(of: other)))
        #expect(routing.answered(peer, welcomed: false) == nil)
        #expect(routing.destination(of: peer) == .thread(thread))
    }

    /// A reconnecting agent's queued frames reach thread 0 before its hello:
    /// thread 0's NOT_WELCOMED for them, if it comes after the board's
    /// thread welcomed the agent, is not passed on.
    @Test func answersFromAThreadAConnectionLeftAreNotDelivered() {
        var routing = FrontRouting(threads: threads)
        let (board, _) = boardsOnTwoThreads()
        let home = threads.thread(of: board)
        let stale = home == 0 ? 1 : 0
        let peer = PeerID(Array("agent".utf8))
        #expect(routing.delivers(answerTo: peer, from: stale), "no route yet: whoever answers is heard")
        _ = routing.hello(from: peer, principal: UserNamespace("agent"), board: board)
        #expect(routing.delivers(answerTo: peer, from: stale), "while the hello waits, as a hub with one thread would")
        _ = routing.answered(peer, welcomed: true)
        #expect(routing.delivers(answerTo: peer, from: home))
        #expect(!routing.delivers(answerTo: peer, from: stale))
    }

    @Test func aNewSessionOnAnotherThreadEndsThePreviousOneThere() {
        var routing = FrontRouting(threads: threads)
        let (board, other) = boardsOnTwoThreads()
        let gateway = Array("gateway".utf8)
        let tab = PeerID(gateway, channel: 7)
        _ = routing.hello(from: tab, principal: UserNamespace("web:ann"), board: board)
        #expect(routing.awaitsAnswer(to: tab, from: threads.thread(of: board)))
        #expect(!routing.awaitsAnswer(to: tab, from: threads.thread(of: other)), "another thread's answers are about earlier messages")
        #expect(routing.answered(tab, welcomed: true) == nil)
        // The same user from another channel, on another thread's board.
        let newTab = PeerID(gateway, channel: 9)
        _ = routing.hello(from: newTab, principal: UserNamespace("web:ann"), board: other)
        #expect(routing.answered(newTab, welcomed: true) == FrontRouting.Departure(thread: threads.thread(of: board), peer: tab))
        // Back on the first thread's board: the session on `other` ends.
        _ = routing.hello(from: tab, principal: UserNamespace("web:ann"), board: board)
        #expect(routing.answered(tab, welcomed: true) == FrontRouting.Departure(thread: threads.thread(of: other), peer: newTab))
        // Another user's session is not touched; a same-thread move needs no goodbye (the thread ends it itself).
        _ = routing.hello(from: PeerID(gateway, channel: 2), principal: UserNamespace("web:ben"), board: other)
        #expect(routing.answered(PeerID(gateway, channel: 2), welcomed: true) == nil)
        _ = routing.hello(from: PeerID(gateway, channel: 3), principal: UserNamespace("web:ben"), board: other)
        #expect(routing.answered(PeerID(gateway, channel: 3), welcomed: true) == nil)
    }

    @Test func theFrontForgetsAtItsCapacity() {
        var routing = FrontRouting(threads: threads, capacity: 8)
        let (_, other) = boardsOnTwoThreads()
        for index in 0..<8 { _ = routing.hello(from: PeerID(Array("p\(index)".utf8)), principal: UserNamespace("p\(index)"), board: other) }
        _ = routing.hello(from: PeerID(Array("p8".utf8)), principal: UserNamespace("p8"), board: other)
        #expect(routing.destination(of: PeerID(Array("p0".utf8))) == .thread(0), "forgotten: thread 0 answers NOT_WELCOMED")
        #expect(routing.destination(of: PeerID(Array("p8".utf8))) == .thread(threads.thread(of: other)))
    }

    @Test func boardListsOfEveryThreadMergeInNameOrder() {
        let lists: [(entries: [String], more: Bool)] = [(["b", "e"], false), (["a", "d", "f"], true), ([], false), (["c"], false)]
        let all = FrontRouting.mergedBoardLists(lists, limit: 10) { $0 }
        #expect(all.entries == ["a", "b", "c", "d", "e", "f"] && all.more, "a thread with more: more")
        let page = FrontRouting.mergedBoardLists([(["b", "e"], false), (["a", "d"], false)], limit: 3) { $0 }
        #expect(page.entries == ["a", "b", "d"] && page.more)
        let exact = FrontRouting.mergedBoardLists([(["b"], false), (["a"], false)], limit: 2) { $0 }
        #expect(exact.entries == ["a", "b"] && !exact.more)
        // Byte order of UTF-8, as each thread sorts ("Z" before "a", "é" after "z").
        let bytes = FrontRouting.mergedBoardLists([(["é", "a"], false), (["Z", "z"], false)], limit: 10) { $0 }
        #expect(bytes.entries == ["Z", "a", "z", "é"])
    }
}
