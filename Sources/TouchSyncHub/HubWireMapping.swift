import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire

// The ZeroMQ transport's translation between protobuf messages and the
// core's model-level requests and replies.

extension AgentRequest {
    /// Every body case is named (no `default:`): a new message type in
    /// agent.proto is a compile error here until it is given a meaning.
    init(_ message: Touchsync_V1_AgentMessage) {
        let sequence = message.sequence
        switch message.body {
        case .hello(let hello):
            self = .hello(
                AgentHello(
                    protocolVersion: hello.protocolVersion, board: hello.board, clientName: hello.clientName,
                    resumeAfter: hello.resumeAfter, sessionID: Array(hello.sessionID)))
        case .frame(let proto):
            do {
                self = .numbered(sequence: sequence, .frame(try TouchFrame(proto, sequence: sequence)))
            } catch {
                self = .numbered(sequence: sequence, .invalid(error))
            }
        case .style(let style):
            self = .numbered(sequence: sequence, .style(StrokeStyle(style.style)))
        case .clear(let clear):
            switch clear.scope {
            case .own: self = .numbered(sequence: sequence, .clear(.own))
            case .board: self = .numbered(sequence: sequence, .clear(.board))
            case .UNRECOGNIZED(let value):
                self = .numbered(sequence: sequence, .invalid(WireError(.invalidValue, "unknown clear scope \(value)")))
            }
        case .heartbeat:
            self = .heartbeat
        case .goodbye:
            self = .goodbye
        case nil:
            self = .empty(sequence: sequence)
        }
    }
}

extension HubReply {
    var proto: Touchsync_V1_HubReply {
        var reply = Touchsync_V1_HubReply()
        switch self {
        case .welcome(let model):
            var welcome = Touchsync_V1_Welcome()
            welcome.protocolVersion = touchSyncProtocolVersion
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
        }
        return reply
    }
}
