import ArgumentParser
import TouchSyncAccess
import Foundation
import Logging
import TouchSyncHub
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncLoad
import TouchSyncStore
import UnixSignals
import ZeroMQ

struct ReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Republish a recorded board with its original timing, for spectators and subscribers.",
        discussion: """
            Reads the board from a hub's journal (--data) or the board store (--store) and publishes it on a publish and \
            a snapshot endpoint that speak the hub's protocol, so `touchsync spectate \
            --publish … --snapshot …` (or any subscriber) attaches as to a live board. \
            Times are seconds into the recording; seeking starts from the nearest \
            checkpoint. The clock starts when the first subscriber arrives (--now: at once). \
            It keeps serving the final board until Ctrl-C (--exit-at-end: exit).
            """)

    @Option(help: "The journal folder (a hub's --data).") var data = JournalDefaults.directory
    @OptionGroup var stored: BoardStoreOptions
    @Option(help: "The board to replay.") var board: String
    @Option(help: "Time scale (2: twice as fast), or max.") var speed = "1"
    @Option(parsing: .unconditional, help: "Start this many seconds into the recording.") var from = 0.0
    @Option(parsing: .unconditional, help: "Stop this many seconds into the recording (default: its end).") var to: Double?
    @Option(help: "Endpoint for subscribers (XPUB).") var publish = "tcp://127.0.0.1:5581"
    @Option(help: "Endpoint for snapshot requests (ROUTER).") var snapshot = "tcp://127.0.0.1:5582"
    @Flag(help: "Start the clock at once instead of at the first subscriber.") var now = false
    @Flag(help: "Exit once the last batch is out instead of serving the final board.") var exitAtEnd = false
    @Option(help: "Serve with this key file (as a hub's --key): CURVE, only users of --access who may watch the board.")
    var key: String?
    @Option(help: "The access list (with --key).") var access: String?
    @Flag(help: "Serve plain text on a non-loopback endpoint.") var insecure = false
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateBoard(board)
        try validateEndpoint(publish, option: "--publish", binds: true)
        try validateEndpoint(snapshot, option: "--snapshot", binds: true)
        guard speed == "max" || (Double(speed).map { $0 > 0 && $0 <= 10_000 } ?? false) else {
            throw ValidationError("--speed must be a number above 0 (at most 10000) or max")
        }
        guard from >= 0 else { throw ValidationError("--from cannot be negative") }
        if let to, to <= from { throw ValidationError("--to must be after --from") }
        guard (key == nil) == (access == nil) else { throw ValidationError("--key and --access go together") }
        if key == nil && !insecure, let open = [publish, snapshot].first(where: { !isLoopback($0) }) {
            throw ValidationError("\(open) accepts other machines: serve with --key and --access, or pass --insecure on a network you trust")
        }
    }

    func run() async throws {
        let logger = logging.logger("touchsync.replay")
        var configuration = ReplayConfiguration()
        configuration.publishEndpoint = publish
        configuration.snapshotEndpoint = snapshot
        configuration.speed = speed == "max" ? nil : Double(speed)
        configuration.from = Duration(secondsValue: from)
        configuration.to = to.map { Duration(secondsValue: $0) }
        configuration.waitForSubscriber = !now
        configuration.security = try serverSecurity(key: key, access: access)
        let history: LoadedHistory
        do {
            if stored.store != nil {
                history = try await stored.history(board: board, data: data, logger: logger)
                let length = Double(history.endTime - history.firstTime) / 1e6
                guard from <= length else {
                    throw CommandFailure(
                        "--from \(from) s is past the end of the recording of \"\(board)\", which is \(String(format: "%.2f", length)) s long")
                }
            } else {
            let recorded = try BoardHistory.open(dataDirectory: data, board: board)
            let first = try recorded.load(from: nil)
            let length = Double(first.endTime - first.firstTime) / 1e6
            guard from <= length else {
                throw CommandFailure(
                    "--from \(from) s is past the end of the recording of \"\(board)\", which is \(String(format: "%.2f", length)) s long")
            }
            // Seek: start from the newest checkpoint at or before --from.
            history = from > 0 ? try recorded.load(from: first.firstTime + Int64(from * 1e6)) : first
            }
        } catch let failure as CommandFailure {
            throw failure
        } catch {
            throw CommandFailure("\(error)")
        }
        for damage in history.damage { emit("warning: \(damage); the replay ends there") }
        let replay = try BoardReplay(board: board, history: history, configuration: configuration, logger: logger)
        let endpoints: (publish: String, snapshot: String)
        do {
            endpoints = try await replay.start()
        } catch let error as ZMQError {
            throw CommandFailure("cannot listen: \(error.description). Choose other endpoints with --publish and --snapshot.")
        } catch let error as AccessListError {
            throw CommandFailure(error.description)
        }
        let span = Double(history.endTime - history.firstTime) / 1e6
        emit("replaying board \"\(board)\" from \(try stored.address()?.description ?? data): \(replay.total) batches, \(String(format: "%.1f", span)) s recorded, speed \(speed)")
        emit("  subscribers \(endpoints.publish)")
        emit("  snapshots   \(endpoints.snapshot)")
        if !now { emit("waiting for the first subscriber (touchsync spectate --board \(board) --publish \(endpoints.publish) --snapshot \(endpoints.snapshot))") }

        let progress = Task {
            var last = -1
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                let (published, sequence) = replay.progress
                if published != last && !Task.isCancelled {
                    emit("  \(published) of \(replay.total) batches, at sequence \(sequence)")
                    last = published
                }
            }
        }
        // Ctrl-C or SIGTERM stops the replay, whether it is still running or serving its end.
        let interrupts = await UnixSignalsSequence(trapping: .sigint, .sigterm)  // trapped now, not when the task runs
        let signals = Task {
            for await _ in interrupts { break }
            await replay.stop()
        }
        let result = await replay.finished()  // nil: stopped before the end
        progress.cancel()
        guard let result else {
            emit("replay stopped before its end")
            await signals.value
            return
        }
        emitSummary(result)
        if exitAtEnd {
            signals.cancel()
            await replay.stop()
            return
        }
        emit("serving the final board until Ctrl-C")
        await signals.value
    }

    private func emitSummary(_ result: ReplayResult) {
        emit(
            "replay done: \(result.batches) batches, \(result.samples) samples, sequence \(result.sequence), digest \(result.digest)")
        emit(
            String(
                format: "  %.2f s recorded in %.2f s; lateness against the scaled timing: p50 %.1f ms, p99 %.1f ms, max %.1f ms",
                result.recordedSeconds, result.wallSeconds, Double(result.latenessP50) / 1000, Double(result.latenessP99) / 1000,
                Double(result.latenessMax) / 1000))
    }
}

