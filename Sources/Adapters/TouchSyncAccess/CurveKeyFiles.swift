import Foundation
import TouchSyncAccessModel

#if canImport(Glibc)
import Glibc
#endif

public enum KeyFileError: Error, Equatable, CustomStringConvertible {
    case missing(String)
    case exists(String)
    case unreadable(path: String, reason: String)
    case invalid(path: String, reason: String)

    public var description: String {
        switch self {
        case .missing(let path): "no key file at \(path)"
        case .exists(let path): "\(path) already exists (pass --force to replace it)"
        case .unreadable(let path, let reason): "cannot use \(path): \(reason)"
        case .invalid(let path, let reason): "\(path) is not a TouchSync key file: \(reason)"
        }
    }
}

/// Key files: `NAME.key` holds the pair (the secret one included; mode
/// 0600), `NAME.pub` the public key alone, one line of Z85 (safe to share).
///
/// ```
/// # TouchSync CURVE key pair of "alice". Secret: keep this file private.
/// public-key = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
/// secret-key = "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs"
/// ```
public enum CurveKeyFiles {
    public static func secretPath(name: String, directory: String) -> String { directory + "/" + name + ".key" }
    public static func publicPath(name: String, directory: String) -> String { directory + "/" + name + ".pub" }

    /// Writes `NAME.key` (0600, refused when it exists unless `force`) and `NAME.pub`.
    public static func write(_ pair: CurveKeyPair, name: String, directory: String, force: Bool) throws(KeyFileError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .unreadable(path: directory, reason: "cannot create the folder: \(error.localizedDescription)")
        }
        let secret = secretPath(name: name, directory: directory)
        let text = """
            # TouchSync CURVE key pair of "\(name)". Secret: keep this file private.
            public-key = "\(pair.publicKey)"
            secret-key = "\(pair.secretKey)"

            """
        try writeFile(secret, Array(text.utf8), mode: 0o600, exclusive: !force)
        try writeFile(publicPath(name: name, directory: directory), Array((pair.publicKey + "\n").utf8), mode: 0o644, exclusive: false)
    }

    /// Reads a `.key` file: both keys.
    public static func readPair(_ path: String) throws(KeyFileError) -> CurveKeyPair {
        let text = try read(path)
        var values: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#") else { continue }
            let parts = trimmed.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 else { continue }
            values[parts[0]] = parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        guard let publicKey = values["public-key"], AccessList.isZ85Key(publicKey) else {
            throw .invalid(path: path, reason: "no public-key line of 40 Z85 characters (a .pub file has no secret key: pass the .key file)")
        }
        guard let secretKey = values["secret-key"], AccessList.isZ85Key(secretKey) else {
            throw .invalid(path: path, reason: "no secret-key line of 40 Z85 characters")
        }
        return CurveKeyPair(publicKey: publicKey, secretKey: secretKey)
    }

    /// A public key: a `.pub` file, a `.key` file (its public half), or the 40 Z85 characters themselves.
    public static func readPublicKey(_ pathOrKey: String) throws(KeyFileError) -> String {
        if !FileManager.default.fileExists(atPath: pathOrKey) && AccessList.isZ85Key(pathOrKey) { return pathOrKey }
        let text = try read(pathOrKey)
        if text.contains("public-key") { return try readPair(pathOrKey).publicKey }
        let key = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard AccessList.isZ85Key(key) else { throw .invalid(path: pathOrKey, reason: "expected one line of 40 Z85 characters") }
        return key
    }

    private static func read(_ path: String) throws(KeyFileError) -> String {
        guard FileManager.default.fileExists(atPath: path) else { throw .missing(path) }
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw .unreadable(path: path, reason: (error as NSError).localizedFailureReason ?? error.localizedDescription)
        }
    }

    private static func writeFile(_ path: String, _ bytes: [UInt8], mode: mode_t, exclusive: Bool) throws(KeyFileError) {
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC)
        let descriptor = open(path, flags, mode)
        guard descriptor >= 0 else {
            if errno == EEXIST { throw .exists(path) }
            throw .unreadable(path: path, reason: String(cString: strerror(errno)))
        }
        defer { close(descriptor) }
        // An existing file keeps its mode through O_TRUNC: set it.
        _ = fchmod(descriptor, mode)
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count, fsync(descriptor) == 0 else {
            throw .unreadable(path: path, reason: "write failed: \(String(cString: strerror(errno)))")
        }
    }
}
