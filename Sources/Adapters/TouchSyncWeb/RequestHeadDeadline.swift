import Foundation
import NIOCore
import NIOHTTP1

/// What the gateway checks in every request head before Hummingbird sees it.
struct RequestHead: Sendable, Equatable {
    var host: String? = nil
    var origin: String? = nil
    /// A WebSocket upgrade.
    var upgrade = false
    /// A body is announced (`Content-Length` above 0 or `Transfer-Encoding`).
    var hasBody = false
}

/// Guards the gateway's connections on raw bytes, first in the pipeline:
/// - a request head must be whole ("\r\n\r\n") within `deadline` of the
///   connection (or of its first byte, for later requests); Hummingbird's
///   idle time-out starts only once a first head is parsed, and a client
///   sending a header byte now and then is never idle: 8,000 such
///   connections (slowloris) held the gateway;
/// - `refusal` sees every head and may answer it (403 for another site's
///   WebSocket or an unknown Host, 413 for a body: the gateway takes none,
///   so a body sent a byte every few seconds cannot hold a connection);
///   Hummingbird's upgrade path could only answer 400.
/// Heads are held until whole (up to `maxHeadBytes`); after an upgrade is let
/// through, bytes only pass.
final class RequestHeadDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The status and reason a request with this head is refused with (nil: it is not).
    typealias Refusal = @Sendable (RequestHead) -> (status: Int, reason: String)?

    private let deadline: TimeAmount
    private let refusal: Refusal?
    private var timer: Scheduled<Void>? = nil
    /// How much of "\r\n\r\n" the current head's bytes end with.
    private var matched = 0
    private static let terminator: [UInt8] = [13, 10, 13, 10]
    /// The current head's bytes, held until it is whole.
    private var head: ByteBuffer? = nil
    /// A WebSocket upgrade went through: the rest is frames.
    private var passthrough = false
    /// A request was refused: nothing more is read.
    private var refused = false
    static let maxHeadBytes = 16 * 1024

    init(deadline: TimeAmount, refusal: Refusal? = nil) {
        self.deadline = deadline
        self.refusal = refusal
    }

    func handlerAdded(context: ChannelHandlerContext) { startTimer(context: context) }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    private func startTimer(context: ChannelHandlerContext) {
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: deadline) { bound.value.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        guard !passthrough else { return context.fireChannelRead(data) }
        var buffer = unwrapInboundIn(data)
        while buffer.readableBytes > 0, !passthrough {
            if head == nil {
                head = context.channel.allocator.buffer(capacity: buffer.readableBytes)
                if timer == nil { startTimer(context: context) }  // a later request's head: its own deadline
            }
            // The bytes up to the end of this head (or all of them).
            var taken = 0
            buffer.withUnsafeReadableBytes { bytes in
                for byte in bytes where matched < 4 {
                    matched = byte == Self.terminator[matched] ? matched + 1 : (byte == 13 ? 1 : 0)
                    taken += 1
                }
            }
            var slice = buffer.readSlice(length: taken)!
            head!.writeBuffer(&slice)
            if matched == 4 {
                timer?.cancel()
                timer = nil
                matched = 0
                let whole = head!
                head = nil
                let facts = Self.facts(of: whole)
                if let refusal, let refused = refusal(facts) {
                    return refuse(context: context, status: refused.status, reason: refused.reason)
                }
                if facts.upgrade { passthrough = true }
                context.fireChannelRead(wrapInboundOut(whole))
            } else if head!.readableBytes > Self.maxHeadBytes {
                // Too long to be a head we serve: Hummingbird answers it (431), then bytes pass.
                passthrough = true
                context.fireChannelRead(wrapInboundOut(head!))
                head = nil
            }
        }
        if passthrough, buffer.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(buffer)) }
    }

    /// The fields of `head` the refusal looks at.
    static func facts(of head: ByteBuffer) -> RequestHead {
        var facts = RequestHead()
        guard let text = head.getString(at: head.readerIndex, length: head.readableBytes) else { return facts }
        for line in text.split(separator: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            switch name {
            case "origin": facts.origin = value
            case "host": facts.host = value
            case "upgrade": facts.upgrade = value.lowercased() == "websocket"
            case "content-length": facts.hasBody = facts.hasBody || value != "0"
            case "transfer-encoding": facts.hasBody = true
            default: break
            }
        }
        return facts
    }

    private func refuse(context: ChannelHandlerContext, status: Int, reason: String) {
        let body = Array(reason.utf8)
        let phrase = HTTPResponseStatus(statusCode: status).reasonPhrase
        var response = context.channel.allocator.buffer(capacity: 128 + body.count)
        response.writeString(
            "HTTP/1.1 \(status) \(phrase)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n")
        response.writeBytes(body)
        refused = true
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(response)).whenComplete { _ in loopBound.value.close(promise: nil) }
    }
}
