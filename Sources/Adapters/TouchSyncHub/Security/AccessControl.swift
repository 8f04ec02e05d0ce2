import CoreMetrics
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
    let accepted: Counter
    let refused: Counter

    init(security: HubSecurity, metricsFactory: any MetricsFactory) throws(AccessListError) {
        self.security = security
        list = Mutex(try AccessList.load(from: security.accessListPath))
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

    /// A publisher of boards (the hub's, a replay's, a relay's): both sockets
    /// CURVE servers, and subscriptions made by their owner (`admit`), never by libzmq.
    static func serve(publish: ZMQSocket, snapshots: ZMQSocket, security: HubSecurity) throws(ZMQError) {
        try makeCurveServer(publish, security: security)
        try makeCurveServer(snapshots, security: security)
        try publish.setXPubManual(true)
    }

    func serve(publish: ZMQSocket, snapshots: ZMQSocket) throws(ZMQError) {
        try Self.serve(publish: publish, snapshots: snapshots, security: security)
    }

    /// Why `user` may not have `board`'s batches, snapshot or history (nil: it may watch it).
    func refusal(for user: String?, board: String) -> String? {
        guard let user, current.role(of: user, on: board) != nil else { return "\(user ?? "this peer") may not watch board \(board)" }
        return nil
    }

    /// Carries out a subscription event just received on an XPUB_MANUAL
    /// `publish`: an unsubscription always; a subscription only to a whole
    /// board topic the sending user may watch. Returns that board (nil: not admitted).
    func admit(_ event: ZMQMessage, on publish: ZMQSocket) throws(ZMQError) -> String? {
        let bytes = event.bytes
        let topic = Array(bytes.dropFirst())
        guard bytes.first == 1 else {
            try? publish.unsubscribe(topic)
            return nil
        }
        guard topic.last == 0, let board = String(validating: topic.dropLast(), as: UTF8.self), refusal(for: event.userID, board: board) == nil
        else { return nil }
        try publish.subscribe(topic)
        return board
    }
}
