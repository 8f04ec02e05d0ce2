import Foundation
import Logging
import NIOCore
import NIOWebSocket
import TouchSyncAccess
import TouchSyncClient
import TouchSyncCore
import TouchSyncGatewayCore
import TouchSyncWebWire

/// One tab's WebSocket, served on its event loop: a hello, then numbered
/// messages handed to the tab's agent; batches, acks and errors go back. The
/// session's rules are `GatewayCore`'s (under the gateway's lock); this is
/// the pump between them and the socket.
///
/// Most messages are handled where they are read, in the same turn of the
/// event loop. A hello waits on something (it starts an agent and waits for
/// the hub's welcome): it runs as a task, and the messages read meanwhile
/// wait in order (reading pauses until the task is done).
final class TabConnection: TabSocketReceiver {
    private let gateway: WebGateway
    let id: GatewayCore.Connection
    let outbox: TabOutbox
    private var socket: TabWebSocket<TabConnection>? = nil
    private var session: TabSession? = nil
    private var fanout: BoardFanout? = nil
    private var welcomed = false
    private var role: Role = .watch
    private var saidGoodbye = false
    /// What this connection's chained touch frames carry from one to the next (docs/protocol.md, "Packed frames").
    private var touchChains = TouchChains()
    /// The pointer position waiting for its turn (`.some(nil)`: it left the board), when it was last sent, and whether others show it.
    private var cursorDue: BrowserMessage.Cursor?? = nil
    private var lastCursorSent = NIODeadline.distantPast
    private var cursorTimer: Scheduled<Void>? = nil
    private var cursorShown = false
    /// A task runs for a message; later messages wait here.
    private var waiting: Bool = false
    private var backlog: [TabSocketMessage] = []
    /// The socket closed (the tab's state is released once no task runs).
    private var socketClosed = false
    private var released = false
    /// A snapshot is being fetched for the tab: its queue waits behind it.
    private var fetchingSnapshot = false
    private let decoder = JSONDecoder()
    /// What the tab may still send now (docs/security.md); past it reading pauses until there is room.
    private var allowance: TabAllowance
    private var throttled = false
    private var lastLimitNotice = ContinuousClock.Instant.now - .seconds(2)
    private var helloTimer: Scheduled<Void>? = nil
    private var saidHello = false
    /// The peer's address, for the per-address seat limit.
    private var address = "unknown"

    init(gateway: WebGateway, id: GatewayCore.Connection, queueLimit: Int) {
        self.gateway = gateway
        self.id = id
        self.outbox = TabOutbox(limit: queueLimit)
        allowance = TabAllowance(gateway.configuration.tabAllowance, now: .now)
    }

    private var maxMessageBytes: Int { gateway.configuration.maxMessageBytes }

    // MARK: TabSocketReceiver

    func opened(_ socket: TabWebSocket<TabConnection>) {
        self.socket = socket
        address = socket.remoteAddress
        // A reconnecting tab carries on with what its address's last connection had left.
        if let left = gateway.allowances.take(for: address) { allowance = left }
        guard let loop = socket.eventLoop else { return }
        let bound = NIOLoopBound(self, eventLoop: loop)
        let group = gateway.flushGroup(for: loop)
        outbox.wake { group.schedule(bound) }
        if group.ackHold > .zero { outbox.holdAcks { [outbox] in group.hold(outbox) } }
        // A WebSocket that never says hello would hold a connection for nothing.
        let timeout = gateway.configuration.helloTimeout
        helloTimer = loop.scheduleTask(in: TimeAmount(timeout)) {
            let connection = bound.value
            guard !connection.saidHello else { return }
            connection.sendError("NOT_WELCOMED", "no hello within \(timeout)")
            connection.socket?.close(code: .policyViolation, reason: "NOT_WELCOMED")
        }
    }

    func received(_ message: TabSocketMessage) {
        guard !waiting else { return backlog.append(message) }
        handle(message)
    }

    func writable() { drainOutbox() }

    func closed() {
        gateway.allowances.keep(allowance, for: address, now: .now)
        helloTimer?.cancel()
        socketClosed = true
        socket = nil
        outbox.close()
        if !waiting { release() }
    }

    // MARK: Reading

