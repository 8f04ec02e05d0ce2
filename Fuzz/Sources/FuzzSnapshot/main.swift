// libFuzzer target: snapshot and history replies from anywhere: assembling
// the chunks and loading the board may refuse, never crash.
import FuzzSupport
import TouchSyncCore
import TouchSyncWire

func fuzzSnapshot(_ input: UnsafeRawBufferPointer) {
    let count = input.count
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
