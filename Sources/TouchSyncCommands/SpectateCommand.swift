import ArgumentParser
import Foundation
import Logging
import TouchSyncLoad
import TouchSyncClient
import TouchSyncCore
import UnixSignals

struct SpectateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spectate",
        abstract: "Follow a board live: strokes in progress and accepted, touches, sequence, digest.",
        discussion: "Prints a running view (at most four lines a second), or with --json one JSON object per event.")

    @Option(help: "The board to follow.") var board: String
    @OptionGroup var hub: HubAddressOptions
    @Flag(help: "One JSON object per line per event (synced, batch, resync, heartbeat, silent), for scripts.")
    var json = false
    @Option(help: "Stop after this many seconds (default: run until Ctrl-C).") var duration: Double?
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateBoard(board)
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
    }

    func run() async throws {
        var configuration = SubscriberConfiguration(board: board, publishEndpoint: hub.publish, snapshotEndpoint: hub.snapshot)
        configuration.snapshotTimeout = .seconds(2)
        let subscriber = try BoardSubscriber(configuration: configuration, logger: logging.logger("touchsync.spectate"))
        subscriber.start()
        if !json { emit("spectating board \"\(board)\" via \(hub.publish) (Ctrl-C stops)") }
        let view = SpectatorView(board: board, json: json)
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                for await event in subscriber.events { await view.show(event, subscriber: subscriber) }
            }
            tasks.addTask {
                if let duration {
                    try? await Task.sleep(for: Duration(secondsValue: duration))
                } else {
                    for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) { break }
                }
                await view.finish(subscriber: subscriber)
                await subscriber.stop()  // ends the event stream, so the printer ends too
            }
            await tasks.waitForAll()
        }
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
        case .heartbeat(_, let agrees):
            if !agrees { emit("digest disagrees with the hub's: resyncing") }
            pending = true
        case .applied:
            pending = true
        }
        if pending && ContinuousClock.now - lastLine >= .milliseconds(250) {
            await printStatus(subscriber)
        }
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
        }
    }
}
