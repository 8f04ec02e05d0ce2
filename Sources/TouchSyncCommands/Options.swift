import ArgumentParser
import Logging
import TouchSyncLoad

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

/// Where the hub is, for the commands that talk to one.
struct HubAddressOptions: ParsableArguments {
    @Option(name: .customLong("hub"), help: "The hub's ingest endpoint (agents).")
    var ingest = "tcp://127.0.0.1:5570"
    @Option(name: .customLong("publish"), help: "The hub's publish endpoint (subscribers).")
    var publish = "tcp://127.0.0.1:5571"
    @Option(name: .customLong("snapshot"), help: "The hub's snapshot endpoint (subscribers).")
    var snapshot = "tcp://127.0.0.1:5572"
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
    guard !board.isEmpty, board.utf8.count <= 128, !board.utf8.contains(0) else {
        throw ValidationError("--board must be 1 to 128 bytes of UTF-8 without NUL")
    }
}

/// A command that could not do its job for a reason outside its arguments
/// (no hub answering, an endpoint in use): "Error: …" and exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
