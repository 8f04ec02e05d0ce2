import TouchSyncHubCore
import Foundation
import Logging
import Testing
import TouchSyncCore
import TouchSyncJournal
import TouchSyncSimulation
import TouchSyncWire

/// A simulated board journaled batch by batch, as the hub does it.
struct JournaledBoard {
    var state = BoardState()
    let name: String
    var encoder: DiffStreamEncoder
    var simulator: SessionSimulator
    var digests: [UInt64: BoardDigest] = [0: BoardState().digest]
    var time: Int64 = 1_000_000

    init(seed: UInt64, name: String = "board") {
        self.name = name
        encoder = DiffStreamEncoder(board: name)
        var profile = SimulationProfile()
        profile.users = 2
        profile.clearRate = 0
        simulator = SessionSimulator(seed: seed, profile: profile)
    }

    /// Reduces events until a batch has diffs, journals it; returns its sequence.
    mutating func appendBatch(to journal: Journal, agent: String = "agent-a") throws -> UInt64 {
        var diffs: [StrokeDiff] = []
        while diffs.isEmpty {
            switch simulator.next() {
            case .frame(let user, let frame, let style): try state.reduce(frame, from: user, style: style, into: &diffs)
            case .clear(let user, let scope): state.clear(scope, by: user, into: &diffs)
            }
        }
        time += 16_667
        let batch = encoder.encode(state.sealBatch(diffs, hubTime: time))
        let progress = AgentProgress(principal: UserNamespace(agent), appliedThrough: state.sequence * 2, style: .default)
        try journal.append(
            board: name, encodedBatch: WireCodec.encode(batch), sequence: batch.sequence, hubTime: time,
            agents: [progress], state: state)
        digests[state.sequence] = state.digest
        return state.sequence
    }
}

func temporaryDirectory(_ name: String) -> String {
    let path = NSTemporaryDirectory() + "touchsync-\(name)-\(UUID().uuidString.prefix(8))"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

func segmentFiles(_ directory: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory + "/board").filter { $0.hasSuffix(".tsj") }.sorted()
        .map { directory + "/board/" + $0 }
}

@Suite("Journal")
struct JournalTests {
    static var quiet: Logger {
        var logger = Logger(label: "journal")
        logger.logLevel = .critical
        return logger
    }

    func openJournal(_ directory: String, fsync: FsyncPolicy = .never, segmentBytes: Int = 16 << 20) throws -> Journal {
        var configuration = JournalConfiguration(directory: directory)
        configuration.fsync = fsync
        configuration.segmentBytes = segmentBytes
        return try Journal(configuration: configuration, logger: Self.quiet)
    }

    /// One journal per data folder: a second one is refused, naming the
    /// holder's pid, until the first is closed.
    @Test func aDataFolderTakesOneJournalAtATime() throws {
        let directory = NSTemporaryDirectory() + "touchsync-lock-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try openJournal(directory)
        #expect(throws: JournalError.locked(folder: directory, holder: "pid \(getpid())")) { try openJournal(directory) }
        first.close()
        let second = try openJournal(directory)
        #expect(throws: JournalError.self) { try openJournal(directory) }
        second.close()
    }

