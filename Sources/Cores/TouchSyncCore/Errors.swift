/// Bad input from an agent. The frame is refused whole and the board is unchanged.
public enum TouchInputError: Error, Hashable, Sendable, CustomStringConvertible {
    /// moved, stationary, ended or cancelled for a touch that is not down.
    case unknownTouch(TouchID, TouchPhase)
    /// began for a touch that is already down.
    case duplicateBegan(TouchID)
    /// The same touch twice in one frame.
    case duplicateTouchInFrame(TouchID)
    /// began or moved with no sample.
    case missingSamples(TouchID, TouchPhase)
    case invalidSample(TouchID, SampleProblem)
    /// An amendment for an estimation index that no sample of the active stroke carries.
    case unknownEstimationIndex(TouchID, UInt32)
    case tooManyTouches(limit: Int)
    case strokeTooLong(TouchID, limit: Int)
    case frameTooLarge(String, limit: Int)
    /// A frame that begins a stroke on a board already holding its maximum of samples.
    case boardFull(limit: Int)
    /// An erase naming a stroke that is not an accepted stroke of the board (or naming it twice).
    case unknownStroke(StrokeID)
    /// An erase of another user's stroke by a user who may not clear the board.
    case notYours(StrokeID)
    /// An edit that cannot be made as asked (no stroke, a scale out of range, ink leaving the board).
    case invalidEdit(String)

    /// A stable name for the error, the same one the wire carries.
    public var code: ErrorCode {
        switch self {
        case .unknownTouch: .unknownTouch
        case .duplicateBegan, .duplicateTouchInFrame: .phaseOrder
        case .missingSamples: .missingSamples
        case .invalidSample: .invalidValue
        case .unknownEstimationIndex: .unknownEstimationIndex
        case .tooManyTouches: .tooManyTouches
        case .strokeTooLong: .strokeTooLong
        case .frameTooLarge: .frameTooLarge
        case .boardFull: .boardFull
        case .unknownStroke: .unknownStroke
        case .notYours: .forbidden
        case .invalidEdit: .invalidValue
        }
    }

    public var description: String {
        switch self {
        case .unknownTouch(let touch, let phase): "\(phase) for touch \(touch), which is not down"
        case .duplicateBegan(let touch): "began for touch \(touch), which is already down"
        case .duplicateTouchInFrame(let touch): "touch \(touch) appears twice in one frame"
        case .missingSamples(let touch, let phase): "\(phase) for touch \(touch) carries no sample"
        case .invalidSample(let touch, let problem): "touch \(touch): \(problem)"
        case .unknownEstimationIndex(let touch, let index):
            "touch \(touch): no sample with estimation index \(index) in its active stroke"
        case .tooManyTouches(let limit): "more than \(limit) touches down at once"
        case .strokeTooLong(let touch, let limit): "touch \(touch): stroke longer than \(limit) samples"
        case .frameTooLarge(let what, let limit): "frame too large: more than \(limit) \(what)"
        case .boardFull(let limit):
            "the board holds its maximum of \(limit) samples: no new stroke until strokes are cleared (strokes in progress may end)"
        case .unknownStroke(let id): "stroke \(id) is not an accepted stroke of this board (or is named twice)"
        case .notYours(let id): "stroke \(id) is another user's: erasing or editing it needs the right to clear the board"
        case .invalidEdit(let reason): "edit refused: \(reason)"
        }
    }
}

