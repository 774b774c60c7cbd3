import Postgres

/// The least-privileged role a server serves as: it reads and writes the data, owns nothing, and
/// so is bound by row-level security; the owner migrates. The embedded cluster makes it here, as
/// docker/postgres/app-role.sql does for the compose stack.
public enum ServingRole {
    /// Creates `role` if needed and grants it the data of `schema` and recordsd's own schema in
    /// `database`, now and as migrations add to them.
    public static func grant(_ owner: Connection, role name: String, schema: String, database: String) throws {
        let role = SQL.identifier(name)
        let schemas = [schema, "records"].map(SQL.identifier).joined(separator: ", ")
        if try owner.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [name]).rowCount == 0 {
            try owner.execute("CREATE ROLE \(role) LOGIN")
        }
        try owner.execute("""
            GRANT CONNECT, TEMPORARY ON DATABASE \(SQL.identifier(database)) TO \(role);
            GRANT USAGE ON SCHEMA \(schemas) TO \(role);
            GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \(schemas) TO \(role);
            GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA \(schemas) TO \(role);
            GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA \(schemas) TO \(role);
            ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO \(role);
            ALTER DEFAULT PRIVILEGES GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO \(role);
            ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO \(role);
            """)
    }

    /// How the connected role escapes row-level security, if it does: "a superuser",
    /// "a BYPASSRLS role", or nil.
    public static func bypassesRowSecurity(_ connection: Connection) throws -> String? {
        let found = try connection.query("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        if found.bool(0, 0) == true { return "a superuser" }
        return found.bool(0, 1) == true ? "a BYPASSRLS role" : nil
    }
}
