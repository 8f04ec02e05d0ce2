import NIOCore
import Synchronization

/// The tabs of one event loop that have something to send, drained together
/// in one turn of the loop. A board's batch reaches its tabs' outboxes on the
/// board host's thread; instead of one cross-thread wake-up per tab (a lock
/// and an eventfd write each), the first tab due schedules one turn for the
/// loop and the others join it. With a `delay`, that turn waits a little so
/// each tab's writes over that time leave as one (docs/performance.md, "The
/// tab path as a channel handler").
final class TabFlushGroup: Sendable {
    let loop: any EventLoop
    let delay: TimeAmount
    private let due = Mutex<[NIOLoopBound<TabConnection>]>([])

    init(loop: any EventLoop, delay: TimeAmount) {
        self.loop = loop
        self.delay = delay
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
