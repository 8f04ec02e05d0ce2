import TouchSyncAccess
import CoreMetrics
import Logging
import ServiceLifecycle
import Synchronization
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncStore
import TouchSyncWaiting
import ZeroMQ

/// A board the hub recovered from its journal at start-up.
public struct RecoveredBoardSummary: Sendable {
    public var board: String
    public var sequence: UInt64
    public var digest: BoardDigest
    public var samples: Int
    /// Damage found and repaired (torn tails truncated, corrupt tails moved aside).
    public var damage: [JournalDamage]
}

/// The TouchSync hub as a `Service`: `run()` binds, serves until graceful
/// shutdown (SIGTERM/SIGINT through a `ServiceGroup`), then publishes what is
/// pending and closes its sockets. `start()`/`stop()` do the same by hand,
/// for embedding (tests, the demo).
public final class TouchSyncHub: Service {
    public let configuration: HubConfiguration
    /// Where boards are stored instead of the journal (nil: the journal, if any).
    public let store: BoardStoreConfiguration?
    private let logger: Logger
    private let metricsFactory: any MetricsFactory
    private let context: ZMQContext
    private let state = Mutex<State>(.idle)
    private let recoveredBoards = Mutex<[RecoveredBoardSummary]>([])

    /// The hub's lifecycle. `stop()` is honoured in every state: during
    /// `.starting` it is remembered, and `start()` shuts what it started down
    /// before it returns (throwing `HubError.stoppedWhileStarting`).
    private enum State {
        case idle
        /// `started` completes when the start is done or undone.
        case starting(stopRequested: Bool, started: Completion<Void>)
        case running(Running)
        case stopped
    }

    private struct Running {
        /// The hub loop, or with several board threads each thread's loop (`BoardThreads` order).
        var loops: [(mailbox: Mailbox<HubLoopCommand>, thread: SocketThread)]
        var threads: BoardThreads
        /// With several board threads: the front that owns the public sockets, and the data folder's lock.
        var front: Front?
        var endpoints: HubEndpoints
        var history: (mailbox: Mailbox<StopCommand>, thread: SocketThread)? = nil
        var authentication: AuthenticationService? = nil
        /// The board store's writers (one per board thread) and the tasks that run them.
        var stores: [(writer: BoardStoreWriter, task: Task<Void, Never>)] = []

        struct Front {
            var mailbox: Mailbox<FrontCommand>
            var thread: SocketThread
            var lock: FolderLock?

            func stop() async {
                mailbox.post(.stop)
                await thread.finished()
                lock?.release()
            }
        }

        /// The loop of `board`'s thread.
        func mailbox(of board: String) -> Mailbox<HubLoopCommand> { loops[threads.thread(of: board)].mailbox }

        func stop() async {
            if let (historyMailbox, historyThread) = history {
                historyMailbox.post(.stop)
                await historyThread.finished()
            }
            for loop in loops { loop.mailbox.post(.stop) }
            for loop in loops { await loop.thread.finished() }
            // After the board threads: what they answered and published last goes out through it.
            await front?.stop()
            // After the loop: what it appended last is committed before the hub is gone.
            for (writer, _) in stores { writer.stop() }
            for (_, task) in stores { await task.value }
            // Last: the sockets it authenticates for are closed.
            await authentication?.stop()
        }
    }

    /// - Parameters:
    ///   - context: share one with clients in the same process (needed for `inproc://`); a new one by default.
    ///   - metricsFactory: where metrics go; the global `MetricsSystem.factory` by default.
    ///   - store: keep boards in the board store (PostgreSQL) instead of the journal.
    public init(
        configuration: HubConfiguration = HubConfiguration(), store: BoardStoreConfiguration? = nil, logger: Logger,
        metricsFactory: (any MetricsFactory)? = nil, context: ZMQContext? = nil
    ) throws {
        var configuration = configuration
        var store = store
        guard configuration.boardThreads >= 1 else { throw HubError.boardThreads("at least 1 board thread") }
        if configuration.boardThreads > 1 {
        }
        if var settings = store {
            configuration.journal = nil
            configuration.storeCommits = true
            configuration.storeHubName = settings.hubName
            settings.limits = configuration.limits.boardLimits
            store = settings
        }
        self.configuration = configuration
        self.store = store
        self.logger = logger
        self.metricsFactory = metricsFactory ?? MetricsSystem.factory
        self.context = try context ?? ZMQContext()
    }

    /// The kernel's id of the hub loop's thread while it runs (benchmarks read its /proc entry);
    /// with several board threads, the first board thread's.
    public var loopThreadID: Int32? { loopThreadIDs.first }

    /// The kernel's ids of the hub's loop threads while it runs: every board
    /// thread's, then the front's when it has one.
    public var loopThreadIDs: [Int32] {
        state.withLock { state in
            guard case .running(let running) = state else { return [] }
            return (running.loops.map(\.thread) + [running.front?.thread].compactMap { $0 }).compactMap(\.systemThreadID)
        }
    }

