import Postgres
import RecordsProtocol

public struct UserError: Error, CustomStringConvertible {
    public var description: String
}

/// Users live in the server's own schema, `records.users`, never served as entities. Passwords
/// are hashed by pgcrypto's bcrypt (`crypt(password, gen_salt('bf', 10))`): salted and slow,
/// and only the hash is stored. Passwords travel to PostgreSQL as parameters, never in SQL text
/// (set log_statement to 'none' or 'ddl' on servers that log statements with their parameters).
public enum Users {
    public static let channel = "records_users"

    /// Creates what authentication needs; run under the migration lock. pgcrypto is a trusted
    /// extension (PostgreSQL 13+): the database owner may create it. Made in recordsd's own
    /// schema when missing; one the database has already is used where it is (`pgcrypto`).
    static func ensureSchema(_ connection: Connection) throws {
        try connection.execute("""
            CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA records;
            CREATE TABLE IF NOT EXISTS records.users (
                name          text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.@-]{1,64}$'),
                role          text NOT NULL CHECK (role IN ('reader', 'writer', 'admin')),
                password_hash text NOT NULL,
                created_at    timestamptz NOT NULL DEFAULT now()
            );
            -- The PostgreSQL role a user's work runs as (row-level security); NULL: the server's.
            ALTER TABLE records.users ADD COLUMN IF NOT EXISTS db_role text;
            """)
    }

    public struct Account: Sendable, Equatable {
        public var name: String
        public var role: Role
        public var createdAt: String
        public var databaseRole: String?
    }

    /// A signed-in user's rights: recordsd's role, and the PostgreSQL role its work runs as.
    public struct Grant: Sendable, Equatable {
        public var role: Role
        public var databaseRole: String?
        /// When the user was added: a user removed and added again is another user, and the
        /// sessions of the first are signed out.
        public var since = ""
    }

    public static func count(_ connection: Connection) throws -> Int {
        guard try connection.query("SELECT to_regclass('records.users') IS NOT NULL").bool(0, 0) == true else { return 0 }
        return try connection.query("SELECT count(*) FROM records.users").int(0, 0) ?? 0
    }

    public static func add(_ name: String, role: Role, password: String, databaseRole: String? = nil, _ connection: Connection) throws {
        try validate(name: name, password: password)
        if let databaseRole {
            // The role must exist and be one the server's login may take: found now, not at sign-in.
            let usable = try connection.query("SELECT pg_has_role(current_user, r.oid, 'MEMBER') FROM pg_roles r WHERE r.rolname = $1", [databaseRole])
            guard usable.rowCount == 1 else { throw UserError(description: "no PostgreSQL role \(databaseRole)") }
            guard usable.bool(0, 0) == true else {
                throw UserError(description: "PostgreSQL role \(databaseRole) is not granted to the server's login: GRANT \(databaseRole) TO <recordsd's role>")
            }
        }
        let crypto = try pgcrypto(connection)
        let result = try connection.query("""
            INSERT INTO records.users (name, role, password_hash, db_role) VALUES ($1, $2, \(crypto).crypt($3, \(crypto).gen_salt('bf', 10)), $4)
            ON CONFLICT (name) DO NOTHING
            """, [name, role.name, password, databaseRole])
        guard result.affectedRows == 1 else { throw UserError(description: "user \(name) already exists") }
        try connection.execute("NOTIFY \(channel)")
    }

    public static func setPassword(_ name: String, password: String, _ connection: Connection) throws {
        try validate(name: name, password: password)
        let crypto = try pgcrypto(connection)
        let result = try connection.query("UPDATE records.users SET password_hash = \(crypto).crypt($2, \(crypto).gen_salt('bf', 10)) WHERE name = $1", [name, password])
        guard result.affectedRows == 1 else { throw UserError(description: "no user \(name)") }
    }

