import TestSupport
import Foundation
import Testing
import TouchSyncCore
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncWire
import ZeroMQ

/// proto/conformance/v1/multiplexed.json (docs/protocol.md, "Conformance
/// vectors"): the ZeroMQ parts a multiplexed client sends, and the exact
/// parts of every message the hub answers, run against a real hub over TCP.
/// `TOUCHSYNC_WRITE_VECTORS=1 swift test --filter MultiplexedVectorTests`
/// writes them afresh (review the diff: a change is a protocol change).
@Suite("Multiplexed conformance vectors", .timeLimit(.minutes(3)))
struct MultiplexedVectorTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("proto/conformance/v1/multiplexed.json")

    struct Vectors: Codable {
        var description: String
        var board: String
        var steps: [Step]
        /// The board's digest (16 hex digits) and its live touches after the last step.
        var finalDigest: String
        var finalLiveTouches: Int
    }

    struct Step: Codable {
        var note: String
        /// The parts of one ZeroMQ message the client sends (hex), channel parts included.
        var send: [String]
        /// The messages the hub answers, each as its parts (hex), in order.
        var replies: [[String]]
    }

    static func channel(_ number: UInt32) -> [UInt8] { ChannelPart.encode(number) }

    static func message(_ sequence: UInt64 = 0, _ body: Touchsync_V1_AgentMessage.OneOf_Body) -> [UInt8] {
        var message = Touchsync_V1_AgentMessage()
        message.sequence = sequence
        message.body = body
        return WireCodec.encode(message)
    }

    static func hello(_ actAs: String, session: String) -> [UInt8] {
        var hello = Touchsync_V1_Hello()
        hello.protocolVersion = 1
        hello.board = "conformance-mux"
        hello.clientName = "vectors"
        hello.sessionID = Data(session.utf8)
        hello.actAs = actAs
        return message(0, .hello(hello))
    }

    static func frame(_ sequence: UInt64, touch: UInt64, _ phase: TouchPhase, x: Int32, t: Int64) -> [UInt8] {
        let change = TouchChange(touch: TouchID(touch), phase: phase, samples: [Sample(x: x, y: 64, time: t)])
        return message(sequence, .frame(TouchFrame(changes: [change]).proto))
    }

    /// What the client sends, with how many reply messages each step waits for.
    static func inputs() -> [(note: String, send: [[UInt8]], replies: Int)] {
        [
            ("channel 1 says hello acting as web:ann", [channel(1), hello("web:ann", session: "session-ann")], 1),
            ("channel 2 says hello acting as web:ben", [channel(2), hello("web:ben", session: "session-ben")], 1),
            (
                "one message carries both users' first frames: each channel is acknowledged on its own, both acks in one message",
                [channel(1), frame(1, touch: 1, .began, x: 64, t: 1000), channel(2), frame(1, touch: 1, .began, x: 640, t: 1000)], 1
            ),
            ("the connection's heartbeat on channel 0 is answered with an ack through 0", [channel(0), message(0, .heartbeat(.init()))], 1),
            ("ann ends her touch: her stroke is accepted", [channel(1), frame(2, touch: 1, .ended, x: 128, t: 2000)], 1),
            ("a message numbered out of order on channel 2 is refused there", [channel(2), frame(5, touch: 1, .moved, x: 700, t: 3000)], 2),
            ("channel 0 carries no session: a hello there is MALFORMED", [channel(0), hello("web:cat", session: "session-cat")], 1),
            ("a channel part of 3 bytes is MALFORMED, answered on channel 0", [[0, 0, 1], message(0, .heartbeat(.init()))], 1),
            ("the connection's goodbye ends every channel: ben's touch is cancelled", [channel(0), message(0, .goodbye(.init()))], 0),
        ]
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    /// With several board threads (`--threads`) the hub answers byte for byte the same.
    @Test(arguments: [1, 3])
    func theHubAnswersAsTheVectorsSay(boardThreads: Int) async throws {
        let test = try await TestHub.start {
            $0.timing.heartbeatInterval = .seconds(1)  // the welcome carries the defaults
            $0.boardThreads = boardThreads
        }
        let socket = try ZMQSocket(test.context, type: .dealer)
        defer { socket.close() }
        try socket.setRoutingID(Array("vector-gateway".utf8))
        try socket.connect(test.endpoints.ingest)
        var steps: [Step] = []
        for input in Self.inputs() {
            _ = try socket.send(multipart: input.send)
            var replies: [[String]] = []
            for _ in 0..<input.replies {
                let parts = try #require(try await offThePool({ try socket.receiveBytes(timeoutMilliseconds: 5000) }), "no reply to: \(input.note)")
                replies.append(parts.map(Self.hex))
            }
            steps.append(Step(note: input.note, send: input.send.map(Self.hex), replies: replies))
        }
        #expect(try await offThePool({ try socket.receiveBytes(timeoutMilliseconds: 300) }) == nil, "a reply the vectors do not list")
        #expect(try await eventually { try await test.board("conformance-mux").liveTouchCount == 0 })
        let board = try await test.board("conformance-mux")
        let actual = Vectors(
            description: "A multiplexed connection (docs/protocol.md, \"Multiplexed connections\") to a plain-text hub with default settings: each step sends one ZeroMQ message of these parts (hex; channel parts are 4 bytes, big-endian) from a DEALER whose routing id is \"vector-gateway\", and the hub answers with these messages, each listed as its parts (hex), in order. The final board's digest and live touches after the last step.",
            board: "conformance-mux", steps: steps, finalDigest: board.digest.description, finalLiveTouches: board.liveTouchCount)
        if boardThreads == 1, ProcessInfo.processInfo.environment["TOUCHSYNC_WRITE_VECTORS"] != nil {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try encoder.encode(actual).write(to: Self.file)
        }
        let expected = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: Self.file))
        #expect(expected.steps.count == actual.steps.count)
        for (index, (want, got)) in zip(expected.steps, actual.steps).enumerated() {
            #expect(want.send == got.send, "step \(index): the input differs (regenerate the vectors?)")
            #expect(want.replies == got.replies, "step \(index) (\(want.note)): the hub answered otherwise")
        }
        #expect(expected.finalDigest == actual.finalDigest && expected.finalLiveTouches == 0)
        // The replies decode as the notes say: acks, welcomes and errors on the right channels.
        let welcome = try WireCodec.decode(Touchsync_V1_HubReply.self, from: Self.bytes(expected.steps[0].replies[0][1]))
        #expect(welcome.welcome.user == "web:ann" && expected.steps[0].replies[0][0] == "00000001")
        let malformed = try WireCodec.decode(Touchsync_V1_HubReply.self, from: Self.bytes(expected.steps[7].replies[0][1]))
        #expect(malformed.error.code == .malformed && expected.steps[7].replies[0][0] == "00000000")
        await test.hub.stop()
    }
}