struct CompactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Drop a board's old journal segments, keeping history from a checkpoint on.",
        discussion: """
            Every segment opens with a checkpoint (the whole board), so the segments before \
            a checkpoint can go without changing what replay shows from that checkpoint on. \
            Safe while the hub runs: the newest segment, which it appends to, is never \
            touched. Segments roll over at the hub's --segment-mib.

            With --store the board store is compacted instead: each board's batches and \
            snapshots before its newest snapshot are deleted (the hub writes one every \
            4 MiB of batches), so history is kept from that snapshot on.
            """)

    @Option(help: "The journal folder (a hub's --data).") var data = JournalDefaults.directory
    @OptionGroup var stored: BoardStoreOptions
    @Option(help: "The board to compact (default: every board).") var board: String?
    @Option(parsing: .unconditional, help: "Keep history from the newest checkpoint at or before this many seconds into the recording (default: the newest checkpoint).")
    var before: Double?
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if let board { try validateBoard(board) }
        if let before {
            guard before.isFinite, before >= 0 else { throw ValidationError("--before must be a number of seconds, 0 or more") }
        }
    }

    func run() async throws {
        let logger = logging.logger("touchsync.compact")
        if let address = try stored.address() {
            guard before == nil else { throw CommandFailure("--before reads journal checkpoints: the store keeps history from its newest snapshot") }
            do {
                var boards = board.map { [$0] } ?? []
                if board == nil { boards = try await BoardStoreHistory.boards(address: address, logger: logger) }
                for name in boards {
                    let removed = try await BoardStoreHistory.compact(address: address, board: name, logger: logger)
                    emit("\(name): \(removed.batches) batch(es) and \(removed.snapshots) snapshot(s) removed")
                }
            } catch {
                throw CommandFailure("\(error)")
            }
            return
        }
        do {
            let boards = try board.map { [$0] } ?? BoardHistory.boards(in: data)
            for name in boards {
                let history = try BoardHistory.open(dataDirectory: data, board: name)
                let firstTime = before != nil ? try history.load().firstTime : 0
                let removed = try history.compact(before: before.map { firstTime + Int64($0 * 1e6) })
                for segment in removed { logger.info("segment removed", metadata: ["board": "\(name)", "segment": "\(segment)"]) }
                emit("\(name): \(removed.count) segment(s) removed, \(history.segments.count - removed.count) kept")
            }
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}
