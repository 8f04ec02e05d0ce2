import Foundation
import TouchSyncAccessModel

// The cluster file (the map is TouchSyncAccessModel's, a core: it reads no file).
extension ClusterMap {
    public static func load(from path: String) throws(ClusterFileError) -> ClusterMap {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadable(path: path, reason: (error as NSError).localizedFailureReason ?? error.localizedDescription)
        }
        let decoded: ClusterMap
        do {
            decoded = try JSONDecoder().decode(ClusterMap.self, from: data)
        } catch {
            throw .invalid("\(path): not a cluster file (\(error))")
        }
        do {
            return try ClusterMap(hubs: decoded.hubs)
        } catch {
            throw .invalid("\(path): \(error.reason)")
        }
    }
}
