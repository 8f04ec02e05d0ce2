import Logging
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire

/// The hub's durable, append-only journal: per board, segment files of
/// checksummed records (each segment opens with a checkpoint), recovered at
/// start-up. Owned by the hub thread.
public final class Journal {
    public let configuration: JournalConfiguration
    private let logger: Logger
    private var writers: [String: BoardJournalWriter] = [:]
    /// Boards whose journal failed (a write, a sync or their folder): they
    /// take no writes until `restart` succeeds, and keep their agents'
    /// progress for the checkpoint that restart writes. The other boards go on.
    private var broken: [String: [UserNamespace: AgentProgress]] = [:]
    /// Boards whose segment is open now (at most `maxOpenFiles`).
    private var openBoards: Set<String> = []
    private var writes: UInt64 = 0
    /// Boards broken while another was written (closing theirs to make room failed): see `takeFailures`.
    private var unreported: [(board: String, error: JournalError)] = []
    /// Written but not yet made durable (for the fsync policy).
    public private(set) var hasUnsyncedWrites = false
    /// Boards written since their last sync: a sync round visits these, not every board.
    private var unsynced: [String] = []
    /// Bytes appended since this journal was opened (checkpoints included).
    public private(set) var bytesWritten = 0
    /// `fdatasync` rounds since this journal was opened.
    public private(set) var syncs = 0
    /// `fdatasync` calls on board files since this journal was opened (a round syncs each file written since the last).
    public private(set) var fileSyncs = 0
    /// `syncfs` calls that made a round's files durable (`JournalSyncMethod`), and the files they covered.
    public private(set) var fileSystemSyncs = 0
    public private(set) var filesSyncedByFileSystem = 0
    /// `syncfs` calls that failed (their files were then synced one by one).
    public private(set) var fileSystemSyncFailures = 0
    /// This journal's own descriptor of the data folder, for `syncfs` (nil: each file is synced on its own).
    private var folderHandle: JournalFile?
    /// Calls that made board files durable: `fdatasync`s and `syncfs`s.
    public var syncCalls: Int { fileSyncs + fileSystemSyncs }
    private let clock = ContinuousClock()
    private var lastSync: ContinuousClock.Instant
    /// Held for the journal's life: one hub per data folder.
    private let lock: FolderLock
    /// The lock is this journal's (false: a hub's board threads share it, and the hub releases it).
    private let ownsLock: Bool
    /// The boards this journal recovers and writes (a board thread's share of the folder).
    private let holds: @Sendable (String) -> Bool

    /// Opens (creating) the data folder, takes its lock (another hub holding
    /// it is an error naming its pid) and checks that it takes writes.
    ///
    /// A hub with several board threads opens one journal per thread on the
    /// same folder: `sharedLock` is the folder's lock, taken once (see
    /// `openFolder`), and `holds` says which boards are the thread's.
    public init(
        configuration: JournalConfiguration, logger: Logger, sharedLock: FolderLock? = nil,
        holds: @escaping @Sendable (String) -> Bool = { _ in true }
    ) throws(JournalError) {
        self.configuration = configuration
        self.logger = logger
        self.holds = holds
        lastSync = clock.now
        if let sharedLock {
            lock = sharedLock
            ownsLock = false
        } else {
            lock = try Self.openFolder(configuration.directory)
            ownsLock = true
        }
        if configuration.syncMethod != .eachFile && configuration.fsync != .never {
            if let release = KernelRelease.current, release < KernelRelease.syncfsReportsErrors {
                // Before 5.8 syncfs says nothing of a failed writeback: each file is synced on its own.
                logger.notice(
                    "journal: this kernel's syncfs does not report write errors (before Linux 5.8): syncing each board file on its own",
                    metadata: ["kernel": "\(release)"])
            } else {
                do throws(JournalError) {
                    folderHandle = try JournalFile.openFolder(configuration.directory)
                } catch {
                    if ownsLock { lock.release() }
                    throw error
                }
            }
        }
    }

