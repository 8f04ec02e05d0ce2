import ArgumentParser
import Foundation
import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncClient
import TouchSyncCore
import TouchSyncTUIO
import UnixSignals
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// `touchsync tuio`: multi-touch hardware (TUIO over UDP) drawing on a
/// board, or a board's live touches sent to TUIO displays.
struct TUIOCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tuio",
        abstract: "Bridge TUIO multi-touch hardware and a board: --listen draws what trackers send, --emit sends a board's touches.",
        discussion: """
            --listen udp://0.0.0.0:3333 receives TUIO 1.1 /tuio/2Dcur and TUIO 2.0 \
            /tuio2/ptr bundles (reacTIVision, TouchDesigner, touch frames) and drives \
            one agent per TUIO source (its source name, or its address), so every \
            table draws in its own namespace. Cursor ids are touch ids: entering the \
            alive set begins a stroke, each set adds a sample, leaving ends it; 0-1 \
            coordinates are scaled to --size. Old and repeated frames (fseq) are \
            dropped, and so is a frame more than 1,000 ahead of the last until the next \
            one agrees with it; a source silent for --source-timeout has its touches \
            cancelled and its numbering starts over. At most --max-sources sources at once.

            TUIO over UDP trusts its network: anyone who can send datagrams to the \
            port can draw as any source. Listen on an interface only trackers reach \
            (or loopback), name the trackers' addresses with --allow, and run one \
            bridge per room.

            --emit udp://HOST:3333 sends the board's strokes in progress as TUIO 1.1 \
            /tuio/2Dcur bundles, --fps times a second, for displays that follow TUIO.

              touchsync tuio --listen udp://0.0.0.0:3333 --board table --hub tcp://hub:5570
              touchsync tuio --emit udp://192.168.1.20:3333 --board table --publish tcp://hub:5571 --snapshot tcp://hub:5572
            """)

    @Option(help: "Receive TUIO here: udp://ADDRESS:PORT (IPv4; 0.0.0.0 for every interface).") var listen: String?
    @Option(name: .customLong("emit"), help: "Send the board's touches as TUIO here: udp://ADDRESS:PORT.") var emitTo: String?
    @Option(help: "The board.") var board: String
    @OptionGroup var hub: HubAddressOptions
    @Option(help: "The canvas TUIO's 0-1 coordinates map to, in points: WIDTHxHEIGHT.") var size = "1920x1080"
    @Option(parsing: .unconditional, help: "Seconds without a packet from a source before its touches are cancelled.")
    var sourceTimeout = 3.0
    @Option(parsing: .unconditional, help: "Sources served at once (each an agent of the hub).") var maxSources = 64
    @Option(parsing: .singleValue, help: "Take datagrams only from this IPv4 address or network (ADDRESS or ADDRESS/BITS; repeatable). Default: anyone who can reach the port.")
    var allow: [String] = []
    @Option(parsing: .unconditional, help: "With --emit: bundles per second.") var fps = 60.0
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateBoard(board)
        guard (listen == nil) != (emitTo == nil) else { throw ValidationError("give one of --listen and --emit") }
        if let listen { _ = try UDPAddress(listen, option: "--listen") }
        if let emitTo { _ = try UDPAddress(emitTo, option: "--emit") }
        guard Self.parseSize(size) != nil else { throw ValidationError("--size must be WIDTHxHEIGHT in points, e.g. 1920x1080") }
        guard sourceTimeout > 0 else { throw ValidationError("--source-timeout must be above 0") }
        guard (1...10_000).contains(maxSources) else { throw ValidationError("--max-sources must be 1 to 10000") }
        _ = try SenderAllowList(allow)
        guard fps > 0 && fps <= 1000 else { throw ValidationError("--fps must be above 0 and at most 1000") }
    }

    static func parseSize(_ text: String) -> (Double, Double)? {
        let parts = text.split(separator: "x").compactMap { Double($0) }
        guard parts.count == 2, parts[0] > 0, parts[1] > 0, parts[0] <= 100_000, parts[1] <= 100_000 else { return nil }
        return (parts[0], parts[1])
    }

    func run() async throws {
        let logger = logging.logger("touchsync.tuio")
        let hub = try self.hub.resolved(board: board)
        let (width, height) = Self.parseSize(size)!
        if let listen {
            let address = try UDPAddress(listen, option: "--listen")
            let bridge = try TUIOBridge(
                address: address, board: board, hubEndpoint: hub.ingest, curve: try hub.keys.curve(), width: width, height: height,
                sourceTimeout: Duration(secondsValue: sourceTimeout), maxSources: maxSources, allowed: try SenderAllowList(allow),
                logger: logger)
            emit("TUIO bridge: \(listen) -> board \"\(board)\" at \(hub.ingest), canvas \(size) points (Ctrl-C stops)")
            let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
            let thread = Thread { bridge.run() }
            thread.name = "touchsync-tuio"
            thread.start()
            for await _ in signals { break }
            let counts = await bridge.stop()
            emit("TUIO bridge stopped: \(counts.frames) frames from \(counts.sources) source(s), \(counts.dropped) old or repeated, \(counts.malformed) malformed packets"
                    + (counts.refusedSources > 0 ? ", \(counts.refusedSources) frames of sources past --max-sources" : "")
                    + (counts.refusedSenders > 0 ? ", \(counts.refusedSenders) datagrams from senders not on --allow" : ""))
        } else if let emitTo {
            let address = try UDPAddress(emitTo, option: "--emit")
            var configuration = SubscriberConfiguration(board: board, publishEndpoint: hub.publish, snapshotEndpoint: hub.snapshot)
            configuration.curve = try hub.keys.curve()
            let subscriber = try BoardSubscriber(configuration: configuration, logger: logger)
            subscriber.start()
            let socket = try UDPSocket(binding: nil)
            emit("TUIO emitter: board \"\(board)\" -> \(emitTo), \(fps) bundles/s (Ctrl-C stops)")
            let stopped = StopFlag()
            let signals = Task {
                for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) {
                    stopped.set()
                    break
                }
            }
            defer { signals.cancel() }
            var frame: Int32 = 0
            let interval = Duration(secondsValue: 1 / fps)
            var next = ContinuousClock.now
            while !stopped.isSet {
                if let state = await subscriber.replica() {
                    frame &+= 1
                    socket.send(TUIOEmitter.bundle(of: state, width: width, height: height, source: "touchsync@\(board)", frame: frame), to: address)
                }
                if let failure = subscriber.status.failure { throw CommandFailure("the subscriber stopped: \(failure)") }
                next += interval
                try? await Task.sleep(until: next)
            }
            await subscriber.stop()
            emit("TUIO emitter stopped after \(frame) bundles")
        }
    }
}

