import Postgres

/// What the server sees of the PostgreSQL it writes to, looked at every second by the model
/// watcher's connection (which, like the pool, follows the URL to the primary): the primary's
/// address as libpq reached it, its standbys and how far behind they are, and how many times
/// the primary changed since start (a failover, or a switch-over). Shown by INFO, `/ready` and
/// `/metrics`; a primary with no standby (a formation degraded to one node, or a single
/// server) says so.
public struct Topology: Sendable, Equatable {
    /// One look: `pg_stat_replication` on the primary.
    public struct Look: Sendable, Equatable {
        public var primary: String
        public var standbys: Int
        public var synchronousStandbys: Int
        /// Bytes of WAL the slowest standby has yet to replay; nil when none, or when the
        /// server's role may not see it (pg_read_all_stats).
        public var lagBytes: Double?

        public init(primary: String, standbys: Int, synchronousStandbys: Int, lagBytes: Double?) {
            self.primary = primary
            self.standbys = standbys
            self.synchronousStandbys = synchronousStandbys
            self.lagBytes = lagBytes
        }
    }

    /// The last look; nil before the first.
    public private(set) var last: Look?
    /// Times the primary's address changed between two looks since start.
    public private(set) var primaryChanges = 0

    public init() {}

    /// Folds one look in: a primary at another address than the last one is a change.
    public mutating func observe(_ look: Look) {
        if let previous = last?.primary, previous != look.primary { primaryChanges += 1 }
        last = look
    }

    /// One line for people (INFO, `/ready`).
    public var summary: String {
        guard let look = last else { return "primary: not seen yet" }
        let standbys = look.standbys == 0
            ? "no standby (a lone primary: a crash of it stops every write until it is back)"
            : "\(look.standbys) standby\(look.standbys == 1 ? "" : "s") (\(look.synchronousStandbys) synchronous)"
                + (look.lagBytes.map { ", replay lag \(Int($0)) bytes" } ?? "")
        return "primary: \(look.primary), \(standbys); primary changes seen: \(primaryChanges)"
    }

    /// The look, on `connection` (one round trip). The lag's subquery runs only on a primary:
    /// `pg_current_wal_lsn()` fails during recovery.
    static func look(_ connection: Connection) throws(PostgresError) -> Look {
        let row = try connection.queryPrepared("""
            SELECT count(*), count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')),
                   (SELECT max(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)) FROM pg_stat_replication WHERE NOT pg_is_in_recovery())
            FROM pg_stat_replication
            """)
        return Look(primary: connection.serverAddress, standbys: Int(row.string(0, 0) ?? "") ?? 0,
                    synchronousStandbys: Int(row.string(0, 1) ?? "") ?? 0, lagBytes: row.string(0, 2).flatMap(Double.init))
    }
}
