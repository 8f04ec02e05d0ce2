/// The loop of a thread that owns sockets (the hub, a replay, the history
/// service): it sleeps in `zmq_poll` on its sockets and its mailbox until
/// input arrives or its next deadline passes (the way CZMQ's zloop works),
/// hands commands and readable sockets to its owner, then ends the turn.
/// One implementation, so every service wakes, stops and times out alike.
public struct PollLoop<Command: Sendable> {
    public enum Step { case proceed, stop }

    private var poller = ZMQPoller()
    private let mailbox: Mailbox<Command>
    private let mailboxIndex: Int
    private let socketCount: Int

    /// Watches `sockets` (readable; reported by their index in this array) and `mailbox`.
    public init(mailbox: Mailbox<Command>, sockets: [ZMQSocket]) throws(ZMQError) {
        self.mailbox = mailbox
        for socket in sockets { try poller.add(socket) }
        socketCount = sockets.count
        mailboxIndex = poller.add(fileDescriptor: mailbox.fileDescriptor)
    }

    /// Runs turns until `commands` returns `.stop` or a handler throws (a
    /// terminated context throws `ZMQError` with `isTerminated`).
    /// - Parameters:
    ///   - deadline: when the next turn is due though nothing arrives (nil: no timer).
    ///   - commands: what other threads posted, oldest first.
    ///   - readable: a socket (by index) has input; read it without blocking.
    ///   - turnEnded: after every wake-up, whatever woke it.
    public mutating func run(
        deadline: () -> ContinuousClock.Instant?,
        commands: ([Command]) throws -> Step,
        readable: (Int) throws -> Void,
        turnEnded: () throws -> Void
    ) throws {
        while true {
            let timeout = deadline().map { ZMQPoller.timeout(until: $0) } ?? -1
            try poller.poll(timeoutMilliseconds: timeout)
            if poller.isReadable(mailboxIndex), try commands(mailbox.drain()) == .stop { return }
            for index in 0..<socketCount where poller.isReadable(index) { try readable(index) }
            try turnEnded()
        }
    }
}

/// The command set of a loop that is only ever told to stop.
public enum StopCommand: Sendable { case stop }
