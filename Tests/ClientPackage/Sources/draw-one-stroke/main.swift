import Foundation
import Logging
import TouchSyncClient

// draw-one-stroke INGEST PUBLISH SNAPSHOT BOARD: one finger down, moving and
// up through a TouchAgent; then a BoardSubscriber shows the stroke. Exits 0
// only if the hub acknowledged every frame and the replica holds the stroke
// with every sample.
let arguments = CommandLine.arguments
guard arguments.count == 5 else {
    FileHandle.standardError.write(Data("usage: draw-one-stroke INGEST PUBLISH SNAPSHOT BOARD\n".utf8))
    exit(2)
}
let (ingest, publish, snapshot, board) = (arguments[1], arguments[2], arguments[3], arguments[4])
let logger = Logger(label: "draw-one-stroke")

let agent = try TouchAgent(configuration: AgentConfiguration(board: board, hubEndpoint: ingest), logger: logger)
agent.start()
let start = Date().timeIntervalSince1970
let points = (0..<20).map { TouchPoint(x: 10 + Double($0) * 4, y: 20 + Double($0) * 2, timestamp: start + Double($0) / 120) }
try agent.touchesBegan([TouchInput(id: 1, coalesced: [points[0]])])
for index in 1..<19 { try agent.touchesMoved([TouchInput(id: 1, coalesced: [points[index]], predicted: [points[index + 1]])]) }
try agent.touchesEnded([TouchInput(id: 1, coalesced: [points[19]])])
guard await agent.flush(timeout: .seconds(20)) else {
    print("not acknowledged within 20 s: \(agent.helloRefusal ?? "no answer from \(ingest)")")
    exit(1)
}
await agent.stop()

let subscriber = try BoardSubscriber(
    configuration: SubscriberConfiguration(board: board, publishEndpoint: publish, snapshotEndpoint: snapshot), logger: logger)
subscriber.start()
guard await subscriber.waitUntil(sequence: 1, timeout: .seconds(20)), let replica = await subscriber.replica() else {
    print("no replica of \(board) within 20 s")
    exit(1)
}
await subscriber.stop()
let samples = replica.acceptedStrokes.map(\.samples.count)
print("accepted strokes \(replica.acceptedStrokes.count), samples \(samples)")
exit(samples == [20] ? 0 : 1)
