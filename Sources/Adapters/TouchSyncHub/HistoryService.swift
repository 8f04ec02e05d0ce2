import TouchSyncHubCore
import Dispatch
import Glibc
import Synchronization
import TouchSyncAccess
import Logging
import TouchSyncCore
import TouchSyncJournal
import TouchSyncStore
import TouchSyncWire
import ZeroMQ

/// Where recorded histories are read from.
enum HistorySource: Sendable {
    case journal(dataDirectory: String)
    case store(StoreAddress)
}

/// Serves boards' recorded histories from the journal (or the board store) on the hub's history
/// endpoint (a ROUTER), on a thread of its own so that reading files never
/// stalls the hub loop. It only reads: the journal is safe to read while the
/// hub appends (a record still being written reads as a torn tail and is
/// simply not sent yet).
final class HistoryService {
    private let source: HistorySource
    private let socket: ZMQSocket
    private let mailbox: Mailbox<StopCommand>
    private let logger: Logger
    let endpoint: String
    private let receiver: RequestReceiver
    /// Recorded batches per reply message (a reply stays well under a megabyte).
    static let batchesPerReply = 64

    /// With `access`, the socket is a CURVE server and each request is authorised (watch or more on its board).
    private let access: AccessControl?

    init(
        source: HistorySource, endpoint: String, context: ZMQContext, mailbox: Mailbox<StopCommand>, logger: Logger,
        access: AccessControl? = nil
    ) throws {
        self.access = access
        self.source = source
        self.mailbox = mailbox
        self.logger = logger
        socket = try ZMQSocket(context, type: .router)
        try socket.setRouterMandatory(true)
        // A few replies queued per peer: the rest of its history waits here, encoded as the peer reads.
        try socket.setSendHighWaterMark(Self.queuedRepliesPerPeer)
        try socket.setMaxMessageSize(64 << 10)
        if let access { try AccessControl.makeCurveServer(socket, security: access.security) }
        try socket.bind(endpoint)
        self.endpoint = try socket.lastEndpoint
        receiver = RequestReceiver(socket: socket)
    }

    func run() {
        defer {
            socket.close()
            _ = mailbox.close()
        }
        do {
            var loop = try PollLoop(mailbox: mailbox, sockets: [socket])
            // While histories are under way, a turn every 10 ms sends what their peers have room for.
            try loop.run(
                deadline: { transfers.isEmpty ? nil : .now + .milliseconds(10) }, commands: { _ in .stop },
                readable: { _ in try drain() }, turnEnded: { pump(now: .now) })
        } catch let error as ZMQError where error.isTerminated {
            return
        } catch {
            logger.error("history service stopped", metadata: ["error": "\(error)"])
        }
    }

    /// History requests one requester (its user, else its connection) may
    /// make per window: a history is sent whole (a subscriber asks once when
    /// it starts), so each served request can queue a whole journal for a
    /// peer that never reads (1,000 of them took 1 GB).
    static let maxRequestsPerWindow = 3
    static let requestWindow: Duration = .seconds(10)
    private var window: (start: ContinuousClock.Instant, counts: [[UInt8]: Int])? = nil

    /// Counts a request of `requester` in the current window; false past the allowance.
    private func admit(_ requester: [UInt8], now: ContinuousClock.Instant) -> Bool {
        guard let current = window, now - current.start < Self.requestWindow else {
            window = (now, [requester: 1])
            return true
        }
        let count = (current.counts[requester] ?? 0) + 1
        window!.counts[requester] = count
        return count <= Self.maxRequestsPerWindow
    }

    private func drain() throws(ZMQError) {
        while let (peer, user, decoded) = try receiver.next(Touchsync_V1_HistoryRequest.self) {
            guard case .success(let request) = decoded else {
                sendError(to: peer, requestID: 0, code: .malformed, "not a HistoryRequest")
                continue
            }
            // Whose request it is: the connection's user, or the user a gateway asks for (counted as that user).
            let party: RequestParty
            switch RequestParty.resolve(user: access == nil ? nil : user, actAs: request.actAs, token: request.token, access: access?.current) {
            case .success(let resolved): party = resolved
            case .failure(let refusal):
                sendError(to: peer, requestID: request.requestID, code: refusal.code, refusal.message)
                continue
            }
            let requester = party.allowanceKey.map { Array($0.utf8) } ?? peer
            guard admit(requester, now: .now) else {
                sendError(
                    to: peer, requestID: request.requestID, code: .rateLimited,
                    "more than \(Self.maxRequestsPerWindow) history requests in \(Self.requestWindow.components.seconds) s")
                continue
            }
            if access != nil, !party.mayWatch(request.board, access: access?.current) {
                sendError(to: peer, requestID: request.requestID, code: .forbidden, "\(party.user ?? "this peer") may not watch board \(request.board)")
                continue
            }
            serve(request, to: peer, requester: requester)
        }
    }

