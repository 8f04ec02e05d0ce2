import TouchSyncHubCore
import Logging
import PostgresNIO
import TouchSyncCore
import TouchSyncJournal
import TouchSyncWire

/// A board's recorded history in the board store, for `replay`, `render`
/// and `compact` (`--store`), in the shape the journal gives it.
public enum BoardStoreHistory {
    /// Every board the store holds, by name.
    public static func boards(address: StoreAddress, logger: Logger) async throws(StoreError) -> [String] {
        try await address.withConnection(logger: logger) { connection in
            var names: [String] = []
            for try await name in try await connection.query("SELECT board FROM touchsync_boards ORDER BY board", logger: logger)
                .decode(String.self)
            {
                names.append(name)
            }
            return names
        }
    }

    /// The board from where its kept batches start without a break: the
    /// empty board when every batch since the first is kept, otherwise the
    /// newest snapshot before the last gap (a gap is where a failed commit's
    /// batches were replaced by a snapshot, or `compact` dropped them).
    public static func load(
        address: StoreAddress, board: String, limits: BoardLimits = BoardLimits(), logger: Logger
    ) async throws(StoreError) -> LoadedHistory {
        try await address.withConnection(logger: logger) { connection in
            var batches: [(sequence: UInt64, bytes: ByteBuffer)] = []
            for try await (sequence, bytes) in try await connection.query(
                "SELECT sequence, batch FROM touchsync_batches WHERE board = \(board) ORDER BY sequence", logger: logger
            ).decode((Int64, ByteBuffer).self) {
                batches.append((UInt64(sequence), bytes))
            }
            // Where the unbroken run of batches ending at the last one starts.
            var runStart = max(batches.count - 1, 0)
            while runStart > 0 && batches[runStart - 1].sequence + 1 == batches[runStart].sequence { runStart -= 1 }
            let base = batches.isEmpty ? nil : batches[runStart].sequence - 1
            var history: LoadedHistory
            if base == 0 {
                history = LoadedHistory(start: BoardState(limits: limits), startTime: 0, firstTime: 0)
            } else {
                // The snapshot the run continues from (or, with no batch after it, the newest one).
                let rows = try await connection.query(
                    base.map {
                        "SELECT snapshot FROM touchsync_snapshots WHERE board = \(board) AND sequence = \(Int64($0))"
                    } ?? "SELECT snapshot FROM touchsync_snapshots WHERE board = \(board) ORDER BY sequence DESC LIMIT 1",
                    logger: logger
                ).collect()
                guard let bytes = try rows.first?.decode(ByteBuffer.self) else {
                    if batches.isEmpty { throw StoreError.noBoard(board) }
                    throw StoreError.refused("board \"\(board)\": no snapshot at batch \(base ?? 0), where its kept batches start")
                }
                guard case .checkpoint(let state, let hubTime, _) = try BoardStoreLoader.decode(bytes, limits: limits) else {
                    throw StoreError.refused("board \"\(board)\": its snapshot is not a checkpoint record")
                }
                history = LoadedHistory(start: state, startTime: hubTime, firstTime: hubTime)
            }
            for (sequence, bytes) in batches[runStart...] {
                guard case .batch(let batch, _) = try BoardStoreLoader.decode(bytes, limits: limits) else {
                    throw StoreError.refused("board \"\(board)\": batch \(sequence) is not a batch record")
                }
                if history.batches.isEmpty && base == 0 {
                    history.startTime = batch.hubTime
                    history.firstTime = batch.hubTime
                }
                do {
                    try history.endState.apply(batch)
                } catch {
                    history.damage.append(
                        JournalDamage(
                            board: board, segment: "store batch \(sequence)",
                            damage: .corrupt(offset: 0, bytes: bytes.readableBytes, reason: "batch \(sequence) does not apply: \(error)"),
                            movedTo: nil))
                    break
                }
                history.batches.append(RecordedBatch(batch))
            }
            return history
        }
    }

    /// What a cached history was read from: its batch count and last
    /// sequence, and its snapshot count (any write or compaction changes it).
    public static func shape(address: StoreAddress, board: String, logger: Logger) async throws(StoreError) -> [Int] {
        try await address.withConnection(logger: logger) { connection in
            let row = try await connection.query(
                """
                SELECT (SELECT count(*) FROM touchsync_batches WHERE board = \(board)),
                    (SELECT coalesce(max(sequence), 0) FROM touchsync_batches WHERE board = \(board)),
                    (SELECT count(*) FROM touchsync_snapshots WHERE board = \(board))
                """, logger: logger
            ).collect().first
            guard let row else { return [] }
            let (batches, last, snapshots) = try row.decode((Int64, Int64, Int64).self)
            return [Int(batches), Int(last), Int(snapshots)]
        }
    }

    /// Drops the batches and snapshots before the board's newest snapshot:
    /// history is then kept from that snapshot on. Returns the batches and
    /// snapshots removed.
    public static func compact(
        address: StoreAddress, board: String, logger: Logger
    ) async throws(StoreError) -> (batches: Int, snapshots: Int) {
        try await address.withConnection(logger: logger) { connection in
            guard let newest = try await connection.query(
                "SELECT max(sequence) FROM touchsync_snapshots WHERE board = \(board)", logger: logger
            ).collect().first?.decode(Int64?.self) else { return (0, 0) }
            let batches = try await connection.query(
                "DELETE FROM touchsync_batches WHERE board = \(board) AND sequence <= \(newest) RETURNING sequence", logger: logger
            ).collect().count
            let snapshots = try await connection.query(
                "DELETE FROM touchsync_snapshots WHERE board = \(board) AND sequence < \(newest) RETURNING sequence", logger: logger
            ).collect().count
            return (batches, snapshots)
        }
    }

    /// The bytes of the boards' batch rows (`pg_column_size`: columns and tuple headers; no index or page overhead).
    package static func batchRowBytes(address: StoreAddress, boards: [String], logger: Logger) async throws(StoreError) -> Int {
        try await address.withConnection(logger: logger) { connection in
            let rows = try await connection.query(
                "SELECT sum(pg_column_size(t.*))::bigint FROM touchsync_batches t WHERE board = ANY(\(boards))", logger: logger
            ).collect()
            return Int(try rows.first?.decode(Int64?.self) ?? 0)
        }
    }

    /// Deletes the boards and everything of theirs (benchmarks clean up with it).
    package static func remove(address: StoreAddress, boards: [String], logger: Logger) async throws(StoreError) {
        try await address.withConnection(logger: logger) { connection in
            try await connection.query("DELETE FROM touchsync_boards WHERE board = ANY(\(boards))", logger: logger)
        }
    }
}
