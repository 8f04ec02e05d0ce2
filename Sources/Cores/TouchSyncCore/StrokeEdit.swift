/// One edit of accepted strokes as a single operation (the whiteboard's
/// selection): move and scale, recolour, delete, or add transformed copies.
///
/// Replicas need nothing new: a changed stroke is `removed` then `restored`
/// (same id, owner and place in the acceptance order), a copy is a stroke
/// `began`, `appended` and `accepted` at once. Undo keeps an `EditRecord`.
public struct StrokeEdit: Sendable, Equatable {
    public enum Change: Sendable, Equatable {
        case transform(StrokeTransform)
        case recolour(rgba: UInt32)
        case delete
        case duplicate(StrokeTransform)
    }

    /// The strokes, in the order copies are made.
    public var strokes: [StrokeID]
    public var change: Change

    public init(strokes: [StrokeID], change: Change) {
        self.strokes = strokes
        self.change = change
    }

    /// Most strokes one edit may name (as for an erase).
    public static let maxStrokes = BoardState.maxErasedStrokes
}

/// p ↦ origin + (p − origin) × scale + offset, in sample units, rounded.
public struct StrokeTransform: Sendable, Equatable {
    public var offsetX: Int32
    public var offsetY: Int32
    public var scale: Double
    public var originX: Int32
    public var originY: Int32

    public init(offsetX: Int32 = 0, offsetY: Int32 = 0, scale: Double = 1, originX: Int32 = 0, originY: Int32 = 0) {
        self.offsetX = offsetX
        self.offsetY = offsetY
        self.scale = scale
        self.originX = originX
        self.originY = originY
    }

    /// The scales an edit may apply (a selection 64 times smaller or larger).
    public static let scales: ClosedRange<Double> = (1.0 / 64)...64

    /// Where `sample` goes (its other fields kept), or nil when that leaves
    /// the coordinates samples may have.
    @inlinable
    public func apply(to sample: Sample) -> Sample? {
        let limit = Double(Sample.maxCoordinateUnits)
        let x = (Double(originX) + Double(sample.x - originX) * scale + Double(offsetX)).rounded()
        let y = (Double(originY) + Double(sample.y - originY) * scale + Double(offsetY)).rounded()
        guard abs(x) <= limit, abs(y) <= limit else { return nil }
        var moved = sample
        moved.x = Int32(x)
        moved.y = Int32(y)
        return moved
    }
}

/// What an edit did, for its undo: the strokes as they were before (those it
/// changed or deleted) and the ids it left on the board (changed strokes and
/// copies). Undoing is the same kind of change the other way round.
public struct EditRecord: Sendable, Equatable {
    public var before: [Stroke]
    public var after: [StrokeID]
    /// The board's next accept position once the edit was made: the user's
    /// strokes accepted later have this position or above.
    public var mark: UInt64
}

