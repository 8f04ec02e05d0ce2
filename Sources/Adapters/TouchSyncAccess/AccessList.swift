import Foundation
@_exported import TouchSyncAccessModel

// The access list's file (the model is TouchSyncAccessModel's, a core: it reads no file).
extension AccessList {
    /// Reads the access list at `path`.
    public static func load(from path: String) throws(AccessListError) -> AccessList {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadable(path: path, reason: (error as NSError).localizedFailureReason ?? error.localizedDescription)
        }
        do {
            return try AccessList(json: data)
        } catch {
            throw .invalid("\(path): " + { if case .invalid(let why) = error { why } else { "\(error)" } }())
        }
    }

    /// Writes the list to `path` atomically (a reader never sees half a file).
    public func save(to path: String) throws(AccessListError) {
        do {
            try json.write(to: URL(fileURLWithPath: path), options: .atomic)
            // It may hold invitation tokens: only its owner reads it.
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        } catch {
            throw .unreadable(path: path, reason: "cannot write: \(error.localizedDescription)")
        }
    }
}
