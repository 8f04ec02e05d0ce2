import Foundation
import Synchronization
import TouchSyncBrowser

#if canImport(Glibc)
import Glibc
#endif

/// A TCP relay on 127.0.0.1 that forwards to `target` and can cut every
/// connection it carries (both ends see the connection drop), then keeps
/// accepting new ones. Real sockets, loopback only; it stops with `stop()`.
final class TCPFaultProxy: Sendable {
    let port: UInt16
    private let listener: Int32
    private let state = Mutex<(pairs: [(Int32, Int32)], stopped: Bool, drops: Int, paused: Bool)>(([], false, 0, false))
    private let targetPort: UInt16

    init(targetPort: UInt16) throws {
        self.targetPort = targetPort
        (listener, port) = try LinkEmulator.listenOnLoopback(backlog: 16)
        let relay = Thread { [self] in self.relay() }
        relay.start()
    }

    var endpoint: String { "tcp://127.0.0.1:\(port)" }
    var drops: Int { state.withLock { $0.drops } }

    /// Stops forwarding: bytes pile up in flight until `resume` (or are lost by `dropConnections`).
    func pause() { state.withLock { $0.paused = true } }

    /// Bytes that reached the proxy and wait in its sockets (held while paused).
    var heldBytes: Int {
        state.withLock { state in
            state.pairs.reduce(0) { total, pair in
                var waiting: Int32 = 0
                var other: Int32 = 0
                _ = ioctl(pair.0, UInt(FIONREAD), &waiting)
                _ = ioctl(pair.1, UInt(FIONREAD), &other)
                return total + Int(waiting) + Int(other)
            }
        }
    }
    func resume() { state.withLock { $0.paused = false } }

    /// Cuts every connection now (RST to both sides): whatever was in flight is lost.
    func dropConnections() {
        state.withLock { state in
            for (client, server) in state.pairs {
                var hard = linger(l_onoff: 1, l_linger: 0)
                setsockopt(client, SOL_SOCKET, SO_LINGER, &hard, socklen_t(MemoryLayout<linger>.size))
                setsockopt(server, SOL_SOCKET, SO_LINGER, &hard, socklen_t(MemoryLayout<linger>.size))
                shutdown(client, Int32(SHUT_RDWR))
                shutdown(server, Int32(SHUT_RDWR))
            }
            state.drops += 1
        }
    }

    func stop() {
        state.withLock { $0.stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func relay() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !state.withLock({ $0.stopped }) {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            let (pairs, paused) = state.withLock { ($0.pairs, $0.paused) }
            // While paused, connections are polled for nothing: their bytes stay in flight.
            let events = paused ? 0 : Int16(POLLIN)
            for (client, server) in pairs {
                fds.append(pollfd(fd: client, events: events, revents: 0))
                fds.append(pollfd(fd: server, events: events, revents: 0))
            }
            guard poll(&fds, nfds_t(fds.count), 20) >= 0 else { continue }
            if fds[0].revents & Int16(POLLIN) != 0 {
                let client = accept(listener, nil, nil)
                if client >= 0 {
                    _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                    let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                    var address = LinkEmulator.loopback(port: targetPort)
                    let connected = withUnsafePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                        }
                    }
                    if connected == 0 {
                        state.withLock { $0.pairs.append((client, server)) }
                    } else {
                        close(client)
                        close(server)
                    }
                }
            }
            var dead: [Int] = []
            // Read the flag again: a pause that came during poll must hold back this round.
            let stillPaused = state.withLock { $0.paused }
            for (index, (client, server)) in pairs.enumerated() where !stillPaused {
                for (from, to, slot) in [(client, server, 1 + index * 2), (server, client, 2 + index * 2)]
                where fds[slot].revents != 0 {
                    let count = read(from, &buffer, buffer.count)
                    if count <= 0 || send(to, buffer, count, Int32(MSG_NOSIGNAL)) != count { dead.append(index) }
                }
            }
            if !dead.isEmpty {
                state.withLock { state in
                    for index in Set(dead).sorted(by: >) where index < state.pairs.count {
                        close(state.pairs[index].0)
                        close(state.pairs[index].1)
                        state.pairs.remove(at: index)
                    }
                }
            }
        }
        state.withLock { state in
            for (client, server) in state.pairs {
                close(client)
                close(server)
            }
            state.pairs.removeAll()
        }
        close(listener)
    }
}
