import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What went wrong with a journal.
public enum JournalError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A system call failed: which, on what, and errno.
    case system(call: String, path: String, errno: Int32)
    /// A request that cannot be met: no such board, not a journal folder, a bad argument.
    case invalid(String)
    /// A journal that cannot be used at all (no readable checkpoint).
    case unreadable(String)
    /// Another process holds the data folder (its lock file names its pid).
    case locked(folder: String, holder: String)

    public var description: String {
        switch self {
        case .system(let call, let path, let code):
            "\(call)(\(path)) failed: \(String(cString: strerror(code))) (errno \(code))"
        case .invalid(let why): why
        case .unreadable(let why): "journal unreadable: \(why)"
        case .locked(let folder, let holder):
            "\(folder) is in use by another hub (\(holder)): two hubs on one data folder would overwrite each other's boards"
        }
    }
}

/// Every system call of the journal goes through here: -1 becomes a typed
/// error carrying errno and the path, and EINTR is retried.
@inline(__always)
func systemCall<Result: BinaryInteger>(_ call: String, path: String, _ body: () -> Result) throws(JournalError) -> Result {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = errno
        if code == EINTR { continue }
        throw .system(call: call, path: path, errno: code)
    }
}

/// An open file of the journal, owned by one thread.
final class JournalFile {
    let path: String
    private var descriptor: Int32
    /// Bytes in the file (the journal only appends, or truncates).
    private(set) var size: Int
    /// The filesystem the file is on (`st_dev`): one `syncfs` covers the files of one.
    let device: UInt64

    private init(path: String, descriptor: Int32, size: Int, device: UInt64) {
        self.path = path
        self.descriptor = descriptor
        self.size = size
        self.device = device
    }

    deinit { close() }

    /// Opens for appending, creating the file when `create` (and failing if it exists then).
    static func openForAppending(_ path: String, create: Bool) throws(JournalError) -> JournalFile {
        try opening(path, flags: O_WRONLY | O_APPEND | (create ? O_CREAT | O_EXCL : 0))
    }

    /// The data folder itself, for `syncFileSystem`. One descriptor per
    /// journal, kept for its life: since Linux 5.8 `syncfs` reports a
    /// writeback error of any file of the filesystem that happened since the
    /// last `syncfs` *on the same descriptor*, so no error slips between two.
    static func openFolder(_ path: String) throws(JournalError) -> JournalFile {
        try opening(path, flags: O_RDONLY | O_DIRECTORY)
    }

