import TouchSyncCore

/// A TUIO source: the sender's address and port, and the name its frames
/// give (nil: none). A datagram from elsewhere naming the same source is
/// another source, so it cannot move this one's frame numbers.
public struct TUIOSourceID: Hashable, Sendable, CustomStringConvertible {
    public var sender: String
    public var name: String?
    public init(sender: String, name: String?) {
        self.sender = sender
        self.name = name
    }
    public var address: Substring { sender.split(separator: ":").first ?? Substring(sender) }
    public var description: String { name.map { "\($0) from \(sender)" } ?? sender }
}

/// The bridge's sources and their trackers, without I/O (issue 41: these
/// rules lived in the bridge's receive loop, tested only through a frozen
/// process and six seconds of waiting). Time is an argument: a source
/// silent for `sourceTimeout` with touches down has them cancelled by
/// `sweep`; one that comes back after the time-out starts its numbering
/// over; the table holds at most `maxSources` sources and `maxSourcesPerAddress`
/// per sender address, making room by forgetting the longest-silent idle one.
public struct TUIOSources: Sendable {
    public struct Limits: Sendable {
        public var width: Double
        public var height: Double
        public var sourceTimeout: Duration
        public var maxSources: Int
        public var maxSourcesPerAddress: Int
        public var maxCursors: Int
        public init(width: Double, height: Double, sourceTimeout: Duration, maxSources: Int, maxSourcesPerAddress: Int, maxCursors: Int) {
            self.width = width
            self.height = height
            self.sourceTimeout = sourceTimeout
            self.maxSources = maxSources
            self.maxSourcesPerAddress = maxSourcesPerAddress
            self.maxCursors = maxCursors
        }
    }

    /// What one frame did.
    public enum Outcome: Sendable {
        /// Taken: the changes and live touches to send (empty changes: nothing to send),
        /// the source that was forgotten to make room (its agent goes), whether the source is new,
        /// and cursors its tracker ignored beyond its maximum.
        case applied(changes: [TouchChange], alive: [TouchID], forgot: TUIOSourceID?, new: Bool, ignoredCursors: Int)
        /// The tracker dropped the frame (old or far-off numbering).
        case dropped(forgot: TUIOSourceID?, new: Bool)
        /// No room: the bridge, or the sender's address, has its maximum of sources, none idle.
        case refused(addressFull: Bool)
    }

    public let limits: Limits
    private var sources: [TUIOSourceID: (tracker: TUIOSourceTracker, lastHeard: ContinuousClock.Instant)] = [:]
    private var perAddress: [Substring: Int] = [:]

    public init(limits: Limits) { self.limits = limits }

    public var count: Int { sources.count }

    /// A frame from `source`, received at `now` (`arrival`: its wall time in seconds, for samples without a time tag).
    public mutating func frame(_ frame: TUIOFrame, from source: TUIOSourceID, arrival: Double, now: ContinuousClock.Instant) -> Outcome {
        var forgot: TUIOSourceID? = nil
        let new = sources[source] == nil
        if new {
            let addressFull = perAddress[source.address, default: 0] >= limits.maxSourcesPerAddress
            if addressFull || sources.count >= limits.maxSources {
                let idle = sources.filter { key, entry in
                    now - entry.lastHeard > limits.sourceTimeout && entry.tracker.down.isEmpty && (!addressFull || key.address == source.address)
                }
                guard let evicted = idle.min(by: { $0.value.lastHeard < $1.value.lastHeard })?.key else { return .refused(addressFull: addressFull) }
                sources[evicted] = nil
                perAddress[evicted.address]! -= 1
                forgot = evicted
            }
            perAddress[source.address, default: 0] += 1
        }
        var entry = sources[source] ?? (TUIOSourceTracker(width: limits.width, height: limits.height, maxCursors: limits.maxCursors), now)
        // Silent for longer than the time-out: its numbering starts over (a restarted tracker).
        if now - entry.lastHeard > limits.sourceTimeout { entry.tracker.resynchronize() }
        entry.lastHeard = now
        let ignoredBefore = entry.tracker.ignoredCursors
        let applied = entry.tracker.apply(frame, arrival: arrival)
        sources[source] = entry
        guard let (changes, alive) = applied else { return .dropped(forgot: forgot, new: new) }
        return .applied(changes: changes, alive: alive, forgot: forgot, new: new, ignoredCursors: entry.tracker.ignoredCursors - ignoredBefore)
    }

    /// Sources silent for longer than the time-out as of `now` (an instant at
    /// which nothing was waiting to be received) with touches down: those
    /// touches cancelled, to be sent.
    public mutating func sweep(asOf now: ContinuousClock.Instant) -> [(source: TUIOSourceID, cancelled: [TouchChange])] {
        var swept: [(source: TUIOSourceID, cancelled: [TouchChange])] = []
        for (source, entry) in sources where now - entry.lastHeard > limits.sourceTimeout && !entry.tracker.down.isEmpty {
            var tracker = entry.tracker
            swept.append((source, tracker.cancelAll()))
            sources[source] = (tracker, entry.lastHeard)
        }
        return swept.sorted { $0.source.sender < $1.source.sender }
    }

    /// When `sweep` may next have something to do: just past the time-out of
    /// the source with touches down heard from longest ago (nil: none).
    public var nextSweep: ContinuousClock.Instant? {
        // Asked before every receive: one pass, no arrays.
        var oldest: ContinuousClock.Instant? = nil
        for entry in sources.values where !entry.tracker.down.isEmpty {
            oldest = min(oldest ?? entry.lastHeard, entry.lastHeard)
        }
        return oldest.map { $0 + limits.sourceTimeout + .milliseconds(1) }
    }
}
