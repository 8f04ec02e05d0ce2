import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore

/// Closes a connection that has not sent a whole request head ("\r\n\r\n")
/// within `deadline` of connecting. Hummingbird's idle time-out starts only
/// once a first head is parsed, and a client sending a header byte now and
/// then is never idle: 8,000 such connections (slowloris) held the gateway.
/// Sits first in the pipeline, on raw bytes; once the head is complete it
/// only passes bytes on.
final class RequestHeadDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let deadline: TimeAmount
    private var timer: Scheduled<Void>? = nil
    /// How much of "\r\n\r\n" the bytes so far end with; 4: the head is complete.
    private var matched = 0
    private static let terminator: [UInt8] = [13, 10, 13, 10]

    init(deadline: TimeAmount) { self.deadline = deadline }

    func handlerAdded(context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: deadline) { bound.value.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if matched < 4 {
            let buffer = unwrapInboundIn(data)
            buffer.withUnsafeReadableBytes { bytes in
                for byte in bytes where matched < 4 {
                    matched = byte == Self.terminator[matched] ? matched + 1 : (byte == 13 ? 1 : 0)
                }
            }
            if matched == 4 {
                timer?.cancel()
                timer = nil
            }
        }
        context.fireChannelRead(data)
    }
}

/// Hummingbird's HTTP/1 + WebSocket child channel with the request-head
/// deadline in front.
struct HeadDeadlineChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value
    let inner: HTTP1WebSocketUpgradeChannel
    let deadline: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(RequestHeadDeadlineHandler(deadline: deadline), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}
