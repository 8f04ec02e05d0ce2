import Foundation

/// Waits for `condition`, polling; false when `timeout` passes first. For
/// conditions of other processes and threads that signal nothing.
public func eventually(timeout: Duration = .seconds(5), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + scaled(timeout)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

/// A new empty folder under the temporary directory, named after `name`.
public func temporaryFolder(_ name: String) throws -> String {
    let folder = NSTemporaryDirectory() + "touchsync-\(name)-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return folder
}
