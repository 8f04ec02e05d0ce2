import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing
@testable import TouchSyncWeb

/// The tab's WebSocket handler on its own, in an `EmbeddedChannel`: frames in,
/// frames and messages out, time advanced by hand.
@Suite("Gateway: the tab's WebSocket handler")
struct TabWebSocketTests {
    /// Records what the handler hands its receiver.
    final class Recorder: TabSocketReceiver {
        var messages: [TabSocketMessage] = []
        var writableCalls = 0
        var closedCalls = 0
        weak var socket: TabWebSocket<Recorder>?
        func opened(_ socket: TabWebSocket<Recorder>) { self.socket = socket }
        func received(_ message: TabSocketMessage) { messages.append(message) }
        func writable() { writableCalls += 1 }
        func closed() { closedCalls += 1 }
    }

    struct Harness {
        let channel = EmbeddedChannel()
        let recorder = Recorder()
        let socket: TabWebSocket<Recorder>

        init(maxMessageBytes: Int = 64, ping: TimeAmount? = .seconds(10)) throws {
            socket = TabWebSocket(
                receiver: recorder, settings: .init(maxMessageBytes: maxMessageBytes, pingInterval: ping, closeTimeout: .seconds(2)))
            try channel.pipeline.syncOperations.addHandler(socket)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 9)).wait()
        }

        func frame(_ opcode: WebSocketOpcode, _ bytes: [UInt8], fin: Bool = true) -> WebSocketFrame {
            WebSocketFrame(fin: fin, opcode: opcode, data: channel.allocator.buffer(bytes: bytes))
        }

        func read(_ frame: WebSocketFrame) throws {
            try channel.writeInbound(frame)
            channel.pipeline.fireChannelReadComplete()
        }

        /// The frames written to the peer so far.
        func written() throws -> [WebSocketFrame] {
            var frames: [WebSocketFrame] = []
            while let frame = try channel.readOutbound(as: WebSocketFrame.self) { frames.append(frame) }
            return frames
        }

        func closeCode(of frame: WebSocketFrame) -> WebSocketErrorCode? {
            var data = frame.data
            return data.readWebSocketErrorCode()
        }
    }

    @Test func fragmentsAreAssembledIntoOneMessage() throws {
        let harness = try Harness()
        try harness.read(harness.frame(.text, Array("hel".utf8), fin: false))
        try harness.read(harness.frame(.continuation, Array("lo ".utf8), fin: false))
        #expect(harness.recorder.messages.isEmpty, "nothing until the last fragment")
        try harness.read(harness.frame(.continuation, Array("tab".utf8)))
        try harness.read(harness.frame(.binary, [1, 2, 3]))
        #expect(harness.recorder.messages == [.text("hello tab"), .binary(harness.channel.allocator.buffer(bytes: [1, 2, 3]))])
        #expect(try harness.written().isEmpty)
    }

    @Test func aMessageLargerThanTheLimitClosesWith1009() throws {
        let harness = try Harness(maxMessageBytes: 8)
        try harness.read(harness.frame(.binary, Array(repeating: 7, count: 6), fin: false))
        try harness.read(harness.frame(.continuation, Array(repeating: 7, count: 6)))
        #expect(harness.recorder.messages.isEmpty)
        let frames = try harness.written()
        #expect(frames.map(\.opcode) == [.connectionClose])
        #expect(frames.first.flatMap(harness.closeCode) == .messageTooLarge)
        // Whatever the peer sends now is not delivered; its close ends the connection.
        try harness.read(harness.frame(.text, Array("late".utf8)))
        #expect(harness.recorder.messages.isEmpty)
        try harness.read(harness.frame(.connectionClose, [0x03, 0xE8]))
        #expect(!harness.channel.isActive)
        #expect(harness.recorder.closedCalls == 1, "closed is said once")
    }

    @Test func brokenFramingAndTextThatIsNotUTF8AreClosedWithTheirCodes() throws {
        let continuation = try Harness()
        try continuation.read(continuation.frame(.continuation, [1]))
        #expect(try continuation.written().first.flatMap(continuation.closeCode) == .protocolError)

        let interleaved = try Harness()
        try interleaved.read(interleaved.frame(.text, [0x61], fin: false))
        try interleaved.read(interleaved.frame(.binary, [1]))
        #expect(try interleaved.written().first.flatMap(interleaved.closeCode) == .protocolError)

        let notUTF8 = try Harness()
        try notUTF8.read(notUTF8.frame(.text, [0x61, 0xC3, 0x28]))
        #expect(notUTF8.recorder.messages.isEmpty)
        #expect(try notUTF8.written().first.flatMap(notUTF8.closeCode) == .dataInconsistentWithMessage)
    }

    @Test func pingsAreAnsweredAndAQuietPeerIsClosed() throws {
        let harness = try Harness(ping: .seconds(10))
        try harness.read(harness.frame(.ping, [9, 9]))
        let pong = try harness.written()
        #expect(pong.map(\.opcode) == [.pong])
        #expect(pong.first?.data == harness.channel.allocator.buffer(bytes: [9, 9]), "a pong carries the ping's data")

        // The handler pings after ten seconds; an answer keeps the connection.
        harness.channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        #expect(try harness.written().map(\.opcode) == [.ping])
        try harness.read(harness.frame(.pong, []))
        harness.channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        #expect(try harness.written().map(\.opcode) == [.ping])
        // No answer by the next ping: closed as going away, and dropped when the peer does not answer the close.
        harness.channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        let close = try harness.written()
        #expect(close.map(\.opcode) == [.connectionClose])
        #expect(close.first.flatMap(harness.closeCode) == .goingAway)
        #expect(harness.channel.isActive)
        harness.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!harness.channel.isActive, "the close time-out drops the connection")
        #expect(harness.recorder.closedCalls == 1)
    }

    @Test func thePeersCloseIsAnsweredWithItsCode() throws {
        let harness = try Harness()
        try harness.read(harness.frame(.connectionClose, [0x03, 0xE9]))  // 1001
        let answer = try harness.written()
        #expect(answer.map(\.opcode) == [.connectionClose])
        #expect(answer.first.flatMap(harness.closeCode) == .goingAway)
        #expect(!harness.channel.isActive)
        #expect(harness.recorder.closedCalls == 1)
    }

    @Test func writesDuringAReadGoOutAtItsEndAndNotAfterClose() throws {
        let harness = try Harness()
        let socket = try #require(harness.recorder.socket)
        socket.send(text: "queued")
        socket.send(binary: harness.channel.allocator.buffer(bytes: [4, 2]))
        socket.flush()
        let frames = try harness.written()
        #expect(frames.map(\.opcode) == [.text, .binary])
        #expect(frames.first?.data == harness.channel.allocator.buffer(string: "queued"))

        socket.close(code: .policyViolation, reason: String(repeating: "x", count: 300))
        let close = try harness.written()
        #expect(close.first.flatMap(harness.closeCode) == .policyViolation)
        #expect((close.first?.data.readableBytes ?? 0) <= 125, "a control frame carries at most 125 bytes")
        socket.send(text: "after close")
        socket.flush()
        #expect(try harness.written().isEmpty, "nothing is written after this end's close")
    }
}