    /// Creates the data folder when missing, takes its lock and checks that it takes writes.
    public static func openFolder(_ directory: String) throws(JournalError) -> FolderLock {
        try JournalFile.makeDirectory(directory)
        let lock = try FolderLock(folder: directory)
        try JournalFile.probeWritable(directory)
        return lock
    }

    /// Reads every board back to its last durable state, repairs torn or
    /// corrupt tails (reporting each), and opens each board for appending.
    public func recover(limits: BoardLimits = BoardLimits()) throws(JournalError) -> [RecoveredBoard] {
        var boards: [RecoveredBoard] = []
        for folder in try JournalFile.list(configuration.directory) {
            guard let name = BoardFolderName.decode(folder), BoardFolderName.encode(name) == folder, holds(name) else { continue }
            let path = configuration.directory + "/" + folder
            guard let (recovered, writer) = try recoverBoard(name: name, folder: path, limits: limits) else { continue }
            if let writer { writers[name] = writer }
            for damage in recovered.damage {
                if damage.isCorruption {
                    logger.error("journal damage", metadata: ["damage": "\(damage)"])
                } else {
                    logger.warning("journal torn tail truncated", metadata: ["damage": "\(damage)"])
                }
            }
            boards.append(recovered)
        }
        return boards
    }

    /// The board from its newest readable segment, and a writer appending to
    /// that segment; nil for a folder with no segment at all. A board with no
    /// readable checkpoint left comes back empty, with its damage reported and
    /// no writer (the next batch, 1, starts a new first segment).
    private func recoverBoard(name: String, folder: String, limits: BoardLimits) throws(JournalError)
        -> (RecoveredBoard, BoardJournalWriter?)?
    {
        var segments = try JournalFile.list(folder).filter { SegmentFormat.sequence(ofFileName: $0) != nil }
        var damage: [JournalDamage] = []
        // The newest segment with a readable checkpoint holds the state; a newer
        // one without (a crash while starting it) is set aside whole.
        while let last = segments.last {
            let path = folder + "/" + last
            let bytes = try JournalFile.readAll(path)
            let scan = SegmentFormat.scan(bytes)
            var replayed = Self.replay(bytes, scan, limits: limits, stopBefore: nil)
            if case .corrupt = replayed.problem, replayed.partial {
                // A batch failed half-way through applying: rebuild without it.
                replayed = Self.replay(bytes, scan, limits: limits, stopBefore: replayed.applied)
            }
            guard let state = replayed.state else {
                let aside = path + ".damaged"
                try JournalFile.rename(path, to: aside)
                damage.append(
                    JournalDamage(
                        board: name, segment: last, damage: replayed.problem ?? .tornTail(offset: 0, bytes: bytes.count),
                        movedTo: aside))
                segments.removeLast()
                continue
            }
            if let problem = replayed.problem {
                var movedTo: String? = nil
                if case .corrupt = problem {
                    // Keep the untrusted bytes for inspection; never silently drop them.
                    let aside = path + ".damaged-at-\(replayed.goodLength)"
                    try JournalFile.writeWhole(aside, Array(bytes[replayed.goodLength...]))
                    movedTo = aside
                }
                try JournalFile.truncate(path, to: replayed.goodLength)
                damage.append(JournalDamage(board: name, segment: last, damage: problem, movedTo: movedTo))
            }
            // Older segments are not needed for the state, but replay reads them:
            // report damage there too.
            for older in segments.dropLast() {
                if let olderDamage = SegmentFormat.scan(try JournalFile.readAll(folder + "/" + older)).damage {
                    damage.append(JournalDamage(board: name, segment: older, damage: olderDamage, movedTo: nil))
                }
            }
            let writer = BoardJournalWriter(
                board: name, folder: folder, reopening: path, size: replayed.goodLength, agents: replayed.agents,
                segmentBytes: configuration.segmentBytes)
            let recovered = RecoveredBoard(
                name: name, state: state, agents: Array(replayed.agents.values), damage: damage,
                recordsApplied: replayed.applied)
            return (recovered, writer)
        }
        guard !damage.isEmpty else { return nil }
        // Nothing readable is left (every segment was moved aside, never deleted):
        // the board starts over, empty, and says why.
        return (
            RecoveredBoard(name: name, state: BoardState(limits: limits), agents: [], damage: damage, recordsApplied: 0), nil
        )
    }