    /// The lock held in this process's name by no journal of ours (a child
    /// another thread is spawning keeps a copy of the descriptor until its
    /// exec: a full suite once failed so) is waited for, briefly; held in
    /// another process's name it is refused at once.
    @Test func aLockHeldOnlyByASpawningChildIsWaitedOut() throws {
        let directory = temporaryDirectory("lock-copy")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func holdLock(as holder: String) -> Int32 {
            let descriptor = open(directory + "/touchsync.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            #expect(descriptor >= 0 && flock(descriptor, LOCK_EX | LOCK_NB) == 0)
            let note = Array("\(holder)\n".utf8)
            _ = ftruncate(descriptor, 0)
            _ = note.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            return descriptor
        }
        let other = holdLock(as: "pid 999999")
        #expect(throws: JournalError.locked(folder: directory, holder: "pid 999999")) { try openJournal(directory) }
        close(other)

        let copy = holdLock(as: "pid \(getpid())")
        // Released from a thread of its own: opening the journal blocks this one while it waits.
        let released = Thread {
            usleep(200_000)
            close(copy)
        }
        released.start()
        let journal = try openJournal(directory)  // waits for the copy to go
        #expect(journal.hasUnsyncedWrites == false)
        journal.close()
    }

    @Test(arguments: [FsyncPolicy.everyBatch, .interval(.milliseconds(5)), .never])
    func recoversExactlyWhatWasWritten(policy: FsyncPolicy) throws {
        let directory = temporaryDirectory("recover")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var board = JournaledBoard(seed: 3)
        let journal = try openJournal(directory, fsync: policy)
        #expect(try journal.recover().isEmpty)
        for _ in 0..<200 { _ = try board.appendBatch(to: journal) }
        // Appends never sync by themselves (the hub's journal thread syncs a group of them); `never` has nothing to sync.
        #expect(journal.hasUnsyncedWrites == (policy != .never))
        try journal.sync()
        #expect(!journal.hasUnsyncedWrites)
        journal.close()

        let recovered = try openJournal(directory).recover()
        let only = try #require(recovered.first)
        #expect(recovered.count == 1 && only.name == "board")
        #expect(only.state.sequence == 200)
        #expect(only.state.digest == board.state.digest)
        #expect(only.damage.isEmpty)
        #expect(only.agents == [AgentProgress(principal: UserNamespace("agent-a"), appliedThrough: 400, style: .default)])
    }

    /// A crash mid-append leaves part of a record: recovery truncates it,
    /// reports it, and appending carries on from the last whole batch.
    @Test func tornTailIsTruncatedAndReported() throws {
        let directory = temporaryDirectory("torn")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var board = JournaledBoard(seed: 5)
        let journal = try openJournal(directory)
        for _ in 0..<50 { _ = try board.appendBatch(to: journal) }
        journal.close()
        let segment = try #require(try segmentFiles(directory).last)
        let whole = try Data(contentsOf: URL(fileURLWithPath: segment))
        // Cut the last record (batch 50) somewhere inside.
        let cut = whole.count - 5
        try whole.prefix(cut).write(to: URL(fileURLWithPath: segment))

        let reopened = try openJournal(directory)
        let recovered = try #require(try reopened.recover().first)
        #expect(recovered.state.sequence == 49)
        #expect(recovered.state.digest == board.digests[49])
        let damage = try #require(recovered.damage.first)
        #expect(!damage.isCorruption)
        guard case .tornTail = damage.damage else {
            Issue.record("expected a torn tail, got \(damage)")
            return
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: segment)).count < cut)  // truncated on disk

