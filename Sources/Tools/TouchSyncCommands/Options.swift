import ArgumentParser
import Logging
import TouchSyncAccess
import TouchSyncHubCore
import TouchSyncLoad
import TouchSyncWire
import Foundation
import TouchSyncWaiting
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Prints one line and flushes it, so a pipe or a file sees every line at
/// once (`touchsync spectate --json | jq`), not when a buffer fills.
func emit(_ line: String) {
    print(line)
    fflush(nil)  // every stream: naming `stdout` is not allowed in Swift 6 (C global state)
}

/// Where the hub is, for the commands that draw (agents) and watch.
struct HubAddressOptions: ParsableArguments {
    @Option(
        name: .customLong("hub"),
        help: "The hub's ingest endpoint (agents); hubs sharing a board store may be listed, comma-separated: after silence the agent tries the next.")
    var ingest = "tcp://127.0.0.1:5570"
    @OptionGroup var subscriber: SubscriberAddressOptions

    var publish: String { subscriber.publish }
    var snapshot: String { subscriber.snapshot }
    var keys: ClientKeyOptions { subscriber.keys }
    var cluster: String? { subscriber.cluster }

    /// These options with the endpoints of `board`'s hub when a cluster file is given.
    func resolved(board: String) throws -> HubAddressOptions {
        guard let cluster else { return self }
        let hub = try SubscriberAddressOptions.loadCluster(cluster).hub(for: board)
        var copy = self
        copy.ingest = hub.ingest
        copy.subscriber.publish = hub.publish
        copy.subscriber.snapshot = hub.snapshot
        return copy
    }

    func validate() throws {
        try validateHubList(ingest)
    }
}

/// `--hub A[,B…]`: every endpoint valid, at least one.
func validateHubList(_ list: String) throws {
    let endpoints = list.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
    for endpoint in endpoints { try validateEndpoint(endpoint, option: "--hub") }
}

/// Where the hub is, for the commands that only read boards (spectators,
/// renderers, relays, health checks): its publish and snapshot endpoints.
struct SubscriberAddressOptions: ParsableArguments {
    @Option(
        name: .customLong("publish"),
        help: "The hub's publish endpoint (subscribers); hubs sharing a board store may be listed, comma-separated, with --snapshot in the same order: the board is followed to whichever holds it.")
    var publish = "tcp://127.0.0.1:5571"
    @Option(name: .customLong("snapshot"), help: "The hub's snapshot endpoint (subscribers); a list as for --publish.")
    var snapshot = "tcp://127.0.0.1:5572"

    @OptionGroup var keys: ClientKeyOptions
    @Option(help: "A cluster file (boards sharded over hubs): the board's hub is found in it, instead of the endpoints.")
    var cluster: String?

    static func loadCluster(_ path: String) throws -> ClusterMap {
        do {
            return try ClusterMap.load(from: path)
        } catch {
            throw CommandFailure(error.description)
        }
    }

    /// These options with the endpoints of `board`'s hub when a cluster file is given.
    func resolved(board: String) throws -> SubscriberAddressOptions {
        guard let cluster else { return self }
        let hub = try Self.loadCluster(cluster).hub(for: board)
        var copy = self
        copy.publish = hub.publish
        copy.snapshot = hub.snapshot
        return copy
    }

    func validate() throws {
        let publishes = publish.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let snapshots = snapshot.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        for endpoint in publishes { try validateEndpoint(endpoint, option: "--publish") }
        for endpoint in snapshots { try validateEndpoint(endpoint, option: "--snapshot") }
        guard publishes.count == snapshots.count else {
            throw ValidationError("--publish lists \(publishes.count) hub(s) and --snapshot \(snapshots.count): list each hub in both, in the same order")
        }
    }

    /// For commands that ask one hub (health, a relay's upstream): one endpoint each.
    func requireOneHub(_ command: String) throws {
        guard !publish.contains(","), !snapshot.contains(",") else {
            throw ValidationError("\(command) asks one hub: give --publish and --snapshot one endpoint each")
        }
    }
}

/// What a server (hub, replay, relay) started with a key file and an access
/// list serves with; nil when it was given neither (options validate that
/// they come together). A missing or bad key file is a clear failure.
func serverSecurity(key: String?, access: String?) throws -> HubSecurity? {
    guard let key, let access else { return nil }
    do {
        return HubSecurity(serverKey: try CurveKeyFiles.readPair(key), accessListPath: access)
    } catch {
        throw CommandFailure("\(error.description) (make one with: touchsync keys generate NAME)")
    }
}

/// A client's CURVE keys, for a hub started with --key and --access.
struct ClientKeyOptions: ParsableArguments {
    @Option(help: "This user's key file (NAME.key from touchsync keys generate), for an authenticated hub.")
    var key: String?
    @Option(help: "The hub's public key: its .pub file, or the 40 Z85 characters.") var hubKey: String?

    func validate() throws {
        guard (key == nil) == (hubKey == nil) else {
            throw ValidationError("--key and --hub-key go together: this user's key file and the hub's public key")
        }
    }

    /// The keys, read (nil: plain text). Throws a clear failure for a missing or bad file.
    func curve() throws -> CurveClientKeys? {
        guard let key, let hubKey else { return nil }
        do {
            return CurveClientKeys(client: try CurveKeyFiles.readPair(key), serverPublicKey: try CurveKeyFiles.readPublicKey(hubKey))
        } catch {
            throw CommandFailure(error.description)
        }
    }
}

