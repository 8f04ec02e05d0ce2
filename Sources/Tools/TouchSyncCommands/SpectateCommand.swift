import ArgumentParser
import Foundation
import Logging
import TouchSyncLoad
import TouchSyncClient
import TouchSyncCore
import TouchSyncJournal
import TouchSyncWire
import UnixSignals

struct SpectateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spectate",
        abstract: "Follow a board live: strokes in progress and accepted, touches, sequence, digest.",
        discussion: """
            Prints a running view (at most four lines a second), or with --json one JSON \
            object per event. With --from-beginning it first replays the board's recorded \
            history (at --speed; from the hub's history endpoint, or from a journal folder \
            given with --data), then follows it live: replay then follow.
            """)

    @Option(help: "The board to follow.") var board: String
    @OptionGroup var hub: HubAddressOptions
    @Option(help: "The hub's history endpoint (for --from-beginning).") var history = "tcp://127.0.0.1:5573"
    @Flag(help: "One JSON object per line per event (synced, batch, resync, heartbeat, silent), for scripts.")
    var json = false
    @Option(parsing: .unconditional, help: "Stop after this many seconds (default: run until Ctrl-C).") var duration: Double?
    @Flag(help: "Replay the board's history from the journal (--data) first, then follow it live.")
    var fromBeginning = false
    @Option(help: "With --from-beginning: read the history from this journal folder instead of the hub.")
    var data: String?
    @Option(help: "Time scale of the replayed history (2: twice as fast), or max.") var speed = "max"
    @Option(
        help: ArgumentHelp(
            "The diff stream's wire format: v1, or v2 (packed appends, fewer bytes per sample).",
            discussion: "A hub or relay that does not publish v2 is followed in v1 after the silence time-out."))
    var wire: WireOption = .v1
    @Flag(help: "With --wire v2: follow the board's stream without predicted tails (fewer bytes; live strokes end at their last real sample).")
    var noPredictions = false
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateBoard(board)
        try validateEndpoint(history, option: "--history")
        guard speed == "max" || (Double(speed).map { $0 > 0 } ?? false) else {
            throw ValidationError("--speed must be a number above 0 or max")
        }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        try validateNoPredictions(noPredictions, wire: wire)
    }

    func run() async throws {
        let hub = try self.hub.resolved(board: board)
        var configuration = SubscriberConfiguration(board: board, publishEndpoint: hub.publish, snapshotEndpoint: hub.snapshot)
        configuration.curve = try hub.keys.curve()
        configuration.snapshotTimeout = .seconds(2)
        configuration.wireFormat = wire.format
        configuration.predictions = !noPredictions
        let subscriber = try BoardSubscriber(configuration: configuration, logger: logging.logger("touchsync.spectate"))
        subscriber.start()
        if !json { emit("spectating board \"\(board)\" via \(hub.publish) (Ctrl-C stops)") }
        let view = SpectatorView(board: board, json: json)
        if fromBeginning {
            // Ctrl-C during the replay ends it there (exit 130); once live, Ctrl-C is how spectating ends (exit 0).
            let command = self
            if try await untilInterrupted({ try await command.replayHistory(view) }) {
                await subscriber.stop()
                if !json { emit("interrupted during the replay") }
                throw ExitCode.interrupted
            }
        }
        let failure: String? = await withTaskGroup(of: String?.self) { tasks in
            tasks.addTask {
                for await event in subscriber.events { await view.show(event, subscriber: subscriber) }
                return subscriber.status.failure  // the stream ended: stopped below, or failed
            }
            // Trapped before the tasks run: a Ctrl-C before a task installed the trap would end the process by the signal.
            let interrupts = duration == nil ? await UnixSignalsSequence(trapping: .sigint, .sigterm) : nil
            tasks.addTask {
                if let duration {
                    try? await Task.sleep(for: Duration(secondsValue: duration))
                } else if let interrupts {
                    for await _ in interrupts { break }
                }
                await view.finish(subscriber: subscriber)
                await subscriber.stop()  // ends the event stream, so the printer ends too
                return nil
            }
            if let failure = await tasks.next() ?? nil {
                tasks.cancelAll()  // no waiting for --duration or a signal: the subscriber is gone
                return failure
            }
            await tasks.waitForAll()
            return nil
        }
        if let failure { throw CommandFailure("the subscriber stopped: \(failure)") }
        if subscriber.status.heartbeats == 0 && subscriber.status.batchesApplied == 0 && !subscriber.status.live {
            throw CommandFailure("never synced with the hub at \(hub.snapshot): is it running?")
        }
    }
}

extension SpectateCommand {
    /// Shows the board's recorded history batch by batch, with its timing
    /// scaled by `--speed`; the live subscriber then carries on from wherever
    /// the hub is (its snapshot includes everything replayed).
    func replayHistory(_ view: SpectatorView) async throws {
        let (start, startTime, batches): (BoardState, Int64, [RecordedBatch])
        if let data {
            do {
                let history = try BoardHistory.open(dataDirectory: data, board: board).load()
                (start, startTime, batches) = (history.start, history.startTime, history.batches)
            } catch {
                throw CommandFailure("\(error)")
            }
        } else {
            do {
                let history = try await HistoryClient.fetch(
                    board: board, endpoint: history, curve: try hub.keys.curve(), logger: logging.logger("touchsync.spectate"))
                (start, startTime, batches) = (history.start, history.batches.first?.hubTime ?? 0, history.batches)
            } catch {
                throw CommandFailure("\(error)")
            }
        }
        if !json {
            emit("replaying \(batches.count) recorded batches of \"\(board)\" from \(data ?? history), then following live")
        }
        var state = start
        let scale = Double(speed)
        let clock = ContinuousClock()
        let began = clock.now
        for batch in batches {
            if let scale {
                let due = began + .microseconds(Int64(Double(batch.hubTime - startTime) / scale))
                if due > clock.now { try await Task.sleep(until: due) }
            }
            let applied: DiffBatch
            do { applied = try state.apply(batch) } catch { throw CommandFailure("the history does not replay: \(error)") }
            await view.showReplayed(applied, state: state)
        }
        await view.finishReplay(state: state)
    }
}

