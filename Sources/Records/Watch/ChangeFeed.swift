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

    /// A partition's changes are its partitioned table's, the entity served: named by the root
    /// of its partition tree (writes into a partition itself fire its own triggers only).
    static let partitionsTable = "(SELECT c.relname FROM pg_class c WHERE c.oid = pg_partition_root(TG_RELID))"

    /// The trigger function that logs a statement's changes of `entity` (an expression:
    /// `TG_TABLE_NAME`, or `partitionsTable` for a partition's triggers).
    static func notifyFunction(_ name: String, entity: String) -> String {
        """
            CREATE OR REPLACE FUNCTION records.\(name)() RETURNS trigger LANGUAGE plpgsql AS $body$
            DECLARE
                operation text := CASE TG_OP WHEN 'INSERT' THEN 'inserted' WHEN 'UPDATE' THEN 'updated' ELSE 'deleted' END;
                entity_name text := \(entity);
            BEGIN
                -- Static SQL (planned once per table): the key columns, named by the trigger's
                -- arguments, are read through jsonb; a composite key is written as a JSON array.
                -- A one-column key is read in place: row_key, a SQL function with a subquery,
                -- is never inlined, and called a row it cost more than the rest of the trigger.
                -- Inserts and updates are one statement: whether a server watches the table is
                -- its one-time filter (the rows are not read when none does), then the keys
                -- are gathered and logged; three statements cost a watched SAVE a tenth more.
                -- The servers are woken at commit, by records_wake on the log.
                IF TG_OP = 'DELETE' THEN
                    IF NOT EXISTS (SELECT 1 FROM records.watched WHERE entity = entity_name
                                   AND seen > now() - interval '\(registrationSeconds) seconds') THEN
                        RETURN NULL;
                    END IF;
                    -- A watch with a WHERE decides on deletes from the values the rows had.
                    IF EXISTS (SELECT 1 FROM records.watched WHERE entity = entity_name AND filtered
                               AND seen > now() - interval '\(registrationSeconds) seconds') THEN
                        INSERT INTO records.deleted_rows (entity, key, row)
                        SELECT entity_name, CASE WHEN TG_NARGS = 1 THEN r.j ->> TG_ARGV[0] ELSE records.row_key(r.j, TG_ARGV) END, r.j
                        FROM (SELECT to_jsonb(o.*) AS j FROM old_rows o) r;
                    END IF;
                    -- (Two statements: both aggregates of a CASE would be computed.)
                    IF TG_NARGS = 1 THEN
                        INSERT INTO records.change_log (entity, operation, keys)
                        SELECT entity_name, operation, k.keys
                        FROM (SELECT array_agg(to_jsonb(o.*) ->> TG_ARGV[0]) AS keys FROM old_rows o) k WHERE k.keys IS NOT NULL;
                    ELSE
                        INSERT INTO records.change_log (entity, operation, keys)
                        SELECT entity_name, operation, k.keys
                        FROM (SELECT array_agg(records.row_key(to_jsonb(o.*), TG_ARGV)) AS keys FROM old_rows o) k WHERE k.keys IS NOT NULL;
                    END IF;
                ELSIF TG_NARGS = 1 THEN
                    INSERT INTO records.change_log (entity, operation, keys)
                    SELECT entity_name, operation, k.keys
                    FROM (SELECT array_agg(to_jsonb(n.*) ->> TG_ARGV[0]) AS keys FROM new_rows n) k
                    WHERE k.keys IS NOT NULL AND EXISTS (SELECT 1 FROM records.watched WHERE entity = entity_name
                                                         AND seen > now() - interval '\(registrationSeconds) seconds');
                ELSE
                    INSERT INTO records.change_log (entity, operation, keys)
                    SELECT entity_name, operation, k.keys
                    FROM (SELECT array_agg(records.row_key(to_jsonb(n.*), TG_ARGV)) AS keys FROM new_rows n) k
                    WHERE k.keys IS NOT NULL AND EXISTS (SELECT 1 FROM records.watched WHERE entity = entity_name
                                                         AND seen > now() - interval '\(registrationSeconds) seconds');
                END IF;
                RETURN NULL;
            END
            $body$;
            """
    }

    /// The trigger function and, on every served table, its three triggers (transition tables
    /// allow one event per trigger). Idempotent. Changes are announced only while some server
    /// has a session watching the table (`records.watched`): PostgreSQL serializes the commits
    /// of transactions that NOTIFY, which measured here cut single-insert throughput by four.
    static func install(_ connection: Connection, model: Model) throws {
        try connection.execute(logTables + "\n" + functions)  // one simple query, so one transaction
        try installTriggers(model, connection)
    }

    /// Where changes are logged: the watched tables' registrations, deleted rows kept for
    /// filtered watches, and the change log itself.
    static let logTables = """
            CREATE TABLE IF NOT EXISTS records.watched (
                server text NOT NULL,
                entity text NOT NULL,
                seen   timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (server, entity)
            );
            -- DDL below runs only when there is something to do: ALTER TABLE and CREATE INDEX
            -- lock the table even when nothing changes, waiting behind every open transaction
            -- that wrote to it while every later writer waits behind them (a server start
            -- stalled the writes of every watched table so).
            DO $watched$
            BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'records.watched'::regclass AND attname = 'filtered' AND NOT attisdropped) THEN
                    ALTER TABLE records.watched ADD COLUMN filtered boolean NOT NULL DEFAULT false;
                END IF;
            END
            $watched$;
            CREATE TABLE IF NOT EXISTS records.deleted_rows (
                seq    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                entity text NOT NULL,
                key    text NOT NULL,
                row    jsonb NOT NULL,
                at     timestamptz NOT NULL DEFAULT now()
            );
            DO $deleted$
            BEGIN
                IF to_regclass('records.deleted_rows_key') IS NULL THEN
                    CREATE INDEX deleted_rows_key ON records.deleted_rows (entity, key);
                END IF;
                IF to_regclass('records.deleted_rows_at') IS NULL THEN
                    CREATE INDEX deleted_rows_at ON records.deleted_rows (at);
                END IF;
            END
            $deleted$;
            CREATE TABLE IF NOT EXISTS records.change_log (
                seq       bigint GENERATED ALWAYS AS IDENTITY,
                xid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
                at        timestamptz NOT NULL DEFAULT now(),
                entity    text NOT NULL,
                operation text NOT NULL,
                keys      text[] NOT NULL
            );
            -- The reader's one index. Every concurrent writer appends to the right edge of
            -- each b-tree on an ever-growing column, one at a time: a primary key on seq
            -- (never looked up) and a b-tree on at (for pruning) cost a watched SAVE under 64
            -- clients some 50 µs of PostgreSQL's CPU. at takes a BRIN index: a page range's
            -- summary is made by VACUUM, not by each insert.
            -- Without a primary key, deletes (pruning) need a replica identity where a
            -- publication FOR ALL TABLES publishes them.
            DO $indexes$
            BEGIN
                IF to_regclass('records.change_log_xid') IS NULL THEN
                    CREATE INDEX change_log_xid ON records.change_log (xid);
                END IF;
                IF to_regclass('records.change_log_pkey') IS NOT NULL THEN
                    ALTER TABLE records.change_log DROP CONSTRAINT change_log_pkey;
                END IF;
                IF (SELECT relreplident FROM pg_class WHERE oid = 'records.change_log'::regclass) <> 'f' THEN
                    ALTER TABLE records.change_log REPLICA IDENTITY FULL;
                END IF;
                IF to_regclass('records.change_log_at') IS NOT NULL THEN
                    DROP INDEX records.change_log_at;
                END IF;
                IF to_regclass('records.change_log_at_range') IS NULL THEN
                    CREATE INDEX change_log_at_range ON records.change_log USING brin (at);
                END IF;
            END
            $indexes$;
            """

    /// The triggers' functions: a row's key, the notify functions of tables and partitions,
    /// and the wake-up at commit.
    static var functions: String {
        """
            CREATE OR REPLACE FUNCTION records.row_key(j jsonb, columns text[]) RETURNS text
                LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $key$
                -- A trigger's TG_ARGV counts from 0: the first element is at the lower bound.
                SELECT CASE WHEN cardinality(columns) = 1 THEN j ->> columns[array_lower(columns, 1)]
                            ELSE (SELECT jsonb_agg(j ->> c ORDER BY n) FROM unnest(columns) WITH ORDINALITY AS x(c, n))::text END
            $key$;
            \(notifyFunction("notify_changes", entity: "TG_TABLE_NAME"))
            \(notifyFunction("notify_partition_changes", entity: partitionsTable))
            -- At commit (deferred): no wake-up while every server's reader polls (the quiet
            -- lock is free: taken and let go at once). A writer that skips it holds the skip
            -- lock shared until its commit ends, taken before it looks, so that a reader
            -- asking to be woken meanwhile either makes it notify or sees it in flight.
            CREATE OR REPLACE FUNCTION records.wake_servers() RETURNS trigger LANGUAGE plpgsql AS $wake$
            BEGIN
                IF pg_try_advisory_lock_shared(\(skipLock.0), \(skipLock.1)) THEN
                    IF pg_try_advisory_lock(\(quietLock.0), \(quietLock.1)) THEN
                        PERFORM pg_advisory_unlock(\(quietLock.0), \(quietLock.1));
                        PERFORM pg_try_advisory_xact_lock_shared(\(skipLock.0), \(skipLock.1));
                        PERFORM pg_advisory_unlock_shared(\(skipLock.0), \(skipLock.1));
                        RETURN NULL;
                    END IF;
                    PERFORM pg_advisory_unlock_shared(\(skipLock.0), \(skipLock.1));
                END IF;
                PERFORM pg_notify('\(channel)', '');
                RETURN NULL;
            END
            $wake$;
            DO $install$
            BEGIN
                -- A constraint trigger has no CREATE OR REPLACE.
                IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'records.change_log'::regclass AND tgname = 'records_wake') THEN
                    CREATE CONSTRAINT TRIGGER records_wake AFTER INSERT ON records.change_log
                        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION records.wake_servers();
                END IF;
            END
            $install$;
            """
    }

    /// On every served table and each of its partitions, the three triggers.
    private static func installTriggers(_ model: Model, _ connection: Connection) throws {
        for entity in model.entities {
            try installTriggers(on: model.table(entity), keyColumns: entity.keyColumns, function: "notify_changes", connection)
            // A write into a partition itself fires the partition's triggers, not its table's:
            // each partition (those attached later at the next install: migrate, SIGHUP) logs
            // its changes as its partitioned table's.
            let partitions = try connection.query("""
                SELECT relid::regclass::text FROM pg_partition_tree(to_regclass($1)) WHERE level > 0 ORDER BY level, relid
                """, [model.table(entity)]).column(0).compactMap { $0 }
            for partition in partitions {
                try installTriggers(on: partition, keyColumns: entity.keyColumns, function: "notify_partition_changes", connection)
            }
        }
    }

    /// The three triggers of `function` on `table`, unless they are there already.
    private static func installTriggers(on table: String, keyColumns: [String], function: String, _ connection: Connection) throws {
        // Already in place (the same three triggers, on the same key columns): nothing to
        // do. CREATE OR REPLACE TRIGGER would lock the table behind its open writers.
        let arguments = keyColumns.map { $0.utf8.map { String(format: "%02x", $0) }.joined() + "00" }.joined()
        let current = try connection.query("""
            SELECT count(*)::text FROM pg_trigger
            WHERE tgrelid = to_regclass($1) AND NOT tgisinternal AND tgfoid = ('records.' || $3)::regproc
              AND encode(tgargs, 'hex') = $2
              AND ((tgname = 'records_notify_insert' AND tgtype = 4 AND tgnewtable IS NOT NULL)
                OR (tgname = 'records_notify_update' AND tgtype = 16 AND tgnewtable IS NOT NULL)
                OR (tgname = 'records_notify_delete' AND tgtype = 8 AND tgoldtable IS NOT NULL))
            """, [table, arguments, function]).string(0, 0)
        if current == "3" { return }
        // Trigger arguments are string literals in the DDL: the key's column names, quoted.
        let key = keyColumns.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" }.joined(separator: ", ")
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