        // Carry on: the next batch is 50 again (the torn one never counted).
        var replay = JournaledBoard(seed: 5)
        let scratch = try openJournal(temporaryDirectory("scratch"))
        for _ in 0..<49 { _ = try replay.appendBatch(to: scratch) }
        #expect(try replay.appendBatch(to: reopened) == 50)
        reopened.close()
        let again = try #require(try openJournal(directory).recover().first)
        #expect(again.state.sequence == 50 && again.damage.isEmpty)
        #expect(again.state.digest == board.digests[50])
    }

    /// A flipped byte in a record that is not the last: everything from it on
    /// is untrusted, moved aside (not deleted) and reported as corruption.
    @Test func flippedByteInTheMiddleIsReportedAndSetAside() throws {
        let directory = temporaryDirectory("flip")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var board = JournaledBoard(seed: 7)
        let journal = try openJournal(directory)
        for _ in 0..<100 { _ = try board.appendBatch(to: journal) }
        journal.close()
        let segment = try #require(try segmentFiles(directory).last)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: segment)))
        let position = bytes.count * 2 / 3
        bytes[position] ^= 0x40
        try Data(bytes).write(to: URL(fileURLWithPath: segment))

        let recovered = try #require(try openJournal(directory).recover().first)
        let damage = try #require(recovered.damage.first)
        #expect(damage.isCorruption)
        #expect(damage.damage.offset <= position)
        let aside = try #require(damage.movedTo)
        let setAside = try Data(contentsOf: URL(fileURLWithPath: aside))
        #expect(setAside.count == bytes.count - damage.damage.offset)  // every untrusted byte kept
        // The state is exactly the last batch before the damage.
        let sequence = recovered.state.sequence
        #expect(sequence > 0 && sequence < 100)
        #expect(recovered.state.digest == board.digests[sequence])
    }

    /// A board whose only segment was cut before its checkpoint was complete
    /// (a crash right after the board was created): the hub still starts, the
    /// board comes back empty with the damage reported and the bytes kept,
    /// and it journals again from batch 1.
    @Test func boardWithNoReadableCheckpointStartsOverAndSaysWhy() throws {
        let directory = temporaryDirectory("nocheckpoint")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var board = JournaledBoard(seed: 13)
        let journal = try openJournal(directory)
        _ = try board.appendBatch(to: journal)
        journal.close()
        let segment = try #require(try segmentFiles(directory).first)
        let whole = try Data(contentsOf: URL(fileURLWithPath: segment))
        try whole.prefix(20).write(to: URL(fileURLWithPath: segment))  // inside the checkpoint record

        let reopened = try openJournal(directory)
        let recovered = try #require(try reopened.recover().first)
        #expect(recovered.state.sequence == 0)
        let damage = try #require(recovered.damage.first)
        #expect(damage.movedTo == segment + ".damaged")
        #expect(FileManager.default.fileExists(atPath: segment + ".damaged"))
        var fresh = JournaledBoard(seed: 13)
        #expect(try fresh.appendBatch(to: reopened) == 1)
        reopened.close()
        let again = try #require(try openJournal(directory).recover().first)
        #expect(again.state.sequence == 1 && again.damage.isEmpty)
    }

    /// Small segments: the board rolls into new segments, each opening with a
    /// checkpoint; compaction drops the old ones and replay from the kept
    /// checkpoint on is unchanged.
    @Test func segmentsRollAndCompactionKeepsReplayFromTheCheckpoint() throws {
        let directory = temporaryDirectory("compact")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var board = JournaledBoard(seed: 9)
        let journal = try openJournal(directory, segmentBytes: 8 << 10)
        for _ in 0..<400 { _ = try board.appendBatch(to: journal) }
        journal.close()
        #expect(try segmentFiles(directory).count >= 3)

        let history = try BoardHistory.open(dataDirectory: directory, board: "board")
        let full = try history.load()
        #expect(full.start.sequence == 0)
        #expect(full.batches.count == 400)
        #expect(full.endState.digest == board.state.digest)
        // Seeking starts from the newest checkpoint at or before the moment.
        let middle = full.batches[250].hubTime
        let seeked = try history.load(from: middle)
        #expect(seeked.start.sequence > 0 && seeked.startTime <= middle)
        #expect(try seeked.state(at: middle).digest == board.digests[251])
        #expect(try full.state(at: middle).digest == board.digests[251])

        let removed = try history.compact(before: middle)
        #expect(!removed.isEmpty)
        let compacted = try BoardHistory.open(dataDirectory: directory, board: "board").load()
        #expect(compacted.start.sequence == seeked.start.sequence)
        #expect(compacted.batches.map(\.sequence) == seeked.batches.map(\.sequence))
        #expect(compacted.endState.digest == board.state.digest)
        // And the hub still recovers the same board.
        let recovered = try #require(try openJournal(directory).recover().first)
        #expect(recovered.state.digest == board.state.digest)
    }

    @Test func boardFolderNamesCannotEscapeTheDataFolder() {
        for name in ["../etc", "a/b", ".", "..", "white board", "ünï", "%41", "x-y_z9"] {
            let folder = BoardFolderName.encode(name)
            #expect(!folder.contains("/") && !folder.contains(".") && !folder.isEmpty)
            #expect(BoardFolderName.decode(folder) == name)
        }
        #expect(BoardFolderName.encode("x-y_z9") == "x-y_z9")
    }

    /// Every name the hub accepts is storable: 128 bytes of punctuation or
    /// of 4-byte letters percent-encode to 374 and 384 characters, past a
    /// file name's 255 (ENAMETOOLONG stopped the whole hub's acknowledgements).
    @Test func everyValidBoardNameFitsAFolderName() throws {
        let longest = ["team-" + String(repeating: ".", count: 123), String(repeating: "😀", count: 32), String(repeating: "白", count: 42) + "xy"]
        var generator = SystemRandomNumberGenerator()
        let randomNames = (0..<200).map { _ in
            String(String.UnicodeScalarView((0..<Int.random(in: 1...40, using: &generator)).compactMap { _ in
                Unicode.Scalar(UInt32.random(in: 0x20...0x2FFF, using: &generator))
            }))
        }.filter { isValidBoardName($0) }
        for name in longest + randomNames {
            #expect(isValidBoardName(name), "\(name.utf8.count) bytes")
            let folder = BoardFolderName.encode(name)
            #expect(folder.utf8.count <= 255 && !folder.contains("/") && !folder.hasPrefix("."), "\(folder)")
            #expect(BoardFolderName.decode(folder) == name)
        }
        // Journaled and recovered under that name.
        let directory = temporaryDirectory("long-name")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var board = JournaledBoard(seed: 9, name: longest[0])
        let journal = try openJournal(directory)
        for _ in 0..<20 { _ = try board.appendBatch(to: journal) }
        try journal.sync()
        journal.close()
        let recovered = try #require(try openJournal(directory).recover().first)
        #expect(recovered.name == longest[0] && recovered.state.digest == board.state.digest)
        #expect(try BoardHistory.boards(in: directory) == [longest[0]])
    }

    /// A board whose folder cannot be made (a file in its place) fails alone:
    /// the append throws, the other board keeps being written and synced,
    /// appends to the broken board write nothing, and once the obstacle is
    /// gone a restart checkpoints the board as it is, which recovery then reads.
    @Test(arguments: [FsyncPolicy.everyBatch, .interval(.seconds(60))])
    func aFailedBoardStopsAloneAndRestartsFromACheckpoint(policy: FsyncPolicy) throws {
        let directory = temporaryDirectory("broken")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let obstacle = directory + "/" + BoardFolderName.encode("blocked")
        let journal = try openJournal(directory, fsync: policy)
        #expect(FileManager.default.createFile(atPath: obstacle, contents: Data("not a folder".utf8)))
        var blocked = JournaledBoard(seed: 5, name: "blocked")
        var open = JournaledBoard(seed: 6, name: "open")
        #expect(throws: JournalError.self) { _ = try blocked.appendBatch(to: journal) }
        #expect(journal.isBroken("blocked") && !journal.isBroken("open"))
        for _ in 0..<20 {
            _ = try open.appendBatch(to: journal)
            _ = try blocked.appendBatch(to: journal, agent: "agent-b")  // nothing written, progress kept
        }
        #expect(journal.syncEach().isEmpty)
        // Still in the way: the restart fails and the board stays broken.
        #expect(throws: JournalError.self) { try journal.restart(board: "blocked", state: blocked.state, hubTime: blocked.time) }
        #expect(journal.isBroken("blocked"))
        try FileManager.default.removeItem(atPath: obstacle)
        try journal.restart(board: "blocked", state: blocked.state, hubTime: blocked.time)
        #expect(!journal.isBroken("blocked"))
        for _ in 0..<5 { _ = try blocked.appendBatch(to: journal, agent: "agent-b") }
        try journal.sync()
        journal.close()

        let recovered = try openJournal(directory).recover()
        let byName = Dictionary(uniqueKeysWithValues: recovered.map { ($0.name, $0) })
        #expect(byName["open"]?.state.digest == open.state.digest && byName["open"]?.state.sequence == 20)
        let restored = try #require(byName["blocked"])
        #expect(restored.state.sequence == 26 && restored.state.digest == blocked.state.digest)
        #expect(restored.agents.first { $0.principal == UserNamespace("agent-b") }?.appliedThrough == 52)
    }

    @Test func fsyncPolicyArguments() {
        #expect(FsyncPolicy(argument: "batch") == .everyBatch)
        #expect(FsyncPolicy(argument: "never") == .never)
        #expect(FsyncPolicy(argument: "20ms") == .interval(.milliseconds(20)))
        #expect(FsyncPolicy(argument: "1s") == .interval(.seconds(1)))
        #expect(FsyncPolicy(argument: "soon") == nil)
        #expect(FsyncPolicy(argument: "0ms") == nil)
    }
}

