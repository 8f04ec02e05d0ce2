import Logging
import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire
import ZeroMQ

/// The front of a hub whose boards are spread over several board threads
/// (`touchsync hub --threads N`): one thread that owns the hub's three
/// public sockets and passes each message to the board thread that holds
/// its board, over an inproc PAIR per socket and thread, and their answers
/// and publications back out. Each board thread is a whole `HubLoop` with
/// its own `HubCore`, journal and snapshot encoder, holding only its boards
/// (`BoardThreads`); clients see one hub.
///
/// What crosses to a board thread is what its loop would have read from a
/// public socket, with one part after the routing id (`FrontOrigin`: the
/// connection's address and descriptor). Routing (`FrontRouting`) follows
/// hellos: a connection or channel goes to the thread of the board it said
/// hello for; when a user's new session is welcomed on another thread than
/// its previous one, the front says goodbye for the previous one there, as
/// a hub with one thread ends it. Board lists are asked of every thread and
/// merged here.
/// What a board thread asks of the front.
enum FrontCommand: Sendable {
    /// Every board thread has connected: start reading the public sockets.
    case serve
    /// Answer nothing more, close the sockets and return from `run`.
    case stop
    /// An access list reload took these users' right to watch: end the
    /// subscriber connections (authenticated hubs; they come back through the handshake).
    case disconnectSubscribers(users: [String])
}

final class HubFront {
    /// One board thread's three inproc sockets, bound by the front.
    struct Link {
        let ingest: ZMQSocket
        let publish: ZMQSocket
        let snapshots: ZMQSocket
    }

    /// Where board thread `thread` of the hub named `hubID` connects.
    static func endpoints(hubID: String, thread: Int) -> (ingest: String, publish: String, snapshots: String) {
        let base = "inproc://touchsync-front-\(hubID)-\(thread)"
        return (base + "-ingest", base + "-publish", base + "-snapshots")
    }

    let sockets: HubSockets
    let links: [Link]
    let mailbox: Mailbox<FrontCommand>
    /// An authenticated hub's access list: the front lets libzmq pass a
    /// subscription only for a user who may watch it (XPUB_MANUAL), and tells
    /// the board threads who sent each message.
    let access: AccessControl?
    var authenticated: Bool { access != nil }
    let logger: Logger
    let maxMessagesPerTurn: Int
    var routing: FrontRouting

    private let routingID = ZMQMessage()
    private let part = ZMQMessage()
    /// Parts of one answer from a board thread, reused.
    private var answer: [ZMQMessage] = []

    /// Board lists asked of every thread, by requester and request id, until each answered.
    private var lists: [ListKey: ListMerge] = [:]
    private struct ListKey: Hashable {
        let requester: [UInt8]
        let requestID: UInt64
    }
    private struct ListMerge {
        var waiting: Int
        var limit: Int
        var refused = false
        var parts: [(entries: [Touchsync_V1_BoardSummary], more: Bool)] = []
    }

    /// Binds one inproc PAIR per public socket and board thread (before the threads connect).
    init(
        sockets: HubSockets, threads: BoardThreads, hubID: String, context: ZMQContext, logger: Logger,
        maxMessagesPerTurn: Int, mailbox: Mailbox<FrontCommand>, access: AccessControl?
    ) throws(ZMQError) {
        var links: [Link] = []
        do {
            for thread in 0..<threads.count {
                let endpoints = Self.endpoints(hubID: hubID, thread: thread)
                let link = Link(
                    ingest: try ZMQSocket(context, type: .pair), publish: try ZMQSocket(context, type: .pair),
                    snapshots: try ZMQSocket(context, type: .pair))
                links.append(link)
                for (socket, endpoint) in [(link.ingest, endpoints.ingest), (link.publish, endpoints.publish), (link.snapshots, endpoints.snapshots)] {
                    // The front drains these every turn: their queues bound nothing a public socket does not.
                    try socket.setSendHighWaterMark(0)
                    try socket.setReceiveHighWaterMark(0)
                    try socket.bind(endpoint)
                }
            }
        } catch {
            for link in links { [link.ingest, link.publish, link.snapshots].forEach { $0.close() } }
            throw error
        }
        self.sockets = sockets
        self.links = links
        self.mailbox = mailbox
        self.logger = logger
        self.maxMessagesPerTurn = maxMessagesPerTurn
        self.access = access
        routing = FrontRouting(threads: threads)
    }