extension BoardState {
    /// Applies `edit` by `user` (the strokes must be theirs unless
    /// `anyOwner`); validated whole first, so a refused edit changes nothing.
    public mutating func edit(
        _ edit: StrokeEdit, by user: UserNamespace, anyOwner: Bool, into diffs: inout [StrokeDiff]
    ) throws(TouchInputError) -> EditRecord {
        guard !edit.strokes.isEmpty else { throw .invalidEdit("an edit names at least one stroke") }
        guard edit.strokes.count <= StrokeEdit.maxStrokes else { throw .frameTooLarge("strokes in one edit", limit: StrokeEdit.maxStrokes) }
        var index: [StrokeID: Int] = [:]
        index.reserveCapacity(acceptedStrokes.count)
        for (offset, stroke) in acceptedStrokes.enumerated() { index[stroke.id] = offset }
        var named = Set<StrokeID>()
        var strokes: [Stroke] = []
        strokes.reserveCapacity(edit.strokes.count)
        for id in edit.strokes {
            guard named.insert(id).inserted, let offset = index[id] else { throw .unknownStroke(id) }
            let stroke = acceptedStrokes[offset]
            guard anyOwner || stroke.owner == user else { throw .notYours(id) }
            strokes.append(stroke)
        }
        // Every new stroke is computed before anything is emitted.
        var replaced: [Stroke] = []
        switch edit.change {
        case .transform(let transform), .duplicate(let transform):
            guard transform.scale.isFinite, StrokeTransform.scales.contains(transform.scale) else {
                throw .invalidEdit("scale must be finite, from 1/64 to 64")
            }
            replaced.reserveCapacity(strokes.count)
            for stroke in strokes {
                var samples: [Sample] = []
                samples.reserveCapacity(stroke.samples.count)
                for sample in stroke.samples {
                    guard let moved = transform.apply(to: sample) else {
                        throw .invalidEdit("stroke \(stroke.id) would leave the board's ±\(Int(Sample.maxCoordinatePoints)) points")
                    }
                    samples.append(moved)
                }
                replaced.append(
                    Stroke(
                        id: stroke.id, owner: stroke.owner, touch: stroke.touch, style: stroke.style, samples: samples,
                        acceptedPosition: stroke.acceptedPosition))
            }
        case .recolour(let rgba):
            replaced = strokes.map { stroke in
                Stroke(
                    id: stroke.id, owner: stroke.owner, touch: stroke.touch, style: StrokeStyle(rgba: rgba, width: stroke.style.width),
                    samples: stroke.samples, acceptedPosition: stroke.acceptedPosition)
            }
        case .delete:
            break
        }
        if case .duplicate = edit.change {
            let added = replaced.reduce(0) { $0 + $1.samples.count }
            guard storedSampleCount + added <= limits.maxSamplesPerBoard else { throw .boardFull(limit: limits.maxSamplesPerBoard) }
            var after: [StrokeID] = []
            var touch: TouchID = 1 << 32  // agents' touches stay below: a copy never meets a finger
            for copy in replaced {
                while touches[user]?[touch] != nil { touch += 1 }
                let id = nextStrokeID
                emit(.began(id, owner: user, touch: touch, style: copy.style), into: &diffs)
                emit(.appended(id, offset: 0, samples: Array(copy.samples)), into: &diffs)
                emit(.accepted(id, position: nextAcceptPosition), into: &diffs)
                after.append(id)
            }
            return EditRecord(before: [], after: after, mark: nextAcceptPosition)
        }
        for id in edit.strokes { emit(.removed(id), into: &diffs) }
        for stroke in replaced { emit(.restored(stroke), into: &diffs) }
        return EditRecord(before: strokes, after: replaced.map(\.id), mark: nextAcceptPosition)
    }

    /// Undoes `record` as far as the board still allows: the strokes it
    /// left that are still here are removed, and its `before` strokes come
    /// back where their id is free (a changed stroke someone removed since
    /// stays removed). Returns the record that redoes it.
    public mutating func revert(_ record: EditRecord, into diffs: inout [StrokeDiff]) -> EditRecord {
        var present: [StrokeID: Stroke] = [:]
        for stroke in acceptedStrokes { present[stroke.id] = stroke }
        let leftHere = Set(record.after)
        var removed: [Stroke] = []
        for id in record.after {
            guard let stroke = present.removeValue(forKey: id) else { continue }
            emit(.removed(id), into: &diffs)
            removed.append(stroke)
        }
        let removedIDs = Set(removed.map(\.id))
        var restored: [StrokeID] = []
        for stroke in record.before {
            // A changed stroke comes back only in place of its current version;
            // a deleted one only while its id is free.
            let comesBack = leftHere.contains(stroke.id) ? removedIDs.contains(stroke.id) : present[stroke.id] == nil
            guard comesBack, let position = stroke.acceptedPosition, position < nextAcceptPosition else { continue }
            emit(.restored(stroke), into: &diffs)
            restored.append(stroke.id)
        }
        return EditRecord(before: removed, after: restored, mark: nextAcceptPosition)
    }
}
