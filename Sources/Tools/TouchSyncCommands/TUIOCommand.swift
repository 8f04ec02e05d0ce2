import ArgumentParser
import Foundation
import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncClient
import TouchSyncCore
import TouchSyncTUIO
import TouchSyncTUIOBridge
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
            coordinates are scaled to --size. A source is its sender's address and \
            port with the name its frames give. Old and repeated frames (fseq) are \
            dropped, and a numbering far from the current one (a restarted tracker) \
            is taken only after 30 frames in a row with the old one quiet for half a \
            second; a source silent for --source-timeout has its touches cancelled and \
            its numbering starts over. At most --max-sources sources at once, \
            --max-sources-per-address from one address, --max-cursors down per source.

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
    @Option(parsing: .unconditional, help: "Sources one sender address may have at once (any port).") var maxSourcesPerAddress = 8
    @Option(parsing: .unconditional, help: "Cursors one source may hold down at once; more are ignored.") var maxCursors = 20
    @Option(parsing: .singleValue, help: "Take datagrams only from this IPv4 address or network (ADDRESS or ADDRESS/BITS; repeatable). Default: anyone who can reach the port.")
    var allow: [String] = []
    @Option(parsing: .unconditional, help: "With --emit: bundles per second.") var fps = 60.0
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateBoard(board)
        guard (listen == nil) != (emitTo == nil) else { throw ValidationError("give one of --listen and --emit") }
        if let listen { _ = try validated { try UDPAddress(listen, option: "--listen") } }
        if let emitTo { _ = try validated { try UDPAddress(emitTo, option: "--emit") } }
        guard Self.parseSize(size) != nil else { throw ValidationError("--size must be WIDTHxHEIGHT in points, e.g. 1920x1080") }
        guard sourceTimeout > 0 else { throw ValidationError("--source-timeout must be above 0") }
        guard (1...10_000).contains(maxSources) else { throw ValidationError("--max-sources must be 1 to 10000") }
        guard (1...10_000).contains(maxSourcesPerAddress) else { throw ValidationError("--max-sources-per-address must be 1 to 10000") }
        guard (1...1_000).contains(maxCursors) else { throw ValidationError("--max-cursors must be 1 to 1000") }
        _ = try validated { try SenderAllowList(allow) }
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
            let address = try validated { try UDPAddress(listen, option: "--listen") }
            let bridge = try listening { try TUIOBridge(
                address: address, board: board, hubEndpoint: hub.ingest, curve: try hub.keys.curve(), width: width, height: height,
                sourceTimeout: Duration(secondsValue: sourceTimeout), maxSources: maxSources, maxSourcesPerAddress: maxSourcesPerAddress,
                maxCursors: maxCursors, allowed: try validated { try SenderAllowList(allow) },
                logger: logger) }
            emit("TUIO bridge: \(listen) -> board \"\(board)\" at \(hub.ingest), canvas \(size) points (Ctrl-C stops)")
            let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
            let thread = Thread { bridge.run() }
            thread.name = "touchsync-tuio"
            thread.start()
            for await _ in signals { break }
            let counts = await bridge.stop()
            emit("TUIO bridge stopped: \(counts.frames) frames from \(counts.sources) source(s), \(counts.dropped) old or repeated, \(counts.malformed) malformed packets"
                    + (counts.refusedSources > 0 ? ", \(counts.refusedSources) frames of sources past --max-sources or --max-sources-per-address" : "")
                    + (counts.ignoredCursors > 0 ? ", \(counts.ignoredCursors) cursors past --max-cursors ignored" : "")
                    + (counts.refusedSenders > 0 ? ", \(counts.refusedSenders) datagrams from senders not on --allow" : ""))
        } else if let emitTo {
            let address = try validated { try UDPAddress(emitTo, option: "--emit") }
            var configuration = SubscriberConfiguration(board: board, publishEndpoint: hub.publish, snapshotEndpoint: hub.snapshot)
            configuration.curve = try hub.keys.curve()
            let subscriber = try BoardSubscriber(configuration: configuration, logger: logger)
            subscriber.start()
            let socket = try listening { try UDPSocket(binding: nil) }
            emit("TUIO emitter: board \"\(board)\" -> \(emitTo), \(fps) bundles/s (Ctrl-C stops)")
            let stopped = StopFlag()
            // Trapped before the first bundle goes out: a Ctrl-C that comes before
            // a task got to install the trap would end the process by the signal (status 2).
            let trapped = await UnixSignalsSequence(trapping: .sigint, .sigterm)
            let signals = Task {
                for await _ in trapped {
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

/// A bad address or list as the option error ArgumentParser prints.
private func validated<Value>(_ make: () throws -> Value) throws -> Value {
    do { return try make() } catch let error as UDPSetupError { throw ValidationError(error.description) }
}

/// A socket that cannot be opened or bound, as the command's failure.
private func listening<Value>(_ make: () throws -> Value) throws -> Value {
    do { return try make() } catch let error as UDPSetupError { throw CommandFailure(error.description) }
}
