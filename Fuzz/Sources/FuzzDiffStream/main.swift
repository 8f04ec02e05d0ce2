// libFuzzer target: publish messages (diff batches and heartbeats) from
// anywhere, applied to a replica that holds strokes: it may refuse a batch
// (and then resync), never crash.
import FuzzSupport
import TouchSyncCore
import TouchSyncWire

func fuzzDiffStream(_ input: UnsafeRawBufferPointer) {
    var replica = BoardState()
    var diffs: [StrokeDiff] = []
    // A board with a stroke in progress and an accepted one, at sequence 1.
    let frame = TouchFrame(changes: [TouchChange(touch: 1, phase: .began, samples: [Sample(x: 1, y: 2, time: 3)])])
    try? replica.reduce(frame, from: UserNamespace("a"), style: .default, into: &diffs)
    try? replica.reduce(frame, from: UserNamespace("b"), style: .default, into: &diffs)
    try? replica.reduce(
        TouchFrame(changes: [TouchChange(touch: 1, phase: .ended, samples: [Sample(x: 5, y: 5, time: 9)])]), from: UserNamespace("b"),
        style: .default, into: &diffs)
    _ = replica.sealBatch(diffs, hubTime: 0)
    // The one-pass reader on the raw bytes (its unsafe reads under the
    // address sanitizer): whatever it reads, SwiftProtobuf's path reads the same.
    if let (_, batchBytes) = PublishedBatch.find(in: input), let fast = DiffBatchReader.decode(batchBytes, against: replica) {
        let slow = try? DiffStreamDecoder.decode(WireCodec.decode(Touchsync_V1_DiffBatch.self, from: batchBytes), against: replica)
        precondition(fast.batch == slow, "the one-pass reader and SwiftProtobuf disagree")
    }
    guard let message = try? WireCodec.decode(Touchsync_V1_PublishMessage.self, from: input) else { return }
    guard case .batch(let batch) = message.body else { return }
    var copy = batch
    copy.sequence = replica.sequence + 1  // reach the decoder, not only the sequence check
    _ = try? replica.apply(copy)
    _ = try? replica.applyIfNew(batch)
    _ = replica.digest
}

runFuzzer(fuzzDiffStream)
