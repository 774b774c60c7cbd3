import Postgres

/// What `recordsd uninstall` removes: recordsd's schema `records` (its tables, functions,
/// pgcrypto when recordsd made it there) and the change-feed triggers it put on the served
/// tables. Nothing else: every drop is RESTRICT, so an object of the application that depends
/// on one of recordsd's stops it (PostgreSQL names the object), and it all happens in one
/// transaction, rolled back on any failure or when only asked what it would do.
public enum Uninstall {
    public struct Report: Sendable {
        /// Each thing dropped (or that would be), as a person reads it.
        public var dropped: [String] = []
        /// Why nothing was dropped, when something stops it.
        public var blocker: String?
    }

    public enum Failure: Error, CustomStringConvertible {
        /// recordsd's servers are connected to the database.
        case serversConnected(Int)
        public var description: String {
            switch self {
            case .serversConnected(let count): "\(count) recordsd server(s) are connected to this database: stop them first"
            }
        }
    }

    public static func isInstalled(_ connection: Connection) throws -> Bool {
        try connection.query("SELECT to_regnamespace('records') IS NOT NULL").bool(0, 0) == true
    }

    /// "view keep.admins depends on table records.users": each object outside recordsd's schema
    /// that depends on one inside it (a view's rule counts as its view; triggers on recordsd's
    /// functions are not counted, they are dropped with it).
    static func dependents(_ connection: Connection) throws -> [String] {
        let found = try connection.query("""
            SELECT DISTINCT dep.type || ' ' || dep.identity || ' depends on ' || ref.type || ' ' || ref.identity
            FROM pg_depend d
            CROSS JOIN LATERAL (SELECT CASE WHEN d.classid = 'pg_rewrite'::regclass THEN 'pg_class'::regclass ELSE d.classid END AS classid,
                                       CASE WHEN d.classid = 'pg_rewrite'::regclass THEN (SELECT ev_class FROM pg_rewrite WHERE oid = d.objid) ELSE d.objid END AS objid,
                                       CASE WHEN d.classid = 'pg_rewrite'::regclass THEN 0 ELSE d.objsubid END AS objsubid) o
            CROSS JOIN LATERAL pg_identify_object(o.classid, o.objid, o.objsubid) dep
            CROSS JOIN LATERAL pg_identify_object(d.refclassid, d.refobjid, 0) ref
            WHERE d.deptype = 'n' AND ref.schema = 'records' AND dep.schema IS DISTINCT FROM 'records'
              AND d.classid <> 'pg_trigger'::regclass AND ref.type <> 'index'
              AND NOT (d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
                       AND d.refobjid = (SELECT ev_class FROM pg_rewrite WHERE oid = d.objid))
            ORDER BY 1
            """)
        return found.column(0).compactMap { $0 }
    }

    /// Drops everything of recordsd's; `commit: false` rolls back at the end (what would go).
    public static func run(_ connection: Connection, commit: Bool) throws -> Report {
        // Each running server keeps one watcher connection (it LISTENs and holds its liveness lock).
        let servers = try connection.query("""
            SELECT count(*) FROM pg_stat_activity WHERE application_name = 'recordsd-watcher' AND datname = current_database()
            """).int(0, 0) ?? 0
        guard servers == 0 else { throw Failure.serversConnected(servers) }
        var report = Report()
        try connection.execute("BEGIN")
        do {
            // The triggers recordsd put on other schemas' tables: those whose function is its.
            let triggers = try connection.query("""
                SELECT t.tgname, t.tgrelid::regclass::text FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
                WHERE p.pronamespace = 'records'::regnamespace AND NOT t.tgisinternal
                  AND (SELECT relnamespace FROM pg_class WHERE oid = t.tgrelid) <> 'records'::regnamespace
                ORDER BY 2, 1
                """)
            var triggered: [String] = []
            for row in 0..<triggers.rowCount {
                let (name, table) = (triggers.string(row, 0)!, triggers.string(row, 1)!)
                try connection.execute("DROP TRIGGER \(SQL.identifier(name)) ON \(table) RESTRICT")
                if triggered.last != table { triggered.append(table) }
            }
            if !triggered.isEmpty {
                report.dropped.append("the change-feed triggers of \(triggered.count) table(s): " + triggered.joined(separator: ", "))
            }
            // Its tables (their indexes, sequences and triggers with them), together.
            let tables = try connection.query("""
                SELECT oid::regclass::text FROM pg_class WHERE relnamespace = 'records'::regnamespace AND relkind IN ('r', 'p') ORDER BY 1
                """).column(0).compactMap { $0 }
            if !tables.isEmpty {
                try connection.execute("DROP TABLE " + tables.joined(separator: ", ") + " RESTRICT")
                report.dropped += tables.map { "table \($0)" }
            }
            // pgcrypto when it lives in recordsd's schema (recordsd made it there).
            let extensions = try connection.query("SELECT extname FROM pg_extension WHERE extnamespace = 'records'::regnamespace ORDER BY 1")
                .column(0).compactMap { $0 }
            for name in extensions {
                try connection.execute("DROP EXTENSION \(SQL.identifier(name)) RESTRICT")
                report.dropped.append("extension \(name)")
            }
            let functions = try connection.query("""
                SELECT oid::regprocedure::text FROM pg_proc WHERE pronamespace = 'records'::regnamespace ORDER BY 1
                """).column(0).compactMap { $0 }
            if !functions.isEmpty {
                try connection.execute("DROP FUNCTION " + functions.joined(separator: ", ") + " RESTRICT")
                report.dropped += functions.map { "function \($0)" }
            }
            // Last the schema, empty now unless someone put something of theirs in it.
            try connection.execute("DROP SCHEMA records RESTRICT")
            report.dropped.append("schema records")
            try connection.execute(commit ? "COMMIT" : "ROLLBACK")
        } catch let error as PostgresError where error.sqlState == .dependentObjectsStillExist {
            try? connection.execute("ROLLBACK")
            // Named from the catalogs, not from PostgreSQL's message, which speaks its locale's language.
            let dependents = (try? Self.dependents(connection)) ?? []
            report.blocker = "objects of the database depend on recordsd's: "
                + (dependents.isEmpty ? "PostgreSQL names them: \(error.message)" : dependents.joined(separator: ", "))
                + "; drop or change them first"
            report.dropped = []
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
        return report
    }
}
