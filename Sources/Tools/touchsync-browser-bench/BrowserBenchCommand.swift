import ArgumentParser
import Foundation
import Logging

/// `touchsync-browser-bench`: the whiteboard end to end in headless
/// Chromium. A tool of its own (not a `touchsync` subcommand) so that the
/// shipped CLI does not carry the Chromium driver.
@main
struct BrowserBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "touchsync-browser-bench",
        abstract: "The browser whiteboard end to end (hub, gateway, headless Chromium): touch-to-pixels latency, frame times, bytes per sample.",
        discussion: """
            Runs on an empty board and on one of --seeded-strokes strokes, each directly and with both pages behind a 100 ms \
            round trip; the empty board also with only the drawing page behind it ("100 ms A"). \
            Needs Debian's chromium (make test installs it). Build with -c release for meaningful figures; they go to docs/performance.md.
            """)

    @Option(parsing: .unconditional, help: "Accepted strokes on the seeded board.") var seededStrokes = 10_000
    @Option(parsing: .unconditional, help: "Strokes page A draws while page B watches.") var draws = 300
    @Option(parsing: .unconditional, help: "Seeded strokes page B selects and drags.") var selected = 1_000
    @Flag(help: "Log the hub's and the gateway's notices.") var verbose = false

    func validate() throws {
        guard seededStrokes >= 0 else { throw ValidationError("--seeded-strokes must be 0 or more") }
        guard draws >= 1 else { throw ValidationError("--draws must be at least 1") }
        guard selected >= 1 else { throw ValidationError("--selected must be at least 1") }
    }

    var logger: Logger {
        var logger = Logger(label: "touchsync.bench")
        logger.logLevel = verbose ? .notice : .warning
        return logger
    }

    func run() async throws {
        #if DEBUG
        emit("warning: this is a debug build; run it from a release build for real figures")
        #endif
        emit("board strokes  round trip    late join  snapshot  drawn  own ink p50/p99/max      remote ink p50/p99/max    render p50/p99/max     frame interval p50/p99  bytes/sample  cursor p50/p99/max (n)")
        let benchmark = BrowserBenchmark(seededStrokes: seededStrokes, drawnStrokes: draws, selectedStrokes: selected)
        var motions: [(String, BrowserBenchmark.Motion)] = []
        try await benchmark.run(logger: logger) { row in
            let roundTrip = "\(row.roundTripMilliseconds) ms" + (row.linked == .drawer ? " A" : "")
            emit(
                String(format: "%13d  ", row.seededStrokes) + String(repeating: " ", count: max(0, 12 - roundTrip.count)) + roundTrip
                + String(
                    format: "  %6.0f ms  %5.1f MB  %5d  %5.1f / %5.1f / %5.1f ms  %6.1f / %5.1f / %5.1f ms  %5.2f / %5.2f / %5.1f ms  %6.1f / %5.1f ms  %8.1f  %5.1f / %5.1f / %5.1f ms (%d)",
                    row.lateJoinMilliseconds, row.snapshotBytes / 1e6, row.strokesDrawn,
                    percentile(row.ownInk, 50), percentile(row.ownInk, 99), row.ownInk.max() ?? .nan,
                    percentile(row.latency, 50), percentile(row.latency, 99), row.latency.max() ?? .nan,
                    percentile(row.renderMilliseconds, 50), percentile(row.renderMilliseconds, 99), row.renderMilliseconds.max() ?? .nan,
                    percentile(row.frameIntervals, 50), percentile(row.frameIntervals, 99), row.bytesPerSample,
                    percentile(row.cursor, 50), percentile(row.cursor, 99), row.cursor.max() ?? .nan, row.cursor.count))
            if let pan = row.pan { motions.append(("panning a \(row.seededStrokes)-stroke board (wheel, 120 events)", pan)) }
            if let zoom = row.zoom { motions.append(("zooming a \(row.seededStrokes)-stroke board (Ctrl-wheel, 60 events)", zoom)) }
            if let move = row.move {
                motions.append(("dragging \(min(selected, row.seededStrokes)) selected strokes on the \(row.seededStrokes)-stroke board (120 moves)", move))
            }
        }
        emit("")
        emit("own ink: the drawing page's pointer event to the end of the frame that drew it; remote ink: its first sample to the viewer's frame")
        emit("round trip: each page behind a link of that round trip to the gateway; A: only the drawing page")
        emit("cursor: the drawing page's hover dispatched (DevTools) to the viewer's presence message for it (drawn in the next frame)")
        for (label, motion) in motions {
            emit(
                String(
                    format: "%@: render p50/p99/max %.2f / %.2f / %.1f ms, frame interval p50/p99 %.1f / %.1f ms (%d frames)",
                    label, percentile(motion.renderMilliseconds, 50), percentile(motion.renderMilliseconds, 99),
                    motion.renderMilliseconds.max() ?? .nan, percentile(motion.frameIntervals, 50), percentile(motion.frameIntervals, 99),
                    motion.renderMilliseconds.count))
        }
    }
}

/// A line of the report, at once (the runs are long).
func emit(_ line: String) {
    print(line)
    fflush(nil)  // every stream: naming `stdout` is not allowed in Swift 6 (C global state)
}

/// Why the benchmark could not run.
struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
