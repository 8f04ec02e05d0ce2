import Foundation
import Testing
import ZeroMQ
#if canImport(Glibc)
import Glibc
#endif

/// Binds `socket` to any free loopback port and returns the endpoint to connect to.
func bindLoopback(_ socket: ZMQSocket) throws -> String {
    try socket.bind("tcp://127.0.0.1:*")
    return try socket.lastEndpoint
}

/// A unique inproc name per test, so parallel tests never collide.
func inprocName(_ label: String = #function) -> String {
    "inproc://\(label)-\(UInt64.random(in: 0...UInt64.max))"
}

@Suite("ZeroMQ socket patterns")
struct PatternTests {
    @Test func pushPullOverInproc() throws {
        let context = try ZMQContext()
        let pull = try ZMQSocket(context, type: .pull)
        let push = try ZMQSocket(context, type: .push)
        let endpoint = inprocName()
        try pull.bind(endpoint)
        try push.connect(endpoint)
        for index in 0..<10 { try push.send("message \(index)") }
        for index in 0..<10 {
            let parts = try #require(try pull.receiveMultipart(timeoutMilliseconds: 2000))
            #expect(parts.map(\.string) == ["message \(index)"])
        }
    }

    @Test func pubSubFiltersByTopicOverTCP() throws {
        let context = try ZMQContext()
        let pub = try ZMQSocket(context, type: .pub)
        let sub = try ZMQSocket(context, type: .sub)
        let endpoint = try bindLoopback(pub)
        try sub.connect(endpoint)
        try sub.subscribe("board-a")
        // A SUB's subscription reaches the PUB asynchronously: publish until the first one lands.
        var first: [[UInt8]]? = nil
        for _ in 0..<200 where first == nil {
            try pub.send(multipart: [Array("board-b".utf8), [9]])
            try pub.send(multipart: [Array("board-a".utf8), [1]])
            first = try sub.receiveBytes(timeoutMilliseconds: 20)
        }
        #expect(first == [Array("board-a".utf8), [1]])
        try pub.send(multipart: [Array("board-b".utf8), [2]])
        try pub.send(multipart: [Array("board-a".utf8), [3]])
        // Drain: only board-a ever arrives.
        while let parts = try sub.receiveBytes(timeoutMilliseconds: 100) {
            #expect(parts[0] == Array("board-a".utf8))
        }
    }

    @Test func routerDealerRoutesRepliesByRoutingID() throws {
        let context = try ZMQContext()
        let router = try ZMQSocket(context, type: .router)
        let endpoint = try bindLoopback(router)
        let dealers = try (0..<3).map { index in
            let dealer = try ZMQSocket(context, type: .dealer)
            try dealer.setRoutingID(Array("agent-\(index)".utf8))
            try dealer.connect(endpoint)
            return dealer
        }
        for (index, dealer) in dealers.enumerated() { try dealer.send("hello from \(index)") }
        for _ in 0..<3 {
            let parts = try #require(try router.receiveMultipart(timeoutMilliseconds: 2000))
            #expect(parts.count == 2)
            let id = parts[0].string
            #expect(parts[1].string == "hello from \(id.dropFirst("agent-".count))")
            #expect(parts[1].peerAddress == "127.0.0.1")
            try router.send(multipart: [parts[0].bytes, Array("reply to \(id)".utf8)])
        }
        for (index, dealer) in dealers.enumerated() {
            #expect(try dealer.receiveBytes(timeoutMilliseconds: 2000) == [Array("reply to agent-\(index)".utf8)])
        }
        #expect(try dealers[0].routingID == Array("agent-0".utf8))
    }

    @Test func pairIsBidirectional() throws {
        let context = try ZMQContext()
        let left = try ZMQSocket(context, type: .pair)
        let right = try ZMQSocket(context, type: .pair)
        let endpoint = inprocName()
        try left.bind(endpoint)
        try right.connect(endpoint)
        try left.send("ping")
        #expect(try right.receiveBytes(timeoutMilliseconds: 2000) == [Array("ping".utf8)])
        try right.send("pong")
        #expect(try left.receiveBytes(timeoutMilliseconds: 2000) == [Array("pong".utf8)])
    }

