import TouchSyncAccessModel
import TouchSyncCore

/// Everything a hub can be told, with the defaults it runs on.
public struct HubConfiguration: Sendable {
    /// Agents connect here with DEALER sockets (the hub's ROUTER).
    /// Default `tcp://127.0.0.1:5570`: loopback only, because without
    /// `security` anyone who connects may claim any namespace; use
    /// `tcp://*:5570` with `security` to accept other machines.
    public var ingestEndpoint = "tcp://127.0.0.1:5570"
    /// Subscribers connect here with SUB sockets (the hub's XPUB). Default `tcp://127.0.0.1:5571`.
    public var publishEndpoint = "tcp://127.0.0.1:5571"
    /// Subscribers ask for snapshots here with DEALER sockets (the hub's ROUTER). Default `tcp://127.0.0.1:5572`.
    public var snapshotEndpoint = "tcp://127.0.0.1:5572"
    /// Spectators ask for a board's recorded history here (a ROUTER served
    /// by a thread of its own), when the hub journals. Default `tcp://127.0.0.1:5573`.
    public var historyEndpoint = "tcp://127.0.0.1:5573"
    /// Board names as labels of per-board metrics (`touchsync_hub_live_touches{board=…}`).
    /// Default false: names are users' words, and whoever reads the metrics
    /// would read them; the sum over boards is always there.
    public var metricsBoardLabels = false
    /// Where boards are journaled, and the fsync policy. Default nil: boards
    /// live in memory only (the `touchsync hub` command journals by default,
    /// into `./touchsync-data`). With a journal, an agent's frames are
    /// acknowledged only once they are as durable as the policy promises, and
    /// a restarted hub recovers every board (docs/architecture.md).
    public var journal: JournalConfiguration? = nil
    /// Boards go to a board store (PostgreSQL) instead of the journal: every
    /// batch is committed before it is published or acknowledged, as with
    /// `--fsync batch`, and a store may take a board away (`boardMoved`).
    /// Default false.
    public var storeCommits = false
    /// This hub's name in the board store (its leases and its place among the live hubs).
    public var storeHubName: String? = nil
    /// What acknowledgements wait for: the journal's fsync policy, a commit
    /// for the board store, nothing (nil) for boards in memory only.
    public var durability: FsyncPolicy? { storeCommits ? .everyBatch : journal?.fsync }
    /// CURVE encryption and an access list. With it every socket is a CURVE
    /// server, each connection is authenticated against the list (its user
    /// is the namespace of everything it does) and each board action is
    /// authorised by the user's role. Default nil: plain text, anyone who can
    /// connect may claim any namespace, which `touchsync hub` allows only on
    /// loopback (or with `--insecure`).
    public var security: HubSecurity? = nil
    /// This hub's place in a sharded cluster: it holds only the boards the
    /// cluster file maps to `name` (rendezvous hashing), and refuses the
    /// others with WRONG_HUB naming the right hub. Default nil: every board.
    public var cluster: (map: ClusterMap, name: String)? = nil

    /// Board threads: the boards are spread over this many threads
    /// (`BoardThreads`), each with its own core, journal and publishing,
    /// behind one front thread that owns the public sockets (`touchsync hub
    /// --threads`). Default 1: one thread owns the sockets and every board.
    public var boardThreads = 1

    /// Time-outs and intervals: liveness, heartbeats, publishing, acknowledging, busy notices.
    public var timing = Timing()

    /// What one user, peer or board may take (docs/security.md lists each with its option).
    public var limits = Limits()

    /// Socket queues and buffers, and how much one turn of the loop handles.
    public var sockets = Sockets()


    public init() {}

    /// Endpoints on free loopback ports, for tests and the embedded demo.
    public static func loopbackEphemeral() -> HubConfiguration {
        var configuration = HubConfiguration()
        configuration.ingestEndpoint = "tcp://127.0.0.1:*"
        configuration.publishEndpoint = "tcp://127.0.0.1:*"
        configuration.snapshotEndpoint = "tcp://127.0.0.1:*"
        configuration.historyEndpoint = "tcp://127.0.0.1:*"
        return configuration
    }

