import TouchSyncCore

/// An independent, deliberately naive model of the seed app (TouchTrackerView):
/// a dictionary of in-progress paths keyed by (user, touch) and an array of
/// accepted strokes. It shares no code with BoardState, so agreement between
/// the two checks the reducer's semantics, not just its self-consistency.
struct ReferenceBoard {
    struct Path: Equatable {
        var owner: String
        var touch: UInt64
        var style: StrokeStyle
        var samples: [Sample]
        var predicted: [Sample]
        var began: Int  // global begin counter, for ordering
        var accepted = 0  // global accept counter, for restoring undone strokes in place
    }

    var touchPaths: [String: Path] = [:]  // "user/touch"
    var strokes: [Path] = []
    var begins = 0
    var accepts = 0
    /// Per user, the strokes undone and not redone yet (most recent last).
    var undone: [String: [Path]] = [:]

    mutating func handle(_ frame: TouchFrame, from user: String, style: StrokeStyle) {
        for change in frame.changes {
            let key = "\(user)/\(change.touch)"
            switch change.phase {
            case .began:
                begins += 1
                touchPaths[key] = Path(
                    owner: user, touch: change.touch, style: style, samples: change.samples,
                    predicted: change.predicted, began: begins)
                amend(key, change.amendments)
            case .moved, .stationary:
                touchPaths[key]!.samples += change.samples
                amend(key, change.amendments)
                touchPaths[key]!.predicted = change.predicted
            case .ended:
                touchPaths[key]!.samples += change.samples
                amend(key, change.amendments)
                var path = touchPaths.removeValue(forKey: key)!
                path.predicted = []
                accepts += 1
                path.accepted = accepts
                strokes.append(path)
                undone[user] = nil  // a new stroke ends what could be redone
            case .cancelled:
                touchPaths[key] = nil
            }
        }
        if let alive = frame.aliveTouches {
            for (key, path) in touchPaths where path.owner == user && !alive.contains(path.touch) {
                touchPaths[key] = nil
            }
        }
    }

    private mutating func amend(_ key: String, _ amendments: [Sample]) {
        for amendment in amendments {
            let index = touchPaths[key]!.samples.lastIndex { $0.estimationIndex == amendment.estimationIndex }!
            touchPaths[key]!.samples[index] = amendment
        }
    }

    mutating func clear(_ scope: ClearScope, by user: String) {
        strokes.removeAll { scope == .board || $0.owner == user }
        if scope == .board { undone.removeAll() } else { undone[user] = nil }
    }

    mutating func undo(by user: String) {
        guard let index = strokes.lastIndex(where: { $0.owner == user }) else { return }
        undone[user, default: []].append(strokes.remove(at: index))
    }

    mutating func redo(by user: String) {
        guard let path = undone[user]?.popLast() else { return }
        strokes.insert(path, at: strokes.firstIndex { $0.accepted > path.accepted } ?? strokes.count)
    }

    /// Erase by position in the accepted list (the reference has no stroke ids).
    mutating func erase(at indices: [Int]) {
        for index in indices.sorted(by: >) { strokes.remove(at: index) }
    }

    /// In-progress paths in begin order.
    var activePaths: [Path] { touchPaths.values.sorted { $0.began < $1.began } }
}

extension ReferenceBoard.Path {
    init(_ stroke: Stroke, began: Int = 0) {
        self.init(
            owner: stroke.owner.rawValue, touch: stroke.touch, style: stroke.style, samples: Array(stroke.samples),
            predicted: stroke.predicted, began: began)
    }

    /// Compares everything but the begin counter, which only the reference has.
    func sameStroke(as other: Self) -> Bool {
        owner == other.owner && touch == other.touch && style == other.style && samples == other.samples
            && predicted == other.predicted
    }
}
