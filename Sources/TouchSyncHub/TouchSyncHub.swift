import CoreMetrics
import Logging
import ServiceLifecycle
import Synchronization
import TouchSyncCore
import TouchSyncJournal
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
    private let logger: Logger
    private let metricsFactory: any MetricsFactory
    private let context: ZMQContext
    private let state = Mutex<State>(.idle)
    private let recoveredBoards = Mutex<[RecoveredBoardSummary]>([])

    private enum State {
        case idle
        case starting
        case running(Mailbox<HubCommand>, HubEndpoints, SocketThread, history: (Mailbox<HubCommand>, SocketThread)?)
        case stopped
    }

    /// - Parameters:
    ///   - context: share one with clients in the same process (needed for `inproc://`); a new one by default.
    ///   - metricsFactory: where metrics go; the global `MetricsSystem.factory` by default.
    public init(
        configuration: HubConfiguration = HubConfiguration(), logger: Logger, metricsFactory: (any MetricsFactory)? = nil,
        context: ZMQContext? = nil
    ) throws {
        self.configuration = configuration
        self.logger = logger
        self.metricsFactory = metricsFactory ?? MetricsSystem.factory
        self.context = try context ?? ZMQContext()
    }

    /// Where the hub listens, once started.
    public var endpoints: HubEndpoints? {
        state.withLock { state in
            if case .running(_, let endpoints, _, _) = state { return endpoints }
            return nil
        }
    }

    /// Binds the sockets and starts the loop thread. Throws when an endpoint
    /// cannot be bound (in use, malformed) or the hub was already started.
    @discardableResult
    public func start() async throws -> HubEndpoints {
        let claimed = state.withLock { state in
            guard case .idle = state else { return false }
            state = .starting
            return true
        }
        guard claimed else { throw HubError.alreadyStarted }
        let mailbox: Mailbox<HubCommand>
        do {
            mailbox = try Mailbox<HubCommand>()
        } catch {
            state.withLock { $0 = .idle }
            throw error
        }
        let (configuration, logger, metricsFactory, context) = (configuration, logger, metricsFactory, context)
        let thread = SocketThread(name: "touchsync-hub")
        var endpoints: HubEndpoints
        do {
            endpoints = try await withCheckedThrowingContinuation { continuation in
                thread.start { [self] in
                    // Built on its own thread: the loop's sockets never leave it.
                    let loop: HubLoop
                    do {
                        loop = try HubLoop(
                            configuration: configuration, logger: logger, metricsFactory: metricsFactory,
                            context: context, mailbox: mailbox)
                    } catch {
                        continuation.resume(throwing: error)
                        return
                    }
                    self.recoveredBoards.withLock { $0 = loop.recovered }
                    continuation.resume(returning: loop.endpoints)
                    loop.run()
                }
            }
        } catch {
            state.withLock { $0 = .idle }  // nothing was bound: the hub can be started again
            throw error
        }
        // The history service: its own thread and socket, so reading files never stalls the loop.
        var history: (Mailbox<HubCommand>, SocketThread)? = nil
        if let journal = configuration.journal {
            do {
                let historyMailbox = try Mailbox<HubCommand>()
                let historyThread = SocketThread(name: "touchsync-history")
                let historyEndpoint: String = try await withCheckedThrowingContinuation { continuation in
                    historyThread.start {
                        let service: HistoryService
                        do {
                            service = try HistoryService(
                                dataDirectory: journal.directory, endpoint: configuration.historyEndpoint, context: context,
                                mailbox: historyMailbox, logger: logger)
                        } catch {
                            continuation.resume(throwing: error)
                            return
                        }
                        continuation.resume(returning: service.endpoint)
                        service.run()
                    }
                }
                endpoints.history = historyEndpoint
                history = (historyMailbox, historyThread)
            } catch {
                mailbox.post(.stop)
                await thread.finished()
                state.withLock { $0 = .idle }
                throw error
            }
        }
        state.withLock { $0 = .running(mailbox, endpoints, thread, history: history) }
        return endpoints
    }

    /// The boards recovered from the journal when the hub started (empty without a journal).
    public var recovered: [RecoveredBoardSummary] { recoveredBoards.withLock { $0 } }

    /// Publishes what is pending, closes the sockets and waits for the loop thread.
    public func stop() async {
        let running: (Mailbox<HubCommand>, SocketThread, (Mailbox<HubCommand>, SocketThread)?)? = state.withLock { state in
            guard case .running(let mailbox, _, let thread, let history) = state else { return nil }
            state = .stopped
            return (mailbox, thread, history)
        }
        guard let (mailbox, thread, history) = running else { return }
        if let (historyMailbox, historyThread) = history {
            historyMailbox.post(.stop)
            await historyThread.finished()
        }
        mailbox.post(.stop)
        await thread.finished()
    }

    /// Serves until graceful shutdown or cancellation.
    public func run() async throws {
        if state.withLock({ if case .idle = $0 { return true } else { return false } }) { try await start() }
        guard case .running(_, _, let thread, _)? = state.withLock({ state -> State? in state }) else { return }
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await thread.finished()
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
            if case .running(let mailbox, _, _, _) = state { mailbox.post(.stop) }
        }
    }

    /// A copy of a board's state as published so far (pending diffs are
    /// published first), or nil when the board does not exist.
    public func boardState(_ board: String) async -> BoardState? {
        guard let mailbox = state.withLock({ state -> Mailbox<HubCommand>? in
            if case .running(let mailbox, _, _, _) = state { return mailbox }
            return nil
        }) else { return nil }
        return await withCheckedContinuation { continuation in
            if !mailbox.post(.inspect(board: board, reply: { continuation.resume(returning: $0) })) {
                continuation.resume(returning: nil)
            }
        }
    }
}

public enum HubError: Error, CustomStringConvertible {
    case alreadyStarted
    public var description: String { "the hub was already started (a hub runs once; make a new one to serve again)" }
}
