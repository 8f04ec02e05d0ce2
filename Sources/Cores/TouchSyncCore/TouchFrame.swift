/// One input event from one agent: what changed for each touch it reports.
/// Like UIKit, touches are not grouped: any subset may appear, in any order.
public struct TouchFrame: Sendable, Equatable {
    /// The agent's number for this frame (acknowledged cumulatively by the hub).
    public var sequence: UInt64
    public var changes: [TouchChange]
    /// The touch ids the agent still has down after this event, or nil when the
    /// agent did not say. Any live touch of this user that is not in the set is
    /// cancelled, so a lost "ended" can never leave a stroke stuck.
    public var aliveTouches: [TouchID]?

    public init(sequence: UInt64 = 0, changes: [TouchChange], aliveTouches: [TouchID]? = nil) {
        self.sequence = sequence
        self.changes = changes
        self.aliveTouches = aliveTouches
    }
}

/// What one touch did in one input event.
public struct TouchChange: Sendable, Equatable {
    public var touch: TouchID
    public var phase: TouchPhase
    /// The coalesced samples since the last event, ending with the event's own
    /// sample (UIKit's `coalescedTouches(for:)`). Required for began and moved.
    public var samples: [Sample]
    /// UIKit's `predictedTouches(for:)`: a guess, shown until this touch's next
    /// change replaces it, never kept in an accepted stroke.
    public var predicted: [Sample]
    /// Updated values for earlier samples of this touch's stroke, matched by
    /// `estimationIndex` (UIKit's `touchesEstimatedPropertiesUpdated`).
    public var amendments: [Sample]

    public init(
        touch: TouchID, phase: TouchPhase, samples: [Sample] = [], predicted: [Sample] = [],
        amendments: [Sample] = []
    ) {
        self.touch = touch
        self.phase = phase
        self.samples = samples
        self.predicted = predicted
        self.amendments = amendments
    }
}

/// Which accepted strokes a clear removes. Strokes in progress are never cleared.
public enum ClearScope: Sendable, Equatable {
    /// The requesting user's own accepted strokes.
    case own
    /// Every accepted stroke on the board.
    case board
}

/// Limits that keep one user from exhausting the hub. Documented defaults.
public struct BoardLimits: Sendable, Equatable {
    /// Touches one user may have down at once (default 20; UIKit reports at most ~11 per device).
    public var maxLiveTouchesPerUser: Int = 20
    /// Samples in one stroke (default 100,000: over 7 minutes at 240 Hz).
    public var maxSamplesPerStroke: Int = 100_000
    /// Samples, predicted and amendments included, in one frame (default 4,096).
    public var maxSamplesPerFrame: Int = 4096
    /// Predicted samples per touch change (default 64).
    public var maxPredictedSamples: Int = 64
    /// Touch changes in one frame (default 64).
    public var maxChangesPerFrame: Int = 64
    /// Samples one board stores (active and accepted strokes; default
    /// 5,000,000, about 160 MB). At the limit a frame that begins a stroke is
    /// refused (`boardFull`) until a clear; strokes in progress may end, so a
    /// board holds at most this plus its live touches' strokes.
    public var maxSamplesPerBoard: Int = 5_000_000

    public init() {}
}
