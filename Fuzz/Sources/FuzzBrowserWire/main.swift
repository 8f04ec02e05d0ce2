// libFuzzer target: the browser wire's packed frames, as the gateway reads a
// tab's (chained touches on one connection: anyone can send them) and as a
// tab reads the gateway's (packed and packed2 batches against its board).
// May refuse, never crash; a batch that reads is applied to the board
// (numbered as the next one), which may refuse it, never crash.
import FuzzSupport
import TouchSyncWebWire

/// The first byte picks what the rest is: 0 a connection's chained touches
/// (each frame behind a length byte), 1 a packed batch, 2 a packed2 batch.
func fuzzBrowserWire(_ input: UnsafeRawBufferPointer) {
    guard let mode = input.first else { return }
    let body = Array(input.dropFirst())
    switch mode % 3 {
    case 0:
        var chains = TouchChains()
        var at = 0
        while at < body.count {
            let length = Int(body[at])
            at += 1
            let frame = body[at..<min(at + length, body.count)]
            at += length
            // A frame the gateway cannot read closes the socket: the next connection starts a new chain.
            if (try? PackedTouch.decode(frame, chains: &chains)) == nil { chains = TouchChains() }
        }
    default:
        // An empty board at sequence 0 (a batch that begins its strokes reads against it).
        var board = BrowserReplica()
        guard (try? board.apply(BrowserSnapshot(seq: 0, accepted: [], active: []))) != nil else { fatalError("the empty snapshot") }
        guard let batch = try? PackedBatch.decode(body, replica: board, blocks: mode % 3 == 1 ? .packed : .packed2) else { return }
        _ = try? board.apply(BrowserBatch(seq: 1, diffs: batch.diffs))
    }
}

runFuzzer(fuzzBrowserWire)