    private func handle(_ message: TabSocketMessage) {
        guard let socket, !socketClosed else { return }
        // Every message counts, malformed ones too; past the allowance the
        // rest is refused and reading pauses (the flood waits in the kernel).
        let now = ContinuousClock.now
        let limited = !allowance.message(now: now)
        if limited {
            throttle(now: now)
            // Shelved at once too: a tab that reconnects the moment it is limited finds it spent.
            gateway.allowances.keep(allowance, for: address, now: now)
        }
        guard message.size <= maxMessageBytes else {
            sendError("TOO_LARGE", "a message is at most \(maxMessageBytes) bytes")
            socket.close(code: .messageTooLarge, reason: "TOO_LARGE")
            return
        }
        let decoded: BrowserMessage
        do {
            switch message {
            case .text(let text):
                decoded = try BrowserMessage.decode(text, with: decoder)
            case .binary(let buffer):
                // Binary frames carry touches, once the welcome said the connection speaks them.
                guard welcomed, outbox.binary else {
                    return sendError("MALFORMED", "binary frames need a welcome with wire binary, packed or packed2 (docs/protocol.md, \"Binary frames\")")
                }
                let bytes = buffer.readableBytesView
                if let first = bytes.first, PackedTouch.isChained(first), outbox.wire == .packed || outbox.wire == .packed2 {
                    do {
                        decoded = .touch(try PackedTouch.decode(bytes, chains: &touchChains))
                    } catch {
                        // The two ends no longer agree on the chain: the tab reconnects and resends on a fresh one.
                        sendError("MALFORMED", "chained touch: \(error.message)")
                        socket.close(code: .dataInconsistentWithMessage, reason: "MALFORMED")
                        return
                    }
                } else {
                    decoded = .touch(try BrowserBinary.decodeTouch(bytes))
                }
            }
        } catch let refused as BrowserMessage.RefusedByNumber {
            // Refused by its number, like any message the hub never saw.
            guard welcomed else { return sendError(refused.code, refused.message) }
            return refuse(refused.number, refused.code, refused.message)
        } catch {
            if limited { return noticeLimit(Self.overAllowance, now: now) }
            return sendError("MALFORMED", (error as? BrowserWireError)?.message ?? "\(error)")
        }
        if case .hello(let hello) = decoded {
            guard !saidHello else { return sendError("MALFORMED", "hello twice on one connection") }
            saidHello = true
            helloTimer?.cancel()
            return runTask { [gateway, id, outbox, address] in
                do throws(BrowserWireError) {
                    let opened = try await gateway.open(hello, connection: id, address: address, outbox: outbox)
                    return { connection in connection.welcome(hello, opened) }
                } catch {
                    return { connection in
                        connection.sendError(error.code, error.message)
                        connection.socket?.close(code: .policyViolation, reason: error.code)
                    }
                }
            }
        }
        guard welcomed else { return sendError("NOT_WELCOMED", "say hello first") }
        if limited {
            if case .bye = decoded {} else {
                if let number = decoded.number { return refuse(number, "RATE_LIMITED", Self.overAllowance) }
                return noticeLimit(Self.overAllowance, now: now)
            }
        }
        switch decoded {
        case .ping(let at):
            socket.send(text: BrowserMessage.pong(at: at).json)
        case .resync:
            // Each costs the whole board: a few a second.
            guard allowance.resync(now: now) else { return noticeLimit("a tab may ask for the board again once a second", now: now) }
            outbox.requestSnapshot()
        case .bye:
            saidGoodbye = true
            socket.close(code: .normalClosure, reason: "bye")
        case .name(let name):
            if let refused = gateway.rename(session, to: name) { sendError(refused.code, refused.message) }
        case .cursor(let cursor):
            guard let x = cursor.x, let y = cursor.y else { return moveCursor(to: nil) }
            guard ([x, y] + (cursor.view ?? [])).allSatisfy({ abs($0) <= 1_000_000 }) else {
                return sendError("MALFORMED", "a cursor and its view are within ±1,000,000 points")
            }
            moveCursor(to: cursor)
        default:
            guard let number = decoded.number else {
                return sendError("MALFORMED", "\(decoded.kind) is what the gateway sends, not a tab")
            }
            guard let session else {
                return socket.send(text: BrowserMessage.refused(n: number, code: "FORBIDDEN", message: "you may only watch this board").json)
            }
            post(decoded, number: number, of: session)
        }
    }

