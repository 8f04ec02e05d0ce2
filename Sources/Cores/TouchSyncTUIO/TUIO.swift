import TouchSyncCore

/// One TUIO frame of one source: what its bundle said, profile-independent.
public struct TUIOFrame: Sendable, Equatable {
    /// The source's name (TUIO 1.1 `source`, TUIO 2.0 `frm`), nil when absent.
    public var source: String?
    /// `fseq` (TUIO 1.1) or the frame id (TUIO 2.0); -1 or nil: no ordering.
    public var sequence: Int64?
    /// The frame's time (OSC time tag), nil when the sender said "immediately".
    public var timeTag: UInt64?
    /// The session ids alive after this frame (nil: the frame did not say).
    public var alive: [Int32]?
    /// Cursor updates in the order received (several for one id are coalesced samples).
    public var updates: [Cursor]

    public struct Cursor: Sendable, Equatable {
        public var id: Int32
        /// Normalised 0–1, y downwards.
        public var x: Float
        public var y: Float
        /// TUIO 2.0 `ptr` pressure (0–1) and angle (radians), when sent.
        public var pressure: Float?
        public var angle: Float?

        public init(id: Int32, x: Float, y: Float, pressure: Float? = nil, angle: Float? = nil) {
            self.id = id
            self.x = x
            self.y = y
            self.pressure = pressure
            self.angle = angle
        }
    }

    public init(source: String? = nil, sequence: Int64? = nil, timeTag: UInt64? = nil, alive: [Int32]? = nil, updates: [Cursor] = []) {
        self.source = source
        self.sequence = sequence
        self.timeTag = timeTag
        self.alive = alive
        self.updates = updates
    }
}

/// Reads the TUIO frames in an OSC packet: TUIO 1.1 `/tuio/2Dcur` (`source`,
/// `alive`, `set`, `fseq`) and TUIO 2.0 `/tuio2/frm`, `/tuio2/ptr`,
/// `/tuio2/alv`. Other profiles (objects, blobs) are ignored; a message of a
/// known profile with wrong arguments counts as a problem and is skipped.
public enum TUIOParser {
    public static func frames(in packet: OSCPacket) -> (frames: [TUIOFrame], problems: Int) {
        var frames: [TUIOFrame] = []
        var problems = 0
        var current: TUIOFrame? = nil
        var currentTag: UInt64 = 1
        func finish() {
            if let frame = current { frames.append(frame) }
            current = nil
        }
        for (timeTag, message) in packet.messages() {
            if current != nil && timeTag != currentTag { finish() }
            currentTag = timeTag
            let arguments = message.arguments
            switch message.address {
            case "/tuio/2Dcur":
                guard let command = arguments.first?.string else {
                    problems += 1
                    continue
                }
                if current == nil { current = TUIOFrame(timeTag: timeTag == OSCTime.immediately ? nil : timeTag) }
                switch command {
                case "source":
                    guard let name = arguments.dropFirst().first?.string else { problems += 1; continue }
                    current!.source = name
                case "alive":
                    let ids = arguments.dropFirst().compactMap(\.int32)
                    guard ids.count == arguments.count - 1 else { problems += 1; continue }
                    current!.alive = ids
                case "set":
                    guard arguments.count >= 4, let id = arguments[1].int32, let x = arguments[2].float, let y = arguments[3].float,
                        x.isFinite, y.isFinite
                    else { problems += 1; continue }
                    current!.updates.append(.init(id: id, x: x, y: y))
                case "fseq":
                    guard let sequence = arguments.dropFirst().first?.int32 else { problems += 1; continue }
                    current!.sequence = Int64(sequence)
                    finish()  // fseq closes a TUIO 1.1 frame
                default:
                    problems += 1
                }
            case "/tuio2/frm":
                finish()
                guard let id = arguments.first?.int32 else { problems += 1; continue }
                var frame = TUIOFrame(sequence: Int64(id))
                if arguments.count > 1, let time = arguments[1].timeTag, time != OSCTime.immediately { frame.timeTag = time }
                if arguments.count > 3, let source = arguments[3].string { frame.source = source }
                current = frame
            case "/tuio2/ptr":
                // s_id tu_id c_id x y angle shear radius press …
                guard current != nil, arguments.count >= 5, let id = arguments[0].int32, let x = arguments[3].float,
                    let y = arguments[4].float, x.isFinite, y.isFinite
                else { problems += 1; continue }
                let angle = arguments.count > 5 ? arguments[5].float.flatMap { $0.isFinite ? $0 : nil } : nil
                let pressure = arguments.count > 8 ? arguments[8].float.flatMap { $0.isFinite ? $0 : nil } : nil
                current!.updates.append(.init(id: id, x: x, y: y, pressure: pressure, angle: angle))
            case "/tuio2/alv":
                guard current != nil else { problems += 1; continue }
                let ids = arguments.compactMap(\.int32)
                guard ids.count == arguments.count else { problems += 1; continue }
                current!.alive = ids
                finish()  // alv closes a TUIO 2.0 frame
            default:
                continue  // another profile
            }
        }
        finish()
        return (frames, problems)
    }
}