    /// Runs until told to stop (after the board threads stopped: what they
    /// sent last is forwarded first), then closes every socket it owns.
    func run() {
        defer {
            sockets.close()
            for link in links { [link.ingest, link.publish, link.snapshots].forEach { $0.close() } }
            _ = mailbox.close()
        }
        do {
            // Clients connect as soon as the public sockets are bound, while the board threads
            // start one by one (loading their boards): nothing is read from the public sockets
            // until every thread has connected, or a message for a thread not connected yet
            // would be dropped by its PAIR (a reconnecting agent's hello, after a restart).
            guard try awaitServe() else { return }
            let linkSockets = links.flatMap { [$0.ingest, $0.publish, $0.snapshots] }
            var loop = try PollLoop(mailbox: mailbox, sockets: [sockets.ingest, sockets.publish, sockets.snapshots] + linkSockets)
            try loop.run(
                deadline: { nil },
                commands: { commands in
                    var revoked: [String] = []
                    for case .disconnectSubscribers(let users) in commands { revoked += users }
                    // Every thread asks after the same reload: once is enough.
                    if !revoked.isEmpty { disconnectSubscribers(Array(Set(revoked)).sorted()) }
                    guard commands.contains(where: { if case .stop = $0 { true } else { false } }) else { return .proceed }
                    // The board threads have stopped: what they sent last (final acks, publications) goes out.
                    for thread in links.indices {
                        while try forwardAnswers(from: thread) + forwardPublications(from: thread) + forwardSnapshotAnswers(from: thread) > 0 {}
                    }
                    return .stop
                },
                readable: { index in try forwardOrLog(from: index) },
                turnEnded: { sockets.subscriberConnections?.update() })
        } catch let error as ZMQError where error.isTerminated {
            logger.info("hub front stopped: context terminated")
        } catch {
            logger.critical("hub front failed", metadata: ["error": "\(error)"])
        }
    }

    /// Waits for `.serve` (true) or `.stop` (false), reading nothing else.
    private func awaitServe() throws -> Bool {
        var waiting = try PollLoop(mailbox: mailbox, sockets: [])
        var serve = false
        try waiting.run(
            deadline: { nil },
            commands: { commands in
                for command in commands {
                    switch command {
                    case .serve: serve = true
                    case .stop: return .stop
                    case .disconnectSubscribers: break  // no subscriber has been read yet
                    }
                }
                return serve ? .stop : .proceed
            },
            readable: { _ in }, turnEnded: {})
        return serve
    }

    /// `forward(from:)`, except that one message that could not be passed on
    /// (its peer gone, say) does not stop the hub's traffic: it is logged.
    private func forwardOrLog(from index: Int) throws(ZMQError) {
        do {
            try forward(from: index)
        } catch {
            if error.isTerminated { throw error }
            logger.warning("hub front: a message not forwarded", metadata: ["socket": "\(index)", "error": "\(error)"])
        }
    }

    /// What a readable socket (by its index in the poll loop) has, passed on.
    private func forward(from index: Int) throws(ZMQError) {
                    switch index {
                    case 0: try forwardAgentMessages()
                    case 1: try forwardSubscriptions()
                    case 2: try forwardSnapshotRequests()
                    default:
                        let thread = (index - 3) / 3
                        switch (index - 3) % 3 {
                        case 0: try forwardAnswers(from: thread)
                        case 1: try forwardPublications(from: thread)
                        default: try forwardSnapshotAnswers(from: thread)
                        }
                    }
    }

    // MARK: Agents

