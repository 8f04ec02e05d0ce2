import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

// A transport's translation of protobuf agent messages into the core's
// model-level requests (pure: the ZeroMQ adapter, fuzzing and future
// transports share it).

extension AgentRequest {
    /// Every body case is named (no `default:`): a new message type in
    /// agent.proto is a compile error here until it is given a meaning.
    package init(_ message: Touchsync_V1_AgentMessage) {
        let sequence = message.sequence
        switch message.body {
        case .hello(let hello):
            self = .hello(
                AgentHello(
                    protocolVersion: hello.protocolVersion, board: hello.board, clientName: hello.clientName,
                    resumeAfter: hello.resumeAfter, sessionID: Array(hello.sessionID), actAs: hello.actAs, token: hello.token,
                    roleLimit: Role(hello.roleLimit)))
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
        case .undo:
            self = .numbered(sequence: sequence, .undo)
        case .redo:
            self = .numbered(sequence: sequence, .redo)
        case .erase(let erase):
            self = .numbered(sequence: sequence, .erase(erase.strokeIds.map(StrokeID.init)))
        case .edit(let edit):
            self = .numbered(sequence: sequence, StrokeEdit(edit).map { .edit($0) } ?? .invalid(WireError(.invalidValue, "an edit has one change: transform, rgba, delete or duplicate")))
        case .heartbeat:
            self = .heartbeat
        case .goodbye:
            self = .goodbye
        case nil:
            // No body this hub knows (none, or one added to agent.proto later):
            // with a number it takes that number like any refused message.
            self = sequence > 0
                ? .numbered(sequence: sequence, .invalid(WireError(.malformed, "an agent message with no body this hub knows")))
                : .empty(sequence: 0)
        }
    }
}


extension StrokeEdit {
    /// The core's edit, or nil when the message names no change (`delete` must be true).
    package init?(_ proto: Touchsync_V1_Edit) {
        let change: Change
        switch proto.change {
        case .transform(let transform): change = .transform(StrokeTransform(transform))
        case .duplicate(let transform): change = .duplicate(StrokeTransform(transform))
        case .rgba(let rgba): change = .recolour(rgba: rgba)
        case .delete(true): change = .delete
        case .delete(false), nil: return nil
        }
        self.init(strokes: proto.strokeIds.map(StrokeID.init), change: change)
    }
}

extension StrokeTransform {
    package init(_ proto: Touchsync_V1_Transform) {
        self.init(
            offsetX: proto.offsetX, offsetY: proto.offsetY, scale: proto.scale == 0 ? 1 : Double(proto.scale),
            originX: proto.originX, originY: proto.originY)
    }
}

extension AgentRequest {
    /// Decodes one agent message (one ZeroMQ frame) into a request: frames,
    /// nearly every message, in one pass (`AgentFrameDecoder`); the rest,
    /// and anything that reader gives up on, through SwiftProtobuf.
    public static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<AgentRequest, WireError> {
        if let frame = AgentFrameDecoder.decode(bytes) { return .success(.numbered(sequence: frame.sequence, .frame(frame))) }
        return Result { () throws(WireError) in AgentRequest(try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: bytes)) }
    }
}

extension Role {
    /// A hello's role limit (nil: none; a value this hub does not know limits to watch, the least).
    init?(_ limit: Touchsync_V1_SessionRole) {
        switch limit {
        case .unspecified: return nil
        case .watch: self = .watch
        case .draw: self = .draw
        case .admin: self = .admin
        case .UNRECOGNIZED: self = .watch
        }
    }
}