/// Checks an endpoint option when it is parsed, so a typo is an error at
/// once, not a socket that never connects: `tcp://HOST:PORT` with a port
/// from 1 to 65535 (`*` too where the command binds), `ipc://PATH` or
/// `inproc://NAME`.
func validateEndpoint(_ endpoint: String, option: String, binds: Bool = false) throws {
    let example = binds ? "tcp://127.0.0.1:5570 or tcp://*:5570" : "tcp://127.0.0.1:5570"
    func refuse(_ why: String) -> ValidationError {
        ValidationError("\(option) \(endpoint): \(why) (an endpoint looks like \(example), ipc://PATH or inproc://NAME)")
    }
    if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") {
        guard !endpoint.hasSuffix("//") else { throw refuse("the path or name is missing") }
        return
    }
    guard endpoint.hasPrefix("tcp://") else { throw refuse("the transport must be tcp://, ipc:// or inproc://") }
    let address = endpoint.dropFirst("tcp://".count)
    guard let colon = address.lastIndex(of: ":") else { throw refuse("the port is missing") }
    let host = address[..<colon]
    let port = address[address.index(after: colon)...]
    guard !host.isEmpty else { throw refuse("the host is missing") }
    if port == "*" && binds { return }
    guard let number = Int(port), (1...65535).contains(number) else {
        throw refuse("the port must be a number from 1 to 65535" + (binds ? ", or * for any free port" : ""))
    }
}

struct LoggingOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "notice"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    /// Logs to standard error, so standard output stays the command's own.
    func logger(_ label: String) -> Logger {
        var logger = Logger(label: label, factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .notice
        return logger
    }
}

func validateBoard(_ board: String) throws {
    guard isValidBoardName(board) else {
        throw ValidationError("--board \(board.debugDescription): \(boardNameRule)")
    }
}

/// A command that could not do its job for a reason outside its arguments
/// (no hub answering, an endpoint in use): "Error: …" and exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` until it returns, or until SIGINT or SIGTERM arrives: then the
/// body's task is cancelled (its sleeps throw `CancellationError`, its loops
/// check `Task.isCancelled`), it tidies up (ends its touches, says goodbye)
/// and returns. True when a signal ended it; the command then exits 130
/// (`ExitCode.interrupted`). The handlers are installed before `body` starts
/// (a signal from then on is never lost, and a shell that started the command
/// with SIGINT ignored does not matter) and the previous ones put back after.
func untilInterrupted(_ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
    // Created before a handler can write to it; a byte left by an earlier call
    // (its body's wake-up racing a signal) is drained, so it cannot end this one.
    var pending = pollfd(fd: interruptPipe.read, events: Int16(POLLIN), revents: 0)
    var stale: UInt8 = 0
    while poll(&pending, 1, 0) > 0 && read(interruptPipe.read, &stale, 1) == 1 {}
    let previous = (signal(SIGINT, interruptHandler), signal(SIGTERM, interruptHandler))
    defer {
        signal(SIGINT, previous.0)
        signal(SIGTERM, previous.1)
    }
    // The thread that takes the signals runs before the body starts.
    let waiter = SignalWaiter()
    return try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            // However the body ends (also by throwing), wake the signal waiter if
            // it still waits (one byte 0: "no signal"): the group waits for it.
            defer { waiter.wakeIfWaiting() }
            do {
                try await body()
            } catch is CancellationError {}
            return false
        }
        group.addTask { await waiter.byte() != 0 }
        let signalled = try await group.next() ?? false
        group.cancelAll()
        // The body, cancelled by the signal, still tidies up: wait for it.
        while let _ = try await group.next() {}
        return signalled
    }
}

/// A thread that takes SIGINT and SIGTERM and reads the self-pipe. In a
/// Swift program with an async main every thread of libdispatch blocks
/// signals, and a thread inherits its creator's mask: without a thread that
/// unblocks them, a Ctrl-C stays pending until the handler is gone (seen:
/// a demo that finished its scene, then died of the SIGINT sent at its start).
/// The thread has unblocked them when `init` returns.
private final class SignalWaiter: Sendable {
    /// The byte read: a signal's number, or 0 when woken without one.
    private let received = Completion<UInt8>()

    init() {
        let started = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            var signals = sigset_t()
            sigemptyset(&signals)
            sigaddset(&signals, SIGINT)
            sigaddset(&signals, SIGTERM)
            pthread_sigmask(SIG_UNBLOCK, &signals, nil)
            started.signal()
            var byte: UInt8 = 0
            while read(interruptPipe.read, &byte, 1) < 0 && errno == EINTR {}
            self.received.complete(byte)
        }
        started.wait()
    }

    /// The byte read: a signal's number, or 0 when the body ended first.
    func byte() async -> UInt8 { await received.join() }

    /// Ends the wait with "no signal" unless a byte was read already.
    func wakeIfWaiting() {
        guard received.value == nil else { return }
        var none: UInt8 = 0
        _ = write(interruptPipe.write, &none, 1)
    }
}

/// The self-pipe the signal handler writes each signal's number to (only
/// `write(2)` there: async-signal-safe).
private let interruptPipe: (read: Int32, write: Int32) = {
    var ends: [Int32] = [-1, -1]
    _ = pipe(&ends)
    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    return (ends[0], ends[1])
}()

private let interruptHandler: @convention(c) (Int32) -> Void = { signal in
    var byte = UInt8(truncatingIfNeeded: signal)
    _ = write(interruptPipe.write, &byte, 1)
}

extension ExitCode {
    /// Ended by SIGINT or SIGTERM after tidying up (128 + SIGINT, as shells report Ctrl-C).
    static let interrupted = ExitCode(130)
}