/// Set once, from a signal handler's task; read by a loop.
final class StopFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// IPv4 senders a bridge takes datagrams from: `ADDRESS` or `ADDRESS/BITS`.
struct SenderAllowList: Sendable {
    private let networks: [(address: UInt32, mask: UInt32)]

    init(_ entries: [String]) throws {
        networks = try entries.map { entry in
            let parts = entry.split(separator: "/", maxSplits: 1)
            var address = in_addr()
            guard inet_pton(AF_INET, String(parts[0]), &address) == 1 else {
                throw ValidationError("--allow \(entry): an IPv4 address or ADDRESS/BITS, e.g. 192.168.1.0/24")
            }
            let bits = parts.count == 2 ? Int(parts[1]) : 32
            guard let bits, (0...32).contains(bits) else { throw ValidationError("--allow \(entry): BITS is 0 to 32") }
            let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << (32 - bits)
            return (UInt32(bigEndian: address.s_addr) & mask, mask)
        }
    }

    private init(networks: [(address: UInt32, mask: UInt32)]) { self.networks = networks }

    /// No list: every sender.
    static let anyone = SenderAllowList(networks: [])

    /// Whether `sender` (`ADDRESS:PORT`) may send; everyone when the list is empty.
    func allows(_ sender: String) -> Bool {
        guard !networks.isEmpty else { return true }
        var address = in_addr()
        guard let host = sender.split(separator: ":").first, inet_pton(AF_INET, String(host), &address) == 1 else { return false }
        let value = UInt32(bigEndian: address.s_addr)
        return networks.contains { value & $0.mask == $0.address }
    }
}