    /// The ingest socket's messages, each to the board thread of its session.
    private func forwardAgentMessages() throws(ZMQError) {
        for _ in 0..<maxMessagesPerTurn {
            guard try sockets.ingest.receive(into: routingID, dontWait: true) else { return }
            guard routingID.hasMore, try sockets.ingest.receive(into: part, dontWait: true) else { continue }
            let connection = routingID.bytes
            if !part.hasMore {
                let peer = PeerID(connection)
                let thread: Int
                // Only a hello's origin is read whole (its address counts in per-address allowances);
                // an authenticated connection's user goes with every message.
                var origin = authenticated ? FrontOrigin(descriptor: nil, user: part.userID, address: nil).encoded : Self.noOrigin
                if let hello = Self.hello(in: part) {
                    origin = FrontOrigin(of: part, authenticated: authenticated).encoded
                    let sender = authenticated ? UserNamespace(part.userID ?? "") : nil
                    thread = routing.hello(
                        from: peer, principal: sender ?? Peer(routingID: connection).principal, board: hello.board, sender: sender)
                } else if case .thread(let routed) = routing.destination(of: peer) {
                    thread = routed
                } else {
                    thread = 0
                }
                let link = links[thread].ingest
                // Every thread is connected and the PAIRs have no high-water mark: a send always
                // queues. Were the first part refused, the others must not go as a message of their own.
                guard try link.send(connection, more: true, dontWait: true) else {
                    logger.warning("hub front: a board thread's link refused a message", metadata: ["thread": "\(thread)"])
                    continue
                }
                _ = try link.send(origin, more: true, dontWait: true)
                _ = try link.send(part, dontWait: true)
                continue
            }
            let origin = FrontOrigin(of: part, authenticated: authenticated)
            let principal = authenticated ? UserNamespace(origin.user ?? "") : Peer(routingID: connection).principal
            try forwardMultiplexed(
                connection: connection, origin: origin.encoded, principal: principal, sender: authenticated ? principal : nil)
        }
    }

    /// The origin part of a message whose origin the thread does not use.
    private static let noOrigin = FrontOrigin(descriptor: nil, address: nil).encoded

    /// A multiplexed connection's pairs (channel, agent message), each to its
    /// session's thread, in order; channel 0 (the connection's heartbeat or
    /// goodbye) to every thread. A message that is not pairs goes whole to
    /// thread 0, which answers it as a hub with one thread does.
    private func forwardMultiplexed(
        connection: [UInt8], origin: [UInt8], principal connectionPrincipal: UserNamespace, sender: UserNamespace?
    ) throws(ZMQError) {
        var parts: [[UInt8]] = [part.bytes]
        while part.hasMore {
            guard try sockets.ingest.receive(into: part, dontWait: true) else { break }
            parts.append(part.bytes)
        }
        var outgoing = [[[UInt8]]](repeating: [], count: links.count)
        var malformed = parts.count % 2 != 0
        var index = 0
        while !malformed && index + 1 < parts.count {
            guard let channel = parts[index].withUnsafeBytes(ChannelPart.decode) else {
                malformed = true
                break
            }
            let peer = PeerID(connection, channel: channel)
            let message = parts[index + 1]
            var destination = routing.destination(of: peer)
            if channel != 0, let hello = message.withUnsafeBytes(Self.hello(in:)) {
                let principal = hello.actAs.isEmpty ? connectionPrincipal : UserNamespace(hello.actAs)
                destination = .thread(routing.hello(from: peer, principal: principal, board: hello.board, sender: sender))
            }
            switch destination {
            case .thread(let thread): outgoing[thread] += [parts[index], message]
            case .everyThread: for thread in outgoing.indices { outgoing[thread] += [parts[index], message] }
            }
            index += 2
        }
        if malformed {
            try links[0].ingest.send(multipart: [connection, origin] + parts, dontWait: true)
            return
        }
        for (thread, pairs) in outgoing.enumerated() where !pairs.isEmpty {
            try links[thread].ingest.send(multipart: [connection, origin] + pairs, dontWait: true)
        }
    }

    /// The hello in an agent message (nil: another body, or not decodable: its thread says why).
    private static func hello(in message: ZMQMessage) -> AgentHello? {
        message.withUnsafeBytes(hello(in:))
    }

