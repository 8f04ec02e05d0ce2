/// A board's whole state at one sequence number: what a late subscriber
/// loads before applying the diffs that follow it.
public struct BoardSnapshot: Sendable, Equatable {
    public var sequence: UInt64
    public var nextStrokeID: StrokeID
    public var nextAcceptPosition: UInt64
    /// Strokes in progress, in begin order.
    public var activeStrokes: [Stroke]
    /// Accepted strokes, in acceptance order.
    public var acceptedStrokes: [Stroke]

    public init(
        sequence: UInt64, nextStrokeID: StrokeID, nextAcceptPosition: UInt64, activeStrokes: [Stroke],
        acceptedStrokes: [Stroke]
    ) {
        self.sequence = sequence
        self.nextStrokeID = nextStrokeID
        self.nextAcceptPosition = nextAcceptPosition
        self.activeStrokes = activeStrokes
        self.acceptedStrokes = acceptedStrokes
    }
}

extension BoardState {
    public func snapshot() -> BoardSnapshot {
        BoardSnapshot(
            sequence: sequence, nextStrokeID: nextStrokeID, nextAcceptPosition: nextAcceptPosition,
            activeStrokes: orderedActiveStrokes, acceptedStrokes: acceptedStrokes)
    }

    /// Loads a snapshot, refusing one whose parts contradict each other
    /// (it came from a corrupt or hostile source). Accepted strokes are
    /// packed as the board keeps them, unless `packing` is false: then the
    /// caller packs them with `packAcceptedStrokes()` (after checking the
    /// digest, which is cheaper over unpacked samples).
    public init(snapshot: BoardSnapshot, limits: BoardLimits = BoardLimits(), packing: Bool = true) throws(ReplicaError) {
        self.init(limits: limits)
        strokeIDBase = snapshot.activeStrokes.first?.id.rawValue ?? snapshot.nextStrokeID.rawValue
        guard strokeIDBase >= 1, snapshot.nextStrokeID.rawValue >= strokeIDBase,
            snapshot.nextStrokeID.rawValue - strokeIDBase <= Self.maxActiveStrokeIDSpan
        else {
            throw .inconsistentSnapshot("active stroke ids span more than \(Self.maxActiveStrokeIDSpan) strokes")
        }
        var previousID = StrokeID(0)
        for stroke in snapshot.activeStrokes {
            guard stroke.id > previousID, stroke.id < snapshot.nextStrokeID else {
                throw .inconsistentSnapshot("active stroke \(stroke.id) out of order or not yet assigned")
            }
            guard stroke.acceptedPosition == nil else {
                throw .inconsistentSnapshot("active stroke \(stroke.id) has an accept position")
            }
            guard touches[stroke.owner]?[stroke.touch] == nil else {
                throw .inconsistentSnapshot("touch \(stroke.touch) of \(stroke.owner) draws two strokes")
            }
            touches[stroke.owner, default: [:]][stroke.touch] = stroke.id
            insertActive(stroke)
            previousID = stroke.id
        }
        var previousPosition: UInt64 = 0
        for stroke in snapshot.acceptedStrokes {
            guard let position = stroke.acceptedPosition, position > previousPosition,
                position < snapshot.nextAcceptPosition, stroke.id < snapshot.nextStrokeID
            else {
                throw .inconsistentSnapshot("accepted stroke \(stroke.id) out of order")
            }
            guard stroke.predicted.isEmpty else {
                throw .inconsistentSnapshot("accepted stroke \(stroke.id) keeps a prediction")
            }
            guard slot(of: stroke.id) == nil else {
                throw .inconsistentSnapshot("stroke \(stroke.id) is both active and accepted")
            }
            previousPosition = position
        }
        acceptedStrokes = snapshot.acceptedStrokes
        if packing { packAcceptedStrokes() }
        storedSampleCount =
            snapshot.activeStrokes.reduce(0) { $0 + $1.samples.count } + snapshot.acceptedStrokes.reduce(0) { $0 + $1.samples.count }
        acceptedSamplesByOwner = [:]
        for stroke in snapshot.acceptedStrokes { countAccepted(stroke.samples.count, of: stroke.owner) }
        nextStrokeID = snapshot.nextStrokeID
        nextAcceptPosition = snapshot.nextAcceptPosition
        sequence = snapshot.sequence
    }
}

extension BoardState {
    /// Packs the accepted strokes that are not yet packed (see `init(snapshot:limits:packing:)`).
    public mutating func packAcceptedStrokes() {
        for index in acceptedStrokes.indices where !acceptedStrokes[index].samples.isPacked {
            acceptedStrokes[index].samples.pack()
        }
    }
}