    /// Time-outs and intervals: liveness, heartbeats, publishing, acknowledging, busy notices.
    public struct Timing: Sendable {
        /// An agent not heard from for this long is *silent*: its touches stay
        /// down (a network outage is not a user who left), and heartbeats list it
        /// so spectators can show its strokes as stalled. Default 3 s.
        public var livenessTimeout: Duration = .seconds(3)
        /// An agent silent for this long is *gone*: its live touches are
        /// cancelled (at once instead when it says goodbye, or when a new
        /// session of the same user starts). A silent agent that comes back
        /// sooner resumes its strokes, and its resent frames apply. Default 30 s;
        /// at least `livenessTimeout`.
        public var abandonTimeout: Duration = .seconds(30)
        /// Every board publishes a heartbeat this often, even when nobody draws. Default 1 s.
        public var heartbeatInterval: Duration = .seconds(1)
        /// The shortest time between two batches of one board. Default 0: a batch
        /// goes out as soon as the hub has drained its input queue, so light
        /// load costs no latency and heavy load batches naturally. A longer
        /// interval trades latency for fewer bytes per sample (docs/performance.md).
        public var publishInterval: Duration = .zero
        /// The shortest time between two acknowledgements to one agent. Default
        /// 0: every agent that sent something is acknowledged when the turn
        /// ends. A few milliseconds send fewer acks (and wake libzmq's I/O
        /// thread less) when agents send many small frames, for that much more
        /// ack latency; durability is unchanged (an ack still waits for the journal).
        public var ackInterval: Duration = .zero
        /// A board created by a hello but never drawn on (nothing published),
        /// with no agent and no subscriber, is forgotten after this long: hellos
        /// alone do not fill the board table. Default 60 s.
        public var idleEmptyBoardTimeout: Duration = .seconds(60)
        /// How often a board whose journal failed tries it again (a checkpoint
        /// of the board as it is then). Default 5 s.
        public var journalRetryInterval: Duration = .seconds(5)
        /// A session silent this long is forgotten (its duplicate detection with it). Default 10 min.
        public var sessionRetention: Duration = .seconds(600)
        /// A new subscriber makes its board publish a heartbeat at once, at most
        /// this often per board (later ones get it at the end of the interval),
        /// so a subscription flood does not flood the other subscribers. Default 100 ms.
        public var subscribeHeartbeatInterval: Duration = .milliseconds(100)
        /// Behind this long without a break, the hub tells every agent BUSY (at
        /// most once per `busyNoticeInterval`): their messages are queued, not
        /// lost, so they keep waiting instead of reconnecting. While behind, no
        /// agent is declared silent (its messages may be in the queue). Default 250 ms.
        public var busyAfter: Duration = .milliseconds(250)
        /// Default 1 s.
        public var busyNoticeInterval: Duration = .seconds(1)

        public init() {}
    }