    /// Replays one segment's good records: its checkpoint, then its batches in
    /// order, up to the first that does not decode or apply (or `stopBefore`).
    static func replay(_ bytes: [UInt8], _ scan: SegmentScan, limits: BoardLimits, stopBefore: Int?) -> SegmentReplay {
        var result = SegmentReplay(goodLength: SegmentFormat.magic.count)
        for (index, record) in scan.records.enumerated() {
            if let stopBefore, index >= stopBefore {
                result.problem = .corrupt(
                    offset: record.offset, bytes: bytes.count - record.offset,
                    reason: "batch record \(index) does not apply to the board before it")
                return result
            }
            let untrusted = { (reason: String) in
                SegmentDamage.corrupt(offset: record.offset, bytes: bytes.count - record.offset, reason: reason)
            }
            let entry: JournalEntry
            do {
                entry = try JournalRecordCodec.decode(bytes, payload: record.payload, limits: limits)
            } catch {
                result.problem = untrusted("\(error)")
                return result
            }
            switch entry {
            case .checkpoint(let loaded, _, let progress) where index == 0:
                result.state = loaded
                for agent in progress { result.agents[agent.principal] = agent }
            case .batch(let batch, let progress) where index > 0:
                do {
                    try result.state!.apply(batch)
                } catch {
                    result.problem = untrusted("batch \(batch.sequence) does not apply to the board at \(result.state!.sequence): \(error)")
                    result.partial = true
                    return result
                }
                for agent in progress { result.agents[agent.principal] = agent }
            default:
                result.problem = untrusted(
                    index == 0 ? "the segment does not start with a checkpoint" : "a checkpoint inside a segment")
                return result
            }
            result.applied += 1
            result.goodLength = record.payload.upperBound
        }
        result.problem = scan.damage
        return result
    }

    /// Appends one published batch and the agents' progress in it. `state` is
    /// the board after the batch (used when a new segment starts). Written,
    /// not durable: whatever the policy, the caller syncs (several appends
    /// may share one `fdatasync` per board file: `syncEach`).
    ///
    /// A failure is the board's alone: it throws, the board is *broken* (no
    /// more writes to it, its file closed) until `restart(board:state:hubTime:)`
    /// succeeds, and every other board keeps being written. Appends to a broken
    /// board write nothing but keep its agents' progress for that restart.
    public func append(
        board: String, encodedBatch: [UInt8], sequence: UInt64, hubTime: Int64, agents: [AgentProgress], state: BoardState
    ) throws(JournalError) {
        if broken[board] != nil {
            for agent in agents { broken[board]![agent.principal] = agent }
            return
        }
        do throws(JournalError) {
            _ = try appendToWriter(
                board: board, encodedBatch: encodedBatch, sequence: sequence, hubTime: hubTime, agents: agents, state: state)
        } catch {
            var progress: [UserNamespace: AgentProgress] = [:]
            if let writer = writers.removeValue(forKey: board) {
                writer.close()
                progress = writer.agents
            }
            openBoards.remove(board)
            for agent in agents { progress[agent.principal] = agent }
            broken[board] = progress
            throw error
        }
        // The caller syncs (`sync`, `syncEach`, `syncIfDue`): several appends may share one.
        if configuration.fsync != .never { hasUnsyncedWrites = true }
    }

    private func appendToWriter(
        board: String, encodedBatch: [UInt8], sequence: UInt64, hubTime: Int64, agents: [AgentProgress], state: BoardState
    ) throws(JournalError) -> BoardJournalWriter {
        let writer: BoardJournalWriter
        if let existing = writers[board] {
            writer = existing
            if !writer.isOpen { makeRoomForOneFile() }
        } else {
            guard sequence == 1 else {
                throw .invalid("board \(board) has no journal but is at batch \(sequence): its folder was removed while the hub ran")
            }
            makeRoomForOneFile()
            writer = try BoardJournalWriter(
                board: board, creatingIn: folder(of: board), hubTime: hubTime,
                limits: state.limits, segmentBytes: configuration.segmentBytes)
            writers[board] = writer
        }
        writes += 1
        writer.lastUsed = writes
        defer { if writer.isOpen { openBoards.insert(board) } }
        if !writer.dirty { unsynced.append(board) }
        bytesWritten += try writer.append(encodedBatch: encodedBatch, agents: agents)
        if writer.segmentFull {
            // The new segment starts with a checkpoint: make the old one durable first.
            try writer.sync()
            bytesWritten += try writer.startSegment(state: state, hubTime: hubTime)
        }
        return writer
    }

