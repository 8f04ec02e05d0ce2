import TouchSyncAccess
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncWire

/// A load run: how many simulated fingers, how fast, for how long, against which hub.
public struct LoadConfiguration: Sendable {
    /// Simulated users, each an agent with its own connection. Default 10.
    public var users = 10
    /// Fingers per user. Default 3.
    public var fingers = 3
    /// Input events per second per finger. Default 120.
    public var hz: Double = 120
    /// Samples per input event (2: a 240 Hz digitizer at 120 Hz events). Default 2.
    public var coalesced = 2
    /// Predicted samples per touch change. Default 1.
    public var predicted = 1
    /// How long fingers draw. Default 5 s.
    public var duration: Duration = .seconds(5)
    /// After drawing, how long to wait for every frame to be acknowledged,
    /// and then half as long for the subscribers to catch up. Default 60 s.
    public var drainTimeout: Duration = .seconds(60)
    /// Keep drawing past `duration` until the generator has run this many
    /// ticks: a starved generator (a busy machine) still draws a known amount,
    /// so a test's checks do not depend on the machine's speed. Default 0.
    public var minimumTicks = 0
    /// Stop after this many strokes have begun, if it comes before `duration`.
    public var strokes: Int? = nil
    /// Boards the users are spread over (round robin). Default 1.
    public var boards = 1
    /// Subscribers per board, connected before anyone draws. Default 1.
    public var subscribers = 1
    /// The subscribers' wire format (v2: packed appends on the boards' v2 topics). Default v1.
    public var wireFormat: WireFormat = .v1
    /// Whether subscribers keep predicted tails (false, with v2: the boards' streams without predictions). Default true.
    public var subscriberPredictions = true
    /// Also start one subscriber per board half-way through (snapshot plus diffs). Default false.
    public var lateSubscriber = false
    /// Users start drawing one after another over this time. Default 0.
    public var rampUp: Duration = .zero
    /// Chance per event that a live touch is cancelled. Default 0.01.
    public var cancelRate = 0.01
    /// Chance per frame that the alive set silently drops a touch (the hub cancels it). Default 0.005.
    public var vanishRate = 0.005
    /// Same seed, same fingers. Default 1.
    public var seed: UInt64 = 1
    /// Threads driving the agents' connections (each user still has its own
    /// connection and identity). Default 2.
    public var agentThreads = 2
    /// The hub to load; nil runs an embedded hub in this process on free loopback ports.
    public var hub: HubEndpoints? = nil
    /// An external hub's process id (the same machine): the report gives its threads' CPU.
    public var hubPID: Int32? = nil
    /// Configuration of the embedded hub.
    public var embeddedHub = HubConfiguration.loopbackEphemeral()
    /// CURVE for every connection (`LoadKeys.prepare`); the embedded hub then
    /// authenticates with them. Default nil: plain text.
    public var keys: LoadKeys? = nil
    /// Boards sharded over the hubs of a cluster file: each board's agents and
    /// subscribers use the hub the map gives it. Overrides `hub`. Default nil.
    public var cluster: ClusterMap? = nil
    /// Each agent's window of unacknowledged messages (`AgentConfiguration.maxInFlight`). Default 32.
    public var maxInFlight = 32
    /// How long an agent waits for its hub's word (an ack's progress, a
    /// heartbeat) before it takes the hub for lost and reconnects
    /// (`AgentConfiguration.hubTimeout`). Default 3 s, the agents' own.
    public var hubTimeout: Duration = .seconds(3)

    public init() {}

    /// Samples per second the run offers (real samples, predictions not counted),
    /// assuming every finger is down all the time (an upper bound).
    public var offeredSamplesPerSecond: Double { Double(users * fingers * coalesced) * hz }
}
