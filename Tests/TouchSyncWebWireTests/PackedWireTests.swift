import Foundation
import Testing
import TouchSyncCore
import TouchSyncSimulation
@testable import TouchSyncWeb
import TouchSyncWebWire

/// The browser wire's packed frames (docs/protocol.md, "Packed frames"):
/// chained touches from a tab read back as the JSON touches they stand for,
/// and packed batches read against the tab's replica as the JSON batches.
/// The vectors in proto/conformance/v1/browser-packed.json are checked here
/// and in Chromium against the page's wire.js (`BrowserTests`);
/// `TOUCHSYNC_WRITE_VECTORS=1 swift test --filter PackedWireTests` writes
/// them afresh (review the diff: a change is a protocol change).
@Suite("Browser wire: packed frames")
struct PackedWireTests {
    static let file = BrowserBinaryTests.file.deletingLastPathComponent().appendingPathComponent("browser-packed.json")

    struct Vectors: Codable {
        var description: String
        var touchSessions: [TouchSession]
        var batchSession: BatchSession
    }

    /// One connection's touches in order: each JSON touch and the chained frame (hex) the page sends for it.
    struct TouchSession: Codable {
        var note: String
        var touches: [String]
        var frames: [String]
    }

    /// A board from empty: each batch as JSON and as the packed frame that a replica reads as it.
    struct BatchSession: Codable {
        var snapshot: String
        var batches: [BatchCase]
    }

    struct BatchCase: Codable {
        var json: String
        var packed: String
        /// The same batch on wire `packed2` (its blocks "S").
        var packed2: String
    }

    static func touchSessions() -> [(note: String, touches: [BrowserMessage.Touch])] {
        let t0 = 1_763_900_000_000.0
        func at(_ ms: Double) -> Double { t0 + ms }
        // One finger at 60 Hz on a curve, with one predicted sample per event.
        var finger: [BrowserMessage.Touch] = []
        for event in 0..<8 {
            let time = Double(event) * 16.6875
            let x = 200 + Double(event) * 7.25 + Double(event * event) * 0.125
            let y = 300 - Double(event) * 3.5
            let phase = event == 0 ? "began" : event == 7 ? "ended" : "moved"
            finger.append(
                .init(
                    n: UInt64(event + 1), phase: phase, id: 1, s: [[x, y, at(time)]],
                    p: phase == "ended" ? nil : [[x + 7.5, y - 3.5, at(time + 16.6875)]]))
        }
        return [
            ("one finger at 60 Hz: began, six moves with a prediction each, ended", finger),
            (
                "two fingers interleaved, coalesced samples, a pen with force and angles, numbers that skip (other messages between)",
                [
                    .init(n: 1, phase: "began", id: 3, s: [[10, 10, at(0), 0.5, 1.5, 0.75]]),
                    .init(n: 2, phase: "began", id: 4, s: [[400, 20, at(1)]]),
                    .init(n: 3, phase: "moved", id: 3, s: [[12, 11, at(8), 0.5, 1.5, 0.75], [14.5, 12, at(16), 0.625, 1.5, 0.8]], p: [[17, 13, at(24), 0.625]]),
                    .init(n: 5, phase: "moved", id: 4, s: [[401, 22, at(17)]], p: [[402, 24, at(33)], [403, 26, at(49)]]),
                    .init(n: 6, phase: "stationary", id: 3, p: [[17, 13, at(40)]]),
                    .init(n: 7, phase: "cancelled", id: 4),
                    .init(n: 9, phase: "ended", id: 3, s: [[15, 12, at(32), 0]]),
                ]
            ),
            (
                "a new touch with only a prediction, an id far away, negative coordinates",
                [
                    .init(n: 40, phase: "stationary", id: 1 << 40, p: [[-5.5, -1000, at(5)]]),
                    .init(n: 41, phase: "moved", id: 1 << 40, s: [[-4.5078125, -999, at(8)], [-3, -998, at(12)], [-2, -997, at(16)], [-1, -996, at(20)]]),
                    .init(n: 42, phase: "moved", id: 7, s: [[0, 0, 0]]),
                ]
            ),
        ]
    }

