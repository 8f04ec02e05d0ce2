import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOWebSocket
import ServiceLifecycle

/// The gateway's child channel: HTTP/1 for the page and its API (Hummingbird's
/// responder), and the WebSocket upgrade at `path` handing the connection to
/// a `TabWebSocket` in the pipeline (no async stream or task per tab). The
/// request-head guard (deadline, Host, Origin, no bodies) sits in front of both.
struct TabUpgradeChannel: ServerChildChannel, HTTPChannelHandler {
    enum UpgradeResult: Sendable {
        /// A tab's WebSocket; `goingAway` closes it when the gateway stops.
        case webSocket(any Channel, goingAway: @Sendable () -> Void)
        case notUpgraded(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
        case failedUpgrade(NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>)
    }

    struct Value: ServerChildChannelValue {
        let upgradeResult: EventLoopFuture<UpgradeResult>
        let channel: any Channel
    }

    /// Puts the tab's handler in an upgraded channel's pipeline (on its event
    /// loop); returns what closes it with "going away".
    /// Installs a tab on an upgraded channel, given the request's `X-Forwarded-For` (all of its values, comma-joined).
    typealias InstallTab = @Sendable (any Channel, String?) throws -> @Sendable () -> Void

    let responder: HTTPChannelHandler.Responder
    let path: String
    let http1: HTTP1Channel.Configuration
    /// The largest WebSocket frame read (larger ones close the connection, 1009).
    let maxFrameSize: Int
    let headDeadline: TimeAmount
    let refusal: RequestHeadDeadlineHandler.Refusal?
    let installTab: InstallTab

    init(
        responder: @escaping HTTPChannelHandler.Responder, path: String, http1: HTTP1Channel.Configuration, maxFrameSize: Int,
        headDeadline: TimeAmount, refusal: RequestHeadDeadlineHandler.Refusal?, installTab: @escaping InstallTab
    ) {
        self.responder = Self.redirectingLateUpgrades(responder)
        self.path = path
        self.http1 = http1
        self.maxFrameSize = maxFrameSize
        self.headDeadline = headDeadline
        self.refusal = refusal
        self.installTab = installTab
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(
                RequestHeadDeadlineHandler(deadline: headDeadline, refusal: refusal), position: .first)
            let upgradeAttempted = NIOLoopBoundBox(false, eventLoop: channel.eventLoop)
            let (path, installTab, http1) = (path, installTab, http1)
            let upgrader = NIOTypedWebSocketServerUpgrader<UpgradeResult>(
                maxFrameSize: maxFrameSize,
                shouldUpgrade: { channel, head in
                    upgradeAttempted.value = true
                    let target = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
                    return channel.eventLoop.makeSucceededFuture(target == path ? HTTPHeaders() : nil)
                },
                upgradePipelineHandler: { channel, head in
                    let forwarded = head.headers["X-Forwarded-For"]
                    return channel.eventLoop.makeCompletedFuture {
                        .webSocket(channel, goingAway: try installTab(channel, forwarded.isEmpty ? nil : forwarded.joined(separator: ",")))
                    }
                })
            let serverUpgrade = NIOTypedHTTPServerUpgradeConfiguration(
                upgraders: [upgrader],
                notUpgradingCompletionHandler: { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        try channel.pipeline.syncOperations.addHandlers(http1.additionalChannelHandlers())
                        try channel.pipeline.syncOperations.addHandler(
                            HTTPConnectionStateHandler(idleTimeout: http1.idleTimeout.map { .init($0) }, logger: logger))
                        let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                            wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
                        return upgradeAttempted.value ? .failedUpgrade(asyncChannel) : .notUpgraded(asyncChannel)
                    }
                })
            var configuration = NIOUpgradableHTTPServerPipelineConfiguration<UpgradeResult>(upgradeConfiguration: serverUpgrade)
            configuration.enablePipelining = false  // NIOAsyncChannel reads requests one at a time
            configuration.enableErrorHandling = false  // Hummingbird answers errors
            configuration.enableResponseHeaderValidation = false  // swift-http-types validates
            let result = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
            return Value(upgradeResult: result, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.upgradeResult.get() {
            case .notUpgraded(let http):
                await handleHTTP(asyncChannel: http, logger: logger)
            case .failedUpgrade(let http):
                await Self.refuseUpgrade(http)
            case .webSocket(let channel, let goingAway):
                // Served by its handler on the event loop; this only waits for the end, and says
                // "going away" to the tab when the gateway shuts down.
                await withGracefulShutdownHandler {
                    try? await channel.closeFuture.get()
                } onGracefulShutdown: {
                    channel.eventLoop.execute { goingAway() }
                }
            }
        } catch {
            logger.debug("connection ended before its first request", metadata: ["error": "\(error)"])
        }
    }

    /// An upgrade to another path: 400 and close, as Hummingbird answers it.
    private static func refuseUpgrade(_ http: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>) async {
        try? await http.executeThenClose { _, outbound in
            let head = HTTPResponse(status: .badRequest, headerFields: [.connection: "close", .contentLength: "0"])
            try await outbound.write(contentsOf: [.head(head), .end(nil)])
        }
    }

    /// NIO's upgrader only looks at a connection's first request: an upgrade
    /// asked later on a kept-alive connection is redirected to the same
    /// address on a new connection (as Hummingbird's WebSocket channel does).
    private static func redirectingLateUpgrades(_ responder: @escaping HTTPChannelHandler.Responder) -> HTTPChannelHandler.Responder {
        struct RedirectedToNewConnection: Error {}
        return { request, writer, channel in
            guard request.headers[.upgrade]?.lowercased() == "websocket" else { return try await responder(request, writer, channel) }
            let target = request.uri.query.map { "\(request.uri.path)?\($0)" } ?? request.uri.path
            try await writer.writeResponse(HTTPResponse(status: .temporaryRedirect, headerFields: [.connection: "close", .location: target]))
            throw RedirectedToNewConnection()
        }
    }
}
