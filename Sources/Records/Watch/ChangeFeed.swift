import Foundation
import Postgres

/// Committed changes to served tables, as PostgreSQL reports them. Statement-level triggers
/// (installed by the server, under the migration lock) append the keys each statement inserted,
/// updated or deleted to `records.change_log`, and wake the servers with `pg_notify`; each
/// server's listening connection then reads the log (`Reader`). The log row belongs to the
/// writing transaction, so a rolled-back save never shows; cascaded deletes fire the triggers of
/// the tables they reach; SQL written directly to PostgreSQL is reported like a save.
///
/// Why a log and not the keys in the notification: PostgreSQL commits transactions that NOTIFY
/// one at a time (the notification queue's lock is held through the commit's WAL flush), which
/// measured here cut writes to a watched table by 3.6x. A writer decides at its commit (a
/// deferred trigger on the log): no NOTIFY while every server's reader polls (`ReadSchedule`:
/// none holds `quietLock`), which is when many commit; else it notifies.
/// See https://www.postgresql.org/docs/15/sql-notify.html
public enum ChangeFeed {
    public static let channel = "records_changes"
    /// Held shared by every reader that waits to be woken; a writer that can take it (for a
    /// moment) knows every reader polls, and does not notify ('rc', 'quie').
    static let quietLock: (Int32, Int32) = (0x7263, 0x71756965)
    /// Held shared, until its commit ends, by every writer that decided not to notify: a
    /// reader that asks to be woken again polls until it can take it ('rc', 'skip').
    static let skipLock: (Int32, Int32) = (0x7263, 0x736b6970)

    /// Asks to be woken by writers (`ReadSchedule.Action.takeQuietLock`): false when someone
    /// holds the lock exclusively (a writer for a moment, or a session that keeps it).
    public static func takeQuietLock(_ connection: Connection) throws -> Bool {
        try advisory("SELECT pg_try_advisory_lock_shared($1::int, $2::int)::text", quietLock, connection) == "true"
    }

    /// Whether a writer that committed without NOTIFY may still be in flight: it holds the
    /// skip lock shared until its commit ends, so the lock cannot be taken exclusively.
    public static func skippersInFlight(_ connection: Connection) throws -> Bool {
        try advisory("SELECT CASE WHEN pg_try_advisory_lock($1::int, $2::int) THEN NOT pg_advisory_unlock($1::int, $2::int) ELSE true END::text",
                     skipLock, connection) != "false"
    }

    /// Lets writers commit without waking this reader, which then polls.
    public static func releaseQuietLock(_ connection: Connection) throws {
        _ = try advisory("SELECT pg_advisory_unlock_shared($1::int, $2::int)::text", quietLock, connection)
    }

    /// `sql` on the lock's two keys ($1, $2); its one value.
    private static func advisory(_ sql: String, _ lock: (Int32, Int32), _ connection: Connection) throws -> String? {
        try connection.query(sql, [String(lock.0), String(lock.1)]).string(0, 0)
    }

    public struct Event: Sendable, Equatable {
        public var entity: String
        public var operation: ChangeOperation
        public var ids: [String]
    }

    /// An entity some session of a server watches; `filtered` when one of them has a WHERE,
    /// which makes deletes keep the deleted rows' values for the predicate to be tried on.
    public struct Watch: Sendable, Equatable {
        public var entity: String
        public var filtered: Bool
    }

    /// Registers (or refreshes) this server's watched entities, as `watches` lists them when
    /// asked, and forgets the others registered before it asked.
    ///
    /// Registrations of one server race (its watcher thread's, each WATCH's): one that read its
    /// list just before a WATCH added an entity would delete that WATCH's registration, made
    /// in between, and changes right after the WATCH's +OK went untold. PostgreSQL's clock is
    /// read before the list: a registration made since is newer (its `seen`), and stays.
    public static func register(server: String, _ connection: Connection, watches: () -> [Watch]) throws {
        let listed = try connection.query("SELECT clock_timestamp()::text").string(0, 0)
        let watches = watches()
        let entities = SQL.arrayLiteral(watches.map { Optional($0.entity) })
        try connection.query("""
            INSERT INTO records.watched (server, entity, filtered)
            SELECT $1, w.entity, w.filtered FROM unnest($2::text[], $3::boolean[]) AS w(entity, filtered)
            ON CONFLICT (server, entity) DO UPDATE SET seen = now(), filtered = excluded.filtered
            """, [server, entities, SQL.arrayLiteral(watches.map { Optional(String($0.filtered)) })])
        try connection.query("DELETE FROM records.watched WHERE server = $1 AND NOT entity = ANY($2::text[]) AND seen < $3::timestamptz",
                             [server, entities, listed])
    }

