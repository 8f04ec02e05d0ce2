/// Coalescing touch frames, as UIKit coalesces touches when the app is busy:
/// an agent whose hub is behind merges the frames it has not sent yet into
/// fewer, larger ones, so an overloaded hub gets the same samples in fewer
/// messages instead of a growing queue of small ones.
extension TouchFrame {
    /// One frame that leaves a board exactly as applying `self` and then
    /// `later` would (the intermediate prediction, which the later change
    /// throws away anyway, is not shown), or nil when no single frame can:
    /// a touch that ends or is cancelled in `self` and appears again in
    /// `later`, a touch that begins in `self` and ends in `later` (a change
    /// has one phase), amendments (kept in their own frame, so the samples
    /// they amend are already stored), alive sets that do not nest, or a
    /// merged frame past `limits` (changes, or half the samples per frame).
    ///
    /// - Parameter downBefore: the touches the agent had down before `self`
    ///   (nil: unknown). The merged frame checks only the later alive set, so
    ///   a touch the earlier set dropped (cancelled) may begin in the later
    ///   frame only if it was not down before.
    public func coalesced(with later: TouchFrame, downBefore: Set<TouchID>?, limits: BoardLimits) -> TouchFrame? {
        switch (aliveTouches, later.aliveTouches) {
        case (nil, nil): break
        case (let earlierAlive?, let laterAlive?):
            // A touch the earlier set drops is cancelled after the earlier
            // frame; merged, that happens only after the later one's changes.
            // So the later frame may begin such a touch only if it was not down.
            for change in later.changes where change.phase == .began && !earlierAlive.contains(change.touch) {
                guard let downBefore, !downBefore.contains(change.touch) else { return nil }
            }
            for touch in laterAlive where !earlierAlive.contains(touch) {
                guard later.changes.contains(where: { $0.touch == touch && $0.phase == .began }) else { return nil }
            }
        default: return nil
        }
        // Order matters twice: strokes get ids in the order they begin, and
        // accept positions in the order they end. So the earlier frame's
        // changes come first in their order, except those the later frame
        // ends or cancels, which take the later frame's order after them.
        var merged: [TouchChange] = []
        merged.reserveCapacity(changes.count + later.changes.count)
        var endedLater: [TouchID: TouchChange] = [:]
        var samples = 0
        for change in changes {
            guard change.amendments.isEmpty else { return nil }
            guard let next = later.changes.first(where: { $0.touch == change.touch }) else {
                merged.append(change)
                samples += change.samples.count + change.predicted.count
                continue
            }
            guard next.amendments.isEmpty else { return nil }
            let phase: TouchPhase
            switch (change.phase, next.phase) {
            case (.ended, _), (.cancelled, _), (_, .began), (.began, .ended), (.began, .cancelled):
                return nil
            case (.began, _): phase = .began
            case (_, .moved): phase = .moved
            case (let earlierPhase, .stationary): phase = earlierPhase  // moved stays moved
            case (_, let laterPhase): phase = laterPhase  // ended or cancelled
            }
            let combined = TouchChange(
                touch: change.touch, phase: phase,
                samples: phase == .cancelled ? [] : change.samples + next.samples, predicted: next.predicted)
            samples += combined.samples.count + combined.predicted.count
            if phase == .ended || phase == .cancelled {
                endedLater[change.touch] = combined
            } else {
                merged.append(combined)
            }
        }
        for change in later.changes {
            guard change.amendments.isEmpty else { return nil }
            if let combined = endedLater[change.touch] {
                merged.append(combined)
            } else if !changes.contains(where: { $0.touch == change.touch }) {
                merged.append(change)
                samples += change.samples.count + change.predicted.count
            }
        }
        guard merged.count <= limits.maxChangesPerFrame, samples <= limits.maxSamplesPerFrame / 2 else { return nil }
        return TouchFrame(sequence: sequence, changes: merged, aliveTouches: later.aliveTouches)
    }
}
