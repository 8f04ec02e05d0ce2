/// A stroke: the path one touch drew, from began to ended.
public struct Stroke: Sendable, Equatable {
    public let id: StrokeID
    public let owner: UserNamespace
    public let touch: TouchID
    public let style: StrokeStyle
    public var samples: StrokeSamples
    /// The predicted tail; always empty once accepted.
    public var predicted: [Sample]
    /// The place in the accepted order, nil while in progress.
    public var acceptedPosition: UInt64?

    public init(
        id: StrokeID, owner: UserNamespace, touch: TouchID, style: StrokeStyle, samples: [Sample] = [],
        predicted: [Sample] = [], acceptedPosition: UInt64? = nil
    ) {
        self.init(
            id: id, owner: owner, touch: touch, style: style, samples: StrokeSamples(samples), predicted: predicted,
            acceptedPosition: acceptedPosition)
    }

    public init(
        id: StrokeID, owner: UserNamespace, touch: TouchID, style: StrokeStyle, samples: StrokeSamples,
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
public struct BoardState: Sendable {
    /// The sequence number of the last batch this state includes.
    public internal(set) var sequence: UInt64 = 0
    public internal(set) var acceptedStrokes: [Stroke] = []
    /// User namespace, then touch id, then the active stroke that touch draws.
    public internal(set) var touches: [UserNamespace: [TouchID: StrokeID]] = [:]
    public internal(set) var nextStrokeID = StrokeID(1)
    public internal(set) var nextAcceptPosition: UInt64 = 1
    public var limits: BoardLimits

    // Active strokes live in a slab: mutating one is an array subscript, while
    // mutating a dictionary value in place goes through a `_modify` coroutine
    // whose frame is heap-allocated (one malloc per sample batch, measured).
    @usableFromInline var slots: [Stroke?] = []
    var freeSlots: [Int] = []
    /// The slot of every stroke begun since `strokeIDBase`, by id - base (-1
    /// once it has left the active strokes). Ids are dense and hub-assigned,
    /// so an array beats a dictionary: no hashing, 4 bytes per stroke.
    @usableFromInline var slotOfStroke: [Int32] = []
    /// The first id `slotOfStroke` covers: 1, or a loaded snapshot's oldest active stroke.
    @usableFromInline var strokeIDBase: UInt64 = 1
    /// The widest span of stroke ids a snapshot's active strokes may cover (64 Mi strokes, 256 MiB of index).
    public static let maxActiveStrokeIDSpan: UInt64 = 1 << 26
    @usableFromInline var activeCount = 0

    public init(limits: BoardLimits = BoardLimits()) {
        self.limits = limits
    }

    // MARK: Views

    /// The active stroke `id`, if it is in progress.
    @inlinable
    public func activeStroke(_ id: StrokeID) -> Stroke? {
        slot(of: id).flatMap { slots[$0] }
    }

    /// The slab slot of active stroke `id`.
    @inlinable
    func slot(of id: StrokeID) -> Int? {
        let index = id.rawValue &- strokeIDBase
        guard index < UInt64(slotOfStroke.count) else { return nil }
        let slot = slotOfStroke[Int(index)]
        return slot >= 0 ? Int(slot) : nil
    }

    /// Strokes in progress by id (a copy: for inspection, not hot paths).
    public var activeStrokes: [StrokeID: Stroke] {
        Dictionary(uniqueKeysWithValues: slots.lazy.compactMap { $0 }.map { ($0.id, $0) })
    }

    /// The ids of the strokes in progress, ascending (without copying the strokes).
    public var activeStrokeIDs: [StrokeID] {
        var ids: [StrokeID] = []
        ids.reserveCapacity(activeCount)
        for index in slots.indices { if let id = slots[index]?.id { ids.append(id) } }
        return ids.sorted()
    }

    /// Strokes in progress, oldest first (stroke ids are assigned in begin order).
    public var orderedActiveStrokes: [Stroke] {
        slots.compactMap { $0 }.sorted { $0.id < $1.id }
    }

    /// One spot per live touch, at its latest (not predicted) sample.
    public var touchSpots: [TouchSpot] {
        orderedActiveStrokes.compactMap { stroke in
            stroke.samples.last.map {
                TouchSpot(owner: stroke.owner, touch: stroke.touch, stroke: stroke.id, x: $0.x, y: $0.y)
            }
        }
    }

    public var liveTouchCount: Int { activeCount }

    /// Samples stored in active and accepted strokes (predicted tails
    /// excluded), kept as diffs apply: the board-size limit reads it per frame.
    public internal(set) var storedSampleCount = 0
    /// Samples in accepted strokes, per owner (owners with none are absent):
    /// the hub's quota of samples per user over all its boards reads it.
    /// Counted per stroke as it is accepted or removed, not per append (a
    /// hash of the owner per append cost reduce 10-20%).
    public internal(set) var acceptedSamplesByOwner: [UserNamespace: Int] = [:]

    /// Samples `owner` has in accepted strokes on this board.
    public func acceptedSamples(of owner: UserNamespace) -> Int { acceptedSamplesByOwner[owner] ?? 0 }

    /// Samples in `owner`'s strokes in progress on this board.
    public func activeSamples(of owner: UserNamespace) -> Int {
        guard let touches = touches[owner] else { return 0 }
        var count = 0
        for id in touches.values { if let slot = slot(of: id) { count += slots[slot]!.samples.count } }
        return count
    }

    mutating func countAccepted(_ count: Int, of owner: UserNamespace) {
        guard count != 0 else { return }
        let total = (acceptedSamplesByOwner[owner] ?? 0) + count
        acceptedSamplesByOwner[owner] = total == 0 ? nil : total
    }

    /// Removes every stroke's predicted tail: a replica of a stream without
    /// predictions loads a snapshot (which has them) and then holds none.
    public mutating func removePredictions() {
        for slot in slots.indices where slots[slot]?.predicted.isEmpty == false { slots[slot]!.predicted = [] }
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
            insertActive(Stroke(id: id, owner: owner, touch: touch, style: style))
            touches[owner, default: [:]][touch] = id
            nextStrokeID = StrokeID(id.rawValue + 1)

        case .appended(let id, let offset, let samples):
            guard let slot = slot(of: id) else { throw .unknownStroke(id) }
            let count = slots[slot]!.samples.count
            guard offset == count else { throw .wrongOffset(id, expected: count, received: offset) }
            slots[slot]!.samples.append(contentsOf: samples)
            storedSampleCount += samples.count

        case .predicted(let id, let samples):
            guard let slot = slot(of: id) else { throw .unknownStroke(id) }
            slots[slot]!.predicted = samples

        case .amended(let id, let offset, let sample):
            guard let slot = slot(of: id) else { throw .unknownStroke(id) }
            let count = slots[slot]!.samples.count
            guard offset >= 0 && offset < count else { throw .wrongOffset(id, expected: count - 1, received: offset) }
            slots[slot]!.samples[offset] = sample

        case .accepted(let id, let position):
            guard slot(of: id) != nil else { throw .unknownStroke(id) }
            guard position == nextAcceptPosition else {
                throw .wrongAcceptPosition(expected: nextAcceptPosition, received: position)
            }
            var stroke = removeActive(id)
            stroke.predicted = []
            stroke.acceptedPosition = position
            // Accepted strokes no longer grow: the board keeps them packed.
            stroke.samples.pack()
            countAccepted(stroke.samples.count, of: stroke.owner)
            acceptedStrokes.append(stroke)
            nextAcceptPosition = position + 1

        case .cancelled(let id):
            guard slot(of: id) != nil else { throw .unknownStroke(id) }
            storedSampleCount -= removeActive(id).samples.count

        case .removed(let id):
            guard let index = acceptedStrokes.firstIndex(where: { $0.id == id }) else { throw .unknownStroke(id) }
            let stroke = acceptedStrokes.remove(at: index)
            storedSampleCount -= stroke.samples.count
            countAccepted(-stroke.samples.count, of: stroke.owner)

        case .restored(let stroke):
            guard let position = stroke.acceptedPosition, position < nextAcceptPosition, stroke.id < nextStrokeID,
                stroke.predicted.isEmpty, slot(of: stroke.id) == nil, !acceptedStrokes.contains(where: { $0.id == stroke.id })
            else { throw .unexpectedStrokeID(expected: nextStrokeID, received: stroke.id) }
            // Accepted strokes stay in position order: find its place.
            var low = 0
            var high = acceptedStrokes.count
            while low < high {
                let middle = (low + high) / 2
                if acceptedStrokes[middle].acceptedPosition! < position { low = middle + 1 } else { high = middle }
            }
            guard low == acceptedStrokes.count || acceptedStrokes[low].acceptedPosition! != position else {
                throw .wrongAcceptPosition(expected: nextAcceptPosition, received: position)
            }
            var packed = stroke
            packed.samples.pack()
            acceptedStrokes.insert(packed, at: low)
            storedSampleCount += stroke.samples.count
            countAccepted(stroke.samples.count, of: stroke.owner)

        case .cleared(let owner):
            if let owner {
                var removed = 0
                acceptedStrokes.removeAll { stroke in
                    guard stroke.owner == owner else { return false }
                    removed += stroke.samples.count
                    return true
                }
                storedSampleCount -= removed
                countAccepted(-removed, of: owner)
            } else {
                for stroke in acceptedStrokes { storedSampleCount -= stroke.samples.count }
                acceptedStrokes.removeAll()
                acceptedSamplesByOwner.removeAll()
            }
        }
    }

    /// Makes `stroke` active. Its id must be new (callers check it against `nextStrokeID`).
    mutating func insertActive(_ stroke: Stroke) {
        let index = Int(stroke.id.rawValue - strokeIDBase)
        if slotOfStroke.count <= index {
            slotOfStroke.append(contentsOf: repeatElement(-1, count: index + 1 - slotOfStroke.count))
        }
        if let slot = freeSlots.popLast() {
            slots[slot] = stroke
            slotOfStroke[index] = Int32(slot)
        } else {
            slotOfStroke[index] = Int32(slots.count)
            slots.append(stroke)
        }
        activeCount += 1
    }

    @discardableResult
    private mutating func removeActive(_ id: StrokeID) -> Stroke {
        let slot = slot(of: id)!
        slotOfStroke[Int(id.rawValue - strokeIDBase)] = -1
        activeCount -= 1
        let stroke = slots[slot].take()!
        freeSlots.append(slot)
        touches[stroke.owner]![stroke.touch] = nil
        if touches[stroke.owner]!.isEmpty { touches[stroke.owner] = nil }
        return stroke
    }

    /// Emits a diff the hub itself produced and applies it. The reducer has
    /// validated the input already, so a diff that does not fit here is a bug
    /// in the reducer, not bad input.
    @usableFromInline
    mutating func emit(_ diff: consuming StrokeDiff, into diffs: inout [StrokeDiff]) {
        do {
            try apply(diff)
        } catch {
            preconditionFailure("the reducer produced a diff that does not fit its own state: \(error)")
        }
        diffs.append(diff)
    }

    /// Stamps the diffs emitted since the last batch with the next sequence
    /// number. The hub calls this once per step with diffs, or with none when
    /// a durable hub records agents' progress alone (a refused frame, a style).
    public mutating func sealBatch(_ diffs: [StrokeDiff], hubTime: Int64) -> DiffBatch {
        sequence += 1
        return DiffBatch(sequence: sequence, hubTime: hubTime, diffs: diffs)
    }
}

extension BoardState: Equatable {
    /// Equal boards show the same strokes in the same order, whatever slots hold them.
    public static func == (lhs: BoardState, rhs: BoardState) -> Bool {
        lhs.sequence == rhs.sequence && lhs.nextStrokeID == rhs.nextStrokeID
            && lhs.nextAcceptPosition == rhs.nextAcceptPosition && lhs.limits == rhs.limits
            && lhs.touches == rhs.touches && lhs.acceptedStrokes == rhs.acceptedStrokes
            && lhs.activeCount == rhs.activeCount
            && lhs.slots.allSatisfy { stroke in stroke.map { rhs.activeStroke($0.id) == $0 } ?? true }
    }
}
