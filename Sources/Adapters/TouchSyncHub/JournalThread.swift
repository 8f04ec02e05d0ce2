import CoreMetrics
import Foundation
import Logging
import Synchronization
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// The journal on a thread of its own, so the hub loop never waits on the
/// disk. The loop hands it appends, sync requests and restarts through a
/// mailbox, in the order the core asked for them; the thread takes whatever
/// has queued since its last round (a group), writes it, makes it durable
/// with one `fdatasync` per board file written (group commit: every turn
/// that queued while the previous group synced shares the next one), and
/// reports back, in order, what failed, what was restored and how far
/// appends are written and synced (`HubEvent`s for the core).
///
/// The journal itself is synchronous and single-threaded: once handed to
/// this thread nothing else touches it.
package final class JournalThread: Sendable {
    package enum Job: Sendable {
        case append(JournalAppend)
        case sync(through: UInt64)
        case restart(board: String, state: BoardState, hubTime: Int64)
    }

    /// What the thread counts (read by benchmarks and tests from any thread).
    package struct Statistics: Sendable, Equatable {
        /// Rounds that synced board files (one `fdatasync` per file written
        /// since the previous, or one `syncfs`: `JournalSyncMethod`).
        package var groups = 0
        /// Appends written.
        package var appends = 0
        /// Calls that made board files durable (`fdatasync`s and `syncfs`s).
        package var fileSyncs = 0
    }

    private let jobs: Mailbox<Job>
    private let thread = SocketThread(name: "touchsync-jrnl")
    private let statistics = Mutex(Statistics())
    /// The reports of the last round, for `stop` (the hub loop has stopped reading its mailbox).
    private let finalReport = Mutex<[HubEvent]?>(nil)
    private let stopping = Atomic<Bool>(false)
    private let ended = DispatchSemaphore(value: 0)

    /// Takes `journal` over and starts the thread, which reads its jobs from
    /// `jobs` (made first, so nothing can fail once the journal is handed
    /// over); `report` is called on the thread after each round with that
    /// round's events, in order.
    package init(
        journal: sending Journal, jobs: Mailbox<Job>, logger: Logger, metricsFactory: any MetricsFactory,
        report: @escaping @Sendable ([HubEvent]) -> Void
    ) {
        self.jobs = jobs
        let owned = JournalHandoff(journal)
        let metrics = JournalMetrics(factory: metricsFactory)
        thread.start { [self, jobs, ended] in
            guard let journal = owned.take() else {
                ended.signal()
                return
            }
            var round = JournalRound(journal: journal, metrics: metrics)
            while true {
                let finishing = self.stopping.load(ordering: .acquiring)
                let queued = jobs.drain()
                if queued.isEmpty {
                    if finishing { break }
                    Self.waitReadable(jobs.fileDescriptor)
                    continue
                }
                let events = round.run(queued)
                self.statistics.withLock {
                    $0.appends += round.appended
                    $0.fileSyncs += round.fileSyncs
                    if round.fileSyncs > 0 { $0.groups += 1 }
                }
                if finishing {
                    self.finalReport.withLock { $0 = ($0 ?? []) + events }
                } else {
                    report(events)
                }
            }
            _ = jobs.close()
            journal.close()
            logger.debug("journal thread stopped", metadata: ["statistics": "\(self.counts)"])
            ended.signal()
        }
    }

    /// The same, with a mailbox of its own (benchmarks, tests).
    package convenience init(
        journal: sending Journal, logger: Logger, metricsFactory: any MetricsFactory, report: @escaping @Sendable ([HubEvent]) -> Void
    ) throws {
        self.init(journal: journal, jobs: try Mailbox<Job>(), logger: logger, metricsFactory: metricsFactory, report: report)
    }

    /// Queues `job` (never blocks). False once the thread has stopped.
    @discardableResult
    package func post(_ job: Job) -> Bool { jobs.post(job) }

    package var counts: Statistics { statistics.withLock { $0 } }

    /// Finishes every queued job, closes the journal and returns the events
    /// of the rounds run meanwhile (the hub loop handles them before it
    /// closes its sockets). Blocks: for the hub loop's own thread, never a task.
    package func stop() -> [HubEvent] {
        stopping.store(true, ordering: .releasing)
        jobs.post(.sync(through: 0))  // wakes the thread (a sync through 0 asks nothing)
        ended.wait()
        ended.signal()  // a second stop returns at once
        return finalReport.withLock { $0 ?? [] }
    }

    private static func waitReadable(_ descriptor: Int32) {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, -1)
    }
}

