import TouchSyncAccessModel
import TouchSyncCore
import TouchSyncWire

/// A connection as its transport names it: an opaque token the core only
/// compares and hands back in replies (for ZeroMQ, the ROUTER routing id).
public struct PeerID: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]
    /// The channel of a multiplexed connection (docs/protocol.md,
    /// "Multiplexed connections"): each channel is a peer of its own, with its
    /// own session; channel 0 is the connection itself. Nil: a connection
    /// that carries one session.
    public let channel: UInt32?
    public init(_ bytes: [UInt8], channel: UInt32? = nil) {
        self.bytes = bytes
        self.channel = channel
    }
    /// The connection itself: channel 0 of a multiplexed connection, or the connection.
    public var connection: PeerID { channel == nil ? self : PeerID(bytes, channel: 0) }
    /// The id as text when it is printable ASCII (an agent's identity), else
    /// in hex (libzmq's generated ids start with a zero byte, which would cut a log line).
    public var description: String {
        let printable = bytes.allSatisfy { $0 >= 0x20 && $0 < 0x7f }
        let text = printable ? String(decoding: bytes, as: UTF8.self) : "0x" + bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        return channel.map { "\(text)#\($0)" } ?? text
    }
}

/// Who sent a message: the connection, and the user namespace its transport
/// vouches for (today derived from the routing id; an authenticated
/// transport puts the authenticated user here). The core trusts only this
/// principal for the namespace of every touch, never anything in a payload.
public struct Peer: Hashable, Sendable {
    public var id: PeerID
    public var principal: UserNamespace
    public init(id: PeerID, principal: UserNamespace) {
        self.id = id
        self.principal = principal
    }
}

/// An agent's message, decoded into model types by the transport adapter.
public enum AgentRequest: Sendable {
    case hello(AgentHello)
    /// Numbered messages: applied exactly once, in order.
    case numbered(sequence: UInt64, NumberedRequest)
    /// "I am still here": answered with an ack.
    case heartbeat
    /// The agent leaves on purpose: its live touches are cancelled at once.
    case goodbye
    /// A message with no body it understands and no number (`sequence` 0);
    /// one with a number is `.numbered(…, .invalid)`: it takes its number.
    case empty(sequence: UInt64)
}

public struct AgentHello: Sendable, Equatable {
    public var protocolVersion: UInt32
    public var board: String
    public var clientName: String
    /// The agent resends every message numbered after this.
    public var resumeAfter: UInt64
    /// The agent process's session (empty when the client sends none).
    public var sessionID: [UInt8]
    /// Delegation: the namespace a gateway asks to act as, for the holder of `token` (empty: none).
    public var actAs: String
    public var token: String
    /// The most the session asks to do (nil: what the hub grants).
    public var roleLimit: Role?
    /// The connection's remote IP address, as the transport knows it (never
    /// from the wire): a plain hub counts board creation per address too.
    public var remoteAddress: String? = nil

    public init(
        protocolVersion: UInt32 = 1, board: String, clientName: String = "", resumeAfter: UInt64 = 0,
        sessionID: [UInt8] = [], actAs: String = "", token: String = "", roleLimit: Role? = nil
    ) {
        self.roleLimit = roleLimit
        self.protocolVersion = protocolVersion
        self.board = board
        self.clientName = clientName
        self.resumeAfter = resumeAfter
        self.sessionID = sessionID
        self.actAs = actAs
        self.token = token
    }
}

/// What a numbered message asks for. Adding a case is a compile error in the
/// core (every switch over it is exhaustive) until it is handled.
public enum NumberedRequest: Sendable {
    case frame(TouchFrame)
    case style(StrokeStyle)
    case clear(ClearScope)
    /// Remove the user's most recent accepted stroke still on the board.
    case undo
    /// Put back the user's most recently undone stroke.
    case redo
    /// Remove these accepted strokes (own ones, or anyone's with the right to clear the board).
    case erase([StrokeID])
    /// Moves, scales, recolours, deletes or copies accepted strokes (one undoable operation).
    case edit(StrokeEdit)
    /// Numbered, but its body does not decode into the model: it still takes
    /// its place in the numbering (refused, never resent).
    case invalid(WireError)
}

/// A request's `act_as` and `token` (docs/protocol.md, "Requests on behalf of a user").
public struct OnBehalf: Sendable, Equatable {
    public var actAs: String
    public var token: String
    public init(actAs: String, token: String) {
        self.actAs = actAs
        self.token = token
    }
}

