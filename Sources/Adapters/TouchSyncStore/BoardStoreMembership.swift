import PostgresNIO
import TouchSyncAccess

/// The hubs of a board store: each writes its name, endpoints and a
/// heartbeat; a hub is live while its heartbeat is younger than its lease
/// time-out. A board no live hub holds belongs to the live hub with the
/// highest rendezvous weight for it (`ClusterMap.hub(for:)`, the cluster
/// file's rule, over the live hubs).
enum BoardStoreMembership {
    /// The live hubs as a cluster map (nil: none live, not even this one yet).
    static func liveHubs(configuration: BoardStoreConfiguration, connection: inout StoreSession) async throws(StoreError) -> ClusterMap? {
        let rows = try await connection.query(
            """
            SELECT name, endpoints FROM touchsync_hubs
            WHERE heartbeat_at > now() - make_interval(secs => \(configuration.leaseSeconds)) ORDER BY name
            """)
        var hubs: [ClusterMap.Hub] = []
        for row in rows {
            guard let (name, endpoints) = try? row.decode((String, String).self) else { continue }
            let parts = endpoints.split(separator: " ").map(String.init)
            guard parts.count >= 3 else { continue }  // not a hub's row as this build writes it
            hubs.append(ClusterMap.Hub(name: name, ingest: parts[0], publish: parts[1], snapshot: parts[2], history: parts.count > 3 ? parts[3] : nil))
        }
        return try? ClusterMap(hubs: hubs)
    }

    /// Boards whose lease lapsed (their hub stopped renewing it), with that hub.
    static func lapsedBoards(connection: inout StoreSession) async throws(StoreError) -> [(board: String, holder: String)] {
        let rows = try await connection.query("SELECT board, hub FROM touchsync_leases WHERE expires_at < now() ORDER BY board")
        return rows.compactMap { try? $0.decode((String, String).self) }
    }

    /// Boards held by another hub whose heartbeat is older than `lateBy`
    /// while the lease still runs, with that hub: it may be dead.
    static func boardsOfLateHubs(
        notHeldBy hub: String, lateBy: Duration, connection: inout StoreSession
    ) async throws(StoreError) -> [(board: String, holder: String)] {
        let seconds = Double(lateBy / .microseconds(1)) / 1e6
        let rows = try await connection.query(
            """
            SELECT l.board, l.hub FROM touchsync_leases l JOIN touchsync_hubs h ON h.name = l.hub
            WHERE l.hub <> \(hub) AND l.expires_at >= now() AND h.heartbeat_at < now() - make_interval(secs => \(seconds))
            ORDER BY l.board
            """)
        return rows.compactMap { try? $0.decode((String, String).self) }
    }

    /// How long until the soonest lease that `hub` does not hold lapses
    /// (nil: none is held, or all lapsed already).
    static func soonestLapse(notHeldBy hub: String, connection: inout StoreSession) async throws(StoreError) -> Duration? {
        let rows = try await connection.query(
            """
            SELECT extract(epoch FROM min(expires_at) - now())::float8 FROM touchsync_leases
            WHERE hub <> \(hub) AND expires_at >= now()
            """)
        guard let seconds = try? rows.first?.decode(Double?.self) else { return nil }
        return .microseconds(Int64(seconds * 1e6))
    }

    /// The hub's heartbeat under its name, written only while the name is
    /// this process's, or its holder's heartbeat lapsed; at start-up
    /// (`sameEndpoints`) also when the holder had these endpoints (this hub
    /// restarted: its ports cannot be bound twice on one machine). It
    /// returns a row when written; none: another live process holds the name.
    static func heartbeat(configuration: BoardStoreConfiguration, sameEndpoints: Bool) -> PostgresQuery {
        """
        INSERT INTO touchsync_hubs (name, endpoints, heartbeat_at, instance)
        VALUES (\(configuration.hubName), \(configuration.endpoints), now(), \(configuration.instance))
        ON CONFLICT (name) DO UPDATE SET endpoints = excluded.endpoints, heartbeat_at = excluded.heartbeat_at, instance = excluded.instance
        WHERE touchsync_hubs.instance = excluded.instance
           OR (\(sameEndpoints) AND touchsync_hubs.endpoints = excluded.endpoints)
           OR touchsync_hubs.heartbeat_at < now() - make_interval(secs => \(configuration.leaseSeconds))
        RETURNING name
        """
    }
}