    @Test func xpubSeesSubscriptionsAndXsubForwards() throws {
        let context = try ZMQContext()
        let xpub = try ZMQSocket(context, type: .xpub)
        try xpub.setXPubVerbose(true)
        let frontend = try bindLoopback(xpub)
        let xsub = try ZMQSocket(context, type: .xsub)
        let backend = inprocName()
        try xsub.bind(backend)
        let pub = try ZMQSocket(context, type: .pub)
        try pub.connect(backend)

        let first = try ZMQSocket(context, type: .sub)
        try first.connect(frontend)
        try first.subscribe("t1")
        let second = try ZMQSocket(context, type: .sub)
        try second.connect(frontend)
        try second.subscribe("t1")

        // XPUB_VERBOSE delivers both subscribe messages for the same topic: [1, "t1"].
        for _ in 0..<2 {
            let event = try #require(try xpub.receiveBytes(timeoutMilliseconds: 2000))
            #expect(event == [[1] + Array("t1".utf8)])
            try xsub.send(event[0])  // forward upstream, as a proxy does
        }
        first.close()
        // Non-verbose for unsubscribe: a closed subscriber's topic goes away when the last one leaves.
        second.close()
        let unsubscribe = try #require(try xpub.receiveBytes(timeoutMilliseconds: 2000))
        #expect(unsubscribe == [[0] + Array("t1".utf8)])
    }
}

@Suite("ZeroMQ messages and limits")
struct MessageTests {
    @Test func multipartArrivesWhole() throws {
        let context = try ZMQContext()
        let push = try ZMQSocket(context, type: .push)
        let pull = try ZMQSocket(context, type: .pull)
        let endpoint = inprocName()
        try pull.bind(endpoint)
        try push.connect(endpoint)
        let parts: [[UInt8]] = [[], [1], Array(repeating: 7, count: 300), Array("end".utf8)]
        try push.send(multipart: parts)
        let received = try #require(try pull.receiveMultipart(timeoutMilliseconds: 2000))
        #expect(received.map(\.bytes) == parts)
        #expect(received.map(\.hasMore) == [true, true, true, false])
    }

