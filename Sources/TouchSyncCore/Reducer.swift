/// The hub's side of the model: turning one user's input into diffs.
///
/// Every entry point validates first and only then emits, so bad input
/// throws a `TouchInputError` and leaves the board exactly as it was.
extension BoardState {
    /// Reduces one touch frame from `user`. Strokes that begin in it take
    /// `style`. Appends the diffs (already applied) to `diffs`.
    public mutating func reduce(
        _ frame: TouchFrame, from user: UserNamespace, style: StrokeStyle, into diffs: inout [StrokeDiff]
    ) throws(TouchInputError) {
        let userTouches = touches[user] ?? [:]
        try validate(frame, userTouches: userTouches)

        for change in frame.changes {
            switch change.phase {
            case .began:
                let id = nextStrokeID
                emit(.began(id, owner: user, touch: change.touch, style: style), into: &diffs)
                emitSamples(of: change, to: id, into: &diffs)
            case .moved, .stationary:
                emitSamples(of: change, to: userTouches[change.touch]!, into: &diffs)
            case .ended:
                let id = userTouches[change.touch]!
                emitSamples(of: change, to: id, into: &diffs, predictions: false)
                emit(.accepted(id, position: nextAcceptPosition), into: &diffs)
            case .cancelled:
                emit(.cancelled(userTouches[change.touch]!), into: &diffs)
            }
        }

        if let alive = frame.aliveTouches, let remaining = touches[user] {
            // Sorted so the same input always yields the same diffs (dictionary order is per process).
            let vanished = remaining.filter { !alive.contains($0.key) }.map(\.value).sorted()
            for id in vanished { emit(.cancelled(id), into: &diffs) }
        }
    }

    /// Removes accepted strokes (never strokes in progress), as the seed's `clear`.
    public mutating func clear(_ scope: ClearScope, by user: UserNamespace, into diffs: inout [StrokeDiff]) {
        emit(.cleared(owner: scope == .own ? user : nil), into: &diffs)
    }

    /// Cancels every live touch of `user`: the agent went silent or left.
    public mutating func cancelTouches(of user: UserNamespace, into diffs: inout [StrokeDiff]) {
        guard let live = touches[user] else { return }
        for id in live.values.sorted() { emit(.cancelled(id), into: &diffs) }
    }

    // MARK: Emitting

    private mutating func emitSamples(
        of change: TouchChange, to id: StrokeID, into diffs: inout [StrokeDiff], predictions: Bool = true
    ) {
        if !change.samples.isEmpty {
            let offset = activeStrokes[id]!.samples.count
            emit(.appended(id, offset: offset, samples: change.samples), into: &diffs)
        }
        for amendment in change.amendments {
            let offset = activeStrokes[id]!.offset(ofEstimation: amendment.estimationIndex)!
            emit(.amended(id, offset: offset, sample: amendment), into: &diffs)
        }
        // A prediction lives until this touch's next change: replace it (or drop it) now.
        if predictions && !(change.predicted.isEmpty && activeStrokes[id]!.predicted.isEmpty) {
            emit(.predicted(id, samples: change.predicted), into: &diffs)
        }
    }

    // MARK: Validating

    private func validate(_ frame: TouchFrame, userTouches: [TouchID: StrokeID]) throws(TouchInputError) {
        guard frame.changes.count <= limits.maxChangesPerFrame else {
            throw .frameTooLarge("touch changes", limit: limits.maxChangesPerFrame)
        }
        var frameSamples = 0
        for (index, change) in frame.changes.enumerated() {
            // Frames are small (≤ maxChangesPerFrame): a scan beats allocating a set.
            for earlier in frame.changes[..<index] where earlier.touch == change.touch {
                throw .duplicateTouchInFrame(change.touch)
            }
            frameSamples += change.samples.count + change.predicted.count + change.amendments.count
            guard change.predicted.count <= limits.maxPredictedSamples else {
                throw .frameTooLarge("predicted samples per touch", limit: limits.maxPredictedSamples)
            }
            let stroke = userTouches[change.touch].map { activeStrokes[$0]! }
            switch change.phase {
            case .began:
                guard stroke == nil else { throw .duplicateBegan(change.touch) }
                guard !change.samples.isEmpty else { throw .missingSamples(change.touch, change.phase) }
            case .moved:
                guard stroke != nil else { throw .unknownTouch(change.touch, change.phase) }
                guard !change.samples.isEmpty else { throw .missingSamples(change.touch, change.phase) }
            case .stationary, .ended, .cancelled:
                guard stroke != nil else { throw .unknownTouch(change.touch, change.phase) }
            }
            if change.phase != .cancelled {
                try validateSamples(of: change, stroke: stroke)
            }
        }
        guard frameSamples <= limits.maxSamplesPerFrame else {
            throw .frameTooLarge("samples", limit: limits.maxSamplesPerFrame)
        }
        let liveAfter = liveTouchCount(after: frame, userTouches: userTouches)
        guard liveAfter <= limits.maxLiveTouchesPerUser else {
            throw .tooManyTouches(limit: limits.maxLiveTouchesPerUser)
        }
    }

    private func validateSamples(of change: TouchChange, stroke: Stroke?) throws(TouchInputError) {
        let touch = change.touch
        let stored = stroke?.samples.count ?? 0
        guard stored + change.samples.count <= limits.maxSamplesPerStroke else {
            throw .strokeTooLong(touch, limit: limits.maxSamplesPerStroke)
        }
        var previousTime = stroke?.samples.last?.time ?? Int64.min
        for sample in change.samples {
            if let problem = sample.validate() { throw .invalidSample(touch, problem) }
            guard sample.time >= previousTime else { throw .invalidSample(touch, .timeWentBackwards) }
            previousTime = sample.time
        }
        for sample in change.predicted {
            if let problem = sample.validate() { throw .invalidSample(touch, problem) }
        }
        for amendment in change.amendments {
            if let problem = amendment.validate() { throw .invalidSample(touch, problem) }
            let index = amendment.estimationIndex
            let original =
                index == 0
                ? nil
                : change.samples.last { $0.estimationIndex == index }
                    ?? stroke?.offset(ofEstimation: index).map { stroke!.samples[$0] }
            guard let original else { throw .unknownEstimationIndex(touch, index) }
            guard original.x == amendment.x, original.y == amendment.y, original.time == amendment.time else {
                throw .invalidSample(touch, .amendmentChangesLocation)
            }
        }
    }

    private func liveTouchCount(after frame: TouchFrame, userTouches: [TouchID: StrokeID]) -> Int {
        func survives(_ touch: TouchID) -> Bool {
            frame.aliveTouches.map { $0.contains(touch) } ?? true
        }
        var count = 0
        for touch in userTouches.keys where survives(touch) {
            let change = frame.changes.first { $0.touch == touch }
            if change?.phase != .ended && change?.phase != .cancelled { count += 1 }
        }
        for change in frame.changes where change.phase == .began && survives(change.touch) { count += 1 }
        return count
    }
}

extension Stroke {
    /// The offset of the latest sample carrying `estimationIndex`; amendments are
    /// recent, so the search runs from the end.
    func offset(ofEstimation index: UInt32) -> Int? {
        samples.lastIndex { $0.estimationIndex == index }
    }
}
