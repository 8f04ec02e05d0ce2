import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire

/// A board's journal read back, for replay, rendering at a moment, and
/// compaction. Read-only: safe while a hub appends to the same board (it
/// reads what was complete when it looked).
public struct BoardHistory: Sendable {
    public let board: String
    public let folder: String
    public let segments: [Segment]

    public struct Segment: Sendable {
        public let name: String
        public let path: String
        /// The sequence of the checkpoint that opens it.
        public let firstSequence: UInt64
    }

    /// The boards journaled in a data folder.
    public static func boards(in dataDirectory: String) throws(JournalError) -> [String] {
        guard JournalFile.exists(dataDirectory) else { throw .invalid("no journal folder at \(dataDirectory)") }
        return try JournalFile.list(dataDirectory).compactMap { folder in
            guard let name = BoardFolderName.decode(folder), BoardFolderName.encode(name) == folder else { return nil }
            return name
        }
    }

    public static func open(dataDirectory: String, board: String) throws(JournalError) -> BoardHistory {
        guard JournalFile.exists(dataDirectory) else { throw .invalid("no journal folder at \(dataDirectory)") }
        let folder = dataDirectory + "/" + BoardFolderName.encode(board)
        guard JournalFile.exists(folder) else {
            let known = (try? boards(in: dataDirectory)) ?? []
            throw .invalid(
                "no board \"\(board)\" in \(dataDirectory)"
                    + (known.isEmpty ? " (it holds no boards)" : " (it holds: \(known.joined(separator: ", ")))"))
        }
        let segments = try JournalFile.list(folder).compactMap { name -> Segment? in
            guard let sequence = SegmentFormat.sequence(ofFileName: name) else { return nil }
            return Segment(name: name, path: folder + "/" + name, firstSequence: sequence)
        }
        guard !segments.isEmpty else { throw .unreadable("board \"\(board)\" has no segment in \(folder)") }
        return BoardHistory(board: board, folder: folder, segments: segments)
    }

    /// The board from the newest checkpoint at or before `time` (hub time, µs
    /// since the epoch; nil: the oldest checkpoint kept), and every batch
    /// recorded after it, in order.
    public func load(from time: Int64? = nil, limits: BoardLimits = BoardLimits()) throws(JournalError) -> LoadedHistory {
        // Checkpoint times, newest first, to find where to start.
        var start = 0
        var firstTime: Int64? = nil
        for (index, segment) in segments.enumerated() {
            guard let checkpointTime = try Self.checkpointTime(of: segment.path) else { continue }
            if firstTime == nil { firstTime = checkpointTime }
            if let time, checkpointTime <= time { start = index }
        }
        var history = LoadedHistory(start: BoardState(limits: limits), startTime: 0, firstTime: firstTime ?? 0)
        var loaded = false
        for segment in segments[start...] {
            let bytes = try JournalFile.readAll(segment.path)
            let scan = SegmentFormat.scan(bytes)
            for (index, record) in scan.records.enumerated() {
                let entry: JournalEntry
                do {
                    entry = try JournalRecordCodec.decode(bytes, payload: record.payload, limits: limits)
                } catch {
                    history.damage.append(
                        JournalDamage(
                            board: board, segment: segment.name,
                            damage: .corrupt(offset: record.offset, bytes: bytes.count - record.offset, reason: "\(error)"),
                            movedTo: nil))
                    return history
                }
                switch entry {
                case .checkpoint(let state, let hubTime, _) where index == 0:
                    if !loaded {
                        history.start = state
                        history.startTime = hubTime
                        history.endState = state
                        loaded = true
                    } else if state.sequence != history.endState.sequence {
                        throw .unreadable(
                            "segment \(segment.name) starts at batch \(state.sequence), the one before ends at \(history.endState.sequence)")
                    }
                case .batch(let batch, _) where index > 0 && loaded:
                    do {
                        try history.endState.apply(batch)
                    } catch {
                        history.damage.append(
                            JournalDamage(
                                board: board, segment: segment.name,
                                damage: .corrupt(
                                    offset: record.offset, bytes: bytes.count - record.offset,
                                    reason: "batch \(batch.sequence) does not apply: \(error)"),
                                movedTo: nil))
                        return history
                    }
                    history.batches.append(RecordedBatch(batch))
                default:
                    throw .unreadable("segment \(segment.name): record \(index) is out of place")
                }
            }
            if let damage = scan.damage {
                history.damage.append(JournalDamage(board: board, segment: segment.name, damage: damage, movedTo: nil))
                return history  // what follows a gap cannot be chained to what came before it
            }
        }
        guard loaded else { throw .unreadable("board \"\(board)\": no readable checkpoint") }
        return history
    }