    /// Reads the change log. Log rows are numbered when written, not when their transaction
    /// commits, so the reader goes by transactions instead: each read takes the rows of the
    /// transactions that were running or not yet begun at the previous read (its snapshot's
    /// `xip` and those from its `xmax` on), which are exactly the rows that read could not
    /// see. Each change is delivered once, whatever the commit order, and a transaction left
    /// open for hours costs nothing as long as it writes no watched table.
    public struct Reader: Sendable {
        /// The previous read's snapshot (`xmin:xmax:xip,...`); nil before the first read.
        private var snapshot: String?
        /// Seconds from the oldest change of the last read's transaction start to the read
        /// (what a watcher waits at least, besides delivery); nil when it read nothing.
        public private(set) var lag: Double?

        public init() {}

        /// The changes committed since the last read. The first read only marks where the
        /// server starts: what was committed before it is not delivered.
        public mutating func read(_ connection: Connection) throws -> [Event] {
            // One row per log row, its keys as an array's text (keys may hold any character),
            // in log order: a row per key cost PostgreSQL twice as much (the snapshot, the lag
            // and the row itself printed for each). Both conditions are the xid index's (a
            // BitmapOr): written `xid IN (SELECT ...)`, the OR made PostgreSQL scan the whole
            // log on every read, 3.7 ms at 30,000 rows, growing with the 5 minutes kept, on a
            // read every 5 ms under writes. Prepared: a reader that polls reads 200 times a second.
            let result = try connection.queryPrepared("""
                SELECT s.now::text, c.entity, c.operation, c.keys::text, extract(epoch FROM clock_timestamp() - c.at)::float8::text
                FROM (SELECT pg_current_snapshot() AS now) s
                LEFT JOIN records.change_log c
                  ON $1::pg_snapshot IS NOT NULL
                 AND (c.xid >= pg_snapshot_xmax($1::pg_snapshot) OR c.xid = ANY (ARRAY(SELECT pg_snapshot_xip($1::pg_snapshot))))
                ORDER BY c.seq
                """, [snapshot])
            // Keys of consecutive statements with the same entity and operation make one event,
            // of at most `eventKeys` (each event of a WATCH with WHERE costs one query).
            var events: [Event] = []
            lag = nil
            for row in 0..<result.rowCount {
                if let seconds = result.string(row, 4).flatMap(Double.init) { lag = max(lag ?? 0, seconds) }
                // The triggers write the operation's word (see `install`).
                guard let entity = result.string(row, 1), let operation = result.string(row, 2).flatMap({ ChangeOperation(rawValue: $0) }),
                      let keys = result.string(row, 3) else { continue }
                for case let key? in SQL.parseArray(keys) {
                    let last = events.count - 1  // by index: a copy of the event would copy its keys on every append
                    if last >= 0, events[last].entity == entity, events[last].operation == operation,
                       events[last].ids.count < ChangeFeed.eventKeys {
                        events[last].ids.append(key)
                    } else {
                        events.append(Event(entity: entity, operation: operation, ids: [key]))
                    }
                }
            }
            snapshot = result.string(0, 0)
            return events
        }
    }

    /// A record's key from the change log's text for it: a composite key is a JSON array.
    public static func recordKey(_ text: String, of entity: Entity) -> RecordKey? {
        guard entity.key.count > 1 else { return RecordKey(entity: entity.name, values: [text]) }
        guard let data = text.data(using: .utf8), let values = (try? JSONSerialization.jsonObject(with: data)) as? [Any],
              values.count == entity.key.count else { return nil }
        return RecordKey(entity: entity.name, values: values.map { ($0 as? String) ?? "" })
    }

    /// Keys a change event carries at most.
    static let eventKeys = 1000

    /// How long the change log and the deleted rows of filtered watches are kept: a server
    /// reads them within milliseconds; this bounds the tables and lets a server that lost its
    /// connection catch up.
    public static let keptMinutes = 5

