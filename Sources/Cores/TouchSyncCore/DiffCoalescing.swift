/// Folds the diffs of several hub steps into fewer diffs with the same
/// effect, so the hub can publish one batch per tick instead of one per
/// input event: successive appends to a stroke become one append, a
/// prediction replaced within the window is sent once (its latest value), and
/// an amendment of a sample appended within the window is folded into it.
///
/// Replaying the result from any state yields exactly what replaying the
/// input would (a property the tests check on random sessions).
public struct DiffCoalescer: Sendable {
    private var output: [StrokeDiff] = []
    /// Per stroke: the output index of its open append and of its prediction.
    private var openAppend: [StrokeID: Int] = [:]
    private var openPrediction: [StrokeID: Int] = [:]

    public init() {}

    public var isEmpty: Bool { output.isEmpty }

    public mutating func add(_ diff: consuming StrokeDiff) {
        switch diff {
        case .appended(let id, let offset, let samples):
            if let index = openAppend[id], case .appended(_, let start, var merged) = output[index],
                start + merged.count == offset
            {
                output[index] = .appended(id, offset: start, samples: [])  // release the array before growing it
                merged.append(contentsOf: samples)
                output[index] = .appended(id, offset: start, samples: merged)
            } else {
                openAppend[id] = output.count
                output.append(diff)
            }
        case .predicted(let id, _):
            // Only the latest prediction matters; it can stand where the first one stood,
            // since nothing between reads a stroke's prediction.
            if let index = openPrediction[id] {
                output[index] = diff
            } else {
                openPrediction[id] = output.count
                output.append(diff)
            }
        case .amended(let id, let offset, let sample):
            if let index = openAppend[id], case .appended(_, let start, var samples) = output[index],
                offset >= start, offset < start + samples.count
            {
                output[index] = .appended(id, offset: start, samples: [])
                samples[offset - start] = sample
                output[index] = .appended(id, offset: start, samples: samples)
            } else {
                output.append(diff)
            }
        case .accepted(let id, _), .cancelled(let id):
            openAppend[id] = nil
            openPrediction[id] = nil
            output.append(diff)
        case .began, .cleared, .removed, .restored:
            output.append(diff)
        }
    }

    public mutating func add(contentsOf diffs: [StrokeDiff]) {
        for diff in diffs { add(diff) }
    }

    /// Adds every diff of `diffs` and leaves it empty (its capacity kept):
    /// each diff moves in, where copying it would retain its samples once
    /// more (the hub's path, once per frame).
    public mutating func add(draining diffs: inout [StrokeDiff]) {
        for index in diffs.indices {
            var diff = StrokeDiff.cleared(owner: nil)  // no payload to release
            swap(&diff, &diffs[index])
            add(diff)
        }
        diffs.removeAll(keepingCapacity: true)
    }

    /// The folded diffs; the coalescer starts over empty.
    public mutating func take() -> [StrokeDiff] {
        openAppend.removeAll(keepingCapacity: true)
        openPrediction.removeAll(keepingCapacity: true)
        defer { output.removeAll(keepingCapacity: true) }
        return output
    }
}