    private static func hello(in bytes: UnsafeRawBufferPointer) -> AgentHello? {
        guard let header = AgentMessageHeader.scan(bytes), header.body == 2,
            case .success(.hello(let hello)) = AgentRequest.decode(bytes)
        else { return nil }
        return hello
    }

    /// A board thread's answers to agents, out through the ingest socket;
    /// a welcome for a session that moved from another thread ends the
    /// previous session there.
    @discardableResult
    private func forwardAnswers(from thread: Int) throws(ZMQError) -> Int {
        let link = links[thread].ingest
        for count in 0..<maxMessagesPerTurn {
            guard try receiveAnswer(from: link) else { return count }
            // Which answers the peer hears is decided as the routing stood when they were sent:
            // a hello's answer, noted next, may move the peer (a refusal takes it back).
            guard keepDeliverable(from: thread) else {
                for message in answer { message.reset() }
                continue
            }
            if routing.hasPendingHellos { try noteHelloAnswers(from: thread) }
            for (index, message) in answer.enumerated() {
                // ROUTER_MANDATORY: an agent gone since is EHOSTUNREACH; it hears the news when it comes back.
                do {
                    guard try sockets.ingest.send(message, more: index < answer.count - 1, dontWait: true) else { break }
                } catch where error.isHostUnreachable {
                    break
                }
            }
            for message in answer { message.reset() }
        }
        return maxMessagesPerTurn
    }

    /// Drops from `answer` (a thread's message to one connection) what its
    /// peer must not hear (false: nothing is left to send):
    /// - channel 0's answers but thread 0's: every thread answers a
    ///   connection's heartbeat, and the connection hears one answer;
    /// - answers to a connection or channel whose hello has since moved it
    ///   to another thread (`FrontRouting.delivers`): they are about what it
    ///   sent before (a reconnecting agent's queued frames reach thread 0
    ///   before its hello, whose welcome may then overtake their NOT_WELCOMED),
    ///   and a hub with one thread would have sent them before the welcome.
    private func keepDeliverable(from thread: Int) -> Bool {
        let connection = answer[0].bytes
        if answer.count == 2 { return routing.delivers(answerTo: PeerID(connection), from: thread) }
        var index = 1
        var kept: [Int] = []
        while index + 1 < answer.count {
            let channel = answer[index].withUnsafeBytes(ChannelPart.decode)
            let keep =
                switch channel {
                case 0: thread == 0
                case let channel?: routing.delivers(answerTo: PeerID(connection, channel: channel), from: thread)
                case nil: true
                }
            if keep { kept += [index, index + 1] }
            index += 2
        }
        guard kept.count < answer.count - 1 else { return true }
        guard !kept.isEmpty else { return false }
        answer = [answer[0]] + kept.map { answer[$0] }  // the dropped parts' messages are released
        return true
    }

    /// Receives a whole message from `socket` into `answer` (false: none waiting).
    private func receiveAnswer(from socket: ZMQSocket) throws(ZMQError) -> Bool {
        var count = 0
        repeat {
            if count == answer.count { answer.append(ZMQMessage()) }
            guard try socket.receive(into: answer[count], dontWait: true) else {
                if count == 0 { return false }
                break
            }
            count += 1
        } while answer[count - 1].hasMore
        if answer.count > count { answer.removeLast(answer.count - count) }
        return true
    }

    /// Looks in `answer` for answers to hellos the routing waits for.
    private func noteHelloAnswers(from thread: Int) throws(ZMQError) {
        let connection = answer[0].bytes
        var replies: [(PeerID, ZMQMessage)] = []
        if answer.count == 2 {
            replies.append((PeerID(connection), answer[1]))
        } else {
            var index = 1
            while index + 1 < answer.count {
                if let channel = answer[index].withUnsafeBytes(ChannelPart.decode) {
                    replies.append((PeerID(connection, channel: channel), answer[index + 1]))
                }
                index += 2
            }
        }
        for (peer, reply) in replies where routing.awaitsAnswer(to: peer, from: thread) {
            guard let welcomed = reply.withUnsafeBytes(Self.helloAnswer(in:)) else { continue }
            guard let departure = routing.answered(peer, welcomed: welcomed) else { continue }
            try sayGoodbye(for: departure)
        }
    }

