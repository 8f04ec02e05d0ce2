import ArgumentParser
import Foundation
import Logging
import TouchSyncClient
import TouchSyncCore
import TouchSyncJournal
import TouchSyncLoad
import TouchSyncRender

struct RenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "render",
        abstract: "Draw a board to SVG or PNG: live from a hub, or from a journal at any moment.",
        discussion: """
            Accepted strokes are drawn solid, strokes in progress at half opacity, and a \
            light gray spot marks each live touch, with each stroke's colour and width. \
            Without --data the board is taken live from a hub (a snapshot). With --data it \
            is read from the journal (with --store from the board store), at --at seconds into the recording (default: its end). \
            --frames DIR --fps N renders a time-lapse of a recording as numbered frames. \
            A .png output needs rsvg-convert (apt-get install librsvg2-bin); it is converted \
            through a temporary SVG, which is not kept. Without --output the image goes to \
            the board's name with "/" and control characters replaced by "_", plus .svg, \
            in the current folder. Folders are never created, except the --frames folder.
            """)

    @Option(help: "The board to draw.") var board: String
    @OptionGroup var hub: SubscriberAddressOptions
    @Option(help: "Read the board from this journal folder instead of a live hub.") var data: String?
    @OptionGroup var stored: BoardStoreOptions
    @Option(parsing: .unconditional, help: "Seconds into the recording (with --data; default: the end).") var at: Double?
    @Option(name: .shortAndLong, help: "The image to write: a .svg or .png file (default: BOARD.svg).") var output: String?
    @Option(help: "Render a time-lapse into this folder as frame-000001.svg, … (with --data).") var frames: String?
    @Option(parsing: .unconditional, help: "Frames per second of recording time in a time-lapse.") var fps = 10.0
    @Flag(help: "With --frames, also write each frame as PNG (needs rsvg-convert).") var png = false
    @Option(help: "Canvas size in points, e.g. 1024x768 (default: fit the drawing).") var size: String?
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateBoard(board)
        if at != nil || frames != nil, data == nil && stored.store == nil {
            throw ValidationError("--at and --frames read a recording: give --data or --store")
        }
        if data != nil && stored.store != nil { throw ValidationError("give either --data or --store") }
        if let at, !(at >= 0) || !at.isFinite { throw ValidationError("--at must be a number of seconds, 0 or more") }
        guard fps > 0 && fps <= 240 else { throw ValidationError("--fps must be above 0 and at most 240") }
        if frames != nil && output != nil { throw ValidationError("give either --output or --frames") }
        if let output, !(output.hasSuffix(".svg") || output.hasSuffix(".png")) {
            throw ValidationError("--output must end in .svg or .png")
        }
        if let size, Self.parseSize(size) == nil { throw ValidationError("--size must look like 1024x768") }
        if png && frames == nil { throw ValidationError("--png goes with --frames (for one image, name it .png)") }
    }

    static func parseSize(_ text: String) -> (Double, Double)? {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let width = Double(parts[0]), let height = Double(parts[1]), width > 0, height > 0 else { return nil }
        return (width, height)
    }

    func run() async throws {
        let hub = try self.hub.resolved(board: board)
        var renderer = BoardRenderer()
        if let size, let (width, height) = Self.parseSize(size) { renderer.canvas = (width, height) }
        if data != nil || stored.store != nil {
            let history = try await stored.history(board: board, data: data ?? "", logger: logging.logger("touchsync.render"))
            for damage in history.damage { emit("warning: \(damage); the recording ends there") }
            if let frames {
                try renderTimeLapse(history, into: frames, renderer: renderer)
                return
            }
            let time = at.map { history.firstTime + Int64($0 * 1e6) } ?? history.endTime
            let state = try history.state(at: time)
            renderer.caption = "\(board) at \(String(format: "%.2f", Double(time - history.firstTime) / 1e6)) s, batch \(state.sequence)"
            let written = try BoardImage.write(renderer.svg(of: state), to: output ?? BoardImage.defaultFileName(board: board))
            emit("board \"\(board)\" at batch \(state.sequence) (\(state.acceptedStrokes.count) accepted, \(state.liveTouchCount) in progress) written to " + written.joined(separator: " and "))
        } else {
            var configuration = SubscriberConfiguration(board: board, publishEndpoint: hub.publish, snapshotEndpoint: hub.snapshot)
            configuration.curve = try hub.keys.curve()
            configuration.snapshotTimeout = .seconds(2)
            let subscriber = try BoardSubscriber(configuration: configuration, logger: logging.logger("touchsync.render"))
            subscriber.start()
            let synced = await subscriber.waitUntil(sequence: 0, timeout: .seconds(5))
            let state = await subscriber.replica()
            await subscriber.stop()
            if let failure = subscriber.status.failure { throw CommandFailure("cannot subscribe to \"\(board)\": \(failure)") }
            guard synced, let state else {
                throw CommandFailure("no snapshot of \"\(board)\" from \(hub.snapshot) within 5 s: is the hub running? (or read a journal with --data)")
            }
            // A board exists once its first batch is out: sequence 0 is a board nobody has drawn on.
            guard state.sequence > 0 else {
                throw CommandFailure("no such board: nothing has been drawn on \"\(board)\" at \(hub.snapshot) (board names are exact; a journal's boards are listed by render --data DIR --board x)")
            }
            renderer.caption = "\(board) live at batch \(state.sequence)"
            let written = try BoardImage.write(renderer.svg(of: state), to: output ?? BoardImage.defaultFileName(board: board))
            emit("board \"\(board)\" at batch \(state.sequence) (\(state.acceptedStrokes.count) accepted, \(state.liveTouchCount) in progress) written to " + written.joined(separator: " and "))
        }
    }

    /// One frame per 1/fps of recording time, the board moved on batch by batch.
    private func renderTimeLapse(_ history: LoadedHistory, into folder: String, renderer: BoardRenderer) throws {
        var renderer = renderer
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let step = Int64(1e6 / fps)
        let start = history.startTime
        let count = Int((history.endTime - start) / step) + 1
        emit("time-lapse of \"\(board)\": \(count) frame(s) at \(fps) per second of recording, into \(folder)")
        var state = history.start
        var next = 0
        let clock = ContinuousClock()
        var lastReport = clock.now
        for frame in 0..<count {
            let time = start + Int64(frame) * step
            while next < history.batches.count, history.batches[next].hubTime <= time {
                do { try state.apply(history.batches[next]) } catch { throw CommandFailure("the journal does not replay: \(error)") }
                next += 1
            }
            renderer.caption = "\(board)  \(String(format: "%.2f", Double(time - history.firstTime) / 1e6)) s  batch \(state.sequence)"
            let name = String(format: "%@/frame-%06d.svg", folder, frame + 1)
            _ = try BoardImage.write(renderer.svg(of: state), to: name, png: png)
            if clock.now - lastReport >= .seconds(1) || frame == count - 1 {
                emit("  frame \(frame + 1) of \(count)")
                lastReport = clock.now
            }
        }
        if png && BoardImage.rsvgConvert == nil { emit("note: \(BoardImage.pngHint): SVG frames only") }
    }
}