    /// At the limit of open segments, the least recently written one is
    /// synced and closed. A board whose close fails is broken (reported by `takeFailures`).
    private func makeRoomForOneFile() {
        while openBoards.count >= max(1, configuration.maxOpenFiles) {
            guard let oldest = openBoards.min(by: { (writers[$0]?.lastUsed ?? 0) < (writers[$1]?.lastUsed ?? 0) }) else { return }
            openBoards.remove(oldest)
            guard let writer = writers[oldest] else { continue }
            do {
                try writer.closeFile()
            } catch {
                writer.close()
                writers[oldest] = nil
                broken[oldest] = writer.agents
                unreported.append((oldest, error))
            }
        }
    }

    /// Boards that broke while another board was written (their segment
    /// could not be synced and closed to make room), since the last call.
    public func takeFailures() -> [(board: String, error: JournalError)] {
        defer { unreported.removeAll() }
        return unreported
    }

    /// Segments open now (at most `maxOpenFiles`).
    public var openFiles: Int { openBoards.count }

    private func folder(of board: String) -> String { configuration.directory + "/" + BoardFolderName.encode(board) }

    private func checkpoint(of state: BoardState, board: String, hubTime: Int64, agents: [UserNamespace: AgentProgress]) -> [UInt8] {
        JournalRecordCodec.checkpointPayload(state: state, board: board, hubTime: hubTime, agents: Array(agents.values))
    }

    /// Whether `board`'s journal failed and has not been restarted.
    public func isBroken(_ board: String) -> Bool { broken[board] != nil }

    /// Starts a broken board's journal again: a new segment whose checkpoint
    /// is `state` (the board now, every batch since the failure included) with
    /// the agents' progress kept meanwhile, durable before this returns
    /// (written aside, synced, renamed into place, folder synced). On failure
    /// the board stays broken.
    public func restart(board: String, state: BoardState, hubTime: Int64) throws(JournalError) {
        guard let agents = broken[board] else { return }
        let folder = folder(of: board)
        try JournalFile.makeDirectory(folder)
        let path = folder + "/" + SegmentFormat.fileName(firstSequence: state.sequence)
        let aside = path + ".new"
        if JournalFile.exists(aside) { try JournalFile.remove(aside) }
        let bytes = SegmentFormat.magic + SegmentFormat.frame(checkpoint(of: state, board: board, hubTime: hubTime, agents: agents))
        do throws(JournalError) {
            let file = try JournalFile.openForAppending(aside, create: true)
            defer { file.close() }
            try file.write(bytes)
            try file.sync()
        } catch {
            try? JournalFile.remove(aside)  // a full disk gets its bytes back
            throw error
        }
        try JournalFile.rename(aside, to: path)
        try JournalFile.syncDirectory(folder)
        writers[board] = BoardJournalWriter(
            board: board, folder: folder, reopening: path, size: bytes.count, agents: agents, segmentBytes: configuration.segmentBytes)
        broken[board] = nil
        bytesWritten += bytes.count
    }

    /// When the next `sync` is due under an interval policy (nil: none pending).
    public var nextSyncDue: ContinuousClock.Instant? {
        guard hasUnsyncedWrites, case .interval(let interval) = configuration.fsync else { return nil }
        return lastSync + interval
    }

    /// Makes every write so far durable; throws the first board's failure
    /// (that board, and any other that failed, is broken: see `syncEach`).
    public func sync() throws(JournalError) {
        if let failure = syncEach().first { throw failure.error }
    }

