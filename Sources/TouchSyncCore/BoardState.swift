/// A stroke: the path one touch drew, from began to ended.
public struct Stroke: Sendable, Equatable {
    public let id: StrokeID
    public let owner: UserNamespace
    public let touch: TouchID
    public let style: StrokeStyle
    public var samples: [Sample]
    /// The predicted tail; always empty once accepted.
    public var predicted: [Sample]
    /// The place in the accepted order, nil while in progress.
    public var acceptedPosition: UInt64?

    public init(
        id: StrokeID, owner: UserNamespace, touch: TouchID, style: StrokeStyle, samples: [Sample] = [],
        predicted: [Sample] = [], acceptedPosition: UInt64? = nil
    ) {
        self.id = id
        self.owner = owner
        self.touch = touch
        self.style = style
        self.samples = samples
        self.predicted = predicted
        self.acceptedPosition = acceptedPosition
    }

    public var isActive: Bool { acceptedPosition == nil }
}

/// A live touch as the seed app's gray spot shows it: where the finger is now.
public struct TouchSpot: Sendable, Equatable {
    public let owner: UserNamespace
    public let touch: TouchID
    public let stroke: StrokeID
    public let x: Int32
    public let y: Int32

    public init(owner: UserNamespace, touch: TouchID, stroke: StrokeID, x: Int32, y: Int32) {
        self.owner = owner
        self.touch = touch
        self.stroke = stroke
        self.x = x
        self.y = y
    }
}

/// The visible state of one board: each user's namespaced touch dictionary,
/// the strokes in progress (in begin order) and the accepted strokes (in
/// acceptance order).
///
/// `apply(_:)` is the only way strokes change, for the hub and for every
/// replica alike, so a replica that applies the hub's diffs in order holds
/// exactly the hub's state. The hub reaches it through `reduce`, which first
/// validates a whole frame and only then emits and applies its diffs.
public struct BoardState: Sendable, Equatable {
    /// The sequence number of the last batch this state includes.
    public internal(set) var sequence: UInt64 = 0
    public internal(set) var activeStrokes: [StrokeID: Stroke] = [:]
    public internal(set) var acceptedStrokes: [Stroke] = []
    /// User namespace, then touch id, then the active stroke that touch draws.
    public internal(set) var touches: [UserNamespace: [TouchID: StrokeID]] = [:]
    public internal(set) var nextStrokeID = StrokeID(1)
    public internal(set) var nextAcceptPosition: UInt64 = 1
    public var limits: BoardLimits

    public init(limits: BoardLimits = BoardLimits()) {
        self.limits = limits
    }

    // MARK: Views

    /// Strokes in progress, oldest first (stroke ids are assigned in begin order).
    public var orderedActiveStrokes: [Stroke] {
        activeStrokes.values.sorted { $0.id < $1.id }
    }

    /// One spot per live touch, at its latest (not predicted) sample.
    public var touchSpots: [TouchSpot] {
        orderedActiveStrokes.compactMap { stroke in
            stroke.samples.last.map {
                TouchSpot(owner: stroke.owner, touch: stroke.touch, stroke: stroke.id, x: $0.x, y: $0.y)
            }
        }
    }

    public var liveTouchCount: Int { activeStrokes.count }

    /// Samples stored in active and accepted strokes (predicted tails excluded).
    public var storedSampleCount: Int {
        activeStrokes.values.reduce(0) { $0 + $1.samples.count } + acceptedStrokes.reduce(0) { $0 + $1.samples.count }
    }

    // MARK: Applying diffs

    /// Applies the next batch. A batch that is not the next one is refused
    /// with nothing changed; a diff that does not fit throws, and the state
    /// must then be replaced from a snapshot (it has diverged).
    public mutating func apply(_ batch: DiffBatch) throws(ReplicaError) {
        guard batch.sequence == sequence &+ 1 else {
            throw .sequenceGap(expected: sequence &+ 1, received: batch.sequence)
        }
        for diff in batch.diffs { try apply(diff) }
        sequence = batch.sequence
    }

