import Foundation
import SwiftProtobuf
import TouchSyncCore

// Conversions between the model and the protobuf messages. Decoding checks
// everything the type system cannot, and throws `WireError`.

extension StrokeStyle {
    public init(_ proto: Touchsync_V1_StrokeStyle) {
        self.init(rgba: proto.rgba, width: proto.width)
    }

    public var proto: Touchsync_V1_StrokeStyle {
        var style = Touchsync_V1_StrokeStyle()
        style.rgba = rgba
        style.width = width
        return style
    }
}

extension TouchPhase {
    public init(_ proto: Touchsync_V1_TouchPhase) throws(WireError) {
        switch proto {
        case .began: self = .began
        case .moved: self = .moved
        case .stationary: self = .stationary
        case .ended: self = .ended
        case .cancelled: self = .cancelled
        case .unspecified, .UNRECOGNIZED: throw .malformed("touch phase \(proto.rawValue) is not a phase")
        }
    }

    public var proto: Touchsync_V1_TouchPhase {
        switch self {
        case .began: .began
        case .moved: .moved
        case .stationary: .stationary
        case .ended: .ended
        case .cancelled: .cancelled
        }
    }
}

extension ErrorCode {
    public var proto: Touchsync_V1_ErrorCode {
        Touchsync_V1_ErrorCode(rawValue: rawValue) ?? .internal
    }

    public init?(_ proto: Touchsync_V1_ErrorCode) {
        self.init(rawValue: proto.rawValue)
    }
}

// MARK: Agent to hub

extension TouchFrame {
    /// Decodes the frame of an `AgentMessage` numbered `sequence`.
    public init(_ proto: Touchsync_V1_TouchFrame, sequence: UInt64) throws(WireError) {
        var changes: [TouchChange] = []
        let reference = proto.eventTime
        if !proto.packedChanges.isEmpty {
            let packed = proto.packedChanges
            let decoded = packed.withUnsafeBytes { bytes in
                Result { () throws(WireError) in try PackedChanges.decode(bytes, 0..<bytes.count, timeReference: reference) }
            }
            changes = try decoded.get()
        }
        changes.reserveCapacity(changes.count + proto.changes.count)
        for change in proto.changes {
            let (samples, predicted) = try SampleRunCodec.decode(change.samples, timeReference: reference)
            changes.append(
                TouchChange(
                    touch: change.touchID, phase: try TouchPhase(change.phase), samples: samples, predicted: predicted,
                    amendments: try SampleRunCodec.decodeSamples(change.amendments, timeReference: reference)))
        }
        self.init(sequence: sequence, changes: changes, aliveTouches: proto.hasAlive ? proto.alive.touchIds : nil)
    }

    /// The event's time: its latest real sample's (the time reference of its runs).
    public var eventTime: Int64 {
        changes.reduce(0) { latest, change in max(latest, change.samples.last?.time ?? 0) }
    }

    /// The frame as numbered `AgentMessage` `sequence` in `format`
    /// (`AgentFrameEncoder`; an agent keeps one, which reuses its buffers).
    public func encodedMessage(sequence: UInt64, format: WireFormat) -> [UInt8] {
        var encoder = AgentFrameEncoder()
        return encoder.message(self, sequence: sequence, format: format)
    }

    /// The frame in wire format v1 (`changes`).
    public var proto: Touchsync_V1_TouchFrame { proto(.v1) }

    /// The frame in `format`: v2 packs every change into `packed_changes`
    /// (docs/protocol.md, "Wire format v2 (agents)").
    public func proto(_ format: WireFormat) -> Touchsync_V1_TouchFrame {
        var frame = Touchsync_V1_TouchFrame()
        let reference = eventTime
        frame.eventTime = reference
        if format == .v2 {
            if !changes.isEmpty { frame.packedChanges = Data(PackedChanges.encode(changes, timeReference: reference)) }
        } else {
            frame.changes = changes.map { change in
                var proto = Touchsync_V1_TouchChange()
                proto.touchID = change.touch
                proto.phase = change.phase.proto
                if !change.samples.isEmpty || !change.predicted.isEmpty {
                    proto.samples = SampleRunCodec.encode(change.samples, predicted: change.predicted, timeReference: reference)
                }
                if !change.amendments.isEmpty {
                    proto.amendments = SampleRunCodec.encode(change.amendments, timeReference: reference)
                }
                return proto
            }
        }
        if let aliveTouches {
            var alive = Touchsync_V1_AliveSet()
            alive.touchIds = aliveTouches
            frame.alive = alive
        }
        return frame
    }
}

/// Writes an agent's frames as numbered `AgentMessage`s: what an agent
/// sends for every input event. v2 is written straight from the model, byte
/// for byte what SwiftProtobuf writes for `TouchFrame.proto(.v2)` (fields in
/// number order, defaults omitted), without the generated structs, `Data`
/// or intermediate packed bytes, and with the packing's buffers kept from
/// one frame to the next: one allocation per frame, the message's own.
public struct AgentFrameEncoder: Sendable {
    private var columns = ChangeColumns()