/// Error codes shared by the model and the wire (`touchsync.v1.ErrorCode`).
public enum ErrorCode: Int, Sendable, CaseIterable {
    case malformed = 1
    case unsupportedVersion = 2
    case notWelcomed = 3
    case unknownBoard = 4
    case unknownTouch = 5
    case phaseOrder = 6
    case missingSamples = 7
    case invalidValue = 8
    case unknownEstimationIndex = 9
    case tooManyTouches = 10
    case strokeTooLong = 11
    case frameTooLarge = 12
    case messageTooLarge = 13
    case rateLimited = 14
    case internalError = 15
    case outOfOrder = 16
    /// A hello whose resume_after the hub cannot honour for its session: start a new session.
    case cannotResume = 17
    /// The hub cannot make this board's frames durable (the board's journal
    /// failed; it retries): nothing more is acknowledged until it works again.
    case storageUnavailable = 18
    /// The hub is behind (overloaded): the agent's messages are queued, not
    /// lost. Not a refusal: keep waiting for acks without reconnecting.
    case busy = 19
    /// A new stroke on a board at its size limit (strokes in progress may end).
    case boardFull = 20
    /// More message bytes per second than the agent's allowance.
    case byteRateLimited = 21
    /// The authenticated user may not do this on this board (its role in the access list).
    case forbidden = 22
    /// A board the cluster file gives to another hub (the message names it).
    case wrongHub = 23
    /// An erase naming a stroke the board does not hold as accepted.
    case unknownStroke = 24
}

extension ErrorCode {
    /// The code's name in docs/protocol.md ("Error codes") and on the browser
    /// wire: written out, so that renaming a case never changes the protocol.
    public var protocolName: String {
        switch self {
        case .malformed: "MALFORMED"
        case .unsupportedVersion: "UNSUPPORTED_VERSION"
        case .notWelcomed: "NOT_WELCOMED"
        case .unknownBoard: "UNKNOWN_BOARD"
        case .unknownTouch: "UNKNOWN_TOUCH"
        case .phaseOrder: "PHASE_ORDER"
        case .missingSamples: "MISSING_SAMPLES"
        case .invalidValue: "INVALID_VALUE"
        case .unknownEstimationIndex: "UNKNOWN_ESTIMATION_INDEX"
        case .tooManyTouches: "TOO_MANY_TOUCHES"
        case .strokeTooLong: "STROKE_TOO_LONG"
        case .frameTooLarge: "FRAME_TOO_LARGE"
        case .messageTooLarge: "MESSAGE_TOO_LARGE"
        case .rateLimited: "RATE_LIMITED"
        case .internalError: "INTERNAL"
        case .outOfOrder: "OUT_OF_ORDER"
        case .cannotResume: "CANNOT_RESUME"
        case .storageUnavailable: "STORAGE_UNAVAILABLE"
        case .busy: "BUSY"
        case .boardFull: "BOARD_FULL"
        case .byteRateLimited: "BYTE_RATE_LIMITED"
        case .forbidden: "FORBIDDEN"
        case .wrongHub: "WRONG_HUB"
        case .unknownStroke: "UNKNOWN_STROKE"
        }
    }
}

/// A diff that does not fit the replica's state: something was missed,
/// repeated or corrupted. The replica must resync from a snapshot.
public enum ReplicaError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The batch is not the next one (a gap, or a repeat).
    case sequenceGap(expected: UInt64, received: UInt64)
    case unknownStroke(StrokeID)
    case unexpectedStrokeID(expected: StrokeID, received: StrokeID)
    case touchAlreadyDown(UserNamespace, TouchID)
    case wrongOffset(StrokeID, expected: Int, received: Int)
    case wrongAcceptPosition(expected: UInt64, received: UInt64)
    /// A snapshot whose parts contradict each other.
    case inconsistentSnapshot(String)

    public var description: String {
        switch self {
        case .sequenceGap(let expected, let received): "expected batch \(expected), received \(received)"
        case .unknownStroke(let id): "no active stroke \(id)"
        case .unexpectedStrokeID(let expected, let received): "expected new stroke \(expected), received \(received)"
        case .touchAlreadyDown(let owner, let touch): "touch \(touch) of \(owner) is already down"
        case .wrongOffset(let id, let expected, let received): "stroke \(id): expected offset \(expected), received \(received)"
        case .wrongAcceptPosition(let expected, let received): "expected accept position \(expected), received \(received)"
        case .inconsistentSnapshot(let why): "inconsistent snapshot: \(why)"
        }
    }
}
