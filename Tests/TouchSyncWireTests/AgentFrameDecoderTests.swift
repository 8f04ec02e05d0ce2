import PropertyChecks
import Synchronization
import Testing
import TouchSyncCore
import TouchSyncSimulation
import TouchSyncWire

/// The reference: SwiftProtobuf's decoding, then the model's checks.
private func referenceDecode(_ bytes: [UInt8]) -> TouchFrame? {
    guard let message = try? WireCodec.decode(Touchsync_V1_AgentMessage.self, from: bytes),
        case .frame(let proto)? = message.body
    else { return nil }
    return try? TouchFrame(proto, sequence: message.sequence)
}

private func fastDecode(_ bytes: [UInt8]) -> TouchFrame? {
    bytes.withUnsafeBytes { AgentFrameDecoder.decode($0) }
}

private func encoded(_ frame: TouchFrame, _ format: WireFormat = .v1) -> [UInt8] {
    var message = Touchsync_V1_AgentMessage()
    message.sequence = frame.sequence
    message.frame = frame.proto(format)
    return WireCodec.encode(message)
}

/// Protobuf pieces for encodings SwiftProtobuf itself never writes.
func varint(_ value: UInt64) -> [UInt8] {
    var value = value, out: [UInt8] = []
    while value >= 0x80 {
        out.append(UInt8(truncatingIfNeeded: value) | 0x80)
        value >>= 7
    }
    return out + [UInt8(value)]
}

private func field(_ number: UInt64, _ body: [UInt8]) -> [UInt8] {
    varint(number << 3 | 2) + varint(UInt64(body.count)) + body
}

/// Frames of every shape: simulated sessions (coalesced, predicted,
/// estimated samples, alive sets) and random runs at the value limits with
/// every flag, force, angles and amendments.
private func frames(seed: UInt64) -> [TouchFrame] {
    var profile = SimulationProfile()
    profile.withForce = seed % 2 == 0
    var simulator = SessionSimulator(seed: seed, profile: profile)
    var frames: [TouchFrame] = []
    while frames.count < 40 {
        if case .frame(_, let frame, _) = simulator.next() { frames.append(frame) }
    }
    let run = sampleRun(seed: seed)
    let split = run.count / 2
    let amendments = run.filter { $0.estimationIndex != 0 }
    frames.append(
        TouchFrame(
            sequence: seed,
            changes: [
                TouchChange(touch: seed, phase: .moved, samples: Array(run[..<split]), predicted: Array(run[split...].prefix(5))),
                TouchChange(touch: 0, phase: .stationary, amendments: amendments),
                TouchChange(touch: .max, phase: .cancelled),
            ],
            aliveTouches: seed % 3 == 0 ? nil : [seed, 0, .max]))
    return frames
}

@Suite("Wire protocol: the one-pass agent frame reader")
struct AgentFrameDecoderTests {
    /// Every frame our encoder writes, in v1 and packed in v2, takes the
    /// one-pass reader and comes out exactly as SwiftProtobuf's path decodes it.
    @Test(arguments: WireFormat.allCases) func readsEveryCanonicalFrameAsSwiftProtobufDoes(format: WireFormat) async {
        await checkProperty(count: 60, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            for frame in frames(seed: seed) {
                let bytes = encoded(frame, format)
                let fast = fastDecode(bytes)
                #expect(fast != nil, "the one-pass reader gave up on a canonical frame")
                #expect(fast == referenceDecode(bytes))
                #expect(fast == frame)
            }
        }
    }

    /// Damaged messages (a byte changed, inserted or cut, a field repeated or
    /// unknown): whenever the one-pass reader answers, SwiftProtobuf's path
    /// gives the same frame; when it gives up, the caller falls back. Some
    /// damage leaves a valid frame, so the comparison is not vacuous.
    @Test(arguments: WireFormat.allCases) func agreesWithSwiftProtobufOnDamagedMessages(format: WireFormat) async {
        let answered = Counter()
        await checkProperty(count: 40, input: Gen.uint64(in: 0...UInt64.max)) { seed in
            var random = SplitMix64(seed: seed)
            for frame in frames(seed: seed) {
                let original = encoded(frame, format)
                for _ in 0..<8 {
                    var bytes = original
                    switch Int.random(in: 0..<5, using: &random) {
                    case 0:
                        bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
                    case 1:
                        bytes.insert(UInt8.random(in: 0...255, using: &random), at: Int.random(in: 0...bytes.count, using: &random))
                    case 2:
                        bytes.removeLast(Int.random(in: 1...bytes.count, using: &random))
                    case 3:
                        // Flip one bit: a changed delta, count, tag or wire type.
                        let index = Int.random(in: 0..<bytes.count, using: &random)
                        bytes[index] ^= 1 << UInt8.random(in: 0...7, using: &random)
                    default:
                        bytes += varint(UInt64.random(in: 1...2000, using: &random) << 3) + varint(7)
                    }
                    let fast = fastDecode(bytes)
                    if let fast {
                        answered.add()
                        #expect(fast == referenceDecode(bytes), "the readers disagree on \(bytes)")
                    }
                }
            }
        }
        #expect(answered.value > 100, "too few damaged messages were still valid frames to compare")
    }

