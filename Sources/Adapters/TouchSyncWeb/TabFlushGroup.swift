import NIOCore
import Synchronization

/// The tabs of one event loop that have something to send, drained together
/// in one turn of the loop. A board's batch reaches its tabs' outboxes on the
/// board host's thread; instead of one cross-thread wake-up per tab (a lock
/// and an eventfd write each), the first tab due schedules one turn for the
/// loop and the others join it. With a `delay`, that turn waits a little so
/// each tab's writes over that time leave as one (docs/performance.md, "The
/// tab path as a channel handler").
///
/// Acks held back (`TabOutbox.holdAcks`) wait on one timer of the loop, not
/// one each: the first ack held arms it, the others join it.
final class TabFlushGroup: Sendable {
    let loop: any EventLoop
    let delay: TimeAmount
    let ackHold: TimeAmount
    private let due = Mutex<[NIOLoopBound<TabConnection>]>([])
    private let held = Mutex<[TabOutbox]>([])

    init(loop: any EventLoop, delay: TimeAmount, ackHold: TimeAmount = .zero) {
        self.loop = loop
        self.delay = delay
        self.ackHold = ackHold
    }

    /// `outbox` holds an ack back: it is told when the hold is over.
    func hold(_ outbox: TabOutbox) {
        let first = held.withLock { held in
            held.append(outbox)
            return held.count == 1
        }
        guard first else { return }
        loop.scheduleTask(in: ackHold) { self.endHolds() }
    }

    /// On the loop: every ack held since the timer was armed goes (unless a batch took it already).
    private func endHolds() {
        let outboxes = held.withLock { held in
            defer { held.removeAll(keepingCapacity: true) }
            return held
        }
        for outbox in outboxes { outbox.ackHoldEnded() }
    }

    /// `connection` has something to send (called once until its outbox is taken empty).
    func schedule(_ connection: NIOLoopBound<TabConnection>) {
        let first = due.withLock { due in
            due.append(connection)
            return due.count == 1
        }
        guard first else { return }
        if delay > .zero {
            loop.scheduleTask(in: delay) { self.drain() }
        } else {
            loop.execute { self.drain() }
        }
    }

    /// On the loop: every tab that was due sends what it has.
    private func drain() {
        let connections = due.withLock { due in
            defer { due.removeAll(keepingCapacity: true) }
            return due
        }
        for connection in connections { connection.value.drainOutbox() }
    }
}
