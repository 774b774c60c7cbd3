import Postgres

/// Committed changes to served tables, as PostgreSQL reports them: statement-level triggers
/// (installed by the server, under the migration lock) send the keys of the rows each statement
/// inserted, updated or deleted with `pg_notify`, in payloads under NOTIFY's 8,000-byte limit.
/// Notifications are delivered at COMMIT only, so a rolled-back save never shows; cascaded
/// deletes fire the triggers of the tables they reach; SQL written directly to PostgreSQL is
/// reported like a save. See https://www.postgresql.org/docs/15/sql-notify.html
public enum ChangeFeed {
    public static let channel = "records_changes"

    public struct Event: Sendable, Equatable {
        public var entity: String
        /// inserted, updated or deleted.
        public var operation: String
        public var ids: [String]
    }

    /// An entity some session of a server watches; `filtered` when one of them has a WHERE,
    /// which makes deletes keep the deleted rows' values for the predicate to be tried on.
    public struct Watch: Sendable, Equatable {
        public var entity: String
        public var filtered: Bool
    }

    /// Registers (or refreshes) this server's watched entities and forgets the others.
    public static func register(server: String, watches: [Watch], _ connection: Connection) throws {
        let entities = SQL.arrayLiteral(watches.map { Optional($0.entity) })
        try connection.query("""
            INSERT INTO records.watched (server, entity, filtered)
            SELECT $1, w.entity, w.filtered FROM unnest($2::text[], $3::boolean[]) AS w(entity, filtered)
            ON CONFLICT (server, entity) DO UPDATE SET seen = now(), filtered = excluded.filtered
            """, [server, entities, SQL.arrayLiteral(watches.map { Optional(String($0.filtered)) })])
        try connection.query("DELETE FROM records.watched WHERE server = $1 AND NOT entity = ANY($2::text[])", [server, entities])
    }

    /// How long deleted rows are kept for filtered watches: events are delivered in
    /// milliseconds; this only bounds the table.
    public static let deletedRowsMinutes = 5

    /// `employee updated 4,5,6` -> an event.
    public static func parse(_ payload: String) -> Event? {
        let parts = payload.split(separator: " ", maxSplits: 2)
        guard parts.count == 3 else { return nil }
        return Event(entity: String(parts[0]), operation: String(parts[1]), ids: parts[2].split(separator: ",").map(String.init))
    }

    /// How long a server's registration of a watched entity lasts without a refresh.
    public static let registrationSeconds = 90

    /// The trigger function and, on every served table, its three triggers (transition tables
    /// allow one event per trigger). Idempotent. Changes are announced only while some server
    /// has a session watching the table (`records.watched`): PostgreSQL serializes the commits
    /// of transactions that NOTIFY, which measured here cut single-insert throughput by four.
    static func install(_ connection: Connection, model: Model) throws {
        try connection.execute("""
            CREATE TABLE IF NOT EXISTS records.watched (
                server text NOT NULL,
                entity text NOT NULL,
                seen   timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (server, entity)
            );
            ALTER TABLE records.watched ADD COLUMN IF NOT EXISTS filtered boolean NOT NULL DEFAULT false;
            CREATE TABLE IF NOT EXISTS records.deleted_rows (
                seq    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                entity text NOT NULL,
                key    text NOT NULL,
                row    jsonb NOT NULL,
                at     timestamptz NOT NULL DEFAULT now()
            );
            CREATE INDEX IF NOT EXISTS deleted_rows_key ON records.deleted_rows (entity, key);
            CREATE INDEX IF NOT EXISTS deleted_rows_at ON records.deleted_rows (at);
            CREATE OR REPLACE FUNCTION records.notify_changes() RETURNS trigger LANGUAGE plpgsql AS $body$
            DECLARE
                operation text := CASE TG_OP WHEN 'INSERT' THEN 'inserted' WHEN 'UPDATE' THEN 'updated' ELSE 'deleted' END;
                rows_name text := CASE TG_OP WHEN 'DELETE' THEN 'old_rows' ELSE 'new_rows' END;
            BEGIN
                IF NOT EXISTS (SELECT 1 FROM records.watched WHERE entity = TG_TABLE_NAME
                               AND seen > now() - interval '\(registrationSeconds) seconds') THEN
                    RETURN NULL;
                END IF;
                -- A watch with a WHERE decides on deletes from the values the rows had.
                IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM records.watched WHERE entity = TG_TABLE_NAME AND filtered
                                                AND seen > now() - interval '\(registrationSeconds) seconds') THEN
                    DELETE FROM records.deleted_rows WHERE at < now() - interval '\(deletedRowsMinutes) minutes';
                    EXECUTE format('INSERT INTO records.deleted_rows (entity, key, row) SELECT %L, o.%I::text, to_jsonb(o) FROM old_rows o',
                                   TG_TABLE_NAME, TG_ARGV[0]);
                END IF;
                -- Keys in groups of under 7,000 bytes, one notification per group.
                EXECUTE format(
                    'SELECT pg_notify(%L, %L || string_agg(k, %L)) FROM '
                    '(SELECT k, (sum(length(k) + 1) OVER (ORDER BY k ROWS UNBOUNDED PRECEDING) / 7000)::int AS g '
                    ' FROM (SELECT %I::text AS k FROM %I) keys) grouped GROUP BY g',
                    '\(channel)', TG_TABLE_NAME || ' ' || operation || ' ', ',', TG_ARGV[0], rows_name);
                RETURN NULL;
            END
            $body$;
            """)
        for entity in model.entities {
            let table = model.table(entity)
            let key = "'" + entity.primaryKey.name.replacingOccurrences(of: "'", with: "''") + "'"
            try connection.execute("""
                CREATE OR REPLACE TRIGGER records_notify_insert AFTER INSERT ON \(table)
                    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records.notify_changes(\(key));
                CREATE OR REPLACE TRIGGER records_notify_update AFTER UPDATE ON \(table)
                    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION records.notify_changes(\(key));
                CREATE OR REPLACE TRIGGER records_notify_delete AFTER DELETE ON \(table)
                    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION records.notify_changes(\(key));
                """)
        }
    }
}