/// What the transport tells the core.
public enum HubEvent: Sendable {
    /// A decoded agent message; `bytes` is its size on the wire (the byte quota pays for it).
    case agentMessage(from: Peer, AgentRequest, bytes: Int)
    /// Bytes from a peer that are no agent message (too large, several frames, undecodable).
    case undecodable(from: Peer, WireError)
    /// The transport knows the connection is closed (the ZeroMQ ROUTER cannot tell).
    case peerGone(PeerID)
    /// A subscription to, or unsubscription from, a publish topic (board name
    /// and a zero byte), by `user` when the transport authenticates (then the
    /// core decides: `allowSubscription`, or nothing).
    case subscribed(topic: [UInt8], by: UserNamespace?)
    case unsubscribed(topic: [UInt8], by: UserNamespace?)
    /// `address`: the requester's remote address on a plain hub (its requests are counted per address too).
    case snapshotRequested(by: PeerID, user: UserNamespace?, board: String, requestID: UInt64, onBehalf: OnBehalf? = nil, address: String? = nil)
    /// A list of the boards whose names start with `prefix`, after `after`, at most `limit`.
    case boardListRequested(
        by: PeerID, user: UserNamespace?, prefix: String, after: String, limit: Int, requestID: UInt64, onBehalf: OnBehalf? = nil,
        address: String? = nil)
    /// The access list was reloaded (authenticated hubs only).
    case accessChanged(AccessList)
    /// The journal actions carried out so far: appends through `writtenThrough`
    /// are written, syncs through `syncedThrough` made them durable.
    case journalProgress(writtenThrough: UInt64, syncedThrough: UInt64)
    /// `board`'s journal failed (a write, a sync, its folder; or a restart
    /// of it): its frames are not promised durable until it is restored. The
    /// other boards are not affected.
    case journalFailed(board: String, reason: String)
    /// `board`'s journal was started again (`restartJournal`): everything
    /// it holds now is durable.
    case journalRestored(board: String)
    /// The board store gave `board`'s lease to hub `owner`: this hub no
    /// longer serves it. Its agents are told WRONG_HUB, and so is anyone who
    /// asks for it later; what was not acknowledged stays with the agents.
    case boardMoved(board: String, owner: String)
    /// The board store gave this hub `board`'s lease (`claimBoard`, or a
    /// board whose hub stopped): it serves the board from here on, as loaded.
    case boardAdopted(RecoveredBoard)
    /// The board store holds no such board (`lookUpBoard`'s answer): snapshot
    /// requests waiting for it are answered with the empty board.
    case boardAbsent(board: String)
    /// The live hubs of the board store changed: a board this hub does not
    /// hold belongs to the one with the highest rendezvous weight, and a
    /// hello or snapshot request for it is answered WRONG_HUB naming it.
    case membershipChanged(ClusterMap)
    /// The transport has handled what was waiting (or its per-turn share of
    /// it: `inputWaiting`, the hub is behind), or `nextDeadline` passed:
    /// publish what is due, run due timers, acknowledge.
    case turnEnded(inputWaiting: Bool)
    /// Publish every pending batch now (before the board is inspected).
    case publishNow
    /// The hub is stopping: publish everything pending and sync the journal.
    case stopping
}

/// What the core asks the transport to do, in order.
public enum HubAction: Sendable {
    case reply(to: PeerID, HubReply)
    case publish(Publication)
    /// Write a batch to the journal before the publication that follows it.
    case appendToJournal(JournalAppend)
    /// Make every append through `through` durable (fsync).
    case syncJournal(through: UInt64)
    /// Start a failed board's journal again from `state`, the board as
    /// published (a checkpoint): answered by `journalRestored` or `journalFailed`.
    case restartJournal(board: String, state: BoardState, hubTime: Int64)
    /// Board store: take `board`'s lease and load it (answered by
    /// `boardAdopted`, `boardMoved` or `journalFailed`); hellos for it wait.
    case claimBoard(String)
    /// Board store: as `claimBoard`, but never creating the board (a snapshot
    /// request for a board this hub would serve but does not hold): answered
    /// by `boardAdopted`, `boardMoved`, `boardAbsent` or `journalFailed`;
    /// snapshot requests for it wait.
    case lookUpBoard(String)
    /// Answer a snapshot request with the board as published at `state.sequence`.
    case sendSnapshot(to: PeerID, requestID: UInt64, board: String, state: BoardState, digest: BoardDigest)
    case refuseSnapshot(to: PeerID, requestID: UInt64, HubRefusal)
    /// Answer a board list request (`more`: boards follow the last one).
    case sendBoardList(to: PeerID, requestID: UInt64, boards: [BoardSummary], more: Bool)
    /// Authenticated hubs: the subscription just received may take effect
    /// (XPUB_MANUAL: subscribe the pipe it came from), or be dropped.
    case allowSubscription(topic: [UInt8])
    case dropSubscription(topic: [UInt8])
    /// A reload took boards away from these users while they watched them:
    /// end the subscriber connections, so every subscriber connects again
    /// through the handshake (the revoked are refused there or at subscribe;
    /// the others resync). ZeroMQ cannot tell which connection is whose.
    case disconnectSubscribers(users: [String])
}