    public init() {}

    public mutating func message(_ frame: TouchFrame, sequence: UInt64, format: WireFormat) -> [UInt8] {
        guard format == .v2 else {
            var message = Touchsync_V1_AgentMessage()
            message.sequence = sequence
            message.frame = frame.proto(format)
            return WireCodec.encode(message)
        }
        let reference = frame.eventTime
        var out = ProtoWriter(capacity: 32 + frame.changes.count * 32)
        out.uint64Field(1, sequence)  // AgentMessage.sequence
        out.lengthDelimited(3) { body in  // AgentMessage.frame
            if let aliveTouches = frame.aliveTouches {  // TouchFrame.alive: AliveSet.touch_ids, packed
                body.lengthDelimited(2) { alive in alive.packed(1, aliveTouches) { $0 } }
            }
            body.sint64Field(3, reference)  // TouchFrame.event_time
            if !frame.changes.isEmpty {  // TouchFrame.packed_changes
                body.lengthDelimited(4) { packed in
                    PackedChanges.write(frame.changes, timeReference: reference, into: &packed, columns: &columns)
                }
            }
        }
        return out.bytes
    }
}

extension Touchsync_V1_Error {
    public init(_ error: TouchInputError, sequence: UInt64) {
        self.init(code: error.code, message: error.description, sequence: sequence)
    }

    public init(_ error: WireError, sequence: UInt64) {
        self.init(code: error.code, message: error.reason, sequence: sequence)
    }

    public init(code: ErrorCode, message: String, sequence: UInt64) {
        self.init()
        self.code = code.proto
        self.message = message
        self.sequence = sequence
    }
}

/// The topic frame of every v1 publish message for `board`: its UTF-8 name
/// and one zero byte, so subscribing to "a" never also matches board "ab".
public func publishTopic(board: String) -> [UInt8] { WireFormat.v1.topic(board: board) }

/// The wire format of a diff stream: v1 (`StrokeAppends`, the board's
/// topic) or v2 (`packed_appends`, the board's v2 topic); everything else
/// in a batch is the same in both.
public enum WireFormat: Int, Sendable, CaseIterable, CustomStringConvertible {
    case v1 = 1
    case v2 = 2

    /// The publish topic of a board in this format: its name and a zero
    /// byte (v1) or a one byte (v2), neither of which a board name holds.
    public func topic(board: String) -> [UInt8] { PublishStream(self).topic(board: board) }

    public var description: String { "v\(rawValue)" }
}

/// One of a board's diff streams, each on its own publish topic (the board
/// name and the stream's byte): v1, v2, and v2 without predicted tails, for
/// subscribers that do not draw predictions (docs/protocol.md, "Streams
/// without predictions"). The bytes of one stream never depend on who reads another.
public enum PublishStream: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case v1 = 0
    case v2 = 1
    case v2WithoutPredictions = 2

    /// The wire format of its batches.
    public var format: WireFormat { self == .v1 ? .v1 : .v2 }
    /// Whether its batches carry predicted tails (and its heartbeats' `digest` is what its replicas hold).
    public var carriesPredictions: Bool { self != .v2WithoutPredictions }

    /// The stream of `format`, with or without predicted tails (v1 always has them).
    public init(_ format: WireFormat, predictions: Bool = true) {
        self = format == .v1 ? .v1 : predictions ? .v2 : .v2WithoutPredictions
    }

    /// Its publish topic for `board`: the name and this stream's byte, which no board name holds.
    public func topic(board: String) -> [UInt8] { Array(board.utf8) + [rawValue] }

    /// The board and stream of a whole board topic (a valid board name and
    /// a stream byte); nil for anything else (a prefix, another byte).
    public static func parse(topic: some BidirectionalCollection<UInt8>) -> (board: String, stream: PublishStream)? {
        guard let last = topic.last, let stream = PublishStream(rawValue: last),
            let board = String(validating: topic.dropLast(), as: UTF8.self), isValidBoardName(board)
        else { return nil }
        return (board, stream)
    }

    public var description: String { self == .v2WithoutPredictions ? "v2 without predictions" : format.description }
}

/// Whether `name` can name a board: 1 to 128 bytes of UTF-8 with no
/// control character (U+0000 to U+001F, U+007F). The one rule for the hub,
/// its clients and the browser gateway (docs/protocol.md, "Board names").
public func isValidBoardName(_ name: String) -> Bool {
    let count = name.utf8.count
    return count >= 1 && count <= maxBoardNameBytes && !name.utf8.contains { $0 < 0x20 || $0 == 0x7F }
}

/// The longest board name, in UTF-8 bytes.
public let maxBoardNameBytes = 128

/// The rule of `isValidBoardName` in words, for error messages.
public let boardNameRule = "a board name is 1 to 128 bytes of UTF-8 without control characters"