/// One round of the journal thread: the jobs queued since the last one,
/// carried out in order, then one sync for the group when any was asked for
/// (or the policy syncs every batch).
struct JournalRound {
    private let journal: Journal
    private let metrics: JournalMetrics
    private let clock = ContinuousClock()
    private var written: UInt64 = 0
    private var synced: UInt64 = 0
    // Counts of the last round.
    private(set) var appended = 0
    private(set) var fileSyncs = 0
    /// The last round synced.
    private(set) var madeDurable = false

    init(journal: Journal, metrics: JournalMetrics) {
        self.journal = journal
        self.metrics = metrics
    }

    mutating func run(_ jobs: [JournalThread.Job]) -> [HubEvent] {
        var events: [HubEvent] = []
        var syncThrough: UInt64 = 0
        appended = 0
        fileSyncs = 0
        madeDurable = false
        let bytesBefore = journal.bytesWritten
        let syncsBefore = journal.syncCalls
        for job in jobs {
            switch job {
            case .append(let append):
                do {
                    try journal.append(
                        board: append.board, encodedBatch: append.encodedBatch, sequence: append.sequence, hubTime: append.hubTime,
                        agents: append.agents, state: append.state)
                } catch {
                    // The board's alone: the others' appends go on (its agents are not acknowledged).
                    events.append(.journalFailed(board: append.board, reason: "write: \(error)"))
                }
                for failure in journal.takeFailures() {
                    events.append(.journalFailed(board: failure.board, reason: "closing its segment: \(failure.error)"))
                }
                written = append.ticket
                appended += 1
            case .sync(let through):
                syncThrough = max(syncThrough, through)
            case .restart(let board, let state, let hubTime):
                do {
                    try journal.restart(board: board, state: state, hubTime: hubTime)
                    events.append(.journalRestored(board: board))
                } catch {
                    events.append(.journalFailed(board: board, reason: "restart: \(error)"))
                }
            }
        }
        if syncThrough > 0 || (journal.configuration.fsync == .everyBatch && appended > 0) {
            // Everything written so far, in one sync per board file: every
            // append this round (and any before) is durable after it.
            let started = clock.now
            for failure in journal.syncEach() {
                events.append(.journalFailed(board: failure.board, reason: "sync: \(failure.error)"))
            }
            synced = written
            madeDurable = true
            if journal.syncCalls > syncsBefore {  // a group commit (not a round that found everything synced)
                metrics.syncDuration.recordNanoseconds(nanoseconds(clock.now - started))
                metrics.syncs.increment()
            }
        }
        fileSyncs = journal.syncCalls - syncsBefore
        metrics.bytes.increment(by: Int64(journal.bytesWritten - bytesBefore))
        // Failures first: the progress that follows must not acknowledge a failed board's agents.
        events.append(.journalProgress(writtenThrough: written, syncedThrough: synced))
        return events
    }
}

/// The journal moving to its thread: handed over once (the caller gives it
/// up: `sending`), taken once on the thread.
private final class JournalHandoff: Sendable {
    private let slot: Mutex<Journal?>
    init(_ journal: sending Journal) { slot = Mutex(journal) }
    func take() -> sending Journal? { slot.withLock { $0.take() } }
}

/// What the journal thread counts of the I/O it carries out.
struct JournalMetrics {
    let bytes: Counter
    let syncs: Counter
    let syncDuration: CoreMetrics.Timer

    init(factory: any MetricsFactory) {
        bytes = Counter(label: "touchsync_hub_journal_bytes_total", factory: factory)
        syncs = Counter(label: "touchsync_hub_journal_syncs_total", factory: factory)
        syncDuration = CoreMetrics.Timer(label: "touchsync_hub_journal_sync_seconds", factory: factory)
    }
}
