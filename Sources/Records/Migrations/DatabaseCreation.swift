import Postgres

/// The embedded cluster's database: made on first start.
public enum DatabaseCreation {
    /// Creates database `name` unless it exists, through the cluster's `postgres` database.
    public static func createIfMissing(_ name: String, conninfo: String) throws {
        let connection = try Connection(conninfo, applicationName: "recordsd")
        defer { connection.close() }
        let exists = try connection.query("SELECT count(*)::text FROM pg_database WHERE datname = $1", [name]).string(0, 0)
        guard exists == "0" else { return }
        try connection.execute("CREATE DATABASE \(SQL.identifier(name))")
    }
}
