import Foundation
import TouchSyncAccess
import TouchSyncHubCore
import ZeroMQ

/// CURVE keys for a load run (`touchsync load --access-dir DIR`): the hub's
/// pair, one pair per simulated user (named as the user, so the
/// authenticated namespace is the one the run checks), a watcher for the
/// subscribers, and an access list granting them, all kept in DIR (existing
/// keys are reused, so an external hub started on DIR's files matches).
public struct LoadKeys: Sendable {
    public var hub: CurveKeyPair
    public var users: [String: CurveKeyPair]
    public var watcher: CurveKeyPair
    public var accessListPath: String

    public static let watcherName = "load-watcher"

    /// Makes (or reuses) the keys in `directory` for `configuration`'s users
    /// and adds them to `directory/access.json` (other users in it are kept).
    public static func prepare(in directory: String, for configuration: LoadConfiguration) throws -> LoadKeys {
        func pair(_ name: String) throws -> CurveKeyPair {
            let path = CurveKeyFiles.secretPath(name: name, directory: directory)
            if FileManager.default.fileExists(atPath: path) { return try CurveKeyFiles.readPair(path) }
            let generated = try ZMQCurve.generateKeyPair()
            let pair = CurveKeyPair(publicKey: generated.publicKey, secretKey: generated.secretKey)
            try CurveKeyFiles.write(pair, name: name, directory: directory, force: false)
            return pair
        }
        let hub = try pair("hub")
        let watcher = try pair(watcherName)
        var users: [String: CurveKeyPair] = [:]
        let accessListPath = directory + "/access.json"
        var list = FileManager.default.fileExists(atPath: accessListPath) ? try AccessList.load(from: accessListPath) : try AccessList()
        try list.set(watcherName, AccessEntry(key: watcher.publicKey, boards: ["load-*": .watch]))
        for name in configuration.userNames {
            let userPair = try pair(name)
            users[name] = userPair
            try list.set(name, AccessEntry(key: userPair.publicKey, boards: ["load-*": .draw]))
        }
        try list.save(to: accessListPath)
        return LoadKeys(hub: hub, users: users, watcher: watcher, accessListPath: accessListPath)
    }
}

extension LoadConfiguration {
    /// The simulated users' names (and namespaces), in user order: `load-BOARD-INDEX`.
    public var userNames: [String] {
        (0..<users).map { user in "load-\(user % boards)-\(user / boards)" }
    }
}