/// An IPv4 UDP address from `udp://ADDRESS:PORT`.
struct UDPAddress: Sendable, CustomStringConvertible {
    let host: String
    let port: UInt16

    init(_ text: String, option: String) throws {
        guard text.hasPrefix("udp://"), let colon = text.lastIndex(of: ":"), colon > text.index(text.startIndex, offsetBy: 6) else {
            throw ValidationError("\(option) \(text): expected udp://ADDRESS:PORT, e.g. udp://0.0.0.0:3333")
        }
        var host = String(text[text.index(text.startIndex, offsetBy: 6)..<colon])
        if host == "localhost" { host = "127.0.0.1" }
        var probe = in_addr()
        guard inet_pton(AF_INET, host, &probe) == 1 else { throw ValidationError("\(option) \(text): the address must be IPv4 (e.g. 0.0.0.0)") }
        guard let port = UInt16(text[text.index(after: colon)...]), port > 0 else {
            throw ValidationError("\(option) \(text): the port must be 1 to 65535")
        }
        self.host = host
        self.port = port
    }

    var sockaddr: sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    var description: String { "udp://\(host):\(port)" }
}

/// A blocking UDP socket (datagrams up to 64 KiB). Only its descriptor is
/// shared: the kernel serialises concurrent calls on it.
final class UDPSocket: Sendable {
    let descriptor: Int32

