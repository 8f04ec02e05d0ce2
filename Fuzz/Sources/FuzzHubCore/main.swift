// libFuzzer target: a byte stream of messages from several peers, decoded
// as the ZeroMQ adapter decodes them and handed to a HubCore with timer
// turns and journal reports in between. Oracle: a replica fed only the
// published batches must accept every one and end equal to the hub's board
// (a crash, a refused batch or a divergence is a finding).
import FuzzSupport
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncWire

let base = ContinuousClock.now

func fuzzHubCore(_ input: UnsafeRawBufferPointer) {
    let count = input.count
    var configuration = HubConfiguration()
    configuration.maxMessagesPerSecond = 1_000_000  // reach the rules behind the rate limit
    var journal = JournalConfiguration(directory: "unused")
    journal.fsync = .interval(.milliseconds(5))
    configuration.journal = journal
    var core = HubCore(configuration: configuration, now: base, wallClockMicroseconds: 1_700_000_000_000_000)
    var replicas: [String: BoardState] = [:]
    var now = base
    var actions: [HubAction] = []
    var written: UInt64 = 0
    var synced: UInt64 = 0
    var cursor = 0
    while cursor + 3 <= count {
        let control = input[cursor]
        let length = Int(input[cursor + 1]) | Int(input[cursor + 2]) << 8
        cursor += 3
        let end = min(count, cursor + length)
        let body = UnsafeRawBufferPointer(rebasing: input[cursor..<end])
        cursor = end
        now += .milliseconds(Int64(control >> 4) * 40)
        let peer = Peer(routingID: [UInt8(ascii: "a") + control % 3])
        let event: HubEvent
        switch (control >> 2) & 3 {
        case 0, 1:
            switch AgentRequest.decode(body) {
            case .success(let request): event = .agentMessage(from: peer, request, bytes: body.count)
            case .failure(let error): event = .undecodable(from: peer, error)
            }
        case 2:
            event = .turnEnded(inputWaiting: control & 0x80 != 0)
        default:
            event = control & 0x40 == 0 ? .journalProgress(writtenThrough: written, syncedThrough: synced) : .subscribed(topic: publishTopic(board: "b"), by: nil)
        }
        actions.removeAll(keepingCapacity: true)
        core.handle(event, now: now, into: &actions)
        for action in actions {
            switch action {
            case .publish(let publication):
                guard let message = try? WireCodec.decode(Touchsync_V1_PublishMessage.self, from: publication.bytes) else {
                    fatalError("the hub published something that is not a PublishMessage")
                }
                if case .batch(let batch) = message.body {
                    do {
                        try replicas[publication.board, default: BoardState()].apply(batch)
                    } catch {
                        fatalError("a replica refused the hub's batch \(batch.sequence): \(error)")
                    }
                }
            case .appendToJournal(let append): written = append.ticket
            case .syncJournal(let through): synced = through
            case .reply, .sendSnapshot, .refuseSnapshot, .allowSubscription, .dropSubscription: break
            // This hub journals to no board store and is never told of a journal failure.
            case .restartJournal, .claimBoard, .lookUpBoard: break
            case .sendBoardList, .disconnectSubscribers: break
            }
        }
    }
    actions.removeAll(keepingCapacity: true)
    core.handle(.publishNow, now: now, into: &actions)
    for case .publish(let publication) in actions {
        if let message = try? WireCodec.decode(Touchsync_V1_PublishMessage.self, from: publication.bytes), case .batch(let batch) = message.body {
            do { try replicas[publication.board, default: BoardState()].apply(batch) } catch { fatalError("final batch refused: \(error)") }
        }
    }
    for name in core.boardNames where replicas[name] != core.board(name) && core.board(name)?.sequence != 0 {
        fatalError("the replica of \(name) differs from the hub's board")
    }
}

runFuzzer(fuzzHubCore)
