import Foundation
import TouchSyncAccess
import TouchSyncHubCore
import ZeroMQ

/// CURVE keys for a load run (`touchsync load --access-dir DIR`): the hub's
/// pair, one pair per simulated user (named as the user, so the
/// authenticated namespace is the one the run checks), a watcher for the
/// subscribers, and an access list granting them, all kept in DIR (existing
/// keys are reused, so an external hub started on DIR's files matches).
/// Against external hubs DIR needs only the hub's public key (`hub.pub`):
/// a folder holding the users' keys, the watcher's and `hub.pub` can be
/// mounted read-only, without the hub's secret key (compose's load profile).
public struct LoadKeys: Sendable {
    /// The hub's pair: nil when only its public key is at hand (external hubs).
    public var hub: CurveKeyPair?
    public var hubPublicKey: String
    public var users: [String: CurveKeyPair]
    public var watcher: CurveKeyPair
    public var accessListPath: String

    public static let watcherName = "load-watcher"

    /// Makes (or reuses) the keys in `directory` for `configuration`'s users
    /// and adds them to `directory/access.json` (other users in it are kept;
    /// the file is written only when something was added or changed).
    public static func prepare(in directory: String, for configuration: LoadConfiguration) throws -> LoadKeys {
        func pair(_ name: String) throws -> CurveKeyPair {
            let path = CurveKeyFiles.secretPath(name: name, directory: directory)
            if FileManager.default.fileExists(atPath: path) { return try CurveKeyFiles.readPair(path) }
            let generated = try ZMQCurve.generateKeyPair()
            let pair = CurveKeyPair(publicKey: generated.publicKey, secretKey: generated.secretKey)
            try CurveKeyFiles.write(pair, name: name, directory: directory, force: false)
            return pair
        }
        let externalHub = configuration.hub != nil || configuration.cluster != nil
        let hubSecret = CurveKeyFiles.secretPath(name: "hub", directory: directory)
        let hubPublic = CurveKeyFiles.publicPath(name: "hub", directory: directory)
        let hub: CurveKeyPair?
        let hubPublicKey: String
        if externalHub && !FileManager.default.fileExists(atPath: hubSecret) && FileManager.default.fileExists(atPath: hubPublic) {
            hub = nil
            hubPublicKey = try CurveKeyFiles.readPublicKey(hubPublic)
        } else {
            let read = try pair("hub")
            hub = read
            hubPublicKey = read.publicKey
        }
        let watcher = try pair(watcherName)
        var users: [String: CurveKeyPair] = [:]
        let accessListPath = directory + "/access.json"
        let existing = FileManager.default.fileExists(atPath: accessListPath) ? try AccessList.load(from: accessListPath) : nil
        var list = try existing ?? AccessList()
        try list.set(watcherName, AccessEntry(key: watcher.publicKey, boards: ["load-*": .watch]))
        for name in configuration.userNames {
            let userPair = try pair(name)
            users[name] = userPair
            try list.set(name, AccessEntry(key: userPair.publicKey, boards: ["load-*": .draw]))
        }
        if list != existing { try list.save(to: accessListPath) }
        return LoadKeys(hub: hub, hubPublicKey: hubPublicKey, users: users, watcher: watcher, accessListPath: accessListPath)
    }
}

extension LoadConfiguration {
    /// The simulated users' names (and namespaces), in user order: `load-BOARD-INDEX`.
    public var userNames: [String] {
        (0..<users).map { user in "load-\(user % boards)-\(user / boards)" }
    }
}