/// The journal's batch records are written by hand (`JournalRecordCodec.batchPayload`):
/// they must be the bytes SwiftProtobuf writes for the same `JournalRecord`,
/// whatever the agents' names, numbers, styles and sessions.
@Suite("Journal batch records")
struct JournalBatchRecordTests {
    @Test func aBatchRecordIsWrittenAsSwiftProtobufWritesIt() throws {
        var random = SplitMix64(seed: 37)
        let names = ["", "a", "web:zoë", "load-7-12", String(repeating: "n", count: 200), "👩‍🎨 artist"]
        for _ in 0..<300 {
            var batch = Touchsync_V1_DiffBatch()
            batch.board = Bool.random(using: &random) ? "board-\(random.next() % 100)" : ""
            batch.sequence = random.next() % 3 == 0 ? 0 : random.next() >> UInt64.random(in: 0...63, using: &random)
            batch.hubTime = Int64(bitPattern: random.next() >> 8)
            let encodedBatch = WireCodec.encode(batch)
            let agents = (0..<Int.random(in: 0...12, using: &random)).map { _ in
                AgentProgress(
                    principal: UserNamespace(names.randomElement(using: &random)!),
                    appliedThrough: random.next() % 4 == 0 ? 0 : random.next() >> UInt64.random(in: 0...63, using: &random),
                    style: StrokeStyle(
                        rgba: random.next() % 3 == 0 ? 0 : UInt32(truncatingIfNeeded: random.next()),
                        width: random.next() % 3 == 0 ? 0 : UInt32(truncatingIfNeeded: random.next() >> UInt64.random(in: 32...63, using: &random))),
                    sessionID: random.next() % 3 == 0 ? [] : (0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            }
            var record = Touchsync_V1_JournalRecord()
            record.batch.batch = batch
            record.batch.agents = agents.map { agent in
                var proto = Touchsync_V1_AgentProgress()
                proto.routingID = Data(agent.principal.rawValue.utf8)
                proto.appliedThrough = agent.appliedThrough
                proto.style.rgba = agent.style.rgba
                proto.style.width = agent.style.width
                proto.sessionID = Data(agent.sessionID)
                return proto
            }
            let written = JournalRecordCodec.batchPayload(encodedBatch: encodedBatch, agents: agents)
            #expect(written == WireCodec.encode(record), "\(agents)")
            // And it reads back as what was written.
            let read = try written.withUnsafeBytes { try JournalRecordCodec.decode($0, limits: BoardLimits()) }
            guard case .batch(let readBatch, let readAgents) = read else {
                Issue.record("a batch record read as \(read)")
                continue
            }
            #expect(readBatch == batch && readAgents == agents)
        }
    }
}
