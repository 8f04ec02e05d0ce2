// libFuzzer target: snapshot and history replies from anywhere: assembling
// the chunks and loading the board may refuse, never crash; the one-pass
// reader agrees with SwiftProtobuf.
import FuzzSupport
import TouchSyncCore
import TouchSyncWire

func fuzzSnapshot(_ input: UnsafeRawBufferPointer) {
    let count = input.count
    // The one-pass reader (its unsafe reads under the address sanitizer):
    // whatever it reads, SwiftProtobuf's path reads the same.
    if let fast = SnapshotReplyReader.read(input) {
        let slow = try? WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: input)
        precondition(fast.requestID == slow?.requestID, "request ids differ")
        precondition(fast.chunk == slow.flatMap { try? SnapshotChunkContents($0.chunk) }, "the readers disagree")
    }
    if let reply = try? WireCodec.decode(Touchsync_V1_SnapshotReply.self, from: input), case .chunk(let chunk) = reply.body {
        if let (snapshot, digest) = try? SnapshotCodec.assemble([chunk, chunk].prefix(Int(count % 2) + 1).map { $0 }),
            let state = try? BoardState(snapshot: snapshot)
        {
            _ = state.digest == digest
        }
    }
    if let reply = try? WireCodec.decode(Touchsync_V1_HistoryReply.self, from: input), case .checkpoint(let chunk) = reply.body {
        if let (snapshot, _) = try? SnapshotCodec.assemble([chunk]) { _ = try? BoardState(snapshot: snapshot) }
    }
}

runFuzzer(fuzzSnapshot)
