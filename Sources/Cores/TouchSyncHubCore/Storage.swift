import TouchSyncCore

// What the hub's core shares with its storage (the journal, the board
// store): the storage adapters depend on these, the core on no adapter.

/// When the journal makes writes durable, and so when the hub acknowledges.
public enum FsyncPolicy: Sendable, Equatable, CustomStringConvertible {
    /// `fdatasync` covering every batch before anything in it is published or
    /// acknowledged: an acknowledged frame survives a crash of the process,
    /// the kernel or the power. The hub's journal thread lets the batches that
    /// queued while it synced share the next `fdatasync` (group commit). The
    /// slowest.
    case everyBatch
    /// `fdatasync` at most this often; acknowledgements wait for it, so the
    /// guarantee is that of `everyBatch` with up to this much added latency.
    /// Batches are published before they are durable: after a crash,
    /// subscribers that saw a batch the journal lost resync (digest mismatch).
    case interval(Duration)
    /// Never `fdatasync`: frames are acknowledged once written to the
    /// operating system. They survive a kill of the hub process (SIGKILL
    /// included), not a kernel crash or power loss.
    case never

    public var description: String {
        switch self {
        case .everyBatch: "batch"
        case .interval(let interval):
            "\(interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000)ms"
        case .never: "never"
        }
    }

    /// Parses `batch`, `never`, or an interval such as `50ms` or `1s`.
    public init?(argument: String) {
        switch argument {
        case "batch", "always", "every-batch": self = .everyBatch
        case "never": self = .never
        default:
            if argument.hasSuffix("ms"), let value = Int(argument.dropLast(2)), value > 0 {
                self = .interval(.milliseconds(value))
            } else if argument.hasSuffix("s"), let value = Double(argument.dropLast()), value > 0 {
                self = .interval(.milliseconds(Int(value * 1000)))
            } else {
                return nil
            }
        }
    }
}

/// How a journal round makes several board files durable at once.
public enum JournalSyncMethod: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// `fdatasync` on each board file written since the last round: each
    /// flushes the disk's cache on its own, so a round over 30 boards costs
    /// 30 flushes.
    case eachFile = "each-file"
    /// One `syncfs(2)` of the data folder's filesystem: every file's data and
    /// sizes with one flush of the disk's cache (about a tenth of the CPU of
    /// `eachFile` for 30 files, docs/performance.md). It also writes out
    /// whatever other programs left unwritten on that filesystem, which the
    /// round then waits for: a data folder on a filesystem that others write
    /// heavily is better off with `eachFile`. A failed `syncfs` is followed by
    /// `fdatasync` on each file, which says which boards failed.
    case fileSystem = "filesystem"
    /// `fileSystem` for a round that syncs at least
    /// `JournalConfiguration.fileSystemSyncFrom` files, `eachFile` below.
    case automatic = "auto"

    public var description: String { rawValue }
}

public enum JournalDefaults {
    /// The data folder when none is given: under the working directory.
    public static let directory = "touchsync-data"
}

/// Where and how the hub journals. Defaults are documented per property.
public struct JournalConfiguration: Sendable {
    /// The data folder; each board gets a folder inside it.
    public var directory: String
    /// Default `.interval(.milliseconds(20))`: acknowledged frames survive
    /// power loss, for at most 20 ms of added acknowledgement latency.
    public var fsync: FsyncPolicy = .interval(.milliseconds(20))
    /// A board starts a new segment, beginning with a checkpoint of its whole
    /// state, once its current one reaches this size. Default 16 MiB.
    public var segmentBytes = 16 << 20
    /// Segments kept open at once: past it the least recently written board's
    /// is synced and closed (reopened at its next batch), so the number of
    /// boards never meets the descriptor limit, at start-up or later. Default 256.
    public var maxOpenFiles = 256
    /// How a round syncs several board files. Default `.automatic`.
    public var syncMethod: JournalSyncMethod = .automatic
    /// Under `.automatic`, the number of files a round syncs from which it
    /// uses one `syncfs` instead of an `fdatasync` each. Default 4.
    public var fileSystemSyncFrom = 4

    public init(directory: String) { self.directory = directory }

    /// Whether a round that syncs `files` board files uses one `syncfs`.
    public func syncsFileSystem(forFiles files: Int) -> Bool {
        switch syncMethod {
        case .eachFile: false
        case .fileSystem: files >= 1
        case .automatic: files >= max(fileSystemSyncFrom, 1)
        }
    }
}

/// A board as the journal had it at start-up.
public struct RecoveredBoard: Sendable {
    public var name: String
    public var state: BoardState
    /// Every agent's progress on this board.
    public var agents: [AgentProgress]
    /// Damage found and repaired (torn tails truncated, corrupt tails moved aside).
    public var damage: [JournalDamage]
    /// Records read and applied to reach `state`.
    public var recordsApplied: Int

    public init(name: String, state: BoardState, agents: [AgentProgress], damage: [JournalDamage] = [], recordsApplied: Int = 0) {
        self.name = name
        self.state = state
        self.agents = agents
        self.damage = damage
        self.recordsApplied = recordsApplied
    }
}

/// Damage in one segment, and what recovery did about it.
public struct JournalDamage: Sendable, Equatable, CustomStringConvertible {
    public var board: String
    public var segment: String
    public var damage: SegmentDamage
    /// Where the untrusted bytes went (corruption is moved aside, never deleted), if anywhere.
    public var movedTo: String?

    package init(board: String, segment: String, damage: SegmentDamage, movedTo: String?) {
        self.board = board
        self.segment = segment
        self.damage = damage
        self.movedTo = movedTo
    }

    public var description: String {
        "board \(board), segment \(segment): \(damage)" + (movedTo.map { "; those bytes were moved to \($0)" } ?? "")
    }

    public var isCorruption: Bool {
        if case .corrupt = damage { return true }
        return false
    }
}

/// How a segment's good part ends early.
public enum SegmentDamage: Sendable, Equatable, CustomStringConvertible {
    /// The last write was cut short (a crash mid-append): expected after a
    /// kill, repaired by truncating it.
    case tornTail(offset: Int, bytes: Int)
    /// Bytes changed after they were written (disk, a stray write, a flipped
    /// bit): everything from `offset` is untrusted.
    case corrupt(offset: Int, bytes: Int, reason: String)

    public var offset: Int {
        switch self {
        case .tornTail(let offset, _), .corrupt(let offset, _, _): offset
        }
    }

    public var description: String {
        switch self {
        case .tornTail(let offset, let bytes): "torn final record: \(bytes) bytes from byte \(offset)"
        case .corrupt(let offset, let bytes, let reason): "corrupt from byte \(offset) (\(bytes) bytes): \(reason)"
        }
    }
}

/// How far the hub has applied one agent's numbered messages on a board:
/// journaled with the batches that contain them, so a restarted hub neither
/// applies a resent frame twice nor forgets the agent's style.
public struct AgentProgress: Sendable, Equatable {
    /// The agent's user namespace (stored as its UTF-8 bytes in `routing_id`).
    public var principal: UserNamespace
    public var appliedThrough: UInt64
    public var style: StrokeStyle
    /// The agent session the numbers belong to (empty in older journals).
    public var sessionID: [UInt8]

    public init(principal: UserNamespace, appliedThrough: UInt64, style: StrokeStyle, sessionID: [UInt8] = []) {
        self.principal = principal
        self.appliedThrough = appliedThrough
        self.style = style
        self.sessionID = sessionID
    }
}
