import TouchSyncCore

/// What the core noticed, for its adapter's logs: the core writes no log
/// and knows no metrics system. It hands each observation to the observer
/// it was given (none: nobody listens) and keeps plain counts in `counters`.
public enum HubObservation: Sendable, Equatable {
    case boardCreated(board: String)
    case boardForgotten(board: String)
    case boardMoved(board: String, owner: String)
    case boardAdopted(board: String, sequence: UInt64)
    case agentJoined(user: UserNamespace, board: String, client: String, resumed: Bool)
    case agentSilent(user: UserNamespace, board: String)
    case agentAbandoned(user: UserNamespace, board: String, touches: Int)
    case agentEnded(user: UserNamespace, board: String, why: String, touches: Int)
    case agentDidNotReturn(user: UserNamespace, board: String, touches: Int)
    case agentOnlyWatches(user: UserNamespace, board: String, touches: Int)
    case refused(HubRefusal)
    case subscriptionRefused(user: UserNamespace?)
    case journalFailed(board: String, reason: String, retryInterval: Duration)
    case journalStillFailing(board: String, reason: String)
    case journalRestored(board: String)
    case watchersLostBoards(users: [String])
    case accessApplied(users: Int)
    case behind(milliseconds: Int64)

    public enum Level: Sendable, Comparable {
        case debug, info, notice, error
    }

    public var level: Level {
        switch self {
        case .refused, .subscriptionRefused, .agentJoined, .boardForgotten: .debug
        case .boardCreated, .boardAdopted, .agentSilent, .agentAbandoned, .agentEnded, .agentDidNotReturn, .agentOnlyWatches: .info
        case .boardMoved, .journalRestored, .watchersLostBoards, .accessApplied, .behind: .notice
        case .journalFailed, .journalStillFailing: .error
        }
    }

    public var message: String {
        switch self {
        case .boardCreated: "board created"
        case .boardForgotten: "empty board forgotten"
        case .boardMoved: "board moved to another hub: no longer served here"
        case .boardAdopted: "board adopted from the board store"
        case .agentJoined: "agent joined"
        case .agentSilent: "agent silent: its touches are kept"
        case .agentAbandoned: "agent gone (silent past the abandon time-out): touches cancelled"
        case .agentEnded: "agent session ended: touches cancelled"
        case .agentDidNotReturn: "agent did not return after the restart: touches cancelled"
        case .agentOnlyWatches: "agent may now only watch: touches cancelled"
        case .refused: "refused"
        case .subscriptionRefused: "subscription refused"
        case .journalFailed(_, _, let retry):
            "journal failed for one board: its frames are not acknowledged until it works again (retried every \(retry)); the other boards go on"
        case .journalStillFailing: "journal still failing: the board's frames are not acknowledged"
        case .journalRestored: "journal works again: the board's frames are acknowledged"
        case .watchersLostBoards: "watchers lost boards: subscriber connections are ended"
        case .accessApplied: "access list applied"
        case .behind: "hub behind: agents told BUSY"
        }
    }

    public var metadata: [String: String] {
        switch self {
        case .boardCreated(let board), .boardForgotten(let board), .journalRestored(let board): ["board": board]
        case .boardMoved(let board, let owner): ["board": board, "owner": owner]
        case .boardAdopted(let board, let sequence): ["board": board, "sequence": "\(sequence)"]
        case .agentJoined(let user, let board, let client, let resumed):
            ["user": user.rawValue, "board": board, "client": client, "resumed": "\(resumed)"]
        case .agentSilent(let user, let board): ["user": user.rawValue, "board": board]
        case .agentAbandoned(let user, let board, let touches), .agentDidNotReturn(let user, let board, let touches),
            .agentOnlyWatches(let user, let board, let touches):
            ["user": user.rawValue, "board": board, "touches": "\(touches)"]
        case .agentEnded(let user, let board, let why, let touches): ["user": user.rawValue, "board": board, "why": why, "touches": "\(touches)"]
        case .refused(let refusal): ["error": "\(refusal)"]
        case .subscriptionRefused(let user): ["user": user?.rawValue ?? "?"]
        case .journalFailed(let board, let reason, _), .journalStillFailing(let board, let reason): ["board": board, "error": reason]
        case .watchersLostBoards(let users): ["users": "\(users)"]
        case .accessApplied(let users): ["users": "\(users)"]
        case .behind(let milliseconds): ["behind_ms": "\(milliseconds)"]
        }
    }
}

/// Who hears the core's observations (the hub's adapter logs them). Called
/// on the core's thread, for events, never per sample.
public protocol HubObserver: AnyObject {
    func observe(_ observation: HubObservation)
}

/// What the core counts, as plain values: the adapter exports them (to
/// swift-metrics) at the end of each turn, so counting costs the hot path
/// an integer add.
public struct HubCounters: Sendable, Equatable {
    public var messages = 0
    public var frames = 0
    public var samples = 0
    public var batches = 0
    public var duplicates = 0
    public var publishedBytes = 0
    public var journalFailures = 0
    /// Refusals by error code.
    public var errors: [ErrorCode: Int] = [:]
    // Gauges: the value now.
    public var agents = 0
    public var subscriptions = 0
    public var boards = 0
    /// How long the hub has been behind its input (0: caught up), as of its last BUSY notice.
    public var behindSeconds = 0.0
    /// Live touches over all boards.
    public var liveTouches = 0
    /// Live touches per board, kept only when board names may be metric labels
    /// (`HubConfiguration.metricsBoardLabels`): boards changed since the exporter last took them.
    public var liveTouchesChanged: [String: Int] = [:]

    public init() {}

    mutating func refused(_ code: ErrorCode) { errors[code, default: 0] += 1 }

    /// The per-board changes since the last call (the exporter's).
    public mutating func takeLiveTouchChanges() -> [String: Int] {
        defer { liveTouchesChanged.removeAll() }
        return liveTouchesChanged
    }
}