    /// Makes every write so far durable, board by board: the boards whose
    /// sync failed are broken (see `append`) and returned; the others are durable.
    public func syncEach() -> [(board: String, error: JournalError)] {
        var failures: [(board: String, error: JournalError)] = []
        if hasUnsyncedWrites {
            syncFileSystems()
            for board in unsynced {
                guard let writer = writers[board] else { continue }  // broken since: closed, nothing to sync
                do throws(JournalError) {
                    if try writer.sync() { fileSyncs += 1 }
                } catch {
                    writer.close()
                    writers[board] = nil
                    openBoards.remove(board)
                    broken[board] = writer.agents
                    failures.append((board, error))
                }
            }
            syncs += 1
        }
        unsynced.removeAll(keepingCapacity: true)
        hasUnsyncedWrites = false
        lastSync = clock.now
        return failures
    }

    /// When the configuration says so for this many files
    /// (`JournalConfiguration.syncsFileSystem`), makes the round's files
    /// durable with one `syncfs` per filesystem they are on instead of an
    /// `fdatasync` each. A filesystem whose `syncfs` fails leaves its files
    /// dirty: `syncEach` then syncs each on its own, which says which boards failed.
    private func syncFileSystems() {
        guard let folder = folderHandle else { return }  // each-file, never, or a kernel whose syncfs hides errors
        // Files of the data folder's filesystem (a board folder mounted elsewhere syncs on its own).
        let covered = unsynced.compactMap { board in writers[board].flatMap { $0.dirtyDevice == folder.device ? $0 : nil } }
        guard configuration.syncsFileSystem(forFiles: covered.count) else { return }
        do throws(JournalError) {
            try folder.syncFileSystem()
            for writer in covered { writer.markSynced() }
            fileSystemSyncs += 1
            filesSyncedByFileSystem += covered.count
        } catch {
            // Some file of the filesystem failed (perhaps not even one of ours): each file's own sync says which.
            fileSystemSyncFailures += 1
            logger.warning(
                "journal: syncfs of the data folder's filesystem failed; syncing each board file on its own",
                metadata: ["error": "\(error)", "files": "\(covered.count)"])
        }
    }

    /// Tests only: closes the descriptor `syncfs` goes through, so the next
    /// one fails (EBADF) and the round falls back to a sync per file.
    func breakFolderHandleForTesting() { folderHandle?.close() }

    /// Syncs under an interval policy when due; true if everything written is now durable.
    public func syncIfDue(now: ContinuousClock.Instant) throws(JournalError) -> Bool {
        if let due = nextSyncDue, now >= due { try sync() }
        return !hasUnsyncedWrites
    }

    public func close() {
        try? sync()
        for writer in writers.values { writer.close() }
        writers.removeAll()
        openBoards.removeAll()
        folderHandle?.close()
        if ownsLock { lock.release() }
    }
}

/// What replaying one segment gave.
struct SegmentReplay {
    /// Nil when the segment has no readable checkpoint.
    var state: BoardState? = nil
    var agents: [UserNamespace: AgentProgress] = [:]
    var applied = 0
    var goodLength: Int
    var problem: SegmentDamage? = nil
    /// The problem struck while a batch was being applied (the state is unusable).
    var partial = false
}

/// One board's open segment.
final class BoardJournalWriter {
    let board: String
    let folder: String
    /// The open segment; nil while closed (the journal keeps a bounded
    /// number of segments open and reopens on demand).
    private var file: JournalFile?
    /// The current segment's path and size, known with the file closed.
    private var segmentPath: String
    private var segmentSize: Int
    private let segmentBytes: Int
    /// Every agent's latest progress on the board, for checkpoints.
    private(set) var agents: [UserNamespace: AgentProgress]
    /// Written since its last sync.
    private(set) var dirty = false
    /// When it was last written (the journal's counter): the least recent is closed first.
    var lastUsed: UInt64 = 0