    /// Where the hub listens, once started.
    public var endpoints: HubEndpoints? {
        state.withLock { state in
            if case .running(let running) = state { return running.endpoints }
            return nil
        }
    }

    /// Recovers the journal, binds the sockets and starts the loop thread.
    /// Throws when an endpoint cannot be bound (in use, malformed), the
    /// journal cannot be opened, the hub was already started, or `stop()`
    /// was called while it started.
    @discardableResult
    public func start() async throws -> HubEndpoints {
        let claimed = state.withLock { state in
            guard case .idle = state else { return false }
            state = .starting(stopRequested: false, started: Completion())
            return true
        }
        guard claimed else { throw HubError.alreadyStarted }
        let running: Running
        do {
            running = try await launch()
        } catch {
            // Nothing is left bound: the hub can be started again, unless it was told to stop.
            finishStarting(as: { stopRequested in stopRequested ? .stopped : .idle })
            throw error
        }
        var stopRequested = false
        finishStarting(as: { requested in
            stopRequested = requested
            return requested ? .stopped : .running(running)
        })
        if stopRequested {
            await running.stop()
            throw HubError.stoppedWhileStarting
        }
        return running.endpoints
    }

    /// Leaves `.starting` for the state `next` chooses (given whether a stop
    /// was requested), and releases every `stop()` that waited.
    private func finishStarting(as next: (Bool) -> State) {
        let started = state.withLock { state -> Completion<Void>? in
            guard case .starting(let stopRequested, let started) = state else { return nil }
            state = next(stopRequested)
            return started
        }
        started?.complete(())
    }

    private func launch() async throws -> Running {
        let mailbox = try Mailbox<HubLoopCommand>()
        let (configuration, logger, metricsFactory, context) = (configuration, logger, metricsFactory, context)
        // Authentication first: its handler must be bound before any CURVE socket of the context.
        let authentication = try await AuthenticationService.start(
            configuration.security, context: context, logger: logger, metricsFactory: metricsFactory)
        let access = authentication?.access
        func stopAuthentication() async { await authentication?.stop() }
        // Each board thread's loop has its mailbox from the start: its store writer reports there.
        let threads = BoardThreads(count: configuration.boardThreads)
        var mailboxes = [mailbox]
        for _ in 1..<threads.count { mailboxes.append(try Mailbox<HubLoopCommand>()) }
        // The board store: leases taken and boards loaded before the loop starts;
        // a writer per board thread, each adopting and committing that thread's boards.
        let stored: Stored?
        do {
            stored = try await store.asyncMap { store in
                let loaded = try await BoardStoreLoader.load(configuration: store, limits: configuration.limits.boardLimits, logger: logger)
                let writers = mailboxes.enumerated().map { index, mailbox in
                    var settings = store
                    if threads.count > 1 { settings.holds = { threads.thread(of: $0) == index } }
                    return BoardStoreWriter(configuration: settings, logger: logger, metricsFactory: metricsFactory) { reports in
                        mailbox.post(.store(reports))
                    }
                }
                return Stored(loaded: loaded, writers: writers)
            }
        } catch {
            await stopAuthentication()
            throw error
        }
        // Every endpoint is bound before the journal is opened, so a hub that
        // cannot listen leaves nothing behind (not even its data folder): the
        // history service first (its own thread and socket, so reading files
        // never stalls the loop), then the loop's three sockets.
        var history: (mailbox: Mailbox<StopCommand>, thread: SocketThread, endpoint: String)? = nil
        let historySource: HistorySource? =
            store.map { .store($0.address) } ?? configuration.journal.map { .journal(dataDirectory: $0.directory) }
        if let historySource {
            let historyMailbox = try Mailbox<StopCommand>()
            let historyThread = SocketThread(name: "touchsync-history")
            let endpoint: String
            do {
                endpoint = try await historyThread.start {
                let service = try HistoryService(
                    source: historySource, endpoint: configuration.historyEndpoint, context: context,
                    mailbox: historyMailbox, logger: logger, access: access)
                return (service.endpoint, service.run)
                }
            } catch {
                await stopAuthentication()
                throw error
            }
            history = (historyMailbox, historyThread, endpoint)
        }
        do {
            var running =
                threads.count > 1
                ? try await launchBoardThreads(mailboxes: mailboxes, access: access, stored: stored)
                : try await launchLoop(mailbox: mailbox, access: access, stored: stored.map { ($0.loaded, $0.writers[0]) })
            running.endpoints.history = history?.endpoint
            running.history = history.map { ($0.mailbox, $0.thread) }
            running.authentication = authentication
            if let stored {
                running.stores = stored.writers.enumerated().map { index, writer in
                    let part = threads.count > 1 ? stored.loaded.only { threads.thread(of: $0) == index } : stored.loaded
                    return (writer, Task { await writer.run(startingWith: part) })
                }
            }
            return running
        } catch {
            if let history {
                history.mailbox.post(.stop)
                await history.thread.finished()
            }
            await stopAuthentication()
            throw error
        }
    }

