import Foundation
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncSimulation
import TouchSyncWire

/// One measured stage.
public struct BenchFigure: Sendable {
    public var stage: String
    public var samples: Int
    /// Best of the repetitions, in seconds.
    public var seconds: Double
    public var samplesPerSecond: Double { Double(samples) / seconds }
}

/// The model and codec micro benchmark: the same pre-generated session
/// through every stage, best of `repetitions`, plus bytes per sample.
public struct CodecBenchmark: Sendable {
    public var frames = 200_000
    public var users = 4
    public var fingers = 5
    public var coalesced = 2
    public var withForce = false
    public var repetitions = 5
    public var seed: UInt64 = 1
    /// Run only the reduce stage (for profilers).
    public var reduceOnly = false
    /// After encoding, run only the replica's decode-and-apply stage, ten
    /// times as often (for profilers).
    public var applyOnly = false
    /// After reducing, run only the board digests (for profilers).
    public var digestOnly = false

    public init() {}

    /// A stage that did not give back what went in (the benchmark checks as it measures).
    public struct Mismatch: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    public struct Report: Sendable {
        public var figures: [BenchFigure]
        public var samples: Int
        public var agentBytesPerSample: Double
        /// The same frames in wire format v2 (packed changes).
        public var agentBytesPerSampleV2: Double = 0
        public var publishBytesPerSample: Double
        /// The diff stream when the hub publishes one coalesced batch per tick
        /// of `eventsPerTick` input events per user (2 at 120 Hz: 16.7 ms).
        public var tickBytesPerSample: Double
        public var eventsPerTick: Int
        /// Bytes per sample of the diff stream for ticks of 1, 2, 4 and 8 events per user.
        public var bytesPerSampleByTick: [(eventsPerTick: Int, bytesPerSample: Double)]
        /// The same in wire format v2 (packed appends).
        public var bytesPerSampleByTickV2: [(eventsPerTick: Int, bytesPerSample: Double)] = []
        /// The same on the v2 stream without predictions.
        public var bytesPerSampleByTickV2WithoutPredictions: [(eventsPerTick: Int, bytesPerSample: Double)] = []
        public var snapshotBytesPerSample: Double
        public var digest: BoardDigest
    }