/// One TUIO source's cursors as TouchSync touches: a pure state machine
/// (no clock, no socket). A cursor entering the alive set begins a touch
/// (once it has a position), its `set`s move it (several in one frame are
/// coalesced samples), leaving the alive set ends it, even if its own
/// packets were lost. Frames older than the last one seen are dropped.
///
/// Frame numbers are a window a spoofed datagram must not move: a number
/// within `maxForwardJump` ahead is taken; one far ahead or far behind (a
/// tracker that restarted, or a forgery) starts a candidate sequence, taken
/// only after `framesToConfirmJump` frames that follow one another while
/// the current sequence has been quiet for `quietBeforeJump` seconds. Two
/// forged datagrams (or a thousand, while the real tracker keeps sending)
/// cannot lock the real tracker out.
public struct TUIOSourceTracker: Sendable {
    /// The canvas TUIO's 0–1 coordinates are scaled to, in points.
    public var width: Double
    public var height: Double
    /// Cursors one source may hold down at once; more are ignored (counted in `ignoredCursors`).
    public var maxCursors: Int
    public private(set) var lastSequence: Int64? = nil
    /// When the last frame of the current sequence was taken (`apply`'s arrival).
    private var lastTaken: Double? = nil
    /// A sequence far from the current one: its first and latest number, and its frames so far.
    private var candidate: (latest: Int64, frames: Int)? = nil
    /// How far ahead of the last frame a frame is taken at once: 1,000
    /// frames, 8 s at 120 fps (packet loss skips a few).
    public static let maxForwardJump: Int64 = 1_000
    /// Frames a new sequence needs in a row before it replaces the current one.
    public static let framesToConfirmJump = 30
    /// Seconds the current sequence must have been quiet for a new one to replace it.
    public static let quietBeforeJump = 0.5
    /// Session ids with a touch down.
    public private(set) var down: Set<Int32> = []
    /// The last sample time given, so times never go backwards within the source.
    private var lastTime: Double = 0
    public private(set) var droppedFrames = 0
    public private(set) var ignoredCursors = 0

    public init(width: Double, height: Double, maxCursors: Int = 20) {
        self.width = width
        self.height = height
        self.maxCursors = maxCursors
    }

    public static func touchID(_ sessionID: Int32) -> TouchID { TouchID(UInt32(bitPattern: sessionID)) }

    /// After a silence: the source's next frame is taken whatever its number
    /// (a tracker that restarted counts from the beginning again).
    public mutating func resynchronize() {
        lastSequence = nil
        candidate = nil
    }