    /// The batches of a short session, each as JSON and packed, consecutive from an empty board.
    static func batchSession(
        steps: Int = 160, profile: SimulationProfile? = nil
    ) throws -> (snapshot: BrowserSnapshot, batches: [(json: String, packed: [UInt8], packed2: [UInt8], model: BrowserBatch)]) {
        var standard = SimulationProfile()
        standard.users = 2
        standard.clearRate = 0.01
        var simulator = SessionSimulator(seed: 5, profile: profile ?? standard, userPrefix: "wire-ü")
        var out: [(String, [UInt8], [UInt8], BrowserBatch)] = []
        try SimulatedBoardSession.run(&simulator, steps: steps, undoEvery: 29, redoEvery: 31, eraseEvery: 67) { _, _, sealed, board in
            let model = BrowserWire.model(sealed, after: board)
            let packed = try #require(PackedBatch.encode(sealed, after: board))
            let packed2 = try #require(PackedBatch.encode(sealed, after: board, blocks: .packed2))
            out.append((BrowserWire.text(of: model), packed, packed2, model))
        }
        return (BrowserSnapshot(seq: 0, accepted: [], active: []), out)
    }

    /// A batch with each run of appends and predictions in stroke order (a
    /// packed2 block's segments come by rank; appends and predictions of
    /// different strokes commute, those of one stroke keep their order).
    static func byStroke(_ batch: BrowserBatch) -> BrowserBatch {
        func stroke(_ diff: BrowserDiff) -> UInt64? {
            switch diff {
            case .appended(let id, _, _), .predicted(let id, _): id
            default: nil
            }
        }
        var out: [BrowserDiff] = []
        var run: [BrowserDiff] = []
        func flush() {
            out += run.enumerated().sorted { (stroke($0.element)!, $0.offset) < (stroke($1.element)!, $1.offset) }.map(\.element)
            run = []
        }
        for diff in batch.diffs {
            if stroke(diff) != nil { run.append(diff) } else { flush(); out.append(diff) }
        }
        flush()
        return BrowserBatch(seq: batch.seq, diffs: out, hubTime: batch.hubTime)
    }

    static func vectors() throws -> Vectors {
        var sessions: [TouchSession] = []
        for session in touchSessions() {
            var chains = TouchChains()
            sessions.append(
                TouchSession(
                    note: session.note, touches: session.touches.map { BrowserMessage.touch($0).json },
                    frames: try session.touches.map { BrowserBinaryTests.hex(try PackedTouch.encode($0, chains: &chains)) }))
        }
        let batches = try batchSession()
        return Vectors(
            description:
                "TouchSync browser wire, packed frames (docs/protocol.md, \"Packed frames\"). touchSessions: one connection's touches, each as JSON and as the chained frame (hex) a tab sends for it, in order (each frame is read against the ones before it on the connection). batchSession: a board from an empty snapshot, each batch as JSON and as the packed frame (hex) the gateway sends on wire packed and on wire packed2; a replica that applied the batches before reads either packed frame as the JSON batch.",
            touchSessions: sessions,
            batchSession: BatchSession(
                snapshot: String(decoding: try JSONEncoder().encode(batches.snapshot), as: UTF8.self),
                batches: batches.batches.map { BatchCase(json: $0.json, packed: BrowserBinaryTests.hex($0.packed), packed2: BrowserBinaryTests.hex($0.packed2)) }))
    }