    // MARK: Transfers

    /// Replies queued in libzmq per peer (ZMQ_SNDHWM).
    static let queuedRepliesPerPeer: Int32 = 16
    /// Histories being sent at once (each holds its board's history in memory).
    static let maxTransfers = 4
    /// Requests waiting for a transfer to end (the rest get RATE_LIMITED).
    static let maxWaiting = 64
    /// A transfer whose peer took nothing for this long is dropped (and freed).
    static let stallLimit: Duration = .seconds(10)
    /// When all transfers are taken, one stalled this long makes room for a new request.
    static let evictableAfter: Duration = .seconds(1)

    /// A history on its way to one peer: its replies are encoded as they go out.
    private struct Transfer {
        let peer: [UInt8]
        let requester: [UInt8]
        let requestID: UInt64
        let board: String
        let history: LoadedHistory
        let checkpoint: [Touchsync_V1_SnapshotChunk]
        /// The next reply: checkpoint chunks, then batch groups, then the end.
        var next = 0
        var lastProgress: ContinuousClock.Instant

        var count: Int { checkpoint.count + (history.batches.count + batchesPerReply - 1) / batchesPerReply + 1 }

        func reply(_ index: Int) -> Touchsync_V1_HistoryReply {
            var reply = Touchsync_V1_HistoryReply()
            reply.requestID = requestID
            if index < checkpoint.count {
                reply.checkpoint = checkpoint[index]
            } else if index < count - 1 {
                let start = (index - checkpoint.count) * batchesPerReply
                var batches = Touchsync_V1_HistoryBatches()
                batches.batches = history.batches[start..<min(start + batchesPerReply, history.batches.count)].map(\.proto)
                reply.batches = batches
            } else {
                var end = Touchsync_V1_HistoryEnd()
                end.sequence = history.endState.sequence
                end.digest = history.endState.digest.rawValue
                reply.end = end
            }
            return reply
        }
    }

    private var transfers: [Transfer] = []
    /// The last history loaded, and the sizes of the segments it was read
    /// from: requests for the same board while nothing was appended share it
    /// (reading a long journal is the costly part; a flood of requests must not repeat it).
    /// The last history read, with what it was read from (the journal's segment sizes, or the store's batch count and last sequence).
    private var cached: (board: String, sizes: [Int], history: LoadedHistory)? = nil
    private var waiting: [(peer: [UInt8], requester: [UInt8], request: Touchsync_V1_HistoryRequest)] = []

    /// Sends every transfer's next replies while its peer has room; drops
    /// finished ones, ones whose peer left, and ones stalled past the limit.
    private func pump(now: ContinuousClock.Instant) {
        // Requests that waited start, in order, as transfers end or stall (each served once).
        while !waiting.isEmpty, transfers.count < Self.maxTransfers || evictStalled(now: now) {
            let next = waiting.removeFirst()
            serve(next.request, to: next.peer, requester: next.requester)
        }
        var index = 0
        while index < transfers.count {
            if send(&transfers[index], now: now) {
                index += 1
            } else {
                transfers.remove(at: index)
            }
        }
        if transfers.isEmpty && waiting.isEmpty { cached = nil }  // nothing is kept once nobody is served
    }

    /// Sends what the peer has room for; false when the transfer is over (done, peer gone, stalled).
    private func send(_ transfer: inout Transfer, now: ContinuousClock.Instant) -> Bool {
        while transfer.next < transfer.count {
            do {
                guard try socket.send(multipart: [transfer.peer, WireCodec.encode(transfer.reply(transfer.next))], dontWait: true) else {
                    break  // the peer's queue is full: later
                }
            } catch {
                logger.debug("history not delivered", metadata: ["error": "\(error)"])
                return false  // EHOSTUNREACH: the peer is gone
            }
            transfer.next += 1
            transfer.lastProgress = now
        }
        if transfer.next >= transfer.count { return false }
        if now - transfer.lastProgress > Self.stallLimit {
            logger.info("history dropped: its peer read nothing for \(Self.stallLimit)", metadata: ["board": "\(transfer.board)"])
            return false
        }
        return true
    }

    /// Room for one more transfer for `requester`: its own earlier one is
    /// replaced; at the limit, the longest-stalled one goes if it is stalled.
    private func makeRoom(for requester: [UInt8], now: ContinuousClock.Instant) -> Bool {
        transfers.removeAll { $0.requester == requester }
        return transfers.count < Self.maxTransfers || evictStalled(now: now)
    }