    /// Removes a user, never the last admin: someone must remain who can manage users, and a
    /// server that required sign-in goes on requiring it.
    public static func remove(_ name: String, _ connection: Connection) throws {
        let result = try connection.query("""
            DELETE FROM records.users WHERE name = $1
              AND NOT (role = 'admin' AND (SELECT count(*) FROM records.users WHERE role = 'admin') = 1)
            """, [name])
        guard result.affectedRows == 1 else {
            let role = try connection.query("SELECT role FROM records.users WHERE name = $1", [name]).string(0, 0)
            throw UserError(description: role == nil ? "no user \(name)" : "\(name) is the last admin: add another admin before removing it")
        }
        try connection.execute("NOTIFY \(channel)")
    }

    /// Every user's rights, to check signed-in sessions against (a removed user loses its
    /// rights, a changed role or database role applies). `db_role` read through jsonb: a
    /// server with --no-migrate may face a users table from before it.
    public static func roles(_ connection: Connection) throws -> [String: Grant] {
        guard try connection.query("SELECT to_regclass('records.users') IS NOT NULL").bool(0, 0) == true else { return [:] }
        let result = try connection.query("SELECT name, role, to_jsonb(u) ->> 'db_role', created_at::text FROM records.users u")
        var roles: [String: Grant] = [:]
        for row in 0..<result.rowCount {
            if let name = result.string(row, 0), let role = result.string(row, 1).flatMap(Role.init(name:)) {
                roles[name] = Grant(role: role, databaseRole: result.string(row, 2), since: result.string(row, 3) ?? "")
            }
        }
        return roles
    }

    public static func list(_ connection: Connection) throws -> [Account] {
        guard try count(connection) > 0 else { return [] }
        let result = try connection.query("SELECT name, role, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), to_jsonb(u) ->> 'db_role' FROM records.users u ORDER BY name")
        return (0..<result.rowCount).map {
            Account(name: result.string($0, 0)!, role: Role(name: result.string($0, 1)!) ?? .reader, createdAt: result.string($0, 2)!,
                    databaseRole: result.string($0, 3))
        }
    }

    /// The user's rights when the password matches, else nil. An unknown name costs the same
    /// bcrypt work as a known one, so timing does not tell whether a user exists.
    public static func verify(_ name: String, password: String, _ connection: Connection) throws -> Grant? {
        let crypto = try pgcrypto(connection)
        let result = try connection.query("""
            SELECT u.role, u.password_hash = \(crypto).crypt($2, u.password_hash), to_jsonb(u) ->> 'db_role', u.created_at::text
            FROM (SELECT 1) AS one LEFT JOIN records.users u ON u.name = $1
            """, [name, password])
        guard let roleName = result.string(0, 0) else {
            _ = try connection.query("SELECT \(crypto).crypt($1, $2)", [password, dummyHash])
            return nil
        }
        guard result.bool(0, 1) == true, let role = Role(name: roleName) else { return nil }
        return Grant(role: role, databaseRole: result.string(0, 2), since: result.string(0, 3) ?? "")
    }

    /// The schema pgcrypto lives in, quoted by PostgreSQL (`regnamespace`'s text), to call its
    /// functions by their full name: the server's login need not have that schema on its
    /// search_path (an owner named `records` once put it in recordsd's own schema, out of the
    /// app role's path, and every sign-in failed).
    static func pgcrypto(_ connection: Connection) throws -> String {
        let found = try connection.query("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pgcrypto'")
        guard let schema = found.string(0, 0) else {
            throw UserError(description: "pgcrypto is not installed: run `recordsd migrate` as the database's owner")
        }
        return schema
    }

    /// A bcrypt hash of nothing in particular, cost 10, for unknown names.
    private static let dummyHash = "$2a$10$CwTycUXWue0Thq9StjUM0uJ8DPLKXt1FYlwYpQW9rVUZ0mL8p/5sS"

    static func validate(name: String, password: String) throws {
        guard name.range(of: "^[A-Za-z0-9_.@-]{1,64}$", options: .regularExpression) != nil else {
            throw UserError(description: "user names are 1 to 64 letters, digits or _ . @ -")
        }
        guard password.count >= 8 else { throw UserError(description: "passwords have at least 8 characters") }
        // bcrypt reads 72 bytes: a longer password would match anything sharing its start.
        guard password.utf8.count <= 72 else { throw UserError(description: "passwords have at most 72 bytes") }
    }
}
