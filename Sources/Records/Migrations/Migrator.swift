import Foundation
import Postgres

/// One file of `migrations/`: `NNNN_name.sql`.
public struct MigrationFile: Sendable, Equatable {
    public var version: Int
    public var name: String
    public var sql: String
}

public struct MigrationError: Error, CustomStringConvertible {
    public var description: String
}

/// Applies `migrations/NNNN_name.sql` in order, each in its own transaction, under an advisory
/// lock so that servers starting together do not race, recording version, name, checksum and
/// time in `records.schema_migrations`. A changed applied file stops everything.
public enum Migrator {
    /// Any fixed number: the key of the advisory lock that serializes migrations.
    static let lockKey = "7878001"
    public static let schemaChannel = "records_schema"

    public static func load(directory: String) throws -> [MigrationFile] {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MigrationError(description: "migrations directory \(directory) does not exist (set --migrations DIR)")
        }
        var files: [MigrationFile] = []
        for entry in try manager.contentsOfDirectory(atPath: directory).sorted() where entry.hasSuffix(".sql") {
            let stem = entry.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]) else {
                throw MigrationError(description: "\(entry): migration files are named NNNN_name.sql")
            }
            if let clash = files.first(where: { $0.version == version }) {
                throw MigrationError(description: "\(entry) and \(clash.version)_\(clash.name).sql share version \(version)")
            }
            let sql = try String(contentsOfFile: directory + "/" + entry, encoding: .utf8)
            files.append(MigrationFile(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql))
        }
        return files.sorted { $0.version < $1.version }
    }

    public struct Applied: Sendable {
        public var version: Int
        public var name: String
        public var checksum: String
        public var appliedAt: String
    }

    public enum State: Equatable, Sendable {
        case applied(at: String)
        case pending
        case changed
        /// Recorded as applied, but the file is gone.
        case missingFile
    }

    /// Every migration with its state, by version.
    public static func status(_ files: [MigrationFile], connection: Connection) throws -> [(version: Int, name: String, state: State)] {
        let applied = try appliedMigrations(connection)
        var rows: [(Int, String, State)] = []
        for file in files {
            if let record = applied[file.version] {
                rows.append((file.version, file.name, try checksum(file.sql, connection) == record.checksum ? .applied(at: record.appliedAt) : .changed))
            } else {
                rows.append((file.version, file.name, .pending))
            }
        }
        for record in applied.values where !files.contains(where: { $0.version == record.version }) {
            rows.append((record.version, record.name, .missingFile))
        }
        return rows.sorted { $0.0 < $1.0 }
    }

    /// Applies what is pending; returns the files applied (empty when up to date).
    public static func migrate(_ files: [MigrationFile], connection: Connection, schema: String = "public") throws -> [MigrationFile] {
        try connection.query("SELECT pg_advisory_lock($1::bigint)", [lockKey])
        defer { _ = try? connection.query("SELECT pg_advisory_unlock($1::bigint)", [lockKey]) }
        try ownSchema(connection)
        return try apply(files, connection: connection, schema: schema)
    }

    /// recordsd's own schema (migration records, save keys and marks, users) and nothing of the
    /// application's: what `recordsd user ...` needs, without applying anyone's migrations.
    public static func bootstrap(_ connection: Connection) throws {
        try connection.query("SELECT pg_advisory_lock($1::bigint)", [lockKey])
        defer { _ = try? connection.query("SELECT pg_advisory_unlock($1::bigint)", [lockKey]) }
        try ownSchema(connection)
    }

    private static func ownSchema(_ connection: Connection) throws {
        try connection.execute("""
            CREATE SCHEMA IF NOT EXISTS records;
            CREATE TABLE IF NOT EXISTS records.schema_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            );
            -- SAVE ... KEY k: what a committed save answered, so a retry answers the same.
            CREATE TABLE IF NOT EXISTS records.save_keys (
                owner   text NOT NULL,
                key     text NOT NULL,
                message text NOT NULL,
                lines   text[] NOT NULL,
                at      timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (owner, key)
            );
            CREATE INDEX IF NOT EXISTS save_keys_at ON records.save_keys (at);
            -- Which changes the key saved: the key answers again only for the same ones.
            ALTER TABLE records.save_keys ADD COLUMN IF NOT EXISTS fingerprint text NOT NULL DEFAULT '';
            -- One row a SAVE, in its transaction: when COMMIT gets no answer, the row says
            -- whether it committed (after a crash a transaction id may be given again).
            CREATE TABLE IF NOT EXISTS records.save_marks (
                xid   xid8 NOT NULL,
                nonce bigint NOT NULL,
                at    timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (xid, nonce)
            );
            -- A mark is written once: RESUME writes the handed-off session's next mark first
            -- (HandOff.fence), so a SAVE of the old copy, still in flight or still open on a
            -- server that lost its liveness lock, can never commit the same unit.
            CREATE UNIQUE INDEX IF NOT EXISTS \(HandOff.fenceIndex) ON records.save_marks (nonce);
            -- Sessions a stopping server handed off, until RESUME on any server (HandOff):
            -- found by the token's hash; no served role is granted it.
            CREATE TABLE IF NOT EXISTS records.handoff (
                token_hash bytea PRIMARY KEY,
                owner      text,
                state      jsonb NOT NULL,
                pending    integer NOT NULL,
                written_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz NOT NULL,
                -- The server that wrote it, and whether the session is still open there
                -- (--durable-units): an open session is resumed only once that server is gone.
                server     text NOT NULL DEFAULT '',
                open       boolean NOT NULL DEFAULT false,
                -- Redeemed: kept a while so that a late write cannot bring it back.
                spent_at   timestamptz
            );
            CREATE INDEX IF NOT EXISTS handoff_expires ON records.handoff (expires_at);
            -- The mark the state's next SAVE writes: kept in records.save_marks while a state
            -- names it (a session idle for hours after a SAVE, then resumed, finds it saved).
            ALTER TABLE records.handoff ADD COLUMN IF NOT EXISTS mark bigint;
            -- Only the server's own login sees it, whatever is granted: a user's --db-role
            -- (SET ROLE) is another current_user. Set once, by whoever creates the table.
            DO $$ BEGIN
              IF NOT (SELECT relforcerowsecurity FROM pg_class WHERE oid = 'records.handoff'::regclass) THEN
                ALTER TABLE records.handoff ENABLE ROW LEVEL SECURITY;
                ALTER TABLE records.handoff FORCE ROW LEVEL SECURITY;
                CREATE POLICY server_only ON records.handoff USING (current_user = session_user) WITH CHECK (current_user = session_user);
              END IF;
            END $$;
            """)
        do {
            try Users.ensureSchema(connection)
        } catch {
            Log.warning("authentication unavailable: cannot create records.users with pgcrypto (\(error))")
        }
    }

    private static func apply(_ files: [MigrationFile], connection: Connection, schema: String) throws -> [MigrationFile] {
        let applied = try appliedMigrations(connection)
        for file in files {
            guard let record = applied[file.version] else { continue }
            if try checksum(file.sql, connection) != record.checksum {
                throw MigrationError(description: "migration \(String(format: "%04d", file.version))_\(file.name).sql was changed after it was applied (checksum differs): restore it and add a new migration instead")
            }
        }
        var done: [MigrationFile] = []
        for file in files where applied[file.version] == nil {
            let label = "\(String(format: "%04d", file.version))_\(file.name).sql"
            do {
                try connection.transaction {
                    // Unqualified names go to the served schema, whatever the login's
                    // search_path: an owner named `records` has "$user" = recordsd's own
                    // schema first, and the sample tables went there, where no one serves them.
                    try connection.query("SELECT set_config('search_path', quote_ident($1) || ', public', true)", [schema])
                    try connection.execute(file.sql)
                    try connection.query(
                        "INSERT INTO records.schema_migrations (version, name, checksum) VALUES ($1, $2, encode(sha256(convert_to($3, 'UTF8')), 'hex'))",
                        [String(file.version), file.name, file.sql])
                }
            } catch let error as PostgresError {
                throw MigrationError(description: "migration \(label) failed and was rolled back: \(error.debugDescription)")
            }
            Log.info("applied migration \(label)")
            done.append(file)
        }
        // Change-feed triggers on every served table, new ones included.
        do {
            try ChangeFeed.install(connection, model: try ModelReflector.reflect(connection, schema: schema))
        } catch {
            Log.warning("WATCH unavailable: cannot install change triggers (\(error))")
        }
        if !done.isEmpty { try connection.execute("NOTIFY \(schemaChannel)") }
        return done
    }

    private static func appliedMigrations(_ connection: Connection) throws -> [Int: Applied] {
        let exists = try connection.query("SELECT to_regclass('records.schema_migrations') IS NOT NULL").bool(0, 0) ?? false
        guard exists else { return [:] }
        let result = try connection.query("SELECT version, name, checksum, to_char(applied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM records.schema_migrations")
        var applied: [Int: Applied] = [:]
        for row in 0..<result.rowCount {
            let version = result.int(row, 0)!
            applied[version] = Applied(version: version, name: result.string(row, 1)!, checksum: result.string(row, 2)!, appliedAt: result.string(row, 3)!)
        }
        return applied
    }

    private static func checksum(_ sql: String, _ connection: Connection) throws -> String {
        try connection.query("SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", [sql]).string(0, 0)!
    }
}
