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
        changes.reserveCapacity(proto.changes.count)
        for change in proto.changes {
            changes.append(
                TouchChange(
                    touch: change.touchID, phase: try TouchPhase(change.phase),
                    samples: try SampleRunCodec.decode(change.samples),
                    predicted: try SampleRunCodec.decode(change.predicted),
                    amendments: try SampleRunCodec.decode(change.amendments)))
        }
        self.init(sequence: sequence, changes: changes, aliveTouches: proto.hasAlive ? proto.alive.touchIds : nil)
    }

    public var proto: Touchsync_V1_TouchFrame {
        var frame = Touchsync_V1_TouchFrame()
        frame.changes = changes.map { change in
            var proto = Touchsync_V1_TouchChange()
            proto.touchID = change.touch
            proto.phase = change.phase.proto
            if !change.samples.isEmpty { proto.samples = SampleRunCodec.encode(change.samples) }
            if !change.predicted.isEmpty { proto.predicted = SampleRunCodec.encode(change.predicted) }
            if !change.amendments.isEmpty { proto.amendments = SampleRunCodec.encode(change.amendments) }
            return proto
        }
        if let aliveTouches {
            var alive = Touchsync_V1_AliveSet()
            alive.touchIds = aliveTouches
            frame.alive = alive
        }
        if let last = changes.lazy.compactMap(\.samples.last).max(by: { $0.time < $1.time }) {
            frame.eventTime = last.time
        }
        return frame
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

// MARK: Hub to subscribers

extension StrokeDiff {
    public init(_ proto: Touchsync_V1_Diff) throws(WireError) {
        switch proto.kind {
        case .began(let began):
            self = .began(
                StrokeID(began.strokeID), owner: UserNamespace(began.owner), touch: began.touchID,
                style: StrokeStyle(began.style))
        case .appended(let appended):
            self = .appended(
                StrokeID(appended.strokeID), offset: Int(appended.offset), samples: try SampleRunCodec.decode(appended.samples))
        case .predicted(let predicted):
            self = .predicted(StrokeID(predicted.strokeID), samples: try SampleRunCodec.decode(predicted.samples))
        case .amended(let amended):
            let samples = try SampleRunCodec.decode(amended.sample)
            guard samples.count == 1 else { throw .malformed("an amendment carries \(samples.count) samples, not 1") }
            self = .amended(StrokeID(amended.strokeID), offset: Int(amended.offset), sample: samples[0])
        case .accepted(let accepted):
            self = .accepted(StrokeID(accepted.strokeID), position: accepted.position)
        case .cancelled(let cancelled):
            self = .cancelled(StrokeID(cancelled.strokeID))
        case .cleared(let cleared):
            self = .cleared(owner: cleared.owner.isEmpty ? nil : UserNamespace(cleared.owner))
        case nil:
            throw .malformed("a diff with no kind")
        }
    }

    public var proto: Touchsync_V1_Diff {
        var diff = Touchsync_V1_Diff()
        switch self {
        case .began(let id, let owner, let touch, let style):
            var began = Touchsync_V1_StrokeBegan()
            began.strokeID = id.rawValue
            began.owner = owner.rawValue
            began.touchID = touch
            began.style = style.proto
            diff.began = began
        case .appended(let id, let offset, let samples):
            var appended = Touchsync_V1_SamplesAppended()
            appended.strokeID = id.rawValue
            appended.offset = UInt32(offset)
            appended.samples = SampleRunCodec.encode(samples)
            diff.appended = appended
        case .predicted(let id, let samples):
            var predicted = Touchsync_V1_PredictedReplaced()
            predicted.strokeID = id.rawValue
            if !samples.isEmpty { predicted.samples = SampleRunCodec.encode(samples) }
            diff.predicted = predicted
        case .amended(let id, let offset, let sample):
            var amended = Touchsync_V1_SampleAmended()
            amended.strokeID = id.rawValue
            amended.offset = UInt32(offset)
            amended.sample = SampleRunCodec.encode([sample])
            diff.amended = amended
        case .accepted(let id, let position):
            var accepted = Touchsync_V1_StrokeAccepted()
            accepted.strokeID = id.rawValue
            accepted.position = position
            diff.accepted = accepted
        case .cancelled(let id):
            var cancelled = Touchsync_V1_StrokeCancelled()
            cancelled.strokeID = id.rawValue
            diff.cancelled = cancelled
        case .cleared(let owner):
            var cleared = Touchsync_V1_Cleared()
            cleared.owner = owner?.rawValue ?? ""
            diff.cleared = cleared
        }
        return diff
    }
}

extension DiffBatch {
    public init(_ proto: Touchsync_V1_DiffBatch) throws(WireError) {
        var diffs: [StrokeDiff] = []
        diffs.reserveCapacity(proto.diffs.count)
        for diff in proto.diffs { diffs.append(try StrokeDiff(diff)) }
        self.init(sequence: proto.sequence, hubTime: proto.hubTime, diffs: diffs)
    }

    public func proto(board: String) -> Touchsync_V1_DiffBatch {
        var batch = Touchsync_V1_DiffBatch()
        batch.board = board
        batch.sequence = sequence
        batch.hubTime = hubTime
        batch.diffs = diffs.map(\.proto)
        return batch
    }
}

/// The topic frame of every publish message for `board`: its UTF-8 name and
/// one zero byte, so subscribing to "a" never also matches board "ab".
public func publishTopic(board: String) -> [UInt8] {
    Array(board.utf8) + [0]
}

/// Whether `name` can name a board: 1 to 128 bytes of UTF-8 with no NUL.
public func isValidBoardName(_ name: String) -> Bool {
    let count = name.utf8.count
    return count >= 1 && count <= 128 && !name.utf8.contains(0)
}