/// A reply to one agent.
public enum HubReply: Sendable, Equatable {
    case welcome(AgentWelcome)
    /// Every numbered message through `through` is handled (applied or refused) and as durable as the policy promises.
    case ack(through: UInt64)
    case error(HubRefusal)
}

public struct AgentWelcome: Sendable, Equatable {
    public var board: String
    public var user: UserNamespace
    public var appliedThrough: UInt64
    public var heartbeatIntervalMilliseconds: UInt32
    public var livenessTimeoutMilliseconds: UInt32
    public var maxLiveTouches: UInt32
    public var maxMessageBytes: UInt32
    /// The hello's version: 2 lets the agent send frames in wire format v2.
    public var protocolVersion: UInt32 = 1
}

/// A typed refusal: the error code, why in words, and the message it answers.
public struct HubRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    public var sequence: UInt64
    /// BUSY only: how long the agent should keep waiting before it doubts the hub.
    public var retryAfterMilliseconds: UInt32
    /// WRONG_HUB only: the hub that serves the board, when known.
    public var owner: ClusterMap.Hub?

    public init(
        _ code: ErrorCode, _ message: String, sequence: UInt64 = 0, retryAfterMilliseconds: UInt32 = 0, owner: ClusterMap.Hub? = nil
    ) {
        self.code = code
        self.message = message
        self.sequence = sequence
        self.retryAfterMilliseconds = retryAfterMilliseconds
        self.owner = owner
    }

    public var description: String { "\(code) (message \(sequence)): \(message)" }
}

/// One message on a board's publish topic, encoded.
public struct Publication: Sendable {
    public enum Kind: Sendable, Equatable {
        case batch(sequence: UInt64)
        case heartbeat(sequence: UInt64, digest: BoardDigest)
    }
    public var board: String
    public var kind: Kind
    public var topic: [UInt8]
    /// An encoded `PublishMessage`.
    public var bytes: [UInt8]

    public init(board: String, kind: Kind, topic: [UInt8], bytes: [UInt8]) {
        self.board = board
        self.kind = kind
        self.topic = topic
        self.bytes = bytes
    }
}

/// One batch to journal, with the progress of the agents it contains.
public struct JournalAppend: Sendable {
    /// Numbers the appends 1, 2, 3…: `journalProgress` reports against it.
    public var ticket: UInt64
    public var board: String
    public var encodedBatch: [UInt8]
    public var sequence: UInt64
    public var hubTime: Int64
    public var agents: [AgentProgress]
    /// The board after the batch (a new segment starts with it).
    public var state: BoardState

    public init(
        ticket: UInt64, board: String, encodedBatch: [UInt8], sequence: UInt64, hubTime: Int64, agents: [AgentProgress], state: BoardState
    ) {
        self.ticket = ticket
        self.board = board
        self.encodedBatch = encodedBatch
        self.sequence = sequence
        self.hubTime = hubTime
        self.agents = agents
        self.state = state
    }
}

/// One board as a board list shows it.
public struct BoardSummary: Sendable, Equatable {
    public var board: String
    public var sequence: UInt64
    public var acceptedStrokes: Int
    public var activeStrokes: Int
    /// Agent sessions on the board now.
    public var agents: Int
    /// Hub time (µs since the epoch) of its last batch in this run; 0: none since the hub started.
    public var lastChangeTime: Int64

    public init(board: String, sequence: UInt64, acceptedStrokes: Int, activeStrokes: Int, agents: Int, lastChangeTime: Int64) {
        self.board = board
        self.sequence = sequence
        self.acceptedStrokes = acceptedStrokes
        self.activeStrokes = activeStrokes
        self.agents = agents
        self.lastChangeTime = lastChangeTime
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
