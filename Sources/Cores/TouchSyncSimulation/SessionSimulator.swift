#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import TouchSyncCore

/// What simulated fingers do, in the proportions a drawing session has.
public struct SimulationProfile: Sendable {
    public var users = 3
    public var fingersPerUser = 3
    /// Input events per second per finger (UIKit delivers 60 or 120).
    public var hz: Double = 120
    /// Samples per event: 1, or 2 for 240 Hz digitizers, more under load.
    public var coalesced: ClosedRange<Int> = 1...3
    public var predicted: ClosedRange<Int> = 0...2
    /// Chance per event that a finger not down touches down.
    public var beginRate = 0.25
    /// Samples a stroke draws before its finger lifts.
    public var strokeLength: ClosedRange<Int> = 4...40
    /// Chance per event that a live touch is cancelled by the agent.
    public var cancelRate = 0.01
    /// Chance per frame that the agent's alive set silently drops one live touch.
    public var vanishRate = 0.01
    /// Chance per frame that it carries an alive set at all.
    public var aliveSetRate = 0.5
    /// Chance per event that a finger's new sample is an estimate amended later.
    public var estimateRate = 0.05
    /// Chance per step of a clear instead of a frame (half own, half board).
    public var clearRate = 0.005
    /// Whether half the clears clear the whole board. A board clear removes
    /// other users' strokes, so what it removes depends on how the users'
    /// input interleaves on the way to the hub; without board clears the
    /// strokes each user leaves on the board depend on the seed alone.
    public var boardClears = true
    /// Chance per event that a down finger is left out of the frame (it did not change).
    public var idleRate = 0.15
    /// Whether samples carry force (3D Touch, Pencil); most fingers report none.
    public var withForce = true

    public init() {}
}

/// One step of simulated input for the hub.
public enum SimulatedInput: Sendable, Equatable {
    case frame(UserNamespace, TouchFrame, StrokeStyle)
    case clear(UserNamespace, ClearScope)
}

/// Deterministic simulated users drawing with several fingers each: smooth
/// curves, fingers touching down and lifting independently, touch ids
/// reused after a touch ends (and the same ids used by every user),
/// coalesced and predicted samples, estimated values amended later, cancels,
/// touches that vanish from the alive set, and clears. Everything it
/// produces is valid input, so a correct hub accepts all of it.
public struct SessionSimulator: Sendable {
    public let profile: SimulationProfile
    public let users: [UserNamespace]
    private var random: SplitMix64
    private var fingers: [[Finger]]
    private var clocks: [Int64]
    private var frameSequences: [UInt64]
    private var nextEstimation: UInt32 = 1
    /// Ids that ended in the event being built: UIKit never reuses one within the same event.
    private var endedThisEvent: [TouchID] = []

    struct Finger {
        var touch: TouchID? = nil
        var x = 0.0, y = 0.0
        var heading = 0.0, speed = 0.0, turn = 0.0
        var remaining = 0
        var pendingEstimate: Sample? = nil
    }

    /// - Parameter startTime: the agent clock (µs) of the first event; a load
    ///   run passes the real monotonic clock, so sample times are creation times.
    public init(
        seed: UInt64, profile: SimulationProfile = SimulationProfile(), userPrefix: String = "user",
        startTime: Int64 = 1_000_000
    ) {
        self.profile = profile
        random = SplitMix64(seed: seed)
        users = (0..<profile.users).map { UserNamespace("\(userPrefix)-\($0)") }
        fingers = Array(repeating: Array(repeating: Finger(), count: profile.fingersPerUser), count: profile.users)
        clocks = Array(repeating: startTime, count: profile.users)
        frameSequences = Array(repeating: 0, count: profile.users)
    }

    public static func style(forUser index: Int) -> StrokeStyle {
        let palette: [UInt32] = [0x6A1B_9AFF, 0x1565_C0FF, 0x2E7D_32FF, 0xEF6C_00FF, 0xC628_28FF, 0x0083_8FFF]
        return StrokeStyle(rgba: palette[index % palette.count], width: UInt32(3 + index % 4) * 64)
    }

    /// The next input, from a user picked at random.
    public mutating func next() -> SimulatedInput {
        let user = Int.random(in: 0..<users.count, using: &random)
        if random.chance(profile.clearRate) {
            let board = random.chance(0.5)
            return .clear(users[user], board && profile.boardClears ? .board : .own)
        }
        return .frame(users[user], nextFrame(for: user), Self.style(forUser: user))
    }

    /// The next input event of `user`, happening at `time` (agent clock, µs):
    /// its samples are spread over the step before it. Load runs pass the real
    /// clock, so a sample's time is when it was made.
    public mutating func nextFrame(for user: Int, at time: Int64) -> TouchFrame {
        // The event covers the real time since this user's previous one, so its
        // samples are never in the future and never older than the last one sent.
        let nominal = Int64(1_000_000 / profile.hz)
        let step = min(max(time - clocks[user], 1), nominal * 4)
        clocks[user] = max(clocks[user], time)
        return frame(for: user, now: clocks[user], step: step)
    }

    /// The next input event of one user: every finger that changed.
    public mutating func nextFrame(for user: Int) -> TouchFrame {
        let step = Int64(1_000_000 / profile.hz)
        clocks[user] += step
        return frame(for: user, now: clocks[user], step: step)
    }