    /// The changes `frame` makes, and the touches down after it; nil when the frame is dropped (old or repeated).
    /// - Parameter arrival: seconds (any origin, steady) when the frame arrived: its time when it carries none.
    public mutating func apply(_ frame: TUIOFrame, arrival: Double) -> (changes: [TouchChange], alive: [TouchID])? {
        if let sequence = frame.sequence, sequence != -1 {
            if let last = lastSequence {
                let ahead = sequence - last
                if ahead <= 0, -ahead < 1 << 30 {
                    droppedFrames += 1  // old or repeated
                    return nil
                }
                if ahead > Self.maxForwardJump || ahead <= 0 {
                    // Far ahead, or far behind (a restart or a wrap): far from the current sequence, a candidate until it is sustained and the current one quiet.
                    if let current = candidate, sequence > current.latest, sequence - current.latest <= Self.maxForwardJump {
                        candidate = (sequence, current.frames + 1)
                    } else {
                        candidate = (sequence, 1)
                    }
                    let quiet = lastTaken.map { arrival - $0 >= Self.quietBeforeJump } ?? true
                    guard candidate!.frames >= Self.framesToConfirmJump, quiet else {
                        droppedFrames += 1
                        return nil
                    }
                }
            }
            candidate = nil
            lastSequence = sequence
            lastTaken = arrival
        }
        var time = frame.timeTag.map(OSCTime.unixSeconds) ?? arrival
        time = max(time, lastTime)
        lastTime = time
        var samplesByID: [Int32: [Sample]] = [:]
        var order: [Int32] = []
        for update in frame.updates {
            guard let sample = try? Sample(
                x: Double(update.x) * width, y: Double(update.y) * height, timestamp: time,
                force: update.pressure.map { Double(max(0, min(1, $0))) }, azimuth: update.angle.map(Double.init))
            else { continue }
            if samplesByID[update.id] == nil { order.append(update.id) }
            samplesByID[update.id, default: []].append(sample)
        }
        let alive = frame.alive.map(Set.init) ?? down.union(order)
        var changes: [TouchChange] = []
        // A source holds at most `maxCursors` down (those that stay, and those this frame begins).
        var held = down.count { alive.contains($0) }
        for id in order where alive.contains(id) {
            if !down.contains(id) {
                guard held < maxCursors else {
                    ignoredCursors += 1  // a flood of cursor ids begins nothing more
                    continue
                }
                held += 1
            }
            var samples = samplesByID[id]!
            for index in samples.indices.dropLast() { samples[index].flags.insert(.coalesced) }
            changes.append(
                TouchChange(touch: Self.touchID(id), phase: down.contains(id) ? .moved : .began, samples: samples))
            down.insert(id)
        }
        for id in down.sorted() where !alive.contains(id) {
            changes.append(TouchChange(touch: Self.touchID(id), phase: .ended))
            down.remove(id)
        }
        return (changes, down.sorted().map(Self.touchID))
    }

    /// The source went quiet: every touch still down is cancelled.
    public mutating func cancelAll() -> [TouchChange] {
        defer { down.removeAll() }
        return down.sorted().map { TouchChange(touch: Self.touchID($0), phase: .cancelled) }
    }
}

/// A board's live touches as TUIO 1.1 `/tuio/2Dcur` bundles, for displays
/// that speak TUIO: one cursor per stroke in progress (its session id the
/// stroke id), at its last sample, normalised to the canvas.
public enum TUIOEmitter {
    public static func bundle(of state: BoardState, width: Double, height: Double, source: String, frame: Int32) -> [UInt8] {
        var messages: [OSCPacket] = [.message(OSCMessage("/tuio/2Dcur", [.string("source"), .string(source)]))]
        let strokes = state.orderedActiveStrokes
        messages.append(.message(OSCMessage("/tuio/2Dcur", [.string("alive")] + strokes.map { .int32(Int32(truncatingIfNeeded: $0.id.rawValue)) })))
        for stroke in strokes {
            guard let last = stroke.samples.last else { continue }
            let x = Float(last.xInPoints / width)
            let y = Float(last.yInPoints / height)
            messages.append(
                .message(OSCMessage(
                    "/tuio/2Dcur",
                    [.string("set"), .int32(Int32(truncatingIfNeeded: stroke.id.rawValue)), .float32(x), .float32(y), .float32(0), .float32(0), .float32(0)])))
        }
        messages.append(.message(OSCMessage("/tuio/2Dcur", [.string("fseq"), .int32(frame)])))
        return OSCEncoder.encode(.bundle(timeTag: OSCTime.immediately, messages))
    }
}