    /// A new board: its folder and a first segment opening with the empty board.
    init(board: String, creatingIn folder: String, hubTime: Int64, limits: BoardLimits, segmentBytes: Int) throws(JournalError) {
        self.board = board
        self.folder = folder
        self.segmentBytes = segmentBytes
        agents = [:]
        try JournalFile.makeDirectory(folder)
        let created = try Self.createSegment(
            folder: folder, board: board, state: BoardState(limits: limits), hubTime: hubTime, agents: [])
        file = created
        segmentPath = created.path
        segmentSize = created.size
    }

    /// A recovered board: appends go to its newest segment, opened when first needed.
    init(board: String, folder: String, reopening path: String, size: Int, agents: [UserNamespace: AgentProgress], segmentBytes: Int) {
        self.board = board
        self.folder = folder
        self.segmentBytes = segmentBytes
        self.agents = agents
        segmentPath = path
        segmentSize = size
    }

    private static func createSegment(
        folder: String, board: String, state: BoardState, hubTime: Int64, agents: [AgentProgress]
    ) throws(JournalError) -> JournalFile {
        let path = folder + "/" + SegmentFormat.fileName(firstSequence: state.sequence)
        let file = try JournalFile.openForAppending(path, create: true)
        let checkpoint = JournalRecordCodec.checkpointPayload(state: state, board: board, hubTime: hubTime, agents: agents)
        try file.write(SegmentFormat.magic + SegmentFormat.frame(checkpoint))
        try file.sync()
        try JournalFile.syncDirectory(folder)
        return file
    }

    var isOpen: Bool { file != nil }
    var segmentFull: Bool { segmentSize >= segmentBytes }

    private func openFile() throws(JournalError) -> JournalFile {
        if let file { return file }
        let opened = try JournalFile.openForAppending(segmentPath, create: false)
        file = opened
        return opened
    }

    /// Returns the bytes written.
    func append(encodedBatch: [UInt8], agents progress: [AgentProgress]) throws(JournalError) -> Int {
        let record = SegmentFormat.frame(capacity: JournalRecordCodec.batchPayloadCapacity(encodedBatch: encodedBatch, agents: progress)) {
            JournalRecordCodec.writeBatchPayload(encodedBatch: encodedBatch, agents: progress, into: &$0)
        }
        let file = try openFile()
        try file.write(record)
        segmentSize = file.size
        for agent in progress { agents[agent.principal] = agent }
        dirty = true
        return record.count
    }

    /// Returns the bytes written (the new segment's header and checkpoint).
    func startSegment(state: BoardState, hubTime: Int64) throws(JournalError) -> Int {
        let next = try Self.createSegment(
            folder: folder, board: board, state: state, hubTime: hubTime, agents: Array(agents.values))
        file?.close()
        file = next
        segmentPath = next.path
        segmentSize = next.size
        dirty = false
        return next.size
    }

    /// The filesystem of its open segment, while it has writes to sync (nil: nothing to sync).
    var dirtyDevice: UInt64? { dirty ? file?.device : nil }

    /// Its writes were made durable by a `syncfs` of its filesystem.
    func markSynced() { dirty = false }

    /// Whether there was something to sync.
    @discardableResult
    func sync() throws(JournalError) -> Bool {
        guard dirty, let file else { return false }
        try file.sync()
        dirty = false
        return true
    }

    /// Closes the segment (made durable first when written since the last
    /// sync: a closed file is not synced again); the next append reopens it.
    func closeFile() throws(JournalError) {
        guard let file else { return }
        try sync()
        file.close()
        self.file = nil
    }

    func close() {
        file?.close()
        file = nil
    }
}

/// Reading one segment's bytes the way recovery does (scan, then replay its
/// records), for the fuzzer: whatever the bytes, it returns an answer.
package enum SegmentReader {
    /// The board the segment's good records give (nil: no readable checkpoint) and how many batches applied.
    package static func read(_ bytes: [UInt8], limits: BoardLimits = BoardLimits()) -> (state: BoardState?, applied: Int, damaged: Bool) {
        let scan = SegmentFormat.scan(bytes)
        let replay = Journal.replay(bytes, scan, limits: limits, stopBefore: nil)
        return (replay.state, replay.applied, replay.problem != nil)
    }
}