    @Test func fourMebibyteMessageIsNotTruncated() throws {
        let context = try ZMQContext()
        let pull = try ZMQSocket(context, type: .pull)
        let push = try ZMQSocket(context, type: .push)
        try push.connect(try bindLoopback(pull))
        let size = 4 * 1024 * 1024
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 13) }
        try push.send(payload)
        let message = ZMQMessage()
        #expect(try pull.waitReadable(timeoutMilliseconds: 5000))
        #expect(try pull.receive(into: message))
        #expect(message.count == size)
        #expect(message.bytes == payload)
        // The same message object is reused for the next receive, with no leftover bytes.
        try push.send([42])
        #expect(try pull.waitReadable(timeoutMilliseconds: 5000))
        #expect(try pull.receive(into: message))
        #expect(message.bytes == [42])
    }

    @Test func pollTimesOutWithNothingReady() throws {
        let context = try ZMQContext()
        let first = try ZMQSocket(context, type: .pull)
        let second = try ZMQSocket(context, type: .pull)
        try first.bind(inprocName("first"))
        let secondEndpoint = inprocName("second")
        try second.bind(secondEndpoint)
        var poller = ZMQPoller()
        let firstIndex = try poller.add(first)
        let secondIndex = try poller.add(second)
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try poller.poll(timeoutMilliseconds: 50) == 0)
        // A lower bound only: poll must really have waited, not returned at once.
        #expect(clock.now - start >= .milliseconds(45))
        #expect(!poller.isReadable(firstIndex) && !poller.isReadable(secondIndex))

        let push = try ZMQSocket(context, type: .push)
        try push.connect(secondEndpoint)
        try push.send("wake")
        #expect(try poller.poll(timeoutMilliseconds: 2000) == 1)
        #expect(!poller.isReadable(firstIndex))
        #expect(poller.isReadable(secondIndex))
        #expect(try first.receiveMultipart(timeoutMilliseconds: 0) == nil)
        let message = ZMQMessage()
        #expect(try first.receive(into: message, dontWait: true) == false)
    }

    /// libzmq refuses sockets past the context's limit with EMFILE; a larger
    /// limit lets a load generator open thousands of connections.
    @Test func contextSocketLimitIsEnforcedAndRaisable() throws {
        let small = try ZMQContext(maxSockets: 4)
        #expect(small.maxSockets == 4)
        var sockets: [ZMQSocket] = []
        var refusal: ZMQError? = nil
        for _ in 0..<8 {
            do {
                sockets.append(try ZMQSocket(small, type: .dealer))
            } catch {
                refusal = error
                break
            }
        }
        #expect(sockets.count == 4)
        #expect(refusal?.code == EMFILE)
        for socket in sockets { socket.close() }

        let large = try ZMQContext(maxSockets: 3000)
        #expect(large.maxSockets == 3000)
        let many = try (0..<1100).map { _ in try ZMQSocket(large, type: .dealer) }
        #expect(many.count == 1100)  // past libzmq's default of 1,023
        for socket in many { socket.close() }
    }

    /// Many commands posted before the owner drains: one wake-up, all delivered in order.
    @Test func mailboxDeliversEveryCommandInOrder() throws {
        let mailbox = try Mailbox<Int>()
        for value in 0..<1000 { #expect(mailbox.post(value)) }
        var poller = ZMQPoller()
        let index = poller.add(fileDescriptor: mailbox.fileDescriptor)
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 1 && poller.isReadable(index))
        #expect(mailbox.drain() == Array(0..<1000))
        // Drained: nothing to wake for until the next post.
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)
        #expect(mailbox.post(7))
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 1)
        #expect(mailbox.drain() == [7])
        #expect(mailbox.close().isEmpty)
        #expect(!mailbox.post(8))
    }

    /// An owner that gathers: it clears the wake-up, takes later, and is not
    /// woken for what is posted in between (the queue was not empty).
    @Test func aClearedMailboxIsTakenLaterWithoutMoreWakeUps() throws {
        let mailbox = try Mailbox<Int>()
        var poller = ZMQPoller()
        let index = poller.add(fileDescriptor: mailbox.fileDescriptor)
        #expect(mailbox.post(1))
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 1 && poller.isReadable(index))
        mailbox.clearSignal()
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)
        for value in 2...5 { #expect(mailbox.post(value)) }
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0, "posts behind a queued command write no wake-up")
        #expect(mailbox.take() == [1, 2, 3, 4, 5])
        #expect(mailbox.post(6))
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 1, "the first post into an empty queue wakes the owner")
        #expect(mailbox.drain() == [6])
    }

    @Test func maxMessageSizeDisconnectsAnOversizedPeer() throws {
        let context = try ZMQContext()
        let pull = try ZMQSocket(context, type: .pull)
        try pull.setMaxMessageSize(1024)
        let endpoint = try bindLoopback(pull)

        let offender = try ZMQSocket(context, type: .push)
        try offender.connect(endpoint)
        try offender.send([UInt8](repeating: 1, count: 4096))
        #expect(try pull.receiveBytes(timeoutMilliseconds: 300) == nil)

        // The limit drops only the offender's connection; a well-behaved peer still gets through.
        let honest = try ZMQSocket(context, type: .push)
        try honest.connect(endpoint)
        try honest.send([UInt8](repeating: 2, count: 1024))
        #expect(try pull.receiveBytes(timeoutMilliseconds: 2000) == [[UInt8](repeating: 2, count: 1024)])
    }

    @Test func routerMandatoryRefusesAnUnknownPeer() throws {
        let context = try ZMQContext()
        let router = try ZMQSocket(context, type: .router)
        try router.setRouterMandatory(true)
        try router.bind(inprocName())
        let error = #expect(throws: ZMQError.self) {
            try router.send(multipart: [Array("nobody".utf8), Array("hello".utf8)])
        }
        #expect(error?.code == EHOSTUNREACH)
        #expect(error?.message.isEmpty == false)
    }

    @Test func errorsAreTypedWithErrnoAndText() throws {
        let context = try ZMQContext()
        let socket = try ZMQSocket(context, type: .pull)
        let error = #expect(throws: ZMQError.self) { try socket.bind("nonsense://here") }
        #expect(error?.code == EPROTONOSUPPORT)
        #expect(error?.description.contains("bind(nonsense://here)") == true)
        socket.close()
        let closed = #expect(throws: ZMQError.self) { try socket.send("x") }
        #expect(closed?.code == ENOTSOCK)
    }

    @Test func optionsRoundTrip() throws {
        let context = try ZMQContext()
        let socket = try ZMQSocket(context, type: .router)
        #expect(try socket.linger == 0)
        try socket.setSendHighWaterMark(17)
        #expect(try socket.sendHighWaterMark == 17)
        try socket.setMaxMessageSize(12345)
        #expect(try socket.maxMessageSize == 12345)
        try socket.setImmediate(true)
        try socket.setHeartbeatInterval(milliseconds: 100)
        try socket.setHeartbeatTimeout(milliseconds: 300)
        try socket.setHeartbeatTTL(milliseconds: 400)
        try socket.setZAPDomain("touchsync")
        try socket.setLinger(milliseconds: 5)
        #expect(try socket.linger == 5)
    }
}