    /// Whether a reply welcomes (true) or refuses (false) a hello; nil for any other reply.
    private static func helloAnswer(in bytes: UnsafeRawBufferPointer) -> Bool? {
        guard let reply = try? WireCodec.decode(Touchsync_V1_HubReply.self, from: bytes) else { return nil }
        switch reply.body {
        case .welcome: return true
        case .error(let error) where error.sequence == 0 && Self.helloRefusals.contains(error.code): return false
        default: return nil
        }
    }

    /// The codes a refused hello carries (docs/protocol.md, "Error codes").
    private static let helloRefusals: Set<Touchsync_V1_ErrorCode> = [
        .malformed, .unsupportedVersion, .unknownBoard, .rateLimited, .cannotResume, .forbidden, .wrongHub,
    ]

    /// Ends a user's previous session on the thread it was on: that
    /// thread hears a goodbye from the connection (or channel) it spoke through.
    private func sayGoodbye(for departure: FrontRouting.Departure) throws(ZMQError) {
        var goodbye = Touchsync_V1_AgentMessage()
        goodbye.goodbye = Touchsync_V1_Goodbye()
        let origin = departure.sender.map { FrontOrigin(descriptor: nil, user: $0.rawValue, address: nil).encoded } ?? Self.noOrigin
        var parts = [departure.peer.bytes, origin]
        if let channel = departure.peer.channel { parts.append(ChannelPart.encode(channel)) }
        parts.append(WireCodec.encode(goodbye))
        try links[departure.thread].ingest.send(multipart: parts, dontWait: true)
    }

    // MARK: Subscribers

    /// Subscriptions, to the thread of their board; a prefix (a relay
    /// following many boards) to every thread. Authenticated, the front lets
    /// one through only for a user who may watch it (as the core decides:
    /// `HubCore.mayWatch`), at once, as XPUB_MANUAL needs, and the thread
    /// hears the user in a second part.
    private func forwardSubscriptions() throws(ZMQError) {
        for _ in 0..<maxMessagesPerTurn {
            guard try sockets.publish.receive(into: part, dontWait: true) else { return }
            let event = part.bytes
            guard let kind = event.first else { continue }
            var parts = [event]
            if let access {
                let user = part.userID
                let topic = Array(event.dropFirst())
                if kind == 0 {
                    try? sockets.publish.unsubscribe(topic)
                } else if let user, HubCore.mayWatch(topic, by: UserNamespace(user), in: access.current) {
                    do { try sockets.publish.subscribe(topic) } catch { logger.warning("subscribe failed", metadata: ["error": "\(error)"]) }
                }
                parts.append(Array((user ?? "").utf8))
            }
            if let board = PublishStream.parse(topic: event.dropFirst())?.board {
                try links[routing.threads.thread(of: board)].publish.send(multipart: parts, dontWait: true)
            } else {
                for link in links { try link.publish.send(multipart: parts, dontWait: true) }
            }
        }
    }

    /// Ends every subscriber connection (they connect again through the
    /// handshake, which the reloaded list decides; the others resync).
    private func disconnectSubscribers(_ users: [String]) {
        guard let connections = sockets.subscriberConnections else { return }
        endSubscriberConnections(connections, publishEndpoint: sockets.endpoints.publish, for: users, logger: logger)
    }

    /// A board thread's publications, out through the publish socket.
    @discardableResult
    private func forwardPublications(from thread: Int) throws(ZMQError) -> Int {
        let link = links[thread].publish
        for count in 0..<maxMessagesPerTurn {
            guard try receiveAnswer(from: link) else { return count }
            for (index, message) in answer.enumerated() {
                guard try sockets.publish.send(message, more: index < answer.count - 1, dontWait: true) else { break }
            }
            for message in answer { message.reset() }
        }
        return maxMessagesPerTurn
    }

    // MARK: Snapshots

    /// Snapshot requests, to the thread of their board; board lists to every thread.
    private func forwardSnapshotRequests() throws(ZMQError) {
        for _ in 0..<maxMessagesPerTurn {
            guard try sockets.snapshots.receive(into: routingID, dontWait: true) else { return }
            guard routingID.hasMore, try sockets.snapshots.receive(into: part, dontWait: true) else { continue }
            while part.hasMore { _ = try sockets.snapshots.receive(into: part, dontWait: true) }
            let requester = routingID.bytes
            let origin = FrontOrigin(of: part, authenticated: authenticated).encoded
            let request = part.withUnsafeBytes { try? WireCodec.decode(Touchsync_V1_SnapshotRequest.self, from: $0) }
            let payload = part.bytes
            if let request, request.listBoards {
                let key = ListKey(requester: requester, requestID: request.requestID)
                if lists.count >= 4096 { lists.removeAll() }  // answers that never came (a thread stopped): bounded
                let limit = request.limit == 0 || request.limit > 1000 ? 1000 : Int(request.limit)
                lists[key] = ListMerge(waiting: links.count, limit: limit)
                for link in links { try link.snapshots.send(multipart: [requester, origin, payload], dontWait: true) }
                continue
            }
            let thread = request.map { routing.threads.thread(of: $0.board) } ?? 0
            try links[thread].snapshots.send(multipart: [requester, origin, payload], dontWait: true)
        }
    }

    /// A board thread's snapshot chunks and answers, out; its part of a board list merged first.
    @discardableResult
    private func forwardSnapshotAnswers(from thread: Int) throws(ZMQError) -> Int {
        let link = links[thread].snapshots
        for count in 0..<maxMessagesPerTurn {
            guard try receiveAnswer(from: link) else { return count }
            defer { for message in answer { message.reset() } }
            if !lists.isEmpty, answer.count == 2, try mergeBoardList() { continue }
            for (index, message) in answer.enumerated() {
                do {
                    guard try sockets.snapshots.send(message, more: index < answer.count - 1, dontWait: true) else { break }
                } catch where error.isHostUnreachable {
                    break
                }
            }
        }
        return maxMessagesPerTurn
    }

    /// Takes `answer` into a board list being merged (true), answering the
    /// requester once every thread answered; false: not part of a list.
    private func mergeBoardList() throws(ZMQError) -> Bool {
        let requester = answer[0].bytes
        // Request id 0 is not on the wire (proto3 leaves zero out).
        let requestID = answer[1].withUnsafeBytes { bytes in ProtoField.varint(3, in: bytes) } ?? 0
        let key = ListKey(requester: requester, requestID: requestID)
        guard var merge = lists[key],
            let reply = answer[1].withUnsafeBytes({ bytes in try? WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: bytes) })
        else { return false }
        switch reply.body {
        case .boards(let list):
            merge.parts.append((list.boards, list.more))
        case .error:
            // The first refusal (an allowance) answers the request; the other threads' answers are dropped.
            if !merge.refused { sendSnapshotAnswer([requester, answer[1].bytes]) }
            merge.refused = true
        default:
            return false
        }
        merge.waiting -= 1
        guard merge.waiting == 0, !merge.refused else {
            lists[key] = merge.waiting == 0 ? nil : merge
            return true
        }
        lists[key] = nil
        let (boards, more) = FrontRouting.mergedBoardLists(merge.parts, limit: merge.limit) { $0.board }
        var merged = Touchsync_V1_SnapshotReply()
        merged.requestID = requestID
        merged.boards.boards = boards
        merged.boards.more = more
        sendSnapshotAnswer([requester, WireCodec.encode(merged)])
        return true
    }

    /// An answer the front made (a merged board list): a requester gone since is dropped.
    private func sendSnapshotAnswer(_ parts: [[UInt8]]) {
        do {
            _ = try sockets.snapshots.send(multipart: parts, dontWait: true)
        } catch {
            logger.debug("board list not delivered", metadata: ["error": "\(error)"])
        }
    }
}