    /// Valid encodings SwiftProtobuf accepts but never writes: the one-pass
    /// reader gives up on them rather than guess, and the reference reads
    /// them (so the hub, which falls back, accepts them too).
    @Test func givesUpOnUnusualButValidEncodings() throws {
        let frame = TouchFrame(
            sequence: 7,
            changes: [
                TouchChange(
                    touch: 3, phase: .moved,
                    samples: [Sample(x: 64, y: 128, time: 1000), Sample(x: 70, y: 130, time: 9000)])
            ],
            aliveTouches: [3])
        let canonical = encoded(frame)
        #expect(fastDecode(canonical) == frame)

        // The sequence said twice (the last one counts).
        let twice = canonical + varint(1 << 3) + varint(8)
        #expect(fastDecode(twice) == nil)
        #expect(referenceDecode(twice)?.sequence == 8)

        // An unknown field (ignored by protobuf readers).
        let unknown = canonical + varint(99 << 3) + varint(1)
        #expect(fastDecode(unknown) == nil)
        #expect(referenceDecode(unknown) == frame)

        // The x column unpacked (one tag per value).
        var proto = frame.proto
        let xs = proto.changes[0].samples.x
        proto.changes[0].samples.x = []
        var run = WireCodec.encode(proto.changes[0].samples)
        for x in xs { run += varint(1 << 3) + varint(UInt64(UInt32(bitPattern: (x << 1) ^ (x >> 31)))) }
        proto.changes[0].samples = try WireCodec.decode(Touchsync_V1_SampleRun.self, from: run)
        #expect(proto.changes[0].samples.x == xs)
        let change = varint(1 << 3) + varint(3) + varint(2 << 3) + varint(2) + field(3, run)
        var frameBytes = field(1, change)
        frameBytes += field(2, field(1, varint(3)))
        frameBytes += varint(3 << 3) + varint(UInt64(bitPattern: (proto.eventTime << 1) ^ (proto.eventTime >> 63)))
        let unpacked = varint(1 << 3) + varint(7) + field(3, frameBytes)
        #expect(fastDecode(unpacked) == nil)
        #expect(referenceDecode(unpacked) == frame)

        // Not a frame at all.
        var hello = Touchsync_V1_AgentMessage()
        hello.hello.board = "b"
        #expect(fastDecode(WireCodec.encode(hello)) == nil)
        #expect(fastDecode([]) == nil)
    }
}

/// A count shared by the property's iterations.
private final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

@Suite("Wire protocol: the one-pass diff batch reader")
struct DiffBatchReaderTests {
    /// A replica fed every batch through the one-pass reader decodes each
    /// exactly as SwiftProtobuf's path does, and ends equal to the hub;
    /// damaged batches are either read identically or left to SwiftProtobuf.
    @Test func readsBatchesAsSwiftProtobufDoes() async {
        await checkProperty(count: 40, input: Gen.uint64(in: 0...UInt64.max), Gen.int(in: 1...8)) { seed, window in
            var simulator = batchTestSimulator(seed: seed)
            var random = SplitMix64(seed: seed)
            var hub = BoardState()
            var history = UndoHistory()
            var encoder = DiffStreamEncoder(board: "board")
            var coalescer = DiffCoalescer()
            var replica = BoardState()
            var readInOnePass = 0
            for step in 1...600 {
                var diffs = try reduceNext(&simulator, into: &hub)
                if step % 97 == 0 { history.undo(by: UserNamespace("user-0"), on: &hub, into: &diffs) }
                history.note(diffs, on: hub)
                coalescer.add(contentsOf: diffs)
                guard step % window == 0 || step == 600, !coalescer.isEmpty else { continue }
                let bytes = encoder.encodedBytes(hub.sealBatch(coalescer.take(), hubTime: Int64(step)))
                let proto = try WireCodec.decode(Touchsync_V1_DiffBatch.self, from: bytes)
                let reference = try DiffStreamDecoder.decode(proto, against: replica)
                let fast = bytes.withUnsafeBytes { DiffBatchReader.decode($0, against: replica) }
                if let fast {
                    readInOnePass += 1
                    #expect(fast.batch == reference)
                    #expect(fast.board == "board")
                }
                // Damage a copy: whatever the one-pass reader still reads, SwiftProtobuf reads the same.
                var damaged = bytes
                damaged[Int.random(in: 0..<damaged.count, using: &random)] ^= 1 << UInt8.random(in: 0...7, using: &random)
                if let read = damaged.withUnsafeBytes({ DiffBatchReader.decode($0, against: replica) }) {
                    let slow = try? DiffStreamDecoder.decode(
                        WireCodec.decode(Touchsync_V1_DiffBatch.self, from: damaged), against: replica)
                    #expect(read.batch == slow)
                }
                let applied = try bytes.withUnsafeBytes { try replica.apply(encodedBatch: $0) }
                #expect(applied.batch == reference)
            }
            #expect(readInOnePass > 0)
            #expect(replica == hub)
        }
    }
}
