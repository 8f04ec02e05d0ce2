import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

// The core's replies as the wire carries them (the hub's transport, and tests that play an agent).

extension HubReply {
    /// The encoded `HubReply`. An ack (the hub sends about one a frame) is
    /// written directly, byte for byte as SwiftProtobuf writes it (tested);
    /// the rest through SwiftProtobuf.
    public var encoded: [UInt8] {
        guard case .ack(let through) = self else { return WireCodec.encode(proto) }
        return WireCodec.ackReply(through: through)
    }

    public var proto: Touchsync_V1_HubReply {
        var reply = Touchsync_V1_HubReply()
        switch self {
        case .welcome(let model):
            var welcome = Touchsync_V1_Welcome()
            welcome.protocolVersion = model.protocolVersion
            welcome.board = model.board
            welcome.user = model.user.rawValue
            welcome.appliedThrough = model.appliedThrough
            welcome.heartbeatIntervalMs = model.heartbeatIntervalMilliseconds
            welcome.livenessTimeoutMs = model.livenessTimeoutMilliseconds
            welcome.maxLiveTouches = model.maxLiveTouches
            welcome.maxMessageBytes = model.maxMessageBytes
            reply.welcome = welcome
        case .ack(let through):
            var ack = Touchsync_V1_Ack()
            ack.through = through
            reply.ack = ack
        case .error(let refusal):
            reply.error = Touchsync_V1_Error(code: refusal.code, message: refusal.message, sequence: refusal.sequence)
            reply.error.retryAfterMs = refusal.retryAfterMilliseconds
            if let owner = refusal.owner { reply.error.owner = owner.proto }
        }
        return reply
    }
}

extension ClusterMap.Hub {
    /// The hub as a WRONG_HUB refusal names it.
    public var proto: Touchsync_V1_HubAddress {
        var address = Touchsync_V1_HubAddress()
        address.name = name
        address.ingest = ingest
        address.publish = publish
        address.snapshot = snapshot
        address.history = history ?? ""
        return address
    }
}
