import Foundation
import Testing
import TouchSyncClient
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncWire
import ZeroMQ

/// Board lists and snapshots on one thread (the gateway's pages ask
/// through it), against a real hub over TCP.
@Suite("Hub requests on one thread", .timeLimit(.minutes(3)))
struct HubRequestHostTests {
    @Test func manyRequestsAtOnceEachGetItsOwnAnswer() async throws {
        let test = try await TestHub.start { $0.limits.maxSnapshotsPerSecond = 1_000 }
        for board in ["a", "b", "c"] {
            let agent = try test.agent(board: board, identity: "drawer-\(board)")
            for stroke in 0..<(board == "a" ? 1 : board == "b" ? 2 : 3) {
                try agent.touchesBegan([TouchInput(id: TouchID(stroke), coalesced: [point(Double(stroke), 1, 1)])])
                try agent.touchesEnded([TouchInput(id: TouchID(stroke), coalesced: [point(Double(stroke), 5, 2)])])
            }
            #expect(await agent.flush())
            await agent.stop()
        }
        let host = try HubRequestHost(context: test.context, logger: testLogger("requests"))
        host.start()
        // 60 requests at once, of two kinds, on the host's one thread: each gets its own answer.
        let answers = try await withThrowingTaskGroup(of: (String, Int).self) { group in
            for index in 0..<60 {
                let board = ["a", "b", "c"][index % 3]
                group.addTask {
                    if index % 2 == 0 {
                        let state = try await BoardDirectory.snapshot(of: board, endpoint: test.endpoints.snapshot, host: host)
                        return (board, state.acceptedStrokes.count)
                    }
                    let page = try await BoardDirectory.list(endpoint: test.endpoints.snapshot, prefix: board, host: host)
                    return (board, Int(page.boards.first { $0.board == board }?.acceptedStrokes ?? 99))
                }
            }
            var answers: [(String, Int)] = []
            for try await answer in group { answers.append(answer) }
            return answers
        }
        #expect(answers.count == 60)
        for (board, strokes) in answers { #expect(strokes == ["a": 1, "b": 2, "c": 3][board], "\(board): \(strokes)") }
        // An endpoint nobody serves: a time-out in words, the host still answers others.
        await #expect(throws: HubRequestFailure.timedOut) {
            _ = try await BoardDirectory.list(endpoint: "tcp://127.0.0.1:1", timeout: .milliseconds(300), host: host)
        }
        #expect(try await BoardDirectory.snapshot(of: "c", endpoint: test.endpoints.snapshot, host: host).acceptedStrokes.count == 3)
        await host.stop()
        await test.hub.stop()
    }
}
