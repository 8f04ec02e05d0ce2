import Foundation
import NIOPosix
import Synchronization
import TestSupport
import TouchSyncBrowser
import TouchSyncLoad
import TouchSyncWaiting
import TouchSyncWebWire

/// A tab as a test drives it: one WebSocket to a gateway, its messages decoded in arrival order.
public final class TestTab: Sendable {
    public let connection: WebSocketConnection
    private let received: Received

    private final class Received: Sendable {
        let state = Mutex((messages: [BrowserMessage](), read: 0, closed: false))
        let arrived = ConditionWaiters()
    }

    private init(connection: WebSocketConnection, received: Received) {
        self.connection = connection
        self.received = received
    }

    /// `headers`: more request headers for the upgrade (a proxy's X-Forwarded-For).
    public static func open(port: Int, group: MultiThreadedEventLoopGroup, headers: [(String, String)] = []) async throws -> TestTab {
        let received = Received()
        let connection = try await WebSocketConnection.connect(
            host: "127.0.0.1", port: port, group: group, headers: headers,
            onText: { text in
                let message = (try? BrowserMessage.decode(text)) ?? .error(code: "UNREADABLE", message: text, fromHub: false)
                received.state.withLock { $0.messages.append(message) }
                received.arrived.signal()
            },
            onBinary: { bytes in
                // Acks of a tab on a binary wire (its batches are read elsewhere: `PackedWireTests`, `aWebLoadConverges`).
                let acks = ((try? BrowserBinary.framesFromGateway(bytes)) ?? []).compactMap { frame -> BrowserMessage? in
                    if case .ack(let n)? = try? BrowserBinary.decodeFromGateway(frame) { return .ack(n: n) }
                    return nil
                }
                received.state.withLock { $0.messages += acks }
                received.arrived.signal()
            },
            onClose: {
                received.state.withLock { $0.closed = true }
                received.arrived.signal()
            })
        return TestTab(connection: connection, received: received)
    }

    public func send(_ message: BrowserMessage) { connection.send(message.json) }
    public func send(bytes: [UInt8]) { connection.send(bytes: bytes) }

    /// Every message received so far, in order.
    public var receivedMessages: [BrowserMessage] { received.state.withLock { $0.messages } }

    /// How many messages received so far match.
    public func received(where matches: (BrowserMessage) -> Bool) -> Int { received.state.withLock { $0.messages.filter(matches).count } }

    /// Whether the gateway closed the connection within `timeout`.
    public func waitUntilClosed(timeout: Duration = .seconds(10)) async -> Bool {
        let timeout = scaled(timeout)
        let received = self.received
        return await received.arrived.wait(timeout: timeout) { received.state.withLock { $0.closed ? true : nil } } ?? false
    }

    /// The next message that `matches`, skipping others; fails after `timeout` or when the connection closed.
    public func next<T: Sendable>(_ what: String, timeout: Duration = .seconds(20), _ matches: @escaping @Sendable (BrowserMessage) -> T?) async throws -> T {
        let timeout = scaled(timeout)
        let received = self.received
        let found: T?? = await received.arrived.wait(timeout: timeout) {
            received.state.withLock { state -> T?? in
                while state.read < state.messages.count {
                    let message = state.messages[state.read]
                    state.read += 1
                    if let value = matches(message) { return .some(value) }
                }
                return state.closed ? .some(nil) : nil
            }
        }
        guard let found, let value = found else {
            // What did come, to tell a slow machine from a wrong answer.
            let last = received.state.withLock { state in
                state.messages.suffix(3).map { message in
                    if case .error(let code, let text, _) = message { "error \(code): \(text)" } else { message.kind }
                } + (state.closed ? ["(closed)"] : [])
            }
            throw TestFailure("no \(what) within \(timeout); the last received: \(last)")
        }
        return value
    }
}

/// A sample as a tab sends it: x and y in points, t in milliseconds.
public func browserSample(_ x: Double, _ y: Double, _ t: Double) -> [Double?] { [x, y, t] }