    /// What one user, peer or board may take (docs/security.md lists each with its option).
    public struct Limits: Sendable {
        /// Samples one user may store over all this hub's boards: past it, a
        /// frame beginning a stroke gets BOARD_FULL until the user clears or
        /// erases some (each board is bounded by `boardLimits` too). Default 10,000,000.
        public var maxSamplesPerUser = 10_000_000
        /// Messages larger than this get a MESSAGE_TOO_LARGE error. Default 1 MiB.
        public var maxMessageBytes = 1 << 20
        /// Messages larger than this are not even received: libzmq drops the
        /// connection (`ZMQ_MAXMSGSIZE`). Default 16 MiB.
        public var hardMessageLimit: Int64 = 16 << 20
        /// Numbered messages one agent may send per second before RATE_LIMITED
        /// (a bucket that refills at this rate and holds two seconds' worth). Default 2,000.
        public var maxMessagesPerSecond = 2000
        /// Samples (coalesced ones included) one user may send per second before
        /// RATE_LIMITED, in a bucket holding two seconds' worth: a frame is
        /// refused whole when the bucket cannot pay for it. Bounds what one user
        /// makes the hub store and publish, whatever its message sizes. Ten
        /// fingers at 240 Hz are 2,400. Default 20,000.
        public var maxSamplesPerSecond = 20_000
        /// Message bytes one user may send per second before BYTE_RATE_LIMITED
        /// (a bucket holding two seconds' worth; heartbeats and hellos pay too).
        /// Bounds decoding and journaling per user whatever the message mix.
        /// Ten fingers at 240 Hz send under 100 KB/s. Default 2 MiB.
        public var maxBytesPerSecond = 2 << 20
        /// Agent sessions the hub keeps (live, silent, or kept after leaving
        /// for their numbering). At the limit the longest-abandoned one is
        /// forgotten to make room; with none abandoned, a new session is
        /// refused (RATE_LIMITED). Default 10,000.
        public var maxSessions = 10_000
        /// Boards one hub holds. Default 10,000.
        public var maxBoards = 10_000
        /// Boards one user (principal) may create on this hub, in total and per
        /// minute, so that one user cannot fill the hub's table (11,000 hellos
        /// on new boards did). Past either, a hello creating a board is refused
        /// `RATE_LIMITED`; boards that exist stay open to it. Defaults 1,000 and 60.
        public var maxBoardsCreatedPerUser = 1_000
        public var maxBoardsCreatedPerUserPerMinute = 60
        /// Snapshot requests one requester (an authenticated user, else a
        /// connection) may make per second; more are refused `RATE_LIMITED`. A
        /// subscriber asks once when it joins and once per resync. Default 5.
        public var maxSnapshotsPerSecond = 5
        /// Per-user limits of every board.
        public var boardLimits = BoardLimits()
        /// Snapshot bytes a requester (user, or a plain hub's remote address) and
        /// the hub may have unread, and how long a connection may leave one
        /// unread before it is closed (`UnreadSnapshots`).
        public var unreadSnapshots = UnreadSnapshots.Limits()

        public init() {}
    }

    /// Socket queues and buffers, and how much one turn of the loop handles.
    public struct Sockets: Sendable {
        /// Messages the hub handles before it publishes and checks its timers. Default 512.
        /// A turn that ends with input still waiting means the hub is behind.
        public var maxMessagesPerTurn = 512
        /// Snapshot chunks queued for one connection that does not read them;
        /// past it the rest of that snapshot is dropped (the subscriber resyncs
        /// when it reads again). Default 128 chunks of up to 65,536 samples: one
        /// and a half snapshots of the largest board (5,000,000 samples, 77 chunks).
        public var snapshotHighWaterMark: Int32 = 128
        /// Samples per snapshot chunk. Default 65,536.
        public var snapshotSamplesPerChunk = 65_536
        /// Messages queued per subscriber before the hub drops that subscriber's
        /// messages (it then resyncs): a slow subscriber never slows anyone else. Default 10,000.
        public var publishHighWaterMark: Int32 = 10_000
        /// The kernel's send buffer per subscriber connection, in bytes. Default 0:
        /// the OS default. Smaller makes a stalled subscriber lose messages sooner.
        public var publishSendBufferBytes: Int32 = 0
        /// Messages queued per agent connection, both ways. Default 10,000.
        public var ingestHighWaterMark: Int32 = 10_000

        public init() {}
    }

}

/// Where a running hub actually listens (ports filled in after `:*`).
public struct HubEndpoints: Sendable, Equatable {
    public var ingest: String
    public var publish: String
    public var snapshot: String
    /// Where recorded histories are served (nil: the hub does not journal).
    public var history: String?

    public init(ingest: String, publish: String, snapshot: String, history: String? = nil) {
        self.ingest = ingest
        self.publish = publish
        self.snapshot = snapshot
        self.history = history
    }
}

/// What an authenticated hub needs.
public struct HubSecurity: Sendable {
    /// The hub's own CURVE key pair (clients pin its public key).
    public var serverKey: CurveKeyPair
    /// The access list file (JSON, docs/security.md), read at start and by `reloadAccessList()`.
    public var accessListPath: String
    /// A connection whose handshake (CURVE and authentication) takes longer is dropped. Default 5 s.
    public var handshakeTimeout: Duration = .seconds(5)

    public init(serverKey: CurveKeyPair, accessListPath: String) {
        self.serverKey = serverKey
        self.accessListPath = accessListPath
    }
}
