import Foundation
import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncClient
import TouchSyncCore
import TouchSyncTUIO
import TouchSyncWaiting
import ZeroMQ

/// The receiving side: UDP in, one agent per TUIO source out, every agent on
/// two shared driver threads. Its `run` thread owns the socket and the
/// trackers; the agent host is thread-safe.
public final class TUIOBridge: Sendable {
    public struct Counts: Sendable {
        public var frames = 0
        public var dropped = 0
        public var malformed = 0
        public var sources = 0
        /// Frames of sources refused past --max-sources or --max-sources-per-address.
        public var refusedSources = 0
        /// Cursors past a source's limit of touches down (their frames' other cursors are taken).
        public var ignoredCursors = 0
        /// Datagrams from senders not on --allow.
        public var refusedSenders = 0
    }

    private let socket: UDPSocket
    private let board: String
    private let hubEndpoint: String
    private let curve: CurveClientKeys?
    private let width: Double
    private let height: Double
    private let sourceTimeout: Duration
    /// Sources (each an agent of the hub) served at once; a new one past it
    /// takes the place of the longest-silent source with no touch down, or is
    /// dropped (1,500 spoofed sources made 1,508 threads and used up ZeroMQ's sockets).
    private let maxSources: Int
    /// Sources one sender address may have at once (any port): spoofed
    /// sources from one machine cannot take every place.
    private let maxSourcesPerAddress: Int
    /// Cursors one source may hold down.
    private let maxCursors: Int
    private let allowed: SenderAllowList
    private let logger: Logger
    private let context: ZMQContext
    private let stopping = Mutex(false)
    private let finished = Completion<Void>()
    private let host: AgentHost
    private let agents = Mutex<[TUIOSourceID: AgentHost.Agent]>([:])
    private let counts = Mutex(Counts())

    public init(
        address: UDPAddress, board: String, hubEndpoint: String, curve: CurveClientKeys?, width: Double, height: Double,
        sourceTimeout: Duration, maxSources: Int = 64, maxSourcesPerAddress: Int = 8, maxCursors: Int = 20, allowed: SenderAllowList = .anyone,
        logger: Logger
    ) throws {
        self.maxSources = maxSources
        self.maxSourcesPerAddress = maxSourcesPerAddress
        self.maxCursors = maxCursors
        self.allowed = allowed
        socket = try UDPSocket(binding: address)
        self.board = board
        self.hubEndpoint = hubEndpoint
        self.curve = curve
        self.width = width
        self.height = height
        self.sourceTimeout = sourceTimeout
        self.logger = logger
        context = try ZMQContext()
        host = try AgentHost(threads: 2, context: context, logger: logger)
        host.start()
    }

