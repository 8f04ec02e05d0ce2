import TouchSyncCore

/// What one simulated user really drew, kept independently of the hub: the
/// strokes in begin order with their samples, and which were cancelled
/// (by the agent or by leaving the alive set). A correct system shows
/// exactly the strokes not cancelled, with exactly these samples.
struct DrawnStrokes {
    struct Drawn {
        var samples: [Sample] = []
        var cancelled = false
    }

    private(set) var strokes: [Drawn] = []
    private var live: [TouchID: Int] = [:]
    private(set) var strokesBegun = 0

    mutating func record(_ frame: TouchFrame) {
        for change in frame.changes {
            switch change.phase {
            case .began:
                live[change.touch] = strokes.count
                strokes.append(Drawn(samples: change.samples))
                strokesBegun += 1
                amend(change)
            case .moved, .stationary, .ended:
                guard let index = live[change.touch] else { continue }
                strokes[index].samples += change.samples
                amend(change)
                if change.phase == .ended { live[change.touch] = nil }
            case .cancelled:
                if let index = live.removeValue(forKey: change.touch) { strokes[index].cancelled = true }
            }
        }
        if let alive = frame.aliveTouches {
            for (touch, index) in live where !alive.contains(touch) {
                strokes[index].cancelled = true
                live[touch] = nil
            }
        }
    }

    private mutating func amend(_ change: TouchChange) {
        guard let index = live[change.touch] else { return }
        for amendment in change.amendments {
            if let offset = strokes[index].samples.lastIndex(where: { $0.estimationIndex == amendment.estimationIndex }) {
                strokes[index].samples[offset] = amendment
            }
        }
    }

    /// The strokes a board must show for this user, in begin order.
    var visible: [[Sample]] { strokes.filter { !$0.cancelled }.map(\.samples) }

    /// Touches down now.
    var liveCount: Int { live.count }
    var liveTouches: [TouchID] { live.keys.sorted() }

    /// Compares with the user's strokes on a board (ordered by stroke id):
    /// samples expected and absent, and samples present and not expected.
    /// Strokes are matched by their first sample (where and when the finger
    /// touched down), so a stroke missing from the board counts as lost once,
    /// instead of shifting every later pair into phantom "duplicates".
    func compare(with shown: [[Sample]]) -> (lost: Int, duplicated: Int) {
        struct Start: Hashable {
            var x: Int32, y: Int32, time: Int64
            init(_ sample: Sample) { (x, y, time) = (sample.x, sample.y, sample.time) }
        }
        var candidates: [Start: [Int]] = [:]
        for (index, stroke) in shown.enumerated() {
            if let first = stroke.first { candidates[Start(first), default: []].append(index) }
        }
        var matched = Set<Int>()
        var lost = 0
        var duplicated = 0
        for want in visible {
            guard let first = want.first, let index = candidates[Start(first)]?.first(where: { !matched.contains($0) }) else {
                lost += want.count
                continue
            }
            matched.insert(index)
            let have = shown[index]
            let common = zip(want, have).prefix { $0 == $1 }.count
            lost += want.count - common
            duplicated += have.count - common
        }
        for (index, stroke) in shown.enumerated() where !matched.contains(index) { duplicated += stroke.count }
        return (lost, duplicated)
    }
}