    init(binding address: UDPAddress?, receiveTimeout: Duration = .milliseconds(100)) throws {
        descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard descriptor >= 0 else { throw CommandFailure("cannot make a UDP socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: 0, tv_usec: Int(receiveTimeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer: Int32 = 1 << 20
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<Int32>.size))
        if let address {
            var socketAddress = address.sockaddr
            let bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw CommandFailure("cannot listen on \(address): \(reason)")
            }
        }
    }

    deinit { close(descriptor) }

    /// The next datagram and its sender ("ADDRESS:PORT"), or nil after the receive time-out.
    func receive(into buffer: inout [UInt8]) -> (count: Int, sender: String)? {
        var from = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let count = buffer.withUnsafeMutableBytes { bytes in
            withUnsafeMutablePointer(to: &from) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(descriptor, bytes.baseAddress, bytes.count, 0, $0, &length) }
            }
        }
        guard count >= 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        inet_ntop(AF_INET, &from.sin_addr, &text, socklen_t(INET_ADDRSTRLEN))
        let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (count, address + ":\(UInt16(bigEndian: from.sin_port))")
    }

    /// Whether a datagram waits to be received (a receive can also come back
    /// empty-handed when interrupted, e.g. by SIGSTOP and SIGCONT).
    var hasPending: Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0 && entry.revents & Int16(POLLIN) != 0
    }

    func send(_ bytes: [UInt8], to address: UDPAddress) {
        var target = address.sockaddr
        _ = bytes.withUnsafeBytes { data in
            withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(descriptor, data.baseAddress, data.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }
}

/// The receiving side: UDP in, one agent per TUIO source out, every agent on
/// two shared driver threads. Its `run` thread owns the socket and the
/// trackers; the agent host is thread-safe.
final class TUIOBridge: Sendable {
    struct Counts: Sendable {
        var frames = 0
        var dropped = 0
        var malformed = 0
        var sources = 0
        /// Frames of sources refused past --max-sources.
        var refusedSources = 0
        /// Datagrams from senders not on --allow.
        var refusedSenders = 0
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
    private let allowed: SenderAllowList
    private let logger: Logger
    private let context: ZMQContext
    private let stopping = Mutex(false)
    private let finished = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    private let host: AgentHost
    private let agents = Mutex<[String: AgentHost.Agent]>([:])
    private let counts = Mutex(Counts())

    init(
        address: UDPAddress, board: String, hubEndpoint: String, curve: CurveClientKeys?, width: Double, height: Double,
        sourceTimeout: Duration, maxSources: Int = 64, allowed: SenderAllowList = .anyone, logger: Logger
    ) throws {
        self.maxSources = maxSources
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

    /// Receives until `stop()`.
    func run() {
        defer {
            let waiters = finished.withLock { state in
                state.done = true
                defer { state.waiters.removeAll() }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }
        var trackers: [String: (tracker: TUIOSourceTracker, lastHeard: ContinuousClock.Instant)] = [:]
        var buffer = [UInt8](repeating: 0, count: 65536)
        let clock = ContinuousClock()
        var malformedSinceLog = 0
        var lastLog = clock.now - .seconds(60)
        var datagramsSinceSweep = 0
        while !stopping.withLock({ $0 }) {
            let received = socket.receive(into: &buffer)
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
                for (source, entry) in trackers where now - entry.lastHeard > sourceTimeout && !entry.tracker.down.isEmpty {
                    var tracker = entry.tracker
                    let cancelled = tracker.cancelAll()
                    trackers[source] = (tracker, entry.lastHeard)
                    if let agent = agent(for: source) { host.send(agent, cancelled, alive: []) }
                    logger.info("TUIO source silent: its touches cancelled", metadata: ["source": "\(source)", "touches": "\(cancelled.count)"])
                }
            }
            guard let (count, sender) = received else { continue }
            guard allowed.allows(sender) else {
                counts.withLock { $0.refusedSenders += 1 }
                continue
            }
            let now = clock.now
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
                let source = frame.source ?? sender
                if trackers[source] == nil && trackers.count >= maxSources {
                    // Full: the longest-silent source with no touch down makes room, or this one is dropped.
                    let idle = trackers.filter { now - $0.value.lastHeard > sourceTimeout && $0.value.tracker.down.isEmpty }
                    guard let evicted = idle.min(by: { $0.value.lastHeard < $1.value.lastHeard })?.key else {
                        counts.withLock { $0.refusedSources += 1 }
                        if clock.now - lastLog >= .seconds(10) {
                            logger.warning("TUIO source refused: the bridge serves its maximum of sources", metadata: ["source": "\(source)", "max": "\(maxSources)"])
                            lastLog = clock.now
                        }
                        continue
                    }
                    trackers[evicted] = nil
                    if let agent = agents.withLock({ $0.removeValue(forKey: evicted) }) { host.remove(agent) }
                }
                var entry = trackers[source] ?? (TUIOSourceTracker(width: width, height: height), now)
                if trackers[source] == nil { counts.withLock { $0.sources += 1 } }
                // Silent for longer than the time-out: its numbering starts over (a restarted tracker).
                if now - entry.lastHeard > sourceTimeout { entry.tracker.resynchronize() }
                entry.lastHeard = clock.now
                guard let (changes, alive) = entry.tracker.apply(frame, arrival: arrival) else {
                    trackers[source] = entry
                    counts.withLock { $0.dropped += 1 }
                    continue
                }
                trackers[source] = entry
                counts.withLock { $0.frames += 1 }
                if !changes.isEmpty, let agent = agent(for: source) { host.send(agent, changes, alive: alive) }
            }
        }
    }

    /// The agent of a TUIO source, made on first use: its namespace is `tuio-` and the source's name.
    private func agent(for source: String) -> AgentHost.Agent? {
        if let existing = agents.withLock({ $0[source] }) { return existing }
        var configuration = AgentConfiguration(board: board, hubEndpoint: hubEndpoint)
        let allowed = source.unicodeScalars.map { scalar -> Character in
            (scalar.properties.isAlphabetic && scalar.isASCII) || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "_" || scalar == "."
                ? Character(scalar) : "-"
        }
        configuration.identity = String(("tuio-" + String(allowed)).prefix(64))
        configuration.clientName = "touchsync tuio"
        configuration.curve = curve
        let agent = host.add(configuration)
        agents.withLock { $0[source] = agent }
        logger.info("TUIO source joined", metadata: ["source": "\(source)", "user": "\(configuration.identity!)"])
        return agent
    }

    /// Stops receiving, lets every agent deliver what it holds and say goodbye.
    func stop() async -> Counts {
        stopping.withLock { $0 = true }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = finished.withLock { state in
                if !state.done { state.waiters.append(continuation) }
                return state.done
            }
            if done { continuation.resume() }
        }
        for agent in agents.withLock({ Array($0.values) }) { _ = await host.flush(agent, timeout: .seconds(5)) }
        await host.stop()
        let counted = counts.withLock { $0 }
        return counted
    }
}
