import Foundation

/// Writes a rendered board to disk: the SVG, and a PNG beside it when
/// `rsvg-convert` (Debian's librsvg2-bin) is installed.
enum BoardImage {
    /// Writes `svg` to `path` (a .svg or .png name). Returns the absolute
    /// paths written. A .png path without rsvg-convert is an error that says
    /// what to install; with `png`, a PNG is added when possible.
    static func write(_ svg: String, to path: String, png: Bool = false) throws -> [String] {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let wantsPNG = url.pathExtension.lowercased() == "png"
        let svgURL = wantsPNG ? url.deletingPathExtension().appendingPathExtension("svg") : url
        try svg.write(to: svgURL, atomically: true, encoding: .utf8)
        var written = [svgURL.path]
        if wantsPNG || png {
            let pngURL = svgURL.deletingPathExtension().appendingPathExtension("png")
            if let converter = rsvgConvert {
                try convert(svgURL, to: pngURL, with: converter)
                written.append(pngURL.path)
            } else if wantsPNG {
                throw CommandFailure(
                    "writing PNG needs rsvg-convert (apt-get install librsvg2-bin); the SVG is at \(svgURL.path)")
            }
        }
        return written
    }

    /// `rsvg-convert` on the PATH, if any.
    static var rsvgConvert: URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("rsvg-convert")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }

    static func convert(_ svg: URL, to png: URL, with converter: URL) throws {
        let process = Process()
        process.executableURL = converter
        process.arguments = ["--format", "png", "--output", png.path, svg.path]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw CommandFailure("rsvg-convert failed on \(svg.path): \(text)")
        }
    }
}