    private mutating func frame(for user: Int, now: Int64, step: Int64) -> TouchFrame {
        var changes: [TouchChange] = []
        endedThisEvent.removeAll(keepingCapacity: true)
        for index in fingers[user].indices {
            if let change = advance(user: user, finger: index, now: now, step: step) {
                changes.append(change)
            }
        }
        changes.shuffle(using: &random)  // touches are not grouped: any order
        var alive: [TouchID]? = nil
        if random.chance(profile.aliveSetRate) {
            var ids = fingers[user].compactMap(\.touch)
            if !ids.isEmpty && random.chance(profile.vanishRate) {
                // The agent lost track of a finger: it drops out of the alive set, no "ended".
                let lost = ids.remove(at: Int.random(in: 0..<ids.count, using: &random))
                let index = fingers[user].firstIndex { $0.touch == lost }!
                fingers[user][index].touch = nil
            }
            alive = ids.shuffled(using: &random)
        }
        frameSequences[user] += 1
        return TouchFrame(sequence: frameSequences[user], changes: changes, aliveTouches: alive)
    }

    private mutating func advance(user: Int, finger index: Int, now: Int64, step: Int64) -> TouchChange? {
        var finger = fingers[user][index]
        defer { fingers[user][index] = finger }

        guard let touch = finger.touch else {
            guard random.chance(profile.beginRate) else { return nil }
            let used = Set(fingers[user].compactMap(\.touch) + endedThisEvent)
            // A small pool of ids: they are reused as soon as a touch ends, like UITouch addresses.
            let free = (0..<TouchID(profile.fingersPerUser + 2)).filter { !used.contains($0) }
            let touch = free.randomElement(using: &random)!
            finger = Finger(
                touch: touch, x: Double.random(in: 50...1900, using: &random),
                y: Double.random(in: 50...1400, using: &random),
                heading: Double.random(in: 0..<(2 * .pi), using: &random),
                speed: Double.random(in: 150...900, using: &random),
                turn: Double.random(in: -3...3, using: &random),
                remaining: Int.random(in: profile.strokeLength, using: &random))
            let first = sample(of: finger, time: now, coalesced: false, estimated: false)
            return TouchChange(touch: touch, phase: .began, samples: [first], predicted: predictions(of: finger, now: now))
        }

        if random.chance(profile.cancelRate) {
            finger.touch = nil
            endedThisEvent.append(touch)
            return TouchChange(touch: touch, phase: .cancelled)
        }
        if random.chance(profile.idleRate) { return nil }

        var amendments: [Sample] = []
        if var pending = finger.pendingEstimate, random.chance(0.7) {
            // The final force arrives later, as with Apple Pencil's estimated properties.
            pending.force = UInt16.random(in: 100...4000, using: &random)
            pending.flags.insert(.hasForce)
            pending.flags.remove(.estimated)
            amendments.append(pending)
            finger.pendingEstimate = nil
        }

        if finger.remaining <= 0 {
            finger.touch = nil
            endedThisEvent.append(touch)
            return TouchChange(touch: touch, phase: .ended, amendments: amendments)
        }
        if random.chance(0.05) {
            return TouchChange(
                touch: touch, phase: .stationary, predicted: predictions(of: finger, now: now), amendments: amendments)
        }

        let count = Int.random(in: profile.coalesced, using: &random)
        var samples: [Sample] = []
        samples.reserveCapacity(count)
        for part in 1...count {
            let dt = Double(step) / 1e6 / Double(count)
            finger.heading += finger.turn * dt
            finger.turn += Double.random(in: -0.5...0.5, using: &random)
            finger.x += cos(finger.heading) * finger.speed * dt
            finger.y += sin(finger.heading) * finger.speed * dt
            let time = now - step + step * Int64(part) / Int64(count)
            let estimated = finger.pendingEstimate == nil && part == count && random.chance(profile.estimateRate)
            let next = sample(of: finger, time: time, coalesced: part < count, estimated: estimated)
            if estimated { finger.pendingEstimate = next }
            samples.append(next)
        }
        finger.remaining -= count
        return TouchChange(
            touch: touch, phase: .moved, samples: samples, predicted: predictions(of: finger, now: now),
            amendments: amendments)
    }

    private mutating func sample(of finger: Finger, time: Int64, coalesced: Bool, estimated: Bool) -> Sample {
        var sample = Sample(x: Int32((finger.x * 64).rounded()), y: Int32((finger.y * 64).rounded()), time: time)
        if profile.withForce {
            sample.force = UInt16.random(in: 200...3000, using: &random)
            sample.flags.insert(.hasForce)
        }
        if coalesced { sample.flags.insert(.coalesced) }
        if estimated {
            sample.flags.insert(.estimated)
            sample.estimationIndex = nextEstimation
            nextEstimation &+= 1
        }
        return sample
    }

    private mutating func predictions(of finger: Finger, now: Int64) -> [Sample] {
        let count = Int.random(in: profile.predicted, using: &random)
        guard count > 0 else { return [] }
        return (1...count).map { ahead in
            let dt = Double(ahead) / profile.hz
            return Sample(
                x: Int32(((finger.x + cos(finger.heading) * finger.speed * dt) * 64).rounded()),
                y: Int32(((finger.y + sin(finger.heading) * finger.speed * dt) * 64).rounded()),
                time: now + Int64(dt * 1e6))
        }
    }
}