    /// Receives until `stop()`. The rules (sources, their time-outs, room for
    /// new ones) are `TUIOSources`'; this loop receives, sweeps when nothing
    /// is waiting, and sends what the rules return. It sleeps in the socket
    /// until a datagram, the next sweep due, or `stop()` (which shuts the
    /// socket's reading down).
    public func run() {
        defer { finished.complete(()) }
        var sources = TUIOSources(
            limits: TUIOSources.Limits(
                width: width, height: height, sourceTimeout: sourceTimeout, maxSources: maxSources,
                maxSourcesPerAddress: maxSourcesPerAddress, maxCursors: maxCursors))
        var buffer = [UInt8](repeating: 0, count: 65536)
        let clock = ContinuousClock()
        var malformedSinceLog = 0
        var lastLog = clock.now - .seconds(60)
        var datagramsSinceSweep = 0
        while !stopping.withLock({ $0 }) {
            let received = socket.receive(into: &buffer, timeout: sources.nextSweep.map { $0 - clock.now } ?? .seconds(86_400))
            // Silent sources: their touches are cancelled (the tracker stopped, or its network did).
            // Judged as of an instant at which nothing was waiting in the socket (datagrams queued
            // while this process was frozen or not scheduled count first: a receive can also come
            // back empty-handed when interrupted), or after many datagrams in a row under a flood.
            var sweepAsOf: ContinuousClock.Instant? = nil
            if received == nil {
                let asOf = clock.now  // taken before the check: whatever arrives later is later than it
                if !socket.hasPending { sweepAsOf = asOf }
            } else {
                datagramsSinceSweep += 1
                if datagramsSinceSweep >= 10_000 { sweepAsOf = clock.now }
            }
            if let now = sweepAsOf {
                datagramsSinceSweep = 0
                for (source, cancelled) in sources.sweep(asOf: now) {
                    if let agent = agent(for: source) { host.send(agent, cancelled, alive: []) }
                    logger.info("TUIO source silent: its touches cancelled", metadata: ["source": "\(source)", "touches": "\(cancelled.count)"])
                }
            }
            guard let (count, sender) = received else { continue }
            guard allowed.allows(sender) else {
                counts.withLock { $0.refusedSenders += 1 }
                continue
            }
            let packet: OSCPacket
            do {
                packet = try OSCDecoder.decode(Array(buffer[0..<count]))
            } catch {
                malformedSinceLog += 1
                counts.withLock { $0.malformed += 1 }
                if clock.now - lastLog >= .seconds(10) {
                    logger.warning("malformed OSC packets", metadata: ["count": "\(malformedSinceLog)", "last": "\(error)", "from": "\(sender)"])
                    malformedSinceLog = 0
                    lastLog = clock.now
                }
                continue
            }
            let arrival = Date().timeIntervalSince1970  // a frame without a time tag happened now
            let (frames, problems) = TUIOParser.frames(in: packet)
            if problems > 0 { counts.withLock { $0.malformed += problems } }
            for frame in frames {
                let source = TUIOSourceID(sender: sender, name: frame.source)
                switch sources.frame(frame, from: source, arrival: arrival, now: clock.now) {
                case .refused(let addressFull):
                    counts.withLock { $0.refusedSources += 1 }
                    if clock.now - lastLog >= .seconds(10) {
                        logger.warning(
                            "TUIO source refused: \(addressFull ? "its address has" : "the bridge serves") its maximum of sources",
                            metadata: ["source": "\(source)", "max": "\(addressFull ? maxSourcesPerAddress : maxSources)"])
                        lastLog = clock.now
                    }
                case .dropped(let forgot, let new):
                    forget(forgot)
                    counts.withLock {
                        $0.sources += new ? 1 : 0
                        $0.dropped += 1
                    }
                case .applied(let changes, let alive, let forgot, let new, let ignoredCursors):
                    forget(forgot)
                    counts.withLock {
                        $0.sources += new ? 1 : 0
                        $0.frames += 1
                        $0.ignoredCursors += ignoredCursors
                    }
                    if !changes.isEmpty, let agent = agent(for: source) { host.send(agent, changes, alive: alive) }
                }
            }
        }
    }

    /// A source forgotten to make room: its agent goes.
    private func forget(_ source: TUIOSourceID?) {
        guard let source, let agent = agents.withLock({ $0.removeValue(forKey: source) }) else { return }
        host.remove(agent)
    }

    /// The agent of a TUIO source, made on first use: its namespace is `tuio-`
    /// and the source's name (its sender when it has none; a second sender
    /// giving the same name gets its address and port after it).
    private func agent(for source: TUIOSourceID) -> AgentHost.Agent? {
        if let existing = agents.withLock({ $0[source] }) { return existing }
        var configuration = AgentConfiguration(board: board, hubEndpoint: hubEndpoint)
        func sanitized(_ text: String) -> String {
            String(text.unicodeScalars.map { scalar -> Character in
                (scalar.properties.isAlphabetic && scalar.isASCII) || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "_" || scalar == "."
                    ? Character(scalar) : "-"
            })
        }
        let named = source.name.map { name in agents.withLock { $0.keys.contains { $0.name == name && $0 != source } } } ?? false
        let label = source.name.map { named ? $0 + "-" + source.sender : $0 } ?? source.sender
        configuration.identity = String(("tuio-" + sanitized(label)).prefix(64))
        configuration.clientName = "touchsync tuio"
        configuration.curve = curve
        let agent = host.add(configuration)
        agents.withLock { $0[source] = agent }
        logger.info("TUIO source joined", metadata: ["source": "\(source)", "user": "\(configuration.identity!)"])
        return agent
    }

    /// Stops receiving, lets every agent deliver what it holds and say goodbye.
    public func stop() async -> Counts {
        stopping.withLock { $0 = true }
        socket.stopReceiving()  // wakes the receive at once
        await finished.join()
        for agent in agents.withLock({ Array($0.values) }) { _ = await host.flush(agent, timeout: .seconds(5)) }
        await host.stop()
        let counted = counts.withLock { $0 }
        return counted
    }
}