    /// One loop thread that owns the sockets and every board.
    private func launchLoop(
        mailbox: Mailbox<HubLoopCommand>, access: AccessControl?, stored: (loaded: BoardStoreLoader.Loaded, writer: BoardStoreWriter)?
    ) async throws -> Running {
        let (configuration, logger, metricsFactory, context) = (configuration, logger, metricsFactory, context)
        let thread = SocketThread(name: "touchsync-hub")
        // Built on its own thread: the sockets never leave it (the journal goes to a thread of its own).
        let endpoints = try await thread.start { [self] in
            let sockets = try HubSockets(configuration: configuration, context: context)
            let startup: HubStartup
            do {
                startup = try HubStartup(
                    configuration: configuration, stored: stored?.loaded.boards, access: access?.current, logger: logger,
                    metricsFactory: metricsFactory) { events in mailbox.post(.journal(events)) }
            } catch {
                sockets.close()
                throw error
            }
            self.recoveredBoards.withLock { $0 = startup.summaries }
            let loop = HubLoop(
                configuration: configuration, sockets: sockets, startup: startup, store: stored?.writer,
                logger: logger, metricsFactory: metricsFactory, mailbox: mailbox)
            return (loop.endpoints, loop.run)
        }
        return Running(loops: [(mailbox, thread)], threads: BoardThreads(count: 1), front: nil, endpoints: endpoints)
    }

    /// A front thread that owns the public sockets, then one loop thread per
    /// share of the boards (`BoardThreads`), each with its own journal on
    /// the one data folder, started one after the other.
    private func launchBoardThreads(mailboxes: [Mailbox<HubLoopCommand>], access: AccessControl?, stored: Stored?) async throws -> Running {
        let (configuration, logger, metricsFactory, context) = (configuration, logger, metricsFactory, context)
        let threads = BoardThreads(count: configuration.boardThreads)
        let hubID = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        let frontMailbox = try Mailbox<FrontCommand>()
        let frontThread = SocketThread(name: "touchsync-front")
        let endpoints = try await frontThread.start {
            let sockets = try HubSockets(configuration: configuration, context: context)
            let front: HubFront
            do {
                front = try HubFront(
                    sockets: sockets, threads: threads, hubID: hubID, context: context, logger: logger,
                    maxMessagesPerTurn: configuration.sockets.maxMessagesPerTurn, mailbox: frontMailbox, access: access)
            } catch {
                sockets.close()
                throw error
            }
            return (sockets.endpoints, front.run)
        }
        var front = Running.Front(mailbox: frontMailbox, thread: frontThread, lock: nil)
        var loops: [(mailbox: Mailbox<HubLoopCommand>, thread: SocketThread)] = []
        func undo() async {
            for loop in loops { loop.mailbox.post(.stop) }
            for loop in loops { await loop.thread.finished() }
            await front.stop()
        }
        do {
            // Every endpoint is bound (above) before the data folder is opened.
            let lock = try configuration.journal.map { journal throws(JournalError) in try Journal.openFolder(journal.directory) }
            front.lock = lock
            var shared = configuration
            shared.limits.maxSessions = threads.share(of: configuration.limits.maxSessions)
            shared.limits.maxBoards = threads.share(of: configuration.limits.maxBoards)
            let threadConfiguration = shared
            var summaries: [RecoveredBoardSummary] = []
            // One ledger of per-user quotas and allowances for all the threads (with the configured, whole limits).
            let ledger = HubLedger(limits: configuration.limits, epoch: ContinuousClock.now)
            let readers = SnapshotReaderTable(SnapshotReaders(limits: configuration.limits.unreadSnapshots, logger: logger))
            for index in 0..<threads.count {
                let mailbox = mailboxes[index]
                let boards = stored?.loaded.boards.filter { threads.thread(of: $0.name) == index }
                let writer = stored?.writers[index]
                let thread = SocketThread(name: "touchsync-hub-\(index)")
                let recovered = try await thread.start {
                    let sockets = try HubSockets(boardThread: index, hubID: hubID, endpoints: endpoints, context: context)
                    let startup: HubStartup
                    do {
                        startup = try HubStartup(
                            configuration: threadConfiguration, stored: boards, access: access?.current, logger: logger,
                            metricsFactory: metricsFactory, boardThread: (threads, index, lock, ledger)
                        ) { events in mailbox.post(.journal(events)) }
                    } catch {
                        sockets.close()
                        throw error
                    }
                    let loop = HubLoop(
                        configuration: threadConfiguration, sockets: sockets, startup: startup, store: writer,
                        logger: logger, metricsFactory: metricsFactory, mailbox: mailbox, boardThread: index, front: frontMailbox,
                        snapshotReaders: readers)
                    return (startup.summaries, loop.run)
                }
                loops.append((mailbox, thread))
                summaries += recovered
            }
            recoveredBoards.withLock { $0 = summaries }
        } catch {
            await undo()
            throw error
        }
        frontMailbox.post(.serve)
        return Running(loops: loops, threads: threads, front: front, endpoints: endpoints)
    }