@Suite("ZeroMQ security and shutdown")
struct LifecycleTests {
    @Test func curveEncryptedConnectionCarriesMessages() throws {
        let context = try ZMQContext()
        let serverKeys = try ZMQCurve.generateKeyPair()
        let clientKeys = try ZMQCurve.generateKeyPair()
        #expect(serverKeys.publicKey.utf8.count == 40 && serverKeys != clientKeys)

        let server = try ZMQSocket(context, type: .router)
        try server.setCurveServer(true)
        try server.setCurveSecretKey(serverKeys.secretKey)
        let endpoint = try bindLoopback(server)
        let client = try ZMQSocket(context, type: .dealer)
        try client.setCurveServerKey(serverKeys.publicKey)
        try client.setCurvePublicKey(clientKeys.publicKey)
        try client.setCurveSecretKey(clientKeys.secretKey)
        try client.connect(endpoint)
        try client.send("secret")
        let parts = try #require(try server.receiveMultipart(timeoutMilliseconds: 3000))
        #expect(parts.last?.string == "secret")
        #expect(try server.mechanism == 2 /* ZMQ_CURVE */)

        // A client with the wrong server key never gets through.
        let impostor = try ZMQSocket(context, type: .dealer)
        try impostor.setCurveServerKey(clientKeys.publicKey)
        try impostor.setCurvePublicKey(clientKeys.publicKey)
        try impostor.setCurveSecretKey(clientKeys.secretKey)
        try impostor.connect(endpoint)
        try impostor.send("let me in")
        #expect(try server.receiveMultipart(timeoutMilliseconds: 300) == nil)
    }

    @Test func shutdownWakesABlockedReceiverAndTerminationCompletes() async throws {
        let context = try ZMQContext()
        let endpoint = inprocName()
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let thread = Thread {
            // This thread owns its socket from creation to close.
            do {
                let socket = try ZMQSocket(context, type: .pull)
                try socket.bind(endpoint)
                continuation.yield("bound")
                _ = try socket.receiveMultipart()
                continuation.yield("received")
            } catch let error as ZMQError {
                continuation.yield(error.isTerminated ? "terminated" : "error \(error)")
            } catch {
                continuation.yield("error \(error)")
            }
            continuation.finish()
        }
        thread.start()
        var events = stream.makeAsyncIterator()
        #expect(await events.next() == "bound")
        context.shutdown()
        #expect(await events.next() == "terminated")
        #expect(await events.next() == nil)
    }
}