/// Renders subscriber events: a throttled one-line view, or JSON lines.
actor SpectatorView {
    let board: String
    let json: Bool
    private var lastLine = ContinuousClock.now - .seconds(1)
    private var pending = false

    init(board: String, json: Bool) {
        self.board = board
        self.json = json
    }

    func show(_ event: SubscriberEvent, subscriber: BoardSubscriber) async {
        if json {
            printJSON(event)
            return
        }
        switch event {
        case .synced(let sequence, let digest, let chunks):
            emit("synced at sequence \(sequence) from a snapshot in \(chunks) chunk(s), digest \(digest)")
        case .resyncing(let reason):
            emit("resyncing: \(reason)")
        case .silent:
            emit("the hub is silent (no batch or heartbeat); waiting")
        case .failed:
            return  // the command reports it as its error
        case .heartbeat(_, let agrees):
            // Nothing changed: a status held back for the rate is printed below, but an idle
            // board's heartbeat prints none (each line walks the whole board for its digest).
            if !agrees { emit("digest disagrees with the hub's: resyncing") }
        case .applied:
            pending = true
        }
        if pending && ContinuousClock.now - lastLine >= .milliseconds(250) {
            await printStatus(subscriber)
        }
    }

    /// A batch from the journal (replay then follow).
    func showReplayed(_ batch: DiffBatch, state: BoardState) {
        if json {
            var counts: [String: Int] = [:]
            for diff in batch.diffs { counts[diff.kindName, default: 0] += 1 }
            let object: [String: Any] = [
                "board": board, "event": "replayed", "sequence": batch.sequence, "hub_time_us": batch.hubTime, "diffs": counts,
            ]
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
                emit(String(decoding: data, as: UTF8.self))
            }
        } else if ContinuousClock.now - lastLine >= .milliseconds(250) {
            lastLine = ContinuousClock.now
            emit(statusLine(prefix: "replay ", state: state, resyncs: nil))
        }
    }

    func finishReplay(state: BoardState) {
        if json {
            let object: [String: Any] = [
                "board": board, "event": "replay_done", "sequence": state.sequence, "digest": state.digest.description,
            ]
            if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
                emit(String(decoding: data, as: UTF8.self))
            }
        } else {
            emit(statusLine(prefix: "replay ", state: state, resyncs: nil))
            emit("history replayed to sequence \(state.sequence); following live")
        }
    }

    private func statusLine(prefix: String, state: BoardState, resyncs: Int?) -> String {
        "\(prefix)seq \(state.sequence)  strokes: \(state.liveTouchCount) in progress, \(state.acceptedStrokes.count) accepted"
            + "  touches \(state.liveTouchCount)  digest \(state.digest)" + (resyncs.map { "  resyncs \($0)" } ?? "")
    }

    func finish(subscriber: BoardSubscriber) async {
        if !json { await printStatus(subscriber) }
    }

    private func printStatus(_ subscriber: BoardSubscriber) async {
        pending = false
        lastLine = ContinuousClock.now
        let status = subscriber.status
        let digest = await subscriber.replica()?.digest.description ?? "-"
        emit(
            "seq \(status.sequence)  strokes: \(status.activeStrokes) in progress, \(status.acceptedStrokes) accepted"
                + "  touches \(status.liveTouches)  digest \(digest)  resyncs \(status.resyncs)")
    }

    private func printJSON(_ event: SubscriberEvent) {
        var object: [String: Any] = ["board": board]
        switch event {
        case .synced(let sequence, let digest, let chunks):
            object.merge(["event": "synced", "sequence": sequence, "digest": digest.description, "chunks": chunks]) { $1 }
        case .applied(let batch):
            var counts: [String: Int] = [:]
            for diff in batch.diffs { counts[diff.kindName, default: 0] += 1 }
            object.merge(["event": "batch", "sequence": batch.sequence, "hub_time_us": batch.hubTime, "diffs": counts]) { $1 }
        case .resyncing(let reason):
            object.merge(["event": "resync", "reason": reason]) { $1 }
        case .heartbeat(let sequence, let agrees):
            object.merge(["event": "heartbeat", "sequence": sequence, "agrees": agrees]) { $1 }
        case .silent:
            object["event"] = "silent"
        case .failed(let reason):
            object.merge(["event": "failed", "reason": reason]) { $1 }
        }
        if let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) {
            emit(String(decoding: data, as: UTF8.self))
        }
    }
}

extension StrokeDiff {
    var kindName: String {
        switch self {
        case .began: "began"
        case .appended: "appended"
        case .predicted: "predicted"
        case .amended: "amended"
        case .accepted: "accepted"
        case .cancelled: "cancelled"
        case .cleared: "cleared"
        case .removed: "removed"
        case .restored: "restored"
        }
    }
}

/// `--wire`: a diff stream's wire format, as the command line spells it.
enum WireOption: String, ExpressibleByArgument, CaseIterable {
    case v1, v2

    var format: WireFormat { self == .v1 ? .v1 : .v2 }
}

/// `--no-predictions` is a v2 stream: v1 has one stream per board, with predictions.
func validateNoPredictions(_ noPredictions: Bool, wire: WireOption) throws {
    if noPredictions && wire != .v2 {
        throw ValidationError("--no-predictions needs --wire v2 (a board's v1 stream always carries predicted tails)")
    }
}