    /// The hub time of the checkpoint opening a segment (nil: unreadable).
    static func checkpointTime(of path: String) throws(JournalError) -> Int64? {
        let bytes = try JournalFile.readAll(path)
        let scan = SegmentFormat.scan(bytes)
        guard let first = scan.records.first else { return nil }
        let record = bytes.withUnsafeBytes { raw in
            try? WireCodec.decode(Touchsync_V1_JournalRecord.self, from: UnsafeRawBufferPointer(rebasing: raw[first.payload]))
        }
        guard case .checkpoint(let checkpoint)? = record?.body else { return nil }
        return checkpoint.hubTime
    }

    /// Deletes the segments before the newest checkpoint at or before `time`
    /// (nil: before the newest segment), so the board's history starts at that
    /// checkpoint; what replay shows from there on is unchanged. Never touches
    /// the segment a hub appends to (the newest). Returns the removed files.
    @discardableResult
    public func compact(before time: Int64? = nil) throws(JournalError) -> [String] {
        var keepFrom = segments.count - 1
        if let time {
            keepFrom = 0
            for (index, segment) in segments.enumerated() {
                if let checkpointTime = try Self.checkpointTime(of: segment.path), checkpointTime <= time { keepFrom = index }
            }
        }
        // The kept segment must open with a readable checkpoint, or nothing would be left to start from.
        guard try Self.checkpointTime(of: segments[keepFrom].path) != nil else {
            throw .unreadable("segment \(segments[keepFrom].name) has no readable checkpoint: nothing was removed")
        }
        var removed: [String] = []
        for segment in segments[..<keepFrom] {
            try JournalFile.remove(segment.path)
            removed.append(segment.path)
        }
        if !removed.isEmpty { try JournalFile.syncDirectory(folder) }
        return removed
    }
}

/// A board's recorded history from one checkpoint on.
public struct LoadedHistory: Sendable {
    /// The board at the checkpoint, and when it was taken.
    public var start: BoardState
    public var startTime: Int64
    /// The batches after it, in order (each carries its hub time).
    public var batches: [RecordedBatch] = []
    /// The board after every batch.
    public var endState = BoardState()
    /// The hub time of the oldest checkpoint kept (the start of the recording).
    public var firstTime: Int64
    /// Damage that cut the history short (reading stops there).
    public var damage: [JournalDamage] = []

    package init(start: BoardState, startTime: Int64, firstTime: Int64) {
        self.start = start
        self.startTime = startTime
        self.firstTime = firstTime
        endState = start
    }

    /// The hub time of the last batch (or of the checkpoint, when none follows).
    public var endTime: Int64 { batches.last?.hubTime ?? startTime }

    /// The board as it stood at hub time `time`: the checkpoint plus every batch up to then.
    public func state(at time: Int64) throws(JournalError) -> BoardState {
        var state = start
        for batch in batches where batch.hubTime <= time {
            do {
                try state.apply(batch)
            } catch {
                throw .unreadable("batch \(batch.sequence) does not apply: \(error)")
            }
        }
        return state
    }
}
