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
        let reference = proto.eventTime
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

    public var proto: Touchsync_V1_TouchFrame {
        var frame = Touchsync_V1_TouchFrame()
        let reference = eventTime
        frame.eventTime = reference
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
        if let aliveTouches {
            var alive = Touchsync_V1_AliveSet()
            alive.touchIds = aliveTouches
            frame.alive = alive
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

extension DiffBatch {
    /// Decodes a batch. A `SamplesAppended` that replaces the prediction
    /// becomes the two diffs it stands for: `.appended`, then `.predicted`.
    public init(_ proto: Touchsync_V1_DiffBatch) throws(WireError) {
        var diffs: [StrokeDiff] = []
        diffs.reserveCapacity(proto.diffs.count)
        let reference = proto.timeReference
        for diff in proto.diffs {
            switch diff.kind {
            case .began(let began):
                diffs.append(
                    .began(
                        StrokeID(began.strokeID), owner: UserNamespace(began.owner), touch: began.touchID,
                        style: StrokeStyle(began.style)))
            case .appended(let appended):
                let id = StrokeID(appended.strokeID)
                let (samples, predicted) = try SampleRunCodec.decode(appended.samples, timeReference: reference)
                guard appended.replacesPrediction || predicted.isEmpty else {
                    throw .malformed("an append carries a predicted tail without replacing the prediction")
                }
                if !samples.isEmpty { diffs.append(.appended(id, offset: Int(appended.offset), samples: samples)) }
                if appended.replacesPrediction { diffs.append(.predicted(id, samples: predicted)) }
            case .predicted(let replaced):
                let (samples, predicted) = try SampleRunCodec.decode(replaced.samples, timeReference: reference)
                guard samples.isEmpty else { throw .malformed("a prediction with samples that are not predicted") }
                diffs.append(.predicted(StrokeID(replaced.strokeID), samples: predicted))
            case .amended(let amended):
                let samples = try SampleRunCodec.decodeSamples(amended.sample, timeReference: reference)
                guard samples.count == 1 else { throw .malformed("an amendment carries \(samples.count) samples, not 1") }
                diffs.append(.amended(StrokeID(amended.strokeID), offset: Int(amended.offset), sample: samples[0]))
            case .accepted(let accepted):
                diffs.append(.accepted(StrokeID(accepted.strokeID), position: accepted.position))
            case .cancelled(let cancelled):
                diffs.append(.cancelled(StrokeID(cancelled.strokeID)))
            case .cleared(let cleared):
                diffs.append(.cleared(owner: cleared.owner.isEmpty ? nil : UserNamespace(cleared.owner)))
            case nil:
                throw .malformed("a diff with no kind")
            }
        }
        self.init(sequence: proto.sequence, hubTime: proto.hubTime, diffs: diffs)
    }

    /// The time reference: the first sample time in the batch, so every run's
    /// times are small offsets.
    var timeReference: Int64 {
        for diff in diffs {
            switch diff {
            case .appended(_, _, let samples), .predicted(_, let samples):
                if let first = samples.first { return first.time }
            case .amended(_, _, let sample): return sample.time
            default: continue
            }
        }
        return 0
    }

    public func proto(board: String) -> Touchsync_V1_DiffBatch {
        var batch = Touchsync_V1_DiffBatch()
        batch.board = board
        batch.sequence = sequence
        batch.hubTime = hubTime
        let reference = timeReference
        batch.timeReference = reference
        var encoded: [Touchsync_V1_Diff] = []
        encoded.reserveCapacity(diffs.count)
        var index = 0
        while index < diffs.count {
            var diff = Touchsync_V1_Diff()
            switch diffs[index] {
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
                // An append followed by the same stroke's new prediction travels as one run.
                if index + 1 < diffs.count, case .predicted(id, let predicted) = diffs[index + 1] {
                    appended.samples = SampleRunCodec.encode(samples, predicted: predicted, timeReference: reference)
                    appended.replacesPrediction = true
                    index += 1
                } else {
                    appended.samples = SampleRunCodec.encode(samples, timeReference: reference)
                }
                diff.appended = appended
            case .predicted(let id, let samples):
                var predicted = Touchsync_V1_PredictedReplaced()
                predicted.strokeID = id.rawValue
                if !samples.isEmpty {
                    predicted.samples = SampleRunCodec.encode([], predicted: samples, timeReference: reference)
                }
                diff.predicted = predicted
            case .amended(let id, let offset, let sample):
                var amended = Touchsync_V1_SampleAmended()
                amended.strokeID = id.rawValue
                amended.offset = UInt32(offset)
                amended.sample = SampleRunCodec.encode([sample], timeReference: reference)
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
            encoded.append(diff)
            index += 1
        }
        batch.diffs = encoded
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