    @Test func theVectorsAreWhatTheGatewaySpeaks() throws {
        let actual = try Self.vectors()
        if ProcessInfo.processInfo.environment["TOUCHSYNC_WRITE_VECTORS"] != nil {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try encoder.encode(actual).write(to: Self.file)
        }
        let expected = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: Self.file))
        #expect(expected.touchSessions.map(\.frames) == actual.touchSessions.map(\.frames))
        #expect(expected.batchSession.batches.map(\.packed) == actual.batchSession.batches.map(\.packed))
        #expect(expected.batchSession.batches.map(\.packed2) == actual.batchSession.batches.map(\.packed2))
        // Read back in order on one chain, each frame is its JSON touch.
        for session in expected.touchSessions {
            var chains = TouchChains()
            for (json, frame) in zip(session.touches, session.frames) {
                guard case .touch(let sent) = try BrowserMessage.decode(json) else {
                    Issue.record("not a touch: \(json)")
                    continue
                }
                let read = try PackedTouch.decode(BrowserBinaryTests.bytes(frame), chains: &chains)
                #expect(read.n == sent.n && read.phase == sent.phase && read.id == sent.id, "\(session.note): \(json)")
                #expect(try TabSamples.fixedPoint(read.s ?? []) == TabSamples.fixedPoint(sent.s ?? []), "\(session.note): \(json)")
                #expect(try TabSamples.fixedPoint(read.p ?? []) == TabSamples.fixedPoint(sent.p ?? []), "\(session.note): \(json)")
            }
        }
        // A replica reads each packed batch as the JSON one, and applying either keeps it the same.
        var replica = BrowserReplica()
        try replica.apply(try JSONDecoder().decode(BrowserSnapshot.self, from: Data(expected.batchSession.snapshot.utf8)))
        for vector in expected.batchSession.batches {
            guard case .batch(let json) = try BrowserMessage.decode(vector.json) else {
                Issue.record("not a batch: \(vector.json.prefix(80))")
                continue
            }
            let packed = try PackedBatch.decode(BrowserBinaryTests.bytes(vector.packed), replica: replica)
            #expect(packed == json, "\(vector.json.prefix(120))")
            let packed2 = try PackedBatch.decode(BrowserBinaryTests.bytes(vector.packed2), replica: replica, blocks: .packed2)
            #expect(Self.byStroke(packed2) == Self.byStroke(json), "\(vector.json.prefix(300)) read as \(packed2)")
            #expect(PackedBatch.sequence(of: BrowserBinaryTests.bytes(vector.packed)) == json.seq)
            #expect(PackedBatch.sequence(of: BrowserBinaryTests.bytes(vector.packed2)) == json.seq)
            #expect(try replica.apply(packed) == .applied)
        }
    }

    /// A long session: every batch read back exactly, every diff kind seen, and fewer bytes than the binary frames.
    @Test func aLongSessionReadsBackInFewerBytes() throws {
        let session = try Self.batchSession(steps: 3000)
        var replica = BrowserReplica()
        try replica.apply(session.snapshot)
        var packedBytes = 0, binaryBytes = 0
        var kinds = Set<String>()
        for batch in session.batches {
            let read = try PackedBatch.decode(batch.packed, replica: replica)
            #expect(read == batch.model)
            #expect(Self.byStroke(try PackedBatch.decode(batch.packed2, replica: replica, blocks: .packed2)) == Self.byStroke(batch.model))
            #expect(try replica.apply(read) == .applied)
            packedBytes += batch.packed.count
            binaryBytes += BrowserBinary.encode(batch.model).count
            kinds.formUnion(batch.model.diffs.map { "\($0)".prefix { $0 != "(" }.description })
        }
        #expect(kinds.isSuperset(of: ["began", "appended", "predicted", "amended", "accepted", "cancelled", "cleared", "removed", "restored"]), "\(kinds)")
        #expect(packedBytes < binaryBytes, "packed \(packedBytes) bytes, binary \(binaryBytes)")
    }

    /// Ten fingers at 60 Hz on one board, one predicted sample an event, some
    /// events skipped (a finger that did not move): what `load --web` draws.
    /// packed2 names segments by rank, gives the predictions columns of their
    /// own and expects a skipped event's time once: it reads back exactly, in
    /// well under the bytes of packed.
    @Test func tenFingersAt60HzCostLessOnPacked2() throws {
        var profile = SimulationProfile()
        profile.users = 10
        profile.fingersPerUser = 1
        profile.hz = 60
        profile.coalesced = 1...1
        profile.predicted = 1...1
        profile.withForce = false
        profile.estimateRate = 0
        profile.clearRate = 0
        profile.aliveSetRate = 0
        profile.vanishRate = 0
        profile.strokeLength = 20...400
        var simulator = SessionSimulator(seed: 11, profile: profile, userPrefix: "tab")
        var board = BoardState()
        var replica = BrowserReplica()
        try replica.apply(BrowserSnapshot(seq: 0, accepted: [], active: []))
        var packed = 0, packed2 = 0, samples = 0
        // Five frames a batch, as a hub's turn gathers about half of ten fingers' events at 60 Hz.
        for _ in 0..<600 {
            var diffs: [StrokeDiff] = []
            for _ in 0..<5 {
                if case .frame(let user, let frame, let style) = simulator.next() { try board.reduce(frame, from: user, style: style, into: &diffs) }
            }
            guard !diffs.isEmpty else { continue }
            let sealed = board.sealBatch(diffs, hubTime: 0)
            let model = BrowserWire.model(sealed, after: board)
            let one = try #require(PackedBatch.encode(sealed, after: board))
            let two = try #require(PackedBatch.encode(sealed, after: board, blocks: .packed2))
            let read = try PackedBatch.decode(two, replica: replica, blocks: .packed2)
            #expect(Self.byStroke(read) == Self.byStroke(model))
            let outcome = try replica.apply(read)
            #expect(outcome == .applied, "\(outcome) at \(sealed.sequence): \(model)")
            packed += one.count
            packed2 += two.count
            for case .appended(_, _, let flat) in model.diffs { samples += flat.count / 4 }
        }
        print("ten fingers at 60 Hz, five frames a batch: \(samples) samples, packed \(packed) bytes, packed2 \(packed2)")
        #expect(samples > 1000 && packed2 * 10 < packed * 8, "packed \(packed) bytes, packed2 \(packed2)")
    }

    /// Packed2 batches with bytes changed at random are refused or read, never trap (a tab keeps its page).
    @Test func mangledPacked2BatchesThrowOrRead() throws {
        let session = try Self.batchSession(steps: 400)
        var random = SystemRandomNumberGenerator()
        var replica = BrowserReplica()
        try replica.apply(session.snapshot)
        var refused = 0, tried = 0
        for batch in session.batches {
            for _ in 0..<8 where batch.packed2.count > 2 {
                var mangled = batch.packed2
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    mangled[Int.random(in: 2..<mangled.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
                if Bool.random(using: &random) { mangled.removeLast(Int.random(in: 0..<(mangled.count - 2), using: &random)) }
                tried += 1
                if (try? PackedBatch.decode(mangled, replica: replica, blocks: .packed2)) == nil { refused += 1 }
            }
            #expect(try replica.apply(try PackedBatch.decode(batch.packed2, replica: replica, blocks: .packed2)) == .applied)
        }
        #expect(tried > 1000 && refused > tried / 4, "\(refused) of \(tried) refused")
    }

    /// Random touches on one connection (any touches, phases, numbers, force and angles) read back to the JSON ones' fixed point.
    @Test func randomTouchesOnOneChainRoundTrip() throws {
        var random = SystemRandomNumberGenerator()
        var sender = TouchChains()
        var receiver = TouchChains()
        var number: UInt64 = 0
        for _ in 0..<2000 {
            func sample() -> [Double?] { BrowserBinaryTests.randomSample(using: &random) }
            number += UInt64.random(in: 1...3, using: &random)
            // Few touch ids, so chains are continued, and sometimes many, so the oldest are forgotten.
            let id = Bool.random(using: &random) ? UInt64.random(in: 0...3, using: &random) : UInt64.random(in: 0...100, using: &random)
            let touch = BrowserMessage.Touch(
                n: number, phase: BrowserBinary.phases.randomElement(using: &random), id: id,
                s: (0..<Int.random(in: 0...5, using: &random)).map { _ in sample() }, p: (0..<Int.random(in: 0...4, using: &random)).map { _ in sample() })
            let read = try PackedTouch.decode(try PackedTouch.encode(touch, chains: &sender), chains: &receiver)
            #expect(read.n == touch.n && read.phase == touch.phase && read.id == touch.id)
            #expect(try TabSamples.fixedPoint(read.s ?? []) == TabSamples.fixedPoint(touch.s ?? []), "\(touch)")
            #expect(try TabSamples.fixedPoint(read.p ?? []) == TabSamples.fixedPoint(touch.p ?? []), "\(touch)")
            #expect(receiver.touchCount <= TouchChains.maxTouches)
        }
    }

    /// A moving finger at 60 Hz with a prediction costs a few bytes a frame, against about 27 in a standalone binary frame.
    @Test func aMovingFingerCostsAFewBytes() throws {
        let session = Self.touchSessions()[0].touches
        var chains = TouchChains()
        let chained = try session.map { try PackedTouch.encode($0, chains: &chains).count }
        let standalone = try session.map { try BrowserBinary.encode($0).count }
        // After the first frame (absolute time), each is under half of its standalone frame.
        for (packed, binary) in zip(chained.dropFirst(), standalone.dropFirst()) { #expect(packed * 2 < binary, "\(chained) against \(standalone)") }
    }

    /// Broken frames throw (the gateway closes the connection: the chain is lost), and never allocate by a claimed count.
    @Test func brokenFramesThrow() throws {
        var chains = TouchChains()
        let good = try PackedTouch.encode(.init(n: 9, phase: "moved", id: 1, s: [[1, 2, 3, 0.5]], p: [[2, 3, 4]]), chains: &chains)
        for cut in 0..<good.count {
            var receiver = TouchChains()
            #expect(throws: BrowserWireError.self) { try PackedTouch.decode(good.prefix(cut), chains: &receiver) }
        }
        var receiver = TouchChains()
        #expect(throws: BrowserWireError.self) { try PackedTouch.decode(good + [0], chains: &receiver) }
        receiver = TouchChains()
        #expect(throws: BrowserWireError.self) { try PackedTouch.decode([0x04, 0, 0x07], chains: &receiver) }  // phase 7
        receiver = TouchChains()
        // 2,000 coalesced samples claimed.
        #expect(throws: BrowserWireError.self) { try PackedTouch.decode([0x04, 0, 0x39, 0xCD, 0x0F], chains: &receiver) }
        receiver = TouchChains()
        // Number 0 (the delta −1).
        #expect(throws: BrowserWireError.self) { try PackedTouch.decode([0x04, 1, 0x08], chains: &receiver) }

        let replica = BrowserReplica()
        // A block claiming a million samples at width 64, in a few bytes.
        #expect(throws: BrowserWireError.self) { try PackedBatch.decode([0x04, 1, 1, 0x73, 1, 2, 0x80, 0x80, 0x3D, 64, 64, 64], replica: replica) }
        // Samples for a stroke the replica does not hold.
        #expect(throws: BrowserWireError.self) { try PackedBatch.decode([0x04, 1, 1, 0x73, 1, 2, 4, 0, 0, 0, 0], replica: replica) }
        // Random bytes never crash the reader.
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let bytes = [0x04] + (0..<Int.random(in: 0...24, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            var chains = TouchChains()
            _ = try? PackedTouch.decode(bytes, chains: &chains)
            _ = try? PackedBatch.decode(bytes, replica: replica)
        }
    }
}
