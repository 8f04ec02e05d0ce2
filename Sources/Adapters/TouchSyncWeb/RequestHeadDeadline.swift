import Foundation
import NIOCore

/// Closes a connection that has not sent a whole request head ("\r\n\r\n")
/// within `deadline` of connecting. Hummingbird's idle time-out starts only
/// once a first head is parsed, and a client sending a header byte now and
/// then is never idle: 8,000 such connections (slowloris) held the gateway.
/// Sits first in the pipeline, on raw bytes: it holds the first head until it
/// is whole (up to `maxHeadBytes`), answers a WebSocket upgrade that
/// `upgradeRefusal` refuses with 403 and its reason (the upgrade path of
/// Hummingbird can only answer 400), and then only passes bytes on.
final class RequestHeadDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Why a WebSocket upgrade with this `Origin` and `Host` is refused (nil: it is not).
    typealias UpgradeRefusal = @Sendable (_ origin: String?, _ host: String?) -> String?

    private let deadline: TimeAmount
    private let upgradeRefusal: UpgradeRefusal?
    private var timer: Scheduled<Void>? = nil
    /// How much of "\r\n\r\n" the bytes so far end with; 4: the head is complete.
    private var matched = 0
    private static let terminator: [UInt8] = [13, 10, 13, 10]
    /// The first head's bytes, held until it is whole.
    private var head: ByteBuffer? = nil
    static let maxHeadBytes = 16 * 1024

    init(deadline: TimeAmount, upgradeRefusal: UpgradeRefusal? = nil) {
        self.deadline = deadline
        self.upgradeRefusal = upgradeRefusal
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: deadline) { bound.value.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard matched < 4 else { return context.fireChannelRead(data) }
        var buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { bytes in
            for byte in bytes where matched < 4 {
                matched = byte == Self.terminator[matched] ? matched + 1 : (byte == 13 ? 1 : 0)
            }
        }
        if matched == 4 {
            timer?.cancel()
            timer = nil
        }
        guard upgradeRefusal != nil else { return context.fireChannelRead(data) }
        if head == nil { head = context.channel.allocator.buffer(capacity: buffer.readableBytes) }
        head!.writeBuffer(&buffer)
        if matched == 4 || head!.readableBytes > Self.maxHeadBytes {
            let whole = head!
            head = nil
            if matched == 4, let reason = refusal(of: whole) {
                refuse(context: context, reason: reason)
                return
            }
            context.fireChannelRead(wrapInboundOut(whole))
        }
    }

    /// The refusal of a WebSocket upgrade in `head`, or nil (not an upgrade, or allowed).
    private func refusal(of head: ByteBuffer) -> String? {
        guard let upgradeRefusal, let text = head.getString(at: head.readerIndex, length: head.readableBytes) else { return nil }
        var origin: String? = nil
        var host: String? = nil
        var upgrade = false
        for line in text.split(separator: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            switch name {
            case "origin": origin = value
            case "host": host = value
            case "upgrade": upgrade = value.lowercased() == "websocket"
            default: break
            }
        }
        return upgrade ? upgradeRefusal(origin, host) : nil
    }

    private func refuse(context: ChannelHandlerContext, reason: String) {
        let body = Array(reason.utf8)
        var response = context.channel.allocator.buffer(capacity: 128 + body.count)
        response.writeString(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n")
        response.writeBytes(body)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(response)).whenComplete { _ in loopBound.value.close(promise: nil) }
    }
}
