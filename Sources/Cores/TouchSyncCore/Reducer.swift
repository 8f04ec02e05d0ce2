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
        // The user's touch table as the frame found it. Each change names a
        // different touch, so earlier changes never alter a later one's entry.
        // (Holding it costs a copy of the small table only on frames that begin
        // or end a touch; every other frame just reads it.)
        let table = touches[user]
        try validate(frame, table: table)

        // Indexing (not `for change in`) reads fields in place instead of copying
        // each change, which would retain its three arrays.
        for index in frame.changes.indices {
            let touch = frame.changes[index].touch
            switch frame.changes[index].phase {
            case .began:
                let id = nextStrokeID
                emit(.began(id, owner: user, touch: touch, style: style), into: &diffs)
                emitSamples(of: frame.changes[index], to: id, into: &diffs)
            case .moved, .stationary:
                emitSamples(of: frame.changes[index], to: table![touch]!, into: &diffs)
            case .ended:
                let id = table![touch]!
                emitSamples(of: frame.changes[index], to: id, into: &diffs, predictions: false)
                emit(.accepted(id, position: nextAcceptPosition), into: &diffs)
            case .cancelled:
                emit(.cancelled(table![touch]!), into: &diffs)
            }
        }

        if let alive = frame.aliveTouches, let remaining = touches[user] {
            var vanished: [StrokeID] = []  // allocates only when a touch did vanish
            for (touch, id) in remaining where !alive.contains(touch) { vanished.append(id) }
            if !vanished.isEmpty {
                // Sorted so the same input always yields the same diffs (dictionary order is per process).
                vanished.sort()
                for id in vanished { emit(.cancelled(id), into: &diffs) }
            }
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
        let slot = slot(of: id)!
        if !change.samples.isEmpty {
            emit(.appended(id, offset: slots[slot]!.samples.count, samples: change.samples), into: &diffs)
        }
        for amendment in change.amendments {
            let offset = slots[slot]!.offset(ofEstimation: amendment.estimationIndex)!
            emit(.amended(id, offset: offset, sample: amendment), into: &diffs)
        }
        // A prediction lives until this touch's next change: replace it (or drop it) now.
        if predictions && !(change.predicted.isEmpty && slots[slot]!.predicted.isEmpty) {
            emit(.predicted(id, samples: change.predicted), into: &diffs)
        }
    }

    // MARK: Validating

    private func validate(_ frame: TouchFrame, table userTouches: [TouchID: StrokeID]?) throws(TouchInputError) {
        guard frame.changes.count <= limits.maxChangesPerFrame else {
            throw .frameTooLarge("touch changes", limit: limits.maxChangesPerFrame)
        }
        var frameSamples = 0
        var begins = false
        let changes = frame.changes
        for index in changes.indices {
            let touch = changes[index].touch
            let phase = changes[index].phase
            // Frames are small (≤ maxChangesPerFrame): a scan beats allocating a set.
            for earlier in 0..<index where changes[earlier].touch == touch {
                throw .duplicateTouchInFrame(touch)
            }
            let samples = changes[index].samples.count
            let predicted = changes[index].predicted.count
            frameSamples += samples + predicted + changes[index].amendments.count
            guard predicted <= limits.maxPredictedSamples else {
                throw .frameTooLarge("predicted samples per touch", limit: limits.maxPredictedSamples)
            }
            let strokeID = userTouches?[touch]
            switch phase {
            case .began:
                guard strokeID == nil else { throw .duplicateBegan(touch) }
                guard samples > 0 else { throw .missingSamples(touch, phase) }
                begins = true
            case .moved:
                guard strokeID != nil else { throw .unknownTouch(touch, phase) }
                guard samples > 0 else { throw .missingSamples(touch, phase) }
            case .stationary, .ended, .cancelled:
                guard strokeID != nil else { throw .unknownTouch(touch, phase) }
            }
            if phase != .cancelled {
                try validateSamples(of: changes[index], stroke: strokeID)
            }
        }
        guard frameSamples <= limits.maxSamplesPerFrame else {
            throw .frameTooLarge("samples", limit: limits.maxSamplesPerFrame)
        }
        if begins && storedSampleCount >= limits.maxSamplesPerBoard {
            throw .boardFull(limit: limits.maxSamplesPerBoard)
        }
        // Without a began the count cannot grow, and it was within the limit before.
        if begins, liveTouchCount(after: frame, userTouches: userTouches ?? [:]) > limits.maxLiveTouchesPerUser {
            throw .tooManyTouches(limit: limits.maxLiveTouchesPerUser)
        }
    }

    private func validateSamples(of change: TouchChange, stroke id: StrokeID?) throws(TouchInputError) {
        let touch = change.touch
        // The stored samples are read in place: a copy of them (or of the
        // Stroke) would retain and release their storage once a frame.
        let storedSlot: Int? = if let id { slot(of: id) } else { nil }
        var storedCount = 0
        var previousTime = Int64.min
        if let storedSlot {
            storedCount = slots[storedSlot]!.samples.count
            previousTime = slots[storedSlot]!.samples.last?.time ?? Int64.min
        }
        guard storedCount + change.samples.count <= limits.maxSamplesPerStroke else {
            throw .strokeTooLong(touch, limit: limits.maxSamplesPerStroke)
        }
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
            var original: Sample? = nil
            if index != 0 {
                original = change.samples.last { $0.estimationIndex == index }
                if original == nil, let storedSlot, let offset = slots[storedSlot]!.samples.lastOffset(ofEstimation: index) {
                    original = slots[storedSlot]!.samples[offset]
                }
            }
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
        let changes = frame.changes
        var count = 0
        for touch in userTouches.keys where survives(touch) {
            let index = changes.indices.first { changes[$0].touch == touch }
            let phase = index.map { changes[$0].phase }
            if phase != .ended && phase != .cancelled { count += 1 }
        }
        for index in changes.indices where changes[index].phase == .began && survives(changes[index].touch) {
            count += 1
        }
        return count
    }
}

extension Stroke {
    /// The offset of the latest sample carrying `estimationIndex`; amendments are
    /// recent, so the search runs from the end.
    func offset(ofEstimation index: UInt32) -> Int? {
        samples.lastOffset(ofEstimation: index)
    }
}
