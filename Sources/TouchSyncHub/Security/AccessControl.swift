import CoreMetrics
import Logging
import Synchronization
import TouchSyncAccess
import TouchSyncHubCore
import ZeroMQ

/// The hub's access list, shared by the threads that authenticate and
/// authorise: the ZAP handler (who may connect, and as whom), the history
/// service, and (through `.accessChanged`) the hub loop's core.
final class AccessControl: Sendable {
    let security: HubSecurity
    private let list: Mutex<AccessList>
    private let logger: Logger
    let accepted: Counter
    let refused: Counter

    init(security: HubSecurity, logger: Logger, metricsFactory: any MetricsFactory) throws(AccessListError) {
        self.security = security
        list = Mutex(try AccessList.load(from: security.accessListPath))
        self.logger = logger
        accepted = Counter(label: "touchsync_hub_zap_total", dimensions: [("result", "accepted")], factory: metricsFactory)
        refused = Counter(label: "touchsync_hub_zap_total", dimensions: [("result", "refused")], factory: metricsFactory)
    }

    var current: AccessList { list.withLock { $0 } }

    /// Reads the file again; on error the old list stays and the error is returned.
    func reload() -> Result<AccessList, AccessListError> {
        do {
            let fresh = try AccessList.load(from: security.accessListPath)
            list.withLock { $0 = fresh }
            return .success(fresh)
        } catch {
            return .failure(error)
        }
    }

    /// Makes `socket` a CURVE server whose connections the ZAP handler checks.
    static func makeCurveServer(_ socket: ZMQSocket, security: HubSecurity) throws(ZMQError) {
        try socket.setCurveServer(true)
        try socket.setCurveSecretKey(security.serverKey.secretKey)
        try socket.setZAPDomain("touchsync")
        try socket.setHandshakeInterval(milliseconds: Int32(clamping: security.handshakeTimeout.components.seconds * 1000))
    }
}