    /// Drops the longest-stalled transfer if it took nothing for `evictableAfter`.
    private func evictStalled(now: ContinuousClock.Instant) -> Bool {
        guard let stalled = transfers.indices.min(by: { transfers[$0].lastProgress < transfers[$1].lastProgress }),
            now - transfers[stalled].lastProgress >= Self.evictableAfter
        else { return false }
        logger.debug("history dropped to make room: its peer read nothing for a second", metadata: ["board": "\(transfers[stalled].board)"])
        transfers.remove(at: stalled)
        return true
    }

    private func serve(_ request: Touchsync_V1_HistoryRequest, to peer: [UInt8], requester: [UInt8]) {
        guard isValidBoardName(request.board) else {
            sendError(to: peer, requestID: request.requestID, code: .unknownBoard, boardNameRule)
            return
        }
        let now = ContinuousClock.now
        guard makeRoom(for: requester, now: now) else {
            // All transfers busy and reading: wait for one to end (a requester waits once, its latest request).
            waiting.removeAll { $0.requester == requester }
            guard waiting.count < Self.maxWaiting else {
                sendError(
                    to: peer, requestID: request.requestID, code: .rateLimited,
                    "the hub is sending its maximum of \(Self.maxTransfers) histories and \(Self.maxWaiting) wait: try again in a few seconds")
                return
            }
            waiting.append((peer, requester, request))
            return
        }
        let history: LoadedHistory
        do {
            history = try load(request.board)
        } catch {
            // A board nobody has drawn on yet has no journal: it is empty, at sequence 0.
            if case JournalError.invalid = error {
                sendEmpty(to: peer, request: request)
            } else if case StoreError.noBoard = error {
                sendEmpty(to: peer, request: request)
            } else {
                sendError(to: peer, requestID: request.requestID, code: .internalError, "\(error)")
            }
            return
        }
        if let damage = history.damage.first(where: \.isCorruption) {
            logger.error("history request hit journal damage", metadata: ["damage": "\(damage)"])
            sendError(to: peer, requestID: request.requestID, code: .internalError, "the journal is damaged: \(damage)")
            return
        }
        transfers.append(
            Transfer(
                peer: peer, requester: requester, requestID: request.requestID, board: request.board, history: history,
                checkpoint: SnapshotCodec.chunks(of: history.start.snapshot(), board: request.board, digest: history.start.digest),
                lastProgress: now))
    }

    private func load(_ board: String) throws -> LoadedHistory {
        guard case .journal(let dataDirectory) = source else { return try loadFromStore(board) }
        let journal = try BoardHistory.open(dataDirectory: dataDirectory, board: board)
        let sizes = journal.segments.map { segment in
            var status = stat()
            return stat(segment.path, &status) == 0 ? Int(status.st_size) : -1
        }
        if let cached, cached.board == board, cached.sizes == sizes { return cached.history }
        let history = try journal.load()
        cached = (board, sizes, history)
        return history
    }

    /// The store is read on this thread, waiting as it waits for files (the
    /// hub loop never does): an async read bridged by a semaphore.
    private func loadFromStore(_ board: String) throws -> LoadedHistory {
        guard case .store(let address) = source else { preconditionFailure("not a store") }
        let logger = logger
        let shape = try blockingWait { try await BoardStoreHistory.shape(address: address, board: board, logger: logger) }
        if let cached, cached.board == board, cached.sizes == shape { return cached.history }
        let history = try blockingWait { try await BoardStoreHistory.load(address: address, board: board, logger: logger) }
        cached = (board, shape, history)
        return history
    }

    private func blockingWait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    private func sendEmpty(to peer: [UInt8], request: Touchsync_V1_HistoryRequest) {
        let empty = BoardState()
        for chunk in SnapshotCodec.chunks(of: empty.snapshot(), board: request.board, digest: empty.digest) {
            var reply = Touchsync_V1_HistoryReply()
            reply.checkpoint = chunk
            reply.requestID = request.requestID
            _ = try? socket.send(multipart: [peer, WireCodec.encode(reply)], dontWait: true)
        }
        var reply = Touchsync_V1_HistoryReply()
        var end = Touchsync_V1_HistoryEnd()
        end.digest = empty.digest.rawValue
        reply.end = end
        reply.requestID = request.requestID
        _ = try? socket.send(multipart: [peer, WireCodec.encode(reply)], dontWait: true)
    }

    private func sendError(to peer: [UInt8], requestID: UInt64, code: ErrorCode, _ text: String) {
        var error = Touchsync_V1_SnapshotReply.Error()
        error.code = code.proto
        error.message = text
        var reply = Touchsync_V1_HistoryReply()
        reply.error = error
        reply.requestID = requestID
        _ = try? socket.send(multipart: [peer, WireCodec.encode(reply)], dontWait: true)
    }
}