    /// The board store as loaded at start-up, and a writer per board thread.
    private struct Stored {
        var loaded: BoardStoreLoader.Loaded
        var writers: [BoardStoreWriter]
    }

    /// The boards recovered from the journal when the hub started (empty without a journal).
    public var recovered: [RecoveredBoardSummary] { recoveredBoards.withLock { $0 } }

    /// Publishes what is pending, closes the sockets and waits for the loop
    /// thread. During `start()` it waits until the start has been undone; a
    /// hub that was never started cannot be started afterwards.
    public func stop() async {
        enum Next {
            case stopRunning(Running)
            case waitForStart(Completion<Void>)
            case nothing
        }
        let next = state.withLock { state -> Next in
            switch state {
            case .idle:
                state = .stopped
                return .nothing
            case .starting(_, let started):
                state = .starting(stopRequested: true, started: started)  // start() undoes itself when it finishes
                return .waitForStart(started)
            case .running(let running):
                state = .stopped
                return .stopRunning(running)
            case .stopped:
                return .nothing
            }
        }
        switch next {
        case .nothing:
            return
        case .stopRunning(let running):
            await running.stop()
        case .waitForStart(let started):
            await started.join()
        }
    }

    /// Serves until graceful shutdown or cancellation.
    public func run() async throws {
        if case .idle = state.withLock({ $0 }) { try await start() }
        guard case .running(let running) = state.withLock({ $0 }) else { return }
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                // Any of its threads that ends (told to stop, or failed) ends the hub.
                await withTaskGroup(of: Void.self) { group in
                    for thread in running.loops.map(\.thread) + [running.front?.thread].compactMap({ $0 }) {
                        group.addTask { await thread.finishedUnlessCancelled() }
                    }
                    await group.next()
                    group.cancelAll()
                }
            } onCancel: {
                self.requestStop()
            }
        } onGracefulShutdown: {
            self.requestStop()
        }
        await stop()
    }

    private func requestStop() {
        state.withLock { state in
            if case .running(let running) = state { for loop in running.loops { loop.mailbox.post(.stop) } }
        }
    }

    /// Reads the access list file again (an authenticated hub; SIGHUP in
    /// `touchsync hub`): new connections are checked against it at once, and
    /// the hub applies it to its sessions and subscriptions (docs/security.md).
    /// On error the old list stays in force and the error is returned.
    public func reloadAccessList() -> Result<Int, AccessListError> {
        guard let (access, mailboxes) = state.withLock({ state -> (AccessControl, [Mailbox<HubLoopCommand>])? in
            guard case .running(let running) = state, let authentication = running.authentication else { return nil }
            return (authentication.access, running.loops.map(\.mailbox))
        }) else { return .failure(.invalid("this hub does not authenticate (no --access list)")) }
        return access.reload().map { list in
            // Every board thread applies it; the front reads the new list for each subscription itself.
            for mailbox in mailboxes { mailbox.post(.accessChanged(list)) }
            return list.users.count
        }
    }

    /// A copy of a board's state as published so far (pending diffs are
    /// published first), or nil when the board does not exist.
    public func boardState(_ board: String) async -> BoardState? {
        guard let mailbox = state.withLock({ state -> Mailbox<HubLoopCommand>? in
            if case .running(let running) = state { return running.mailbox(of: board) }
            return nil
        }) else { return nil }
        let copy = Completion<BoardState?>()
        if !mailbox.post(.inspect(board: board, reply: { copy.complete($0) })) { return nil }
        // Answered at the loop's next turn (or nil as it closes): also a cancelled task tidying up gets it.
        return await copy.join()
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async throws -> T? {
        guard let self else { return nil }
        return try await transform(self)
    }
}

public enum HubError: Error, CustomStringConvertible {
    case alreadyStarted
    case stoppedWhileStarting
    /// `HubConfiguration.boardThreads` cannot be served as asked.
    case boardThreads(String)

    public var description: String {
        switch self {
        case .alreadyStarted: "the hub was already started or stopped (a hub runs once; make a new one to serve again)"
        case .stoppedWhileStarting: "the hub was stopped while it started: it no longer listens"
        case .boardThreads(let why): "board threads: \(why)"
        }
    }
}
