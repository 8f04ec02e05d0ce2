import TouchSyncCore
import TouchSyncSimulation

/// A hub's view of one board for tests: reduce input, seal a batch per step.
struct TestHub {
    var board = BoardState()
    var batches: [DiffBatch] = []
    var time: Int64 = 0

    /// Feeds one simulated input; returns the batch it produced, if any.
    @discardableResult
    mutating func feed(_ input: SimulatedInput) throws(TouchInputError) -> DiffBatch? {
        var diffs: [StrokeDiff] = []
        switch input {
        case .frame(let user, let frame, let style):
            try board.reduce(frame, from: user, style: style, into: &diffs)
        case .clear(let user, let scope):
            board.clear(scope, by: user, into: &diffs)
        }
        guard !diffs.isEmpty else { return nil }
        time += 1000
        let batch = board.sealBatch(diffs, hubTime: time)
        batches.append(batch)
        return batch
    }
}

func sample(_ x: Int32, _ y: Int32, t: Int64, estimation: UInt32 = 0) -> Sample {
    Sample(x: x, y: y, time: t, flags: estimation == 0 ? [] : .estimated, estimationIndex: estimation)
}

let alice = UserNamespace("alice")
let bob = UserNamespace("bob")
