import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay on 127.0.0.1 that carries a browser's connections to a
/// gateway as a slower link would: every byte arrives `oneWayDelay` after
/// it was sent, in each direction (a round trip of twice that), and the
/// link can go down (every connection is cut and new ones are closed at
/// once) and come back. Real sockets and threads; `stop()` ends it.
public final class LinkEmulator: Sendable {
    public let port: UInt16
    public let oneWayDelay: Duration
    private let listener: Int32
    private let targetPort: UInt16
    private struct State {
        var sockets: Set<Int32> = []
        var down = false
        var stopped = false
        var connections = 0
    }
    private let state = Mutex(State())

    public init(targetPort: UInt16, oneWayDelay: Duration) throws {
        self.targetPort = targetPort
        self.oneWayDelay = oneWayDelay
        (listener, port) = try Self.listenOnLoopback(backlog: 64)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Connections accepted so far (a page that retries opens more).
    public var connections: Int { state.withLock { $0.connections } }

    /// Cuts every connection and closes new ones until `up()`.
    public func down() {
        let sockets = state.withLock { state in
            state.down = true
            return state.sockets
        }
        for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    public func up() { state.withLock { $0.down = false } }

    public func stop() {
        let sockets = state.withLock { state in
            state.stopped = true
            state.down = true
            return state.sockets
        }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)  // Chromium, spawned meanwhile, must not keep it
            let refuse = state.withLock { state in
                state.connections += 1
                return state.down || state.stopped
            }
            if refuse {
                close(client)
                continue
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(client)
                close(server)
                continue
            }
            for fd in [client, server] {
                var yes: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
            }
            state.withLock { $0.sockets.formUnion([client, server]) }
            let finished = Atomic<Int>(0)
            let release: @Sendable () -> Void = { [self] in
                // The second direction to end closes both sockets.
                if finished.add(1, ordering: .sequentiallyConsistent).newValue == 2 {
                    state.withLock { $0.sockets.subtract([client, server]) }
                    close(client)
                    close(server)
                }
            }
            DelayedPipe(from: client, to: server, delay: oneWayDelay, done: release).start()
            DelayedPipe(from: server, to: client, delay: oneWayDelay, done: release).start()
        }
    }

    /// A TCP socket listening on 127.0.0.1 at a free port, and that port.
    public static func listenOnLoopback(backlog: Int32) throws -> (descriptor: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, backlog) == 0 else {
            close(fd)
            throw Chromium.Failure("cannot listen on 127.0.0.1: errno \(errno)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, UInt16(bigEndian: actual.sin_port))
    }

    public static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}

/// One direction of a connection: a reader queues what arrives with the
/// time it is due, a writer sends it when due. The queue is under a mutex;
/// the semaphore wakes the writer (a stray wake-up only makes it look again).
private final class DelayedPipe: Sendable {
    let source: Int32, destination: Int32
    let delay: Duration
    let done: @Sendable () -> Void
    private let state = Mutex<(queue: [(due: ContinuousClock.Instant, bytes: [UInt8])], ended: Bool)>(([], false))
    private let arrived = DispatchSemaphore(value: 0)

    init(from source: Int32, to destination: Int32, delay: Duration, done: @escaping @Sendable () -> Void) {
        self.source = source
        self.destination = destination
        self.delay = delay
        self.done = done
    }

    func start() {
        Thread.detachNewThread { [self] in read() }
        Thread.detachNewThread { [self] in write() }
    }

    private func read() {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = recv(source, &buffer, buffer.count, 0)
            if count < 0 && errno == EINTR { continue }
            let bytes = count > 0 ? Array(buffer[0..<count]) : []
            state.withLock { state in
                if count <= 0 { state.ended = true } else { state.queue.append((ContinuousClock.now + delay, bytes)) }
            }
            arrived.signal()
            if count <= 0 { return }
        }
    }

    private enum Next {
        case send([UInt8])
        case wait(until: ContinuousClock.Instant?)
        case finished
    }

    private func write() {
        while true {
            let now = ContinuousClock.now
            let next: Next = state.withLock { state in
                guard let head = state.queue.first else { return state.ended ? .finished : .wait(until: nil) }
                guard head.due <= now else { return .wait(until: head.due) }
                state.queue.removeFirst()
                return .send(head.bytes)
            }
            switch next {
            case .finished:
                shutdown(destination, Int32(SHUT_WR))
                done()
                return
            case .wait(let until):
                if let until {
                    let (seconds, attoseconds) = (until - now).components
                    _ = arrived.wait(timeout: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)))
                } else {
                    arrived.wait()
                }
            case .send(let bytes):
                guard deliver(bytes) else {
                    // The other side is gone: stop the reader, wait for it to end, and end.
                    shutdown(source, Int32(SHUT_RDWR))
                    while !state.withLock({ state in
                        state.queue.removeAll()
                        return state.ended
                    }) { arrived.wait() }
                    done()
                    return
                }
            }
        }
    }

    /// Sends all of `bytes`; false when the destination is gone.
    private func deliver(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 && errno == EINTR { continue }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }
}