    public func run(progress: (String) -> Void = { _ in }) throws -> Report {
        var profile = SimulationProfile()
        profile.users = users
        profile.fingersPerUser = fingers
        profile.coalesced = coalesced...coalesced
        profile.predicted = 1...1
        profile.withForce = withForce
        profile.clearRate = 0
        profile.strokeLength = 60...600
        // Drawing fingers move continuously while down; an occasional pause (a skipped
        // event, the finger frozen) still happens.
        profile.idleRate = 0.02
        var simulator = SessionSimulator(seed: seed, profile: profile)
        var inputs: [(UserNamespace, TouchFrame, StrokeStyle)] = []
        inputs.reserveCapacity(frames)
        while inputs.count < frames {
            if case .frame(let user, let frame, let style) = simulator.next() { inputs.append((user, frame, style)) }
        }
        let samples = inputs.reduce(0) { $0 + $1.1.changes.reduce(0) { $0 + $1.samples.count } }
        progress("workload: \(frames) frames, \(samples) samples (\(users) users x \(fingers) fingers, \(coalesced) samples per event, 1 predicted)")

        var limits = BoardLimits()
        limits.maxSamplesPerStroke = .max
        let clock = ContinuousClock()
        func best(_ stage: String, samples: Int = samples, _ body: () throws -> Void) rethrows -> BenchFigure {
            var fastest = Double.infinity
            for _ in 0..<repetitions {
                let start = clock.now
                try body()
                let elapsed = clock.now - start
                fastest = min(fastest, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
            }
            let figure = BenchFigure(stage: stage, samples: samples, seconds: fastest)
            progress("  \(stage): \(Int(figure.samplesPerSecond)) samples/s")
            return figure
        }

        var figures: [BenchFigure] = []
        var hub = BoardState(limits: limits)
        var batches: [DiffBatch] = []
        figures.append(try best("reduce (hub model, frames to diffs)") {
            hub = BoardState(limits: limits)
            batches.removeAll(keepingCapacity: true)
            var diffs: [StrokeDiff] = []
            for (index, (user, frame, style)) in inputs.enumerated() {
                diffs.removeAll(keepingCapacity: true)
                try hub.reduce(frame, from: user, style: style, into: &diffs)
                if !diffs.isEmpty { batches.append(hub.sealBatch(diffs, hubTime: Int64(index))) }
            }
        })

        // A heartbeat's digest walks the whole board; with a subscriber of the
        // stream without predictions the hub needs both digests. Their figures
        // count the board's stored samples (the session's clears removed most).
        func digestFigures() throws -> [BenchFigure] {
            var digest = BoardDigest(rawValue: 0)
            var digests = (digest: BoardDigest(rawValue: 0), withoutPredictions: BoardDigest(rawValue: 0))
            let measured = [
                best("board digest (a heartbeat; per stored sample)", samples: hub.storedSampleCount) { digest = hub.digest },
                best("board digests with and without predictions, one pass", samples: hub.storedSampleCount) { digests = hub.digests },
            ]
            guard digest == hub.digest, digests.digest == digest, digests.withoutPredictions == hub.digest(includingPredictions: false) else {
                throw CodecBenchmark.Mismatch("the one-pass digests differ from the digest")
            }
            return measured
        }
        if digestOnly {
            // The board just built, still in the caches (in the full run the digest
            // reads a board other stages have pushed out of them: slower).
            for _ in 0..<10 { figures += try digestFigures() }
        }
        if reduceOnly || digestOnly {
            return Report(
                figures: figures, samples: samples, agentBytesPerSample: 0, publishBytesPerSample: 0,
                tickBytesPerSample: 0, eventsPerTick: 0, bytesPerSampleByTick: [], snapshotBytesPerSample: 0,
                digest: hub.digest)
        }

        var agentMessages: [[UInt8]] = []
        figures.append(best("encode agent frames") {
            agentMessages = inputs.map { _, frame, _ in
                var message = Touchsync_V1_AgentMessage()
                message.sequence = frame.sequence
                message.frame = frame.proto
                return WireCodec.encode(message)
            }
        })
        // The hub's own decoding (AgentRequest.decode: the one-pass frame reader).
        figures.append(try best("decode agent frames") {
            for bytes in agentMessages {
                let request = try bytes.withUnsafeBytes { try AgentRequest.decode($0).get() }
                guard case .numbered(_, .frame) = request else { throw CodecBenchmark.Mismatch("a frame decoded as \(request)") }
            }
        })
        // Wire format v2: the same frames packed, decoded by the hub's reader and checked against the model.
        var agentMessagesV2: [[UInt8]] = []
        figures.append(best("encode agent frames (v2)") {
            var encoder = AgentFrameEncoder()  // as an agent keeps one
            agentMessagesV2 = inputs.map { _, frame, _ in encoder.message(frame, sequence: frame.sequence, format: .v2) }
        })
        figures.append(try best("decode agent frames (v2)") {
            for bytes in agentMessagesV2 {
                let request = try bytes.withUnsafeBytes { try AgentRequest.decode($0).get() }
                guard case .numbered(_, .frame) = request else { throw CodecBenchmark.Mismatch("a v2 frame decoded as \(request)") }
            }
        })
        for (index, bytes) in agentMessagesV2.enumerated() {
            let request = try bytes.withUnsafeBytes { try AgentRequest.decode($0).get() }
            guard case .numbered(_, .frame(let decoded)) = request, decoded.changes == inputs[index].1.changes,
                decoded.aliveTouches == inputs[index].1.aliveTouches
            else { throw CodecBenchmark.Mismatch("v2 frame \(index) decoded differently") }
        }
        figures.append(try best("decode agent frames (SwiftProtobuf, for comparison)") {
            for bytes in agentMessages {
                let message = try WireCodec.decode(Touchsync_V1_AgentMessage.self, from: bytes)
                _ = try TouchFrame(message.frame, sequence: message.sequence)
            }
        })

        var published: [[UInt8]] = []
        // As the hub encodes them: written in one pass, wrapped as a PublishMessage.
        figures.append(best("encode diff batches") {
            var encoder = DiffStreamEncoder(board: "bench")
            published = batches.map { batch in WireCodec.field(1, wrapping: encoder.encodedBytes(batch)) }
        })

        // As a subscriber applies them (the one-pass reader).
        func applyPublished(to replica: inout BoardState) throws {
            for bytes in published {
                try bytes.withUnsafeBytes { bytes in
                    guard let (_, batch) = PublishedBatch.find(in: bytes) else { throw CodecBenchmark.Mismatch("not a batch") }
                    try replica.apply(encodedBatch: batch)
                }
            }
        }
        if applyOnly {
            for _ in 0..<(10 * repetitions) {
                var replica = BoardState(limits: limits)
                try applyPublished(to: &replica)
                guard replica.digest == hub.digest else { throw CodecBenchmark.Mismatch("benchmark replica diverged from the hub") }
            }
            return Report(
                figures: figures, samples: samples, agentBytesPerSample: 0, publishBytesPerSample: 0,
                tickBytesPerSample: 0, eventsPerTick: 0, bytesPerSampleByTick: [], snapshotBytesPerSample: 0,
                digest: hub.digest)
        }

        // Wire format v2: the same batches with packed appends, as a v2 subscriber applies them.
        var publishedV2: [[UInt8]] = []
        figures.append(best("encode diff batches (v2)") {
            var encoder = DiffStreamEncoder(board: "bench", format: .v2)
            publishedV2 = batches.map { batch in WireCodec.field(1, wrapping: encoder.encodedBytes(batch)) }
        })

        var replica = BoardState(limits: limits)
        // Each repetition's replica is kept until all have run: freeing the
        // previous one is not part of decoding and applying.
        var finished: [BoardState] = []
        figures.append(try best("decode and apply diff batches (replica)") {
            finished.append(replica)
            replica = BoardState(limits: limits)
            try applyPublished(to: &replica)
        })
        finished.removeAll()
        guard replica.digest == hub.digest else { throw CodecBenchmark.Mismatch("benchmark replica diverged from the hub") }
        var replicaV2 = BoardState(limits: limits)
        figures.append(try best("decode and apply diff batches (v2 replica)") {
            finished.append(replicaV2)
            replicaV2 = BoardState(limits: limits)
            for bytes in publishedV2 {
                try bytes.withUnsafeBytes { bytes in
                    guard let (_, batch) = PublishedBatch.find(in: bytes) else { throw CodecBenchmark.Mismatch("not a batch") }
                    try replicaV2.apply(encodedBatch: batch)
                }
            }
        })
        finished.removeAll()
        guard replicaV2.digest == hub.digest else { throw CodecBenchmark.Mismatch("the v2 replica diverged from the hub") }
        var protobufReplica = BoardState(limits: limits)
        figures.append(try best("decode and apply diff batches (SwiftProtobuf, for comparison)") {
            protobufReplica = BoardState(limits: limits)
            for bytes in published {
                try protobufReplica.apply(WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes).batch)
            }
        })
        guard protobufReplica.digest == hub.digest else { throw CodecBenchmark.Mismatch("the SwiftProtobuf replica diverged from the hub") }

        // The hub's pipeline, as its loop runs it: reduce every frame into the
        // board's channel, which folds a tick's diffs and encodes one batch.
        func tickStream(eventsPerTick: Int, stream: PublishStream = .v1) throws -> [[UInt8]] {
            var channel = BoardChannel(name: "bench", limits: limits)
            if stream != .v1 {
                channel.start(stream)
                channel.stop(.v1)
            }
            var batches: [[UInt8]] = []
            for (index, (user, frame, style)) in inputs.enumerated() {
                try channel.reduce(frame, from: user, style: style)
                if (index + 1) % (users * eventsPerTick) == 0 || index == inputs.count - 1,
                    let batch = channel.sealBatch(hubTime: Int64(index))
                {
                    // PublishMessage.batch
                    batches.append(WireCodec.field(1, wrapping: batch[stream]!))
                }
            }
            return batches
        }
        let eventsPerTick = 2
        var tickBatches: [[UInt8]] = []
        figures.append(try best("hub pipeline: reduce, coalesce per tick, encode") {
            tickBatches = try tickStream(eventsPerTick: eventsPerTick)
        })
        figures += try digestFigures()
        let tickBytes = tickBatches.reduce(0) { $0 + $1.count }
        var tickReplica = BoardState(limits: limits)
        for bytes in tickBatches {
            try tickReplica.apply(WireCodec.decode(Touchsync_V1_PublishMessage.self, from: bytes).batch)
        }
        guard tickReplica.digest == hub.digest else { throw CodecBenchmark.Mismatch("tick-coalesced replica diverged from the hub") }

        // The size side of the tick-length trade-off (latency grows with the tick).
        var byTick: [(Int, Double)] = [], byTickV2: [(Int, Double)] = [], byTickV2WithoutPredictions: [(Int, Double)] = []
        for events in [1, 2, 4, 8] {
            let bytes = try tickStream(eventsPerTick: events).reduce(0) { $0 + $1.count }
            byTick.append((events, Double(bytes) / Double(samples)))
            for stream in [PublishStream.v2, .v2WithoutPredictions] {
                let batches = try tickStream(eventsPerTick: events, stream: stream)
                var replica = BoardState(limits: limits)
                for bytes in batches {
                    try bytes.withUnsafeBytes { bytes in
                        guard let (_, batch) = PublishedBatch.find(in: bytes) else { throw CodecBenchmark.Mismatch("not a batch") }
                        try replica.apply(encodedBatch: batch)
                    }
                }
                guard replica.digest == hub.digest(includingPredictions: stream.carriesPredictions) else {
                    throw CodecBenchmark.Mismatch("the \(stream) tick stream diverged from the hub")
                }
                let perSample = Double(batches.reduce(0) { $0 + $1.count }) / Double(samples)
                if stream == .v2 { byTickV2.append((events, perSample)) } else { byTickV2WithoutPredictions.append((events, perSample)) }
            }
        }

        let snapshotBytes = SnapshotCodec.chunks(of: hub.snapshot(), board: "bench", digest: hub.digest)
            .reduce(0) { $0 + WireCodec.encode($1).count }
        let stored = hub.storedSampleCount
        return Report(
            figures: figures, samples: samples,
            agentBytesPerSample: Double(agentMessages.reduce(0) { $0 + $1.count }) / Double(samples),
            agentBytesPerSampleV2: Double(agentMessagesV2.reduce(0) { $0 + $1.count }) / Double(samples),
            publishBytesPerSample: Double(published.reduce(0) { $0 + $1.count }) / Double(samples),
            tickBytesPerSample: Double(tickBytes) / Double(samples), eventsPerTick: eventsPerTick,
            bytesPerSampleByTick: byTick, bytesPerSampleByTickV2: byTickV2,
            bytesPerSampleByTickV2WithoutPredictions: byTickV2WithoutPredictions,
            snapshotBytesPerSample: Double(snapshotBytes) / Double(max(stored, 1)), digest: hub.digest)
    }
}