    /// Opens `path` (close-on-exec) and reads its size and filesystem.
    private static func opening(_ path: String, flags: Int32) throws(JournalError) -> JournalFile {
        let descriptor = try systemCall("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, 0o644) }
        var status = stat()
        do throws(JournalError) {
            _ = try systemCall("fstat", path: path) { fstat(descriptor, &status) }
        } catch {
            _ = Glibc.close(descriptor)
            throw error
        }
        return JournalFile(path: path, descriptor: descriptor, size: Int(status.st_size), device: UInt64(status.st_dev))
    }

    func write(_ bytes: [UInt8]) throws(JournalError) {
        var offset = 0
        while offset < bytes.count {
            let (descriptor, start) = (descriptor, offset)
            let written = bytes.withUnsafeBytes { buffer in
                Glibc.write(descriptor, buffer.baseAddress! + start, buffer.count - start)
            }
            if written == -1 {
                if errno == EINTR { continue }
                throw .system(call: "write", path: path, errno: errno)
            }
            offset += written
        }
        size += bytes.count
    }

    /// Makes what was written durable (data, and the size that reaches it).
    func sync() throws(JournalError) {
        _ = try systemCall("fdatasync", path: path) { fdatasync(descriptor) }
    }

    /// `syncfs(2)` of the file's filesystem (on a folder from `openFolder`):
    /// every file's data and size there, with one flush of the disk's cache.
    func syncFileSystem() throws(JournalError) {
        _ = try systemCall("syncfs", path: path) { linuxSyncfs(descriptor) }
    }

    func close() {
        if descriptor >= 0 {
            _ = Glibc.close(descriptor)
            descriptor = -1
        }
    }

    static func readAll(_ path: String) throws(JournalError) -> [UInt8] {
        let descriptor = try systemCall("open", path: path) { open(path, O_RDONLY | O_CLOEXEC) }
        defer { _ = Glibc.close(descriptor) }
        var status = stat()
        _ = try systemCall("fstat", path: path) { fstat(descriptor, &status) }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        var offset = 0
        while offset < bytes.count {
            let start = offset
            let read = bytes.withUnsafeMutableBytes { buffer in
                Glibc.read(descriptor, buffer.baseAddress! + start, buffer.count - start)
            }
            if read == -1 {
                if errno == EINTR { continue }
                throw .system(call: "read", path: path, errno: errno)
            }
            if read == 0 { break }  // shrank while reading
            offset += read
        }
        if offset < bytes.count { bytes.removeSubrange(offset...) }
        return bytes
    }

    static func truncate(_ path: String, to length: Int) throws(JournalError) {
        _ = try systemCall("truncate", path: path) { Glibc.truncate(path, off_t(length)) }
    }

    static func writeWhole(_ path: String, _ bytes: [UInt8]) throws(JournalError) {
        let file = try openForAppending(path, create: true)
        try file.write(bytes)
        try file.sync()
    }

    /// Makes a folder's entries (files created, renamed, removed) durable.
    static func syncDirectory(_ path: String) throws(JournalError) {
        let descriptor = try systemCall("open", path: path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { _ = Glibc.close(descriptor) }
        _ = try systemCall("fsync", path: path) { fsync(descriptor) }
    }

    static func makeDirectory(_ path: String) throws(JournalError) {
        var component = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            component += "/" + part
            if mkdir(component, 0o755) == -1 && errno != EEXIST {
                throw .system(call: "mkdir", path: component, errno: errno)
            }
        }
    }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    static func remove(_ path: String) throws(JournalError) {
        _ = try systemCall("unlink", path: path) { unlink(path) }
    }

    static func rename(_ from: String, to: String) throws(JournalError) {
        _ = try systemCall("rename", path: from) { Glibc.rename(from, to) }
    }

    /// Names in a folder (no "." or "..").
    static func list(_ path: String) throws(JournalError) -> [String] {
        guard let directory = opendir(path) else { throw .system(call: "opendir", path: path, errno: errno) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}

/// An exclusive `flock` on a data folder's lock file, held as long as this
/// value lives: a second hub on the same folder is refused at start, and the
/// lock goes with the process however it ends (even SIGKILL).
public final class FolderLock: Sendable {
    static let fileName = "touchsync.lock"
    /// The lock file's descriptor (-1 once released). A hub with several board
    /// threads shares one lock between their journals, and releases it from
    /// another thread than the one that took it: hence the mutex.
    private let descriptor: Mutex<Int32>
    private let path: String
    /// The lock files this process holds now: a second journal on one of them is refused at once.
    private static let held = Mutex<Set<String>>([])

    /// The lock of `folder`, which must exist; throws `.locked` naming the holder when another journal has it.
    public init(folder: String) throws(JournalError) {
        let path = folder + "/" + Self.fileName
        self.path = path
        let ours = "pid \(getpid())"
        guard !Self.held.withLock({ $0.contains(path) }) else { throw .locked(folder: folder, holder: ours) }
        // A failed init closes what it opened here (deinit does not run before every property is set).
        let fd = try systemCall("open", path: path) { open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644) }
        var attempts = 0
        while flock(fd, LOCK_EX | LOCK_NB) == -1 {
            let code = errno
            var holder = [UInt8](repeating: 0, count: 64)
            let count = holder.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress, $0.count, 0) }
            let text = String(decoding: holder.prefix(max(count, 0)).filter { $0 != 0x0A }, as: UTF8.self)
            // Held in this process's name though no journal of ours holds it: it was just released,
            // and a child that another thread is spawning still has a copy of the descriptor until
            // its exec closes it (a flock belongs to the open file, which the copy shares). Wait
            // that out, briefly and boundedly.
            if code == EWOULDBLOCK && text == ours && attempts < 200 {
                attempts += 1
                usleep(10_000)
                continue
            }
            _ = Glibc.close(fd)
            guard code == EWOULDBLOCK else { throw .system(call: "flock", path: path, errno: code) }
            throw .locked(folder: folder, holder: text.isEmpty ? "pid unknown" : text)
        }
        // Who holds it, for the message a second hub prints.
        let note = Array("pid \(getpid())\n".utf8)
        do {
            _ = try systemCall("ftruncate", path: path) { ftruncate(fd, 0) }
            _ = try systemCall("pwrite", path: path) { note.withUnsafeBytes { Glibc.pwrite(fd, $0.baseAddress, $0.count, 0) } }
        } catch {
            _ = Glibc.close(fd)
            throw error
        }
        descriptor = Mutex(fd)
        Self.held.withLock { _ = $0.insert(path) }
    }

    deinit { release() }

    public func release() {
        let fd = descriptor.withLock { fd in
            defer { fd = -1 }
            return fd
        }
        guard fd >= 0 else { return }
        _ = Glibc.close(fd)  // closing the descriptor releases the flock
        Self.held.withLock { _ = $0.remove(path) }
    }
}

extension JournalFile {
    /// Proves the folder takes writes now (read-only mounts, full disks and
    /// missing permissions show here, at start, not at the first frame).
    static func probeWritable(_ folder: String) throws(JournalError) {
        let path = folder + "/.touchsync-write-probe"
        let file = try openForAppending(path, create: !exists(path))
        defer {
            file.close()
            unlink(path)
        }
        try file.write(Array(repeating: 0, count: 4096))
        try file.sync()
    }
}

/// The running kernel's version, major and minor (`uname -r`: "6.1.0-18-amd64" is 6.1).
struct KernelRelease: Comparable, CustomStringConvertible {
    let major: Int
    let minor: Int

    /// Since 5.8 `syncfs` returns writeback errors (before, it returned 0 whatever happened).
    static let syncfsReportsErrors = KernelRelease(major: 5, minor: 8)

    /// Nil when the release does not read as a version.
    static var current: KernelRelease? {
        var names = utsname()
        guard uname(&names) == 0 else { return nil }
        let release = withUnsafeBytes(of: &names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return KernelRelease(release)
    }

    init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    init?(_ release: String) {
        let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard numbers.count == 2, release.first?.isNumber == true else { return nil }
        (major, minor) = (numbers[0], numbers[1])
    }

    static func < (lhs: KernelRelease, rhs: KernelRelease) -> Bool { (lhs.major, lhs.minor) < (rhs.major, rhs.minor) }

    var description: String { "\(major).\(minor)" }
}

/// syncfs(2): Glibc declares it only under _GNU_SOURCE, which Swift's Glibc module leaves out.
@_silgen_name("syncfs")
private func linuxSyncfs(_ descriptor: Int32) -> Int32
