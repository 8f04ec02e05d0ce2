import Logging
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire
import ZeroMQ

// HubLoop: the ingest and publish sockets' messages, into core events.
extension HubLoop {

    func drainIngest() throws(ZMQError) {
        var received = 0
        while received < configuration.sockets.maxMessagesPerTurn {
            guard try ingest.receive(into: routing, dontWait: true) else { return }
            if behindFront {
                // The front's part about the connection (`FrontOrigin`) comes between.
                guard routing.hasMore, try ingest.receive(into: payload, dontWait: true) else { continue }
                frontOrigin = payload.withUnsafeBytes(FrontOrigin.init(decoding:))
            }
            guard routing.hasMore, try ingest.receive(into: payload, dontWait: true) else {
                continue  // a ROUTER always prefixes the routing id; a lone frame is not from a DEALER
            }
            received += 1
            if !payload.hasMore {
                // A connection that carries one session.
                guard let peer = self.peer(routing.bytes, user: payload) else { continue }
                receiveAgentMessage(payload, from: peer)
            } else {
                received += try receiveMultiplexed(from: routing.bytes)
            }
        }
        ingestWaiting = true
    }

    /// A multiplexed connection's message (docs/protocol.md, "Multiplexed
    /// connections"): pairs of parts, a channel (4 bytes, big-endian) and the
    /// agent message for that channel's session; `payload` holds the first
    /// channel part. Returns how many agent messages it carried.
    func receiveMultiplexed(from routingID: [UInt8]) throws(ZMQError) -> Int {
        var carried = 0
        while true {
            let channel: UInt32? =
                payload.withUnsafeBytes(ChannelPart.decode)
            guard try ingest.receive(into: channelMessage, dontWait: true) else { return carried }  // parts arrive together
            guard let connection = self.peer(routingID, user: channelMessage) else {
                try skipRemainingParts(of: channelMessage)
                return carried
            }
            guard let channel else {
                handle(
                    .undecodable(
                        from: Peer(id: PeerID(routingID, channel: 0), principal: connection.principal),
                        .malformed("a multiplexed message is pairs of parts: a channel of 4 bytes (big-endian), then an agent message")))
                try skipRemainingParts(of: channelMessage)
                return carried
            }
            carried += 1
            receiveAgentMessage(channelMessage, from: Peer(id: PeerID(routingID, channel: channel), principal: connection.principal))
            guard channelMessage.hasMore else { return carried }
            guard try ingest.receive(into: payload, dontWait: true) else { return carried }
            guard payload.hasMore else {
                handle(
                    .undecodable(
                        from: Peer(id: PeerID(routingID, channel: 0), principal: connection.principal),
                        .malformed("a multiplexed message has an even number of parts: its last channel part has no agent message")))
                return carried
            }
        }
    }

    func skipRemainingParts(of message: ZMQMessage) throws(ZMQError) {
        while message.hasMore {
            guard try ingest.receive(into: message, dontWait: true) else { return }
        }
    }

    /// Decodes one agent message from `peer` and hands it to the core.
    func receiveAgentMessage(_ message: ZMQMessage, from peer: Peer) {
        if message.count > configuration.limits.maxMessageBytes {
            let tooLarge = WireError(.messageTooLarge, "\(message.count) bytes, the limit is \(configuration.limits.maxMessageBytes)")
            // A numbered message still takes its number (read without decoding the body), so the next is not OUT_OF_ORDER.
            if let header = message.withUnsafeBytes(AgentMessageHeader.scan), header.sequence > 0,
                let body = header.body, AgentMessageHeader.numberedBodies.contains(body)
            {
                handle(.agentMessage(from: peer, .numbered(sequence: header.sequence, .invalid(tooLarge)), bytes: message.count))
            } else {
                handle(.undecodable(from: peer, tooLarge))
            }
        } else {
            switch message.withUnsafeBytes(AgentRequest.decode) {
            case .success(.hello(var hello)):
                // Per-address quotas (a plain hub's users are connections); behind a front, the front read it.
                hello.remoteAddress = behindFront ? frontOrigin?.address : message.peerAddress
                handle(.agentMessage(from: peer, .hello(hello), bytes: message.count))
            case .success(let request): handle(.agentMessage(from: peer, request, bytes: message.count))
            case .failure(let error): handle(.undecodable(from: peer, error))
            }
        }
    }

    /// The peer a message came from. Authenticated, its principal is the
    /// user ZAP gave the connection (nil when there is none: not accepted);
    /// otherwise the routing id's namespace.
    func peer(_ routingID: [UInt8], user message: ZMQMessage) -> Peer? {
        guard authenticated else {
            if let known = peers[routingID] { return known }
            if peers.count >= 65_536 { peers.removeAll(keepingCapacity: true) }  // a cache: bounded against id floods
            let peer = Peer(routingID: routingID)
            peers[routingID] = peer
            return peer
        }
        // A routing id may be reused by another connection (of another user) later: check the user each time.
        if behindFront {
            // The front read the user (`FrontOrigin`).
            guard let user = frontOrigin?.user, !user.isEmpty else { return nil }
            if let known = peers[routingID], known.principal.rawValue == user { return known }
            if peers.count >= 65_536 { peers.removeAll(keepingCapacity: true) }
            let peer = Peer(id: PeerID(routingID), principal: UserNamespace(user))
            peers[routingID] = peer
            return peer
        }
        if let known = peers[routingID], message.property("User-Id", equals: known.principal.rawValue) { return known }
        guard let user = message.userID, !user.isEmpty else { return nil }
        if peers.count >= 65_536 { peers.removeAll(keepingCapacity: true) }
        let peer = Peer(id: PeerID(routingID), principal: UserNamespace(user))
        peers[routingID] = peer
        return peer
    }

    /// XPUB hands up subscribe (1) and unsubscribe (0) messages.
    func drainSubscriptions() throws(ZMQError) {
        for _ in 0..<configuration.sockets.maxMessagesPerTurn {
            guard try publish.receive(into: payload, dontWait: true) else { return }
            let event = payload.bytes
            var user = authenticated ? payload.userID.map { UserNamespace($0) } : nil
            if behindFront && payload.hasMore {
                // The front's second part: the subscriber's user.
                guard try publish.receive(into: payload, dontWait: true) else { return }
                user = payload.count > 0 ? UserNamespace(payload.string) : nil
            }
            guard let kind = event.first else { continue }
            let topic = Array(event.dropFirst())
            handle(kind == 1 ? .subscribed(topic: topic, by: user) : .unsubscribed(topic: topic, by: user))
        }
    }
}