    static let overAllowance = "this tab sends more messages than a page does: slow down"

    /// Refuses page message `number` here (its number is used, as the hub's refusals use it).
    private func refuse(_ number: UInt64, _ code: String, _ message: String) {
        guard let session else { return sendError(code, message) }
        if let refusal = gateway.handle(number, of: session, { (_: TouchAgent) throws(BrowserWireError) in throw BrowserWireError(code, message) }) {
            socket?.send(text: refusal)
        }
    }

    /// A `RATE_LIMITED` error for unnumbered messages, at most once a second (the notices must not be a flood of their own).
    private func noticeLimit(_ message: String, now: ContinuousClock.Instant) {
        guard now - lastLimitNotice >= .seconds(1) else { return }
        lastLimitNotice = now
        sendError("RATE_LIMITED", message)
    }

    /// Stops reading until the allowance has room again.
    private func throttle(now: ContinuousClock.Instant) {
        guard !throttled, let loop = socket?.eventLoop else { return }
        throttled = true
        socket?.pauseReading()
        // At least 50 ms: a flood is read in slices, not a message at a time.
        let wait = max(allowance.nextMessage(now: now) - now, .milliseconds(50))
        let bound = NIOLoopBound(self, eventLoop: loop)
        loop.scheduleTask(in: TimeAmount(wait)) {
            let connection = bound.value
            connection.throttled = false
            if !connection.waiting, !connection.socketClosed { connection.socket?.resumeReading() }
        }
    }

    /// Hands a numbered message to the session's agent (or refuses it).
    private func post(_ decoded: BrowserMessage, number: UInt64, of session: TabSession) {
        let role = self.role
        let refusal = gateway.handle(number, of: session) { (agent: TouchAgent) throws(BrowserWireError) in
            try WebGateway.authorize(decoded, role: role)
            try WebGateway.post(decoded, to: agent)
        }
        if let refusal {
            socket?.send(text: refusal)
        } else if case .style(_, let rgba?, _) = decoded {
            gateway.colour(session, rgba)
        }
    }

    private func welcome(_ hello: BrowserMessage.Hello, _ opened: (TabSession?, BoardFanout, WebGateway.TabIdentity)) {
        let (session, board, identity) = opened
        self.session = session
        fanout = board
        welcomed = true
        role = identity.role
        // The name others see: the invited user's, or the one this tab's hello gave (null for a nameless watcher).
        let facts = gateway.welcomeFacts(of: session)
        let name = facts.displayName ?? identity.user ?? hello.name.flatMap(DisplayName.cleaned)
        let wire = TabWire(hello: hello.wire)
        outbox.speak(wire)
        let welcome = BrowserMessage.Welcome(
            user: session?.namespace, resume: session?.resumeToken, board: board.board, acked: facts.acked,
            role: "\(identity.role)", name: name, wire: wire.name)
        socket?.send(text: BrowserMessage.welcome(welcome).json)
        socket?.flush()
        gateway.tabJoined(id, session: session, board: board, identity: identity, outbox: outbox)
    }

    /// Runs `work` off the event loop; what it returns runs back on the loop,
    /// then the messages that waited. Reading pauses meanwhile.
    private func runTask(_ work: @escaping @Sendable () async -> @Sendable (TabConnection) -> Void) {
        guard let loop = socket?.eventLoop else { return }
        waiting = true
        socket?.pauseReading()
        let bound = NIOLoopBound(self, eventLoop: loop)
        Task {
            let then = await work()
            loop.execute {
                let connection = bound.value
                then(connection)
                connection.taskDone()
            }
        }
    }

    private func taskDone() {
        waiting = false
        guard !socketClosed else { return release() }
        if !throttled { socket?.resumeReading() }
        while !waiting, !backlog.isEmpty { handle(backlog.removeFirst()) }
        socket?.flush()
    }

    private func sendError(_ code: String, _ message: String) {
        socket?.send(text: BrowserMessage.error(code: code, message: message, fromHub: false).json)
    }

    // MARK: Writing

