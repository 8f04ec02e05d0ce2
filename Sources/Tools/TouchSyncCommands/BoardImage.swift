import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a rendered board to disk as SVG or PNG (PNG through `rsvg-convert`,
/// Debian's librsvg2-bin). Files appear whole (written beside, then renamed),
/// folders are never created here, and failures say which path and why in
/// plain words.
enum BoardImage {
    /// Writes `svg` to `path`: a .svg file, or a .png file converted from it
    /// (the SVG then only passes through a temporary file). With `png`, a
    /// .svg path also gets a PNG beside it when rsvg-convert is installed
    /// (time-lapse frames and the demo keep both on purpose). Returns the
    /// absolute paths written.
    static func write(_ svg: String, to path: String, png: Bool = false) throws -> [String] {
        let url = URL(fileURLWithPath: path).standardizedFileURL
        let folder = url.deletingLastPathComponent().path
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw CommandFailure("cannot write \(url.path): the folder \(folder) does not exist")
        }
        if url.pathExtension.lowercased() == "png" {
            guard let converter = rsvgConvert else {
                throw CommandFailure("writing PNG needs rsvg-convert (apt-get install librsvg2-bin); or name the output .svg")
            }
            let temporarySVG = temporaryPath(beside: url, suffix: ".svg")
            defer { unlink(temporarySVG) }
            try writeWhole(Array(svg.utf8), to: temporarySVG, reportedAs: url.path)
            let temporaryPNG = temporaryPath(beside: url, suffix: ".png")
            defer { unlink(temporaryPNG) }
            try convert(URL(fileURLWithPath: temporarySVG), to: URL(fileURLWithPath: temporaryPNG), with: converter)
            try rename(temporaryPNG, to: url.path)
            return [url.path]
        }
        let temporary = temporaryPath(beside: url, suffix: ".svg")
        defer { unlink(temporary) }
        try writeWhole(Array(svg.utf8), to: temporary, reportedAs: url.path)
        try rename(temporary, to: url.path)
        var written = [url.path]
        if png, let converter = rsvgConvert {
            let pngURL = url.deletingPathExtension().appendingPathExtension("png")
            let temporaryPNG = temporaryPath(beside: pngURL, suffix: ".png")
            defer { unlink(temporaryPNG) }
            try convert(url, to: URL(fileURLWithPath: temporaryPNG), with: converter)
            try rename(temporaryPNG, to: pngURL.path)
            written.append(pngURL.path)
        }
        return written
    }

    /// The file a board is drawn to when no --output is given: its name with
    /// `/` and control characters replaced by `_` (and a leading `.` too, so
    /// the file is not hidden), plus `.svg`, in the current folder.
    static func defaultFileName(board: String) -> String {
        var name = String(board.unicodeScalars.map { $0 == "/" || $0.value < 0x20 || $0.value == 0x7F ? "_" : Character($0) })
        if name.hasPrefix(".") { name = "_" + name.dropFirst() }
        return name + ".svg"
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

    /// What to tell a user whose PNG was skipped.
    static let pngHint = "no PNG written: rsvg-convert is not installed (apt-get install librsvg2-bin)"

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

    private static func temporaryPath(beside url: URL, suffix: String) -> String {
        url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp\(suffix)").path
    }

    private static func writeWhole(_ bytes: [UInt8], to path: String, reportedAs target: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw failure(target) }
        defer { close(descriptor) }
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(target)
            }
            offset += count
        }
    }

    private static func rename(_ from: String, to: String) throws {
        guard systemRename(from, to) == 0 else { throw failure(to) }
    }

    private static func failure(_ path: String) -> CommandFailure {
        CommandFailure("cannot write \(path): \(String(cString: strerror(errno)))")
    }
}

// The C calls, out of reach of `BoardImage.write` and `rename`'s names.
private func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int { write(descriptor, buffer, count) }
private func systemRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }
