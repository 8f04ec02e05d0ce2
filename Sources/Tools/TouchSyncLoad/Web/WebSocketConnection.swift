import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Synchronization

/// One WebSocket to a gateway, as a browser tab holds it, on SwiftNIO's
/// WebSocket codec: text and binary frames in (handed to `onText` or `onBinary`
/// on the connection's event loop, in order), masked frames out (from any thread), pings
/// answered. No `Origin` header: it is not a page, so the gateway does not
/// check one (docs/protocol.md, "HTTP").
public final class WebSocketConnection: Sendable {
    private let channel: any Channel
    /// Bytes of text received and sent (frame payloads).
    private let counters: ByteCounters

    private init(channel: any Channel, counters: ByteCounters) {
        self.channel = channel
        self.counters = counters
    }

    public enum ConnectError: Error, CustomStringConvertible {
        case notUpgraded(String)
        public var description: String {
            switch self {
            case .notUpgraded(let url): "\(url) did not upgrade to a WebSocket (not a touchsync gateway, or it refused the connection)"
            }
        }
    }

    /// Connects to `ws://host:port/path`. `onText` runs on the event loop for
    /// every text message; `onClose` once, when the connection ends.
    public static func connect(
        host: String, port: Int, path: String = "/ws", group: any EventLoopGroup, headers extra: [(String, String)] = [],
        onText: @escaping @Sendable (String) -> Void, onBinary: (@Sendable ([UInt8]) -> Void)? = nil,
        onClose: @escaping @Sendable () -> Void
    ) async throws -> WebSocketConnection {
        let counters = ByteCounters()
        enum Upgrade: Sendable {
            case websocket
            case refused
        }
        let (channel, upgraded): (any Channel, EventLoopFuture<Upgrade>) = try await ClientBootstrap(group: group)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(
                        maxFrameSize: 1 << 26,
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.addHandler(
                                    FrameHandler(onText: onText, onBinary: onBinary, onClose: onClose, counters: counters))
                                return Upgrade.websocket
                            }
                        })
                    var headers = HTTPHeaders()
                    headers.add(name: "Host", value: "\(host):\(port)")
                    headers.add(name: "Content-Length", value: "0")
                    for (name, value) in extra { headers.add(name: name, value: value) }
                    let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<Upgrade>(
                        upgradeRequestHead: head, upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in channel.eventLoop.makeCompletedFuture { .refused } })
                    let negotiated = try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(
                        configuration: .init(upgradeConfiguration: configuration))
                    return (channel, negotiated)
                }
            }
        guard try await upgraded.get() == .websocket else {
            try? await channel.close()
            throw ConnectError.notUpgraded("ws://\(host):\(port)\(path)")
        }
        return WebSocketConnection(channel: channel, counters: counters)
    }

    /// Sends one text message (a masked frame, as clients must).
    public func send(_ text: String) {
        var buffer = channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        counters.sent(buffer.readableBytes)
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: buffer), promise: nil)
    }

    /// Sends one binary message (docs/protocol.md, "Binary frames").
    public func send(bytes: [UInt8]) {
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        counters.sent(buffer.readableBytes)
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .binary, maskKey: .random(), data: buffer), promise: nil)
    }

    /// Closes the connection (a close frame, then the socket).
    public func close() async {
        let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: channel.allocator.buffer(capacity: 0))
        try? await channel.writeAndFlush(frame)
        try? await channel.close()
    }

    /// Closes the socket without a close frame (a tab whose network went away).
    public func drop() async { try? await channel.close() }

    public var bytesReceived: Int { counters.received }
    public var bytesSent: Int { counters.sentBytes }
}

/// Byte counts, written on the event loop and read by the run.
private final class ByteCounters: Sendable {
    private let counts = Mutex((received: 0, sent: 0))
    func received(_ bytes: Int) { counts.withLock { $0.received += bytes } }
    func sent(_ bytes: Int) { counts.withLock { $0.sent += bytes } }
    var received: Int { counts.withLock { $0.received } }
    var sentBytes: Int { counts.withLock { $0.sent } }
}

/// Reassembles text and binary messages, answers pings and the server's close.
private final class FrameHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let onText: @Sendable (String) -> Void
    private let onBinary: (@Sendable ([UInt8]) -> Void)?
    private let onClose: @Sendable () -> Void
    private let counters: ByteCounters
    private var partial: ByteBuffer? = nil
    private var partialIsBinary = false
    private var closed = false

    init(
        onText: @escaping @Sendable (String) -> Void, onBinary: (@Sendable ([UInt8]) -> Void)?, onClose: @escaping @Sendable () -> Void,
        counters: ByteCounters
    ) {
        self.onText = onText
        self.onBinary = onBinary
        self.onClose = onClose
        self.counters = counters
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            var data = frame.unmaskedData
            partialIsBinary = frame.opcode == .binary
            if frame.fin {
                deliver(&data)
            } else {
                partial = data
            }
        case .continuation:
            guard var whole = partial else { return }
            var more = frame.unmaskedData
            whole.writeBuffer(&more)
            if frame.fin {
                partial = nil
                deliver(&whole)
            } else {
                partial = whole
            }
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            let reply = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(reply), promise: nil)
            context.close(promise: nil)
        default:
            break
        }
    }

    private func deliver(_ buffer: inout ByteBuffer) {
        counters.received(buffer.readableBytes)
        if partialIsBinary {
            onBinary?(buffer.readBytes(length: buffer.readableBytes) ?? [])
        } else {
            onText(buffer.readString(length: buffer.readableBytes) ?? "")
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !closed {
            closed = true
            onClose()
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
