import NIOCore
import NIOWebSocket

/// A whole WebSocket message from a tab.
enum TabSocketMessage: Equatable {
    case text(String)
    case binary(ByteBuffer)

    var size: Int {
        switch self {
        case .text(let text): text.utf8.count
        case .binary(let buffer): buffer.readableBytes
        }
    }
}

/// What a tab's WebSocket tells the one who serves it, on the connection's
/// event loop. Writes made during `received` go out together at the end of
/// the read (one flush for everything a read brought).
protocol TabSocketReceiver: AnyObject, SendableMetatype {
    func opened(_ socket: TabWebSocket<Self>)
    func received(_ message: TabSocketMessage)
    /// The socket can take writes again after it could not.
    func writable()
    /// The connection is gone (called once; nothing is written after it).
    func closed()
}

/// A tab's end of the WebSocket protocol (RFC 6455) as a SwiftNIO channel
/// handler after the upgrade: it assembles fragmented messages, answers
/// pings, pings a quiet peer and closes it when it stops answering, and
/// closes with a code when the peer breaks the protocol. Messages go to the
/// receiver on the event loop, with no task or stream per connection: the
/// gateway's hot path is a read, a call and a write (docs/performance.md,
/// "The tab path as a channel handler").
final class TabWebSocket<Receiver: TabSocketReceiver>: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    struct Settings {
        /// The largest message assembled from fragments; a larger one closes the connection (1009).
        var maxMessageBytes: Int
        /// How often a quiet peer is pinged; a peer that has not answered the last ping by the next is closed.
        var pingInterval: TimeAmount? = .seconds(10)
        /// How long a close waits for the peer's close before the connection is dropped.
        var closeTimeout: TimeAmount = .seconds(2)
    }

    private let settings: Settings
    private var receiver: Receiver?
    private var context: ChannelHandlerContext? = nil
    /// A message's fragments so far (its first frame's opcode).
    private var fragments: (opcode: WebSocketOpcode, data: ByteBuffer)? = nil
    private var unansweredPing = false
    private var pinger: RepeatedTask? = nil
    private var closeTimer: Scheduled<Void>? = nil
    /// This end sent its close: nothing more is written; the peer's close ends the connection.
    private(set) var isClosing = false
    private var reading = false
    private var wroteWhileReading = false

    init(receiver: Receiver, settings: Settings) {
        self.receiver = receiver
        self.settings = settings
    }

    var eventLoop: (any EventLoop)? { context?.eventLoop }
    /// The client's address as a trusted proxy named it (set before the handler is added), if any.
    var clientAddress: String? = nil
    /// The peer's IP address (what per-address limits count), or "unknown".
    var remoteAddress: String { clientAddress ?? context?.channel.remoteAddress?.ipAddress ?? "unknown" }
    var isWritable: Bool { context?.channel.isWritable ?? false }
    var allocator: ByteBufferAllocator { context?.channel.allocator ?? ByteBufferAllocator() }

    // MARK: Writing (on the event loop)

    /// Queues a text message (flushed at the end of the current read, or by `flush`).
    func send(text: String) {
        guard let context, !isClosing else { return }
        var buffer = context.channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        write(WebSocketFrame(fin: true, opcode: .text, data: buffer), context: context)
    }

    /// Queues a binary message; `data` is written as it is (a board's shared buffer is not copied).
    func send(binary data: ByteBuffer) {
        guard let context, !isClosing else { return }
        write(WebSocketFrame(fin: true, opcode: .binary, data: data), context: context)
    }

    private func write(_ frame: WebSocketFrame, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(frame), promise: nil)
        if reading { wroteWhileReading = true }
    }

    /// Sends what was queued (a no-op while reading: the read's end flushes).
    func flush() {
        guard let context, !reading else { return }
        context.flush()
    }

    /// Says goodbye with `code` and `reason` and closes once the peer answers (or after the close time-out).
    func close(code: WebSocketErrorCode, reason: String = "") {
        guard let context, !isClosing else { return }
        isClosing = true
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(String(reason.utf8.prefix(120)) ?? "")  // a control frame carries at most 125 bytes
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data)), promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        closeTimer = context.eventLoop.scheduleTask(in: settings.closeTimeout) { loopBound.value.close(promise: nil) }
    }

    /// Stops reading from the peer (what was read still arrives) until `resumeReading`.
    func pauseReading() {
        try? context?.channel.syncOptions?.setOption(.autoRead, value: false)
    }

    func resumeReading() {
        guard let context else { return }
        try? context.channel.syncOptions?.setOption(.autoRead, value: true)
        context.read()
    }

    // MARK: ChannelInboundHandler

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if let interval = settings.pingInterval {
            let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
            pinger = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in loopBound.value.ping() }
        }
        receiver?.opened(self)
    }

    func handlerRemoved(context: ChannelHandlerContext) { end() }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    /// The server allows half-closed connections (for HTTP), so a tab that
    /// went away shows as its input closing, not as an inactive channel: a
    /// WebSocket has nothing more to say after that, and its seat is freed now
    /// rather than at the ping time-out.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed? = event as? ChannelEvent {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { receiver?.writable() }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        reading = true
        defer { reading = false }
        switch frame.opcode {
        case .text, .binary:
            guard fragments == nil else { return close(code: .protocolError, reason: "a new message inside a fragmented one") }
            if frame.fin {
                deliver(frame.opcode, frame.unmaskedData)
            } else {
                fragments = (frame.opcode, frame.unmaskedData)
            }
        case .continuation:
            guard var message = fragments else { return close(code: .protocolError, reason: "a continuation without a message") }
            fragments = nil  // not copied on write below
            var data = frame.unmaskedData
            guard message.data.readableBytes + data.readableBytes <= settings.maxMessageBytes else {
                return close(code: .messageTooLarge, reason: "a message is at most \(settings.maxMessageBytes) bytes")
            }
            message.data.writeBuffer(&data)
            if frame.fin { deliver(message.opcode, message.data) } else { fragments = message }
        case .ping:
            guard !isClosing else { return }
            write(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData), context: context)
        case .pong:
            unansweredPing = false
        case .connectionClose:
            if isClosing { return context.close(promise: nil) }
            // Answered with the peer's code, then closed (RFC 6455 5.5.1).
            isClosing = true
            var data = frame.unmaskedData
            let code = data.readWebSocketErrorCode() ?? .normalClosure
            var answer = context.channel.allocator.buffer(capacity: 2)
            answer.write(webSocketErrorCode: code)
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: answer))).whenComplete { _ in
                loopBound.value.close(promise: nil)
            }
        default:
            close(code: .protocolError, reason: "unknown opcode")
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if wroteWhileReading {
            wroteWhileReading = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    private func deliver(_ opcode: WebSocketOpcode, _ data: ByteBuffer) {
        guard !isClosing else { return }
        if opcode == .text {
            guard let text = String(validating: data.readableBytesView, as: UTF8.self) else {
                return close(code: .dataInconsistentWithMessage, reason: "text that is not UTF-8")
            }
            receiver?.received(.text(text))
        } else {
            receiver?.received(.binary(data))
        }
    }

    private func ping() {
        guard let context, !isClosing else { return }
        guard !unansweredPing else {
            // No pong since the last ping: the tab's network is gone.
            return close(code: .goingAway, reason: "no answer to ping")
        }
        unansweredPing = true
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .ping, data: context.channel.allocator.buffer(capacity: 0))), promise: nil)
    }

    private func end() {
        pinger?.cancel()
        pinger = nil
        closeTimer?.cancel()
        closeTimer = nil
        context = nil
        isClosing = true
        if let receiver {
            self.receiver = nil  // the receiver holds this handler: the cycle ends here
            receiver.closed()
        }
    }
}