    /// Each table on its own: one that cannot be pruned (a lost privilege, a publication that
    /// refuses deletes) leaves the others pruned. Throws the first failure, after the rest.
    public static func prune(_ connection: Connection) throws {
        var failure: Error?
        for statement in [
            "DELETE FROM records.change_log WHERE at < now() - interval '\(keptMinutes) minutes'",
            "DELETE FROM records.deleted_rows WHERE at < now() - interval '\(keptMinutes) minutes'",
            "DELETE FROM records.save_keys WHERE at < now() - interval '\(saveKeyHours) hours'",
            // Servers gone (stopped, killed): every watched write's trigger reads this table.
            "DELETE FROM records.watched WHERE seen < now() - interval '\(2 * registrationSeconds) seconds'",
            """
            DELETE FROM records.handoff WHERE expires_at < now() - interval '\(HandOff.expiredKeptMinutes) minutes'
                OR spent_at < now() - interval '\(HandOff.expiredKeptMinutes) minutes'
            """,
            """
            DELETE FROM records.save_marks m WHERE at < now() - interval '\(saveMarkMinutes) minutes'
                AND NOT EXISTS (SELECT 1 FROM records.handoff h WHERE h.mark = m.nonce AND h.spent_at IS NULL)
            """,
        ] {
            do { try connection.execute(statement) } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// How long a SAVE's commit mark is kept: a SAVE whose COMMIT got no answer is resolved
    /// within this time (the session stops asking well before it).
    public static let saveMarkMinutes = 60

    /// How long a SAVE KEY's outcome is kept for retries.
    public static let saveKeyHours = 24

    /// How long a server's registration of a watched entity lasts without a refresh.
    public static let registrationSeconds = 90

    /// The trigger function and, on every served table, its three triggers (transition tables
    /// allow one event per trigger). Idempotent. Changes are announced only while some server
    /// has a session watching the table (`records.watched`): PostgreSQL serializes the commits
    /// of transactions that NOTIFY, which measured here cut single-insert throughput by four.
    static func install(_ connection: Connection, model: Model) throws {
        try connection.execute(installSQL)  // one simple query, so one transaction
        try installTriggers(model, connection)
    }

    /// The log's tables and the triggers' functions (`ChangeFeed.sql`, embedded when built).
    static let installSQL = String(decoding: PackageResources.ChangeFeed_sql, as: UTF8.self)

    /// On every served table and each of its partitions, the three triggers.
    private static func installTriggers(_ model: Model, _ connection: Connection) throws {
        for entity in model.entities {
            try installTriggers(on: model.table(entity), entity: entity, connection)
            // A write into a partition itself fires the partition's triggers, not its table's:
            // each partition (those attached later at the next install: migrate, SIGHUP) logs
            // its changes as its partitioned table's, the entity its triggers name.
            let partitions = try connection.query("""
                SELECT relid::regclass::text FROM pg_partition_tree(to_regclass($1)) WHERE level > 0 ORDER BY level, relid
                """, [model.table(entity)]).column(0).compactMap { $0 }
            for partition in partitions {
                try installTriggers(on: partition, entity: entity, connection)
            }
        }
    }

    /// The three triggers on `table` that log `entity`'s changes, unless they are there already.
    /// Their arguments: the entity's name, then its key columns.
    private static func installTriggers(on table: String, entity: Entity, _ connection: Connection) throws {
        let function = "log_changes"
        let names = [entity.name] + entity.keyColumns
        // Already in place (the same three triggers, with the same arguments): nothing to
        // do. CREATE OR REPLACE TRIGGER would lock the table behind its open writers.
        let arguments = names.map { $0.utf8.map { String(format: "%02x", $0) }.joined() + "00" }.joined()
        let current = try connection.query("""
            SELECT count(*)::text FROM pg_trigger
            WHERE tgrelid = to_regclass($1) AND NOT tgisinternal AND tgfoid = ('records.' || $3)::regproc
              AND encode(tgargs, 'hex') = $2
              AND ((tgname = 'records_notify_insert' AND tgtype = 4 AND tgnewtable IS NOT NULL)
                OR (tgname = 'records_notify_update' AND tgtype = 16 AND tgnewtable IS NOT NULL)
                OR (tgname = 'records_notify_delete' AND tgtype = 8 AND tgoldtable IS NOT NULL))
            """, [table, arguments, function]).string(0, 0)
        if current == "3" { return }
        // Trigger arguments are string literals in the DDL, quoted.
        let key = names.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }.joined(separator: ", ")
        try connection.execute("""
            CREATE OR REPLACE TRIGGER records_notify_insert AFTER INSERT ON \(table)
                REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records.\(function)(\(key));
            CREATE OR REPLACE TRIGGER records_notify_update AFTER UPDATE ON \(table)
                REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records.\(function)(\(key));
            CREATE OR REPLACE TRIGGER records_notify_delete AFTER DELETE ON \(table)
                REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION records.\(function)(\(key));
            """)
    }
}