    /// Sends the tab what its outbox holds: a snapshot first when one is due,
    /// then batches and acks (runs of binary frames as one bundle), until the
    /// outbox is empty or the socket cannot take more (its writability wakes
    /// this again; the outbox meanwhile overflows into a snapshot).
    func drainOutbox() {
        guard let socket else { return }
        guard !fetchingSnapshot else {
            // Acks do not wait for the board: the tab hears them while its snapshot is fetched.
            if let ack = outbox.takeAck() {
                switch ack {
                case .binary(let buffer): socket.send(binary: buffer)
                case .text(let text): socket.send(text: text)
                }
                socket.flush()
            }
            return
        }
        while socket.isWritable, let next = outbox.take() {
            switch next {
            case .closed:
                return
            case .revoked(let code, let message):
                sendError(code, message)
                socket.close(code: .policyViolation, reason: code)
                return
            case .snapshot:
                fetchSnapshot()
                return
            case .messages(let frames):
                // Text frames in order; each run of binary ones as one bundle (docs/protocol.md, "Binary frames").
                var run: [ByteBuffer] = []
                for frame in frames {
                    switch frame {
                    case .binary(let buffer): run.append(buffer)
                    case .text(let text):
                        if !run.isEmpty { socket.send(binary: WebGateway.bundle(run)) }
                        run.removeAll()
                        socket.send(text: text)
                    }
                }
                if !run.isEmpty { socket.send(binary: WebGateway.bundle(run)) }
            }
        }
        socket.flush()
    }

    /// The board from the gateway's replica, then the users; batches queued meanwhile follow it.
    private func fetchSnapshot() {
        guard let fanout, let loop = socket?.eventLoop else { return }
        fetchingSnapshot = true
        let bound = NIOLoopBound(self, eventLoop: loop)
        let gateway = self.gateway
        Task {
            let board: BoardState? = await fanout.waitUntilSynced(timeout: .seconds(30)) ? await fanout.snapshot() : nil
            let users = gateway.usersMessage(of: fanout.board)
            loop.execute {
                let connection = bound.value
                connection.fetchingSnapshot = false
                guard let socket = connection.socket else { return }
                guard let board else {
                    connection.sendError("HUB_UNAVAILABLE", "no snapshot of the board from the hub yet")
                    socket.flush()
                    // Asked again in a second (the board may come back).
                    loop.scheduleTask(in: .seconds(1)) { bound.value.outbox.requestSnapshot() }
                    return
                }
                socket.send(text: BrowserWire.snapshot(board))
                socket.send(text: users)
                connection.drainOutbox()
            }
        }
    }

    // MARK: The end

    /// The socket is gone and no task runs: the tab leaves its board; its
    /// session waits for it to come back (or ends, after a goodbye or a revocation).
    // MARK: Presence

    /// The tab's pointer goes to the board's other tabs at most every
    /// `cursorInterval` (`laserInterval` while it draws with the laser; the
    /// latest position wins), on this event loop. Watchers' cursors are not shown.
    private func moveCursor(to cursor: BrowserMessage.Cursor?) {
        guard session != nil, let loop = socket?.eventLoop else { return }
        cursorDue = .some(cursor)
        guard cursorTimer == nil else { return }
        let next = lastCursorSent + (cursor?.laser == true ? Self.laserInterval : Self.cursorInterval)
        if next <= .now() { return sendCursor() }
        cursorTimer = loop.scheduleTask(deadline: next) { [self] in
            cursorTimer = nil
            sendCursor()
        }
    }

    private func sendCursor() {
        guard case .some(let point) = cursorDue else { return }
        cursorDue = nil
        lastCursorSent = .now()
        cursorShown = point != nil
        gateway.cursor(of: id, session: session, on: fanout, outbox: outbox, at: point)
    }

    static let cursorInterval = TimeAmount.milliseconds(50)
    static let laserInterval = TimeAmount.milliseconds(16)

    private func release() {
        guard !released else { return }
        released = true
        backlog.removeAll()
        cursorTimer?.cancel()
        // The board's other tabs stop showing this tab's pointer.
        if cursorShown { gateway.cursor(of: id, session: session, on: fanout, outbox: outbox, at: nil) }
        gateway.tabLeft(id, session: session, board: fanout, outbox: outbox, saidGoodbye: saidGoodbye)
    }
}