    /// The Clone pattern's rule for a subscriber that loaded a snapshot at
    /// sequence S while diffs kept arriving: batches up to S are already in
    /// the state and are skipped (returns false); the next one is applied.
    @discardableResult
    public mutating func applyIfNew(_ batch: DiffBatch) throws(ReplicaError) -> Bool {
        if batch.sequence <= sequence { return false }
        try apply(batch)
        return true
    }

    /// Applies one diff, checking that it fits; the checked condition is
    /// tested before anything changes, so a refused diff changes nothing.
    public mutating func apply(_ diff: StrokeDiff) throws(ReplicaError) {
        switch diff {
        case .began(let id, let owner, let touch, let style):
            guard id == nextStrokeID else { throw .unexpectedStrokeID(expected: nextStrokeID, received: id) }
            guard touches[owner]?[touch] == nil else { throw .touchAlreadyDown(owner, touch) }
            activeStrokes[id] = Stroke(id: id, owner: owner, touch: touch, style: style)
            touches[owner, default: [:]][touch] = id
            nextStrokeID = StrokeID(id.rawValue + 1)

        case .appended(let id, let offset, let samples):
            guard let count = activeStrokes[id]?.samples.count else { throw .unknownStroke(id) }
            guard offset == count else { throw .wrongOffset(id, expected: count, received: offset) }
            activeStrokes[id]!.samples.append(contentsOf: samples)

        case .predicted(let id, let samples):
            guard activeStrokes[id] != nil else { throw .unknownStroke(id) }
            activeStrokes[id]!.predicted = samples

        case .amended(let id, let offset, let sample):
            guard let count = activeStrokes[id]?.samples.count else { throw .unknownStroke(id) }
            guard offset >= 0 && offset < count else { throw .wrongOffset(id, expected: count - 1, received: offset) }
            activeStrokes[id]!.samples[offset] = sample

        case .accepted(let id, let position):
            guard activeStrokes[id] != nil else { throw .unknownStroke(id) }
            guard position == nextAcceptPosition else {
                throw .wrongAcceptPosition(expected: nextAcceptPosition, received: position)
            }
            var stroke = removeActive(id)
            stroke.predicted = []
            stroke.acceptedPosition = position
            acceptedStrokes.append(stroke)
            nextAcceptPosition = position + 1

        case .cancelled(let id):
            guard activeStrokes[id] != nil else { throw .unknownStroke(id) }
            removeActive(id)

        case .cleared(let owner):
            if let owner {
                acceptedStrokes.removeAll { $0.owner == owner }
            } else {
                acceptedStrokes.removeAll()
            }
        }
    }

    @discardableResult
    private mutating func removeActive(_ id: StrokeID) -> Stroke {
        let stroke = activeStrokes.removeValue(forKey: id)!
        touches[stroke.owner]![stroke.touch] = nil
        if touches[stroke.owner]!.isEmpty { touches[stroke.owner] = nil }
        return stroke
    }

    /// Emits a diff the hub itself produced and applies it. The reducer has
    /// validated the input already, so a diff that does not fit here is a bug
    /// in the reducer, not bad input.
    @usableFromInline
    mutating func emit(_ diff: StrokeDiff, into diffs: inout [StrokeDiff]) {
        do {
            try apply(diff)
        } catch {
            preconditionFailure("the reducer produced a diff that does not fit its own state: \(error)")
        }
        diffs.append(diff)
    }

    /// Stamps the diffs emitted since the last batch with the next sequence
    /// number. The hub calls this once per step, for a non-empty step.
    public mutating func sealBatch(_ diffs: [StrokeDiff], hubTime: Int64) -> DiffBatch {
        precondition(!diffs.isEmpty, "an empty step publishes no batch")
        sequence += 1
        return DiffBatch(sequence: sequence, hubTime: hubTime, diffs: diffs)
    }
}
