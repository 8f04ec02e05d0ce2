import Foundation
import Testing
import TouchSyncCore
import TouchSyncSimulation
import NIOCore
@testable import TouchSyncWeb
import TouchSyncWebWire

/// The browser wire's binary frames (docs/protocol.md, "Binary frames"):
/// each stands for exactly the JSON message it replaces. The vectors in
/// proto/conformance/v1/browser-binary.json are checked here on the Swift
/// side and in Chromium on the page's side (`BrowserTests`);
/// `TOUCHSYNC_WRITE_VECTORS=1 swift test --filter BrowserBinaryTests` writes
/// them afresh (review the diff: a change is a protocol change).
@Suite("Browser wire: binary frames")
struct BrowserBinaryTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("proto/conformance/v1/browser-binary.json")

    struct Vectors: Codable {
        var description: String
        var touches: [TouchCase]
        var batches: [BatchCase]
        var acks: [AckCase]
        var bundles: [BundleCase]
    }

    struct BundleCase: Codable {
        var note: String
        var binary: String
        /// The frames it carries, in order.
        var frames: [String]
    }

    struct TouchCase: Codable {
        var note: String
        /// The JSON text message a tab could send instead.
        var json: String
        var binary: String
    }

    struct BatchCase: Codable {
        var json: String
        var binary: String
    }

    struct AckCase: Codable {
        var n: UInt64
        var binary: String
    }

    static func touches() -> [(note: String, touch: BrowserMessage.Touch)] {
        [
            ("began with one sample, no force", .init(n: 1, phase: "began", id: 1, s: [[100, 50.5, 1_763_900_000_123.25]])),
            (
                "moved: two coalesced samples with force, one predicted", .init(n: 2, phase: "moved", id: 1, s: [[101, 51, 1_763_900_000_131.5, 0.5], [103, 52, 1_763_900_000_139.75, 0.625]],
                p: [[105, 53, 1_763_900_000_148, 0.625]])
            ),
            (
                "a pen: force and angles; the predicted sample has neither", .init(n: 3, phase: "moved", id: 7, s: [[10.5078125, -20.5078125, 5.0625, 1, 1.5, 0.25]],
                p: [[11, -21, 13]])
            ),
            ("stationary with no sample", .init(n: 4, phase: "stationary", id: 1)),
            ("ended with its last sample", .init(n: 5, phase: "ended", id: 1, s: [[104, 52.5, 1_763_900_000_156.25, 0]])),
            ("cancelled", .init(n: 6, phase: "cancelled", id: 7)),
            ("negative coordinates, halves away from zero", .init(n: 300, phase: "began", id: 1 << 40, s: [[-0.5078125, -1000, 0, nil, nil, nil]])),
            ("an azimuth alone (altitude null is 0)", .init(n: 301, phase: "moved", id: 1 << 40, s: [[0, 0, 1, nil, -3, nil]])),
        ]
    }

    /// Batches of a short session as the gateway sends them: every diff kind.
    static func batches() throws -> [(json: String, binary: [UInt8])] {
        var profile = SimulationProfile()
        profile.users = 2
        profile.clearRate = 0.01
        var simulator = SessionSimulator(seed: 5, profile: profile, userPrefix: "wire-ü")
        var out: [(String, [UInt8])] = []
        var kinds = Set<String>()
        try SimulatedBoardSession.run(&simulator, steps: 400, undoEvery: 29, redoEvery: 31, eraseEvery: 67) { step, _, sealed, board in
            let model = BrowserWire.model(sealed, after: board)
            let batchKinds = Set(model.diffs.map { "\($0)".prefix { $0 != "(" }.description })
            // The first batches, and every one with a kind not seen yet or a rare one.
            if step < 30 || !batchKinds.isSubset(of: kinds) || !batchKinds.isDisjoint(with: ["restored", "cleared", "removed", "amended"]) {
                out.append((BrowserWire.text(of: model), BrowserBinary.encode(model)))
            }
            kinds.formUnion(batchKinds)
        }
        #expect(kinds.isSuperset(of: ["began", "appended", "predicted", "amended", "accepted", "cancelled", "cleared", "removed", "restored"]), "\(kinds)")
        return out
    }

    /// What the gateway's writer makes of a tab's queued binary frames.
    static func bundles() throws -> [BundleCase] {
        let batches = try Self.batches().prefix(2).map(\.binary)
        func bundle(_ frames: [[UInt8]]) -> String {
            let buffer = WebGateway.bundle(frames.map { ByteBuffer(bytes: $0) })
            return hex(buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes) ?? [])
        }
        return [
            BundleCase(
                note: "two batches and two acks: the batches, and the last ack only (it covers the first)",
                binary: bundle([batches[0], BrowserBinary.ack(7), batches[1], BrowserBinary.ack(9)]),
                frames: [hex(batches[0]), hex(batches[1]), hex(BrowserBinary.ack(9))]),
            BundleCase(note: "a frame alone goes as itself", binary: bundle([batches[0]]), frames: [hex(batches[0])]),
        ]
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func bytes(_ hex: String) -> [UInt8] {
        stride(from: 0, to: hex.count, by: 2).map { offset in
            let start = hex.index(hex.startIndex, offsetBy: offset)
            return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16)!
        }
    }

    @Test func theVectorsAreWhatTheGatewaySpeaks() throws {
        let actual = Vectors(
            description: "TouchSync browser wire, binary frames (docs/protocol.md, \"Binary frames\"): each binary frame (hex) and the JSON message it stands for. touches: a tab's touch message (the gateway reads the binary one as the JSON one, to the same fixed point); batches: the gateway's batch (a replica applies the binary one as the JSON one; binary batches carry no hub time); acks: the gateway's ack {\"t\":\"ack\",\"n\":n}.",
            touches: try Self.touches().map { TouchCase(note: $0.note, json: BrowserMessage.touch($0.touch).json, binary: Self.hex(try BrowserBinary.encode($0.touch))) },
            batches: try Self.batches().map { BatchCase(json: $0.json, binary: Self.hex($0.binary)) },
            acks: [0, 1, 127, 128, 300, 1 << 35].map { AckCase(n: $0, binary: Self.hex(BrowserBinary.ack($0))) },
            bundles: try Self.bundles())
        if ProcessInfo.processInfo.environment["TOUCHSYNC_WRITE_VECTORS"] != nil {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try encoder.encode(actual).write(to: Self.file)
        }
        let expected = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: Self.file))
        #expect(expected.touches.map(\.binary) == actual.touches.map(\.binary))
        #expect(expected.batches.map(\.binary) == actual.batches.map(\.binary))
        #expect(expected.acks.map(\.binary) == actual.acks.map(\.binary))
        for vector in expected.touches {
            // Read back, a binary touch is the JSON one: same number, phase, id and fixed-point samples.
            guard case .touch(let json) = try BrowserMessage.decode(vector.json) else {
                Issue.record("\(vector.note): not a touch")
                continue
            }
            let binary = try BrowserBinary.decodeTouch(Self.bytes(vector.binary))
            #expect(binary.n == json.n && binary.phase == json.phase && binary.id == json.id, "\(vector.note)")
            #expect(try TabSamples.fixedPoint(binary.s ?? []) == TabSamples.fixedPoint(json.s ?? []), "\(vector.note): coalesced")
            #expect(try TabSamples.fixedPoint(binary.p ?? []) == TabSamples.fixedPoint(json.p ?? []), "\(vector.note): predicted")
        }
        for vector in expected.batches {
            guard case .batch(let json) = try BrowserMessage.decode(vector.json),
                case .batch(let binary) = try BrowserBinary.decodeFromGateway(Self.bytes(vector.binary))
            else {
                Issue.record("not a batch: \(vector.json.prefix(80))")
                continue
            }
            #expect(binary == json)
        }
        for vector in expected.acks { #expect(try BrowserBinary.decodeFromGateway(Self.bytes(vector.binary)) == .ack(n: vector.n)) }
        #expect(expected.bundles.map(\.binary) == actual.bundles.map(\.binary))
        for vector in expected.bundles {
            #expect(try BrowserBinary.framesFromGateway(Self.bytes(vector.binary)).map(Self.hex) == vector.frames, "\(vector.note)")
        }
    }

    /// Random touches (any mix of force, angles and none per sample) read back to the JSON ones' fixed point.
    @Test func randomTouchesRoundTrip() throws {
        var random = SystemRandomNumberGenerator()
        for round in 0..<500 {
            func sample() -> [Double?] { Self.randomSample(using: &random) }
            let touch = BrowserMessage.Touch(
                n: UInt64(round + 1), phase: BrowserBinary.phases.randomElement(using: &random), id: UInt64.random(in: 0...UInt64.max, using: &random),
                s: (0..<Int.random(in: 0...5, using: &random)).map { _ in sample() }, p: (0..<Int.random(in: 0...3, using: &random)).map { _ in sample() })
            let read = try BrowserBinary.decodeTouch(try BrowserBinary.encode(touch))
            #expect(read.n == touch.n && read.phase == touch.phase && read.id == touch.id)
            #expect(try TabSamples.fixedPoint(read.s ?? []) == TabSamples.fixedPoint(touch.s ?? []), "\(touch)")
            #expect(try TabSamples.fixedPoint(read.p ?? []) == TabSamples.fixedPoint(touch.p ?? []), "\(touch)")
        }
    }

    /// A page's sample with any mix of force, angles (altitude or not) and neither.
    static func randomSample(using random: inout some RandomNumberGenerator) -> [Double?] {
        var values: [Double?] = [
            Double.random(in: -5000...5000, using: &random), Double.random(in: -5000...5000, using: &random), Double.random(in: 0...2e12, using: &random),
        ]
        let force: Double? = Bool.random(using: &random) ? Double.random(in: 0...1, using: &random) : nil
        let azimuth: Double? = Bool.random(using: &random) ? Double.random(in: -6...6, using: &random) : nil
        if force != nil || azimuth != nil { values.append(force) }
        if let azimuth {
            values.append(azimuth)
            values.append(Bool.random(using: &random) ? Double.random(in: 0...1.5, using: &random) : nil)
        }
        return values
    }

    /// Broken frames: refused by their number once it was read (taken), as a connection error before.
    @Test func brokenTouchFramesAreRefused() throws {
        let good = try BrowserBinary.encode(.init(n: 9, phase: "moved", id: 1, s: [[1, 2, 3, 0.5]], p: [[2, 3, 4]]))
        for cut in 3..<good.count {
            do {
                _ = try BrowserBinary.decodeTouch(good.prefix(cut))
                Issue.record("a frame cut to \(cut) bytes was read")
            } catch let refused as BrowserMessage.RefusedByNumber {
                #expect(refused.number == 9 && refused.code == "MALFORMED")
            }
        }
        #expect(throws: BrowserWireError.self) { try BrowserBinary.decodeTouch([1]) }
        #expect(throws: BrowserWireError.self) { try BrowserBinary.decodeTouch([7, 9]) }
        var badPhase = good
        badPhase[2] = 9
        #expect(throws: BrowserMessage.RefusedByNumber.self) { try BrowserBinary.decodeTouch(badPhase) }
        // 2,000 samples claimed: TOO_MANY_SAMPLES before anything is allocated.
        do {
            _ = try BrowserBinary.decodeTouch([1, 9, 1, 1, 0xD0, 0x0F, 0, 0])
            Issue.record("2,000 samples read")
        } catch let refused as BrowserMessage.RefusedByNumber {
            #expect(refused.code == "TOO_MANY_SAMPLES")
        }
        #expect(throws: BrowserWireError.self) { try BrowserBinary.decodeFromGateway([1, 5, 0xFF, 0xFF, 0xFF, 0x0F]) }
        #expect(throws: BrowserWireError.self) { try BrowserBinary.decodeFromGateway(good) }  // a count past the frame
    }
}
