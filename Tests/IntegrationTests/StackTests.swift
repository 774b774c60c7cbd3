import Foundation
import Postgres
import Testing

/// The stack as deployed: PostgreSQL, the migrations applied once by the database's owner, two
/// recordsd replicas serving as a least-privileged role over TLS, HAProxy in front. The same
/// suite runs inside docker-compose (`scripts/compose-test`: the `integration` service) and
/// against the same shape started as processes on loopback (`scripts/local-stack/run`), both
/// named by the variables `StackEnvironment` reads. scripts/test runs both.
@Suite struct StackTests {
    @Test func bothReplicasServeTheSameModelWithMigrationsAppliedOnce() throws {
        let stack = try StackEnvironment.current()
        for endpoint in [stack.first, stack.second, stack.balancer] {
            let client = try stack.client(endpoint)
            #expect(try client.send("PING").status == "+OK PONG")
            #expect(try client.send("ENTITIES").status == "+OK 11 entities")
        }
        let applied = try Connection(stack.databaseURL).query("SELECT count(*) FROM records.schema_migrations").int(0, 0)
        #expect(applied == (try migrationFileCount()))
    }

    @Test func aSaveOnOneReplicaIsSeenAndWatchedOnTheOther() throws {
        let stack = try StackEnvironment.current()
        let watcher = try stack.client(stack.second)
        try watcher.ok("WATCH game")
        let editor = try stack.client(stack.first)
        let name = "stack-" + UUID().uuidString
        try editor.ok("INSERT game AS #g name=\"\(name)\"")
        let id = try editor.send("SAVE").lines[0].split(separator: " ")[2]
        var event: String?
        while event == nil, let line = try watcher.readLine() {
            if line == "! game \(id) inserted" { event = line }
        }
        #expect(event != nil)
        #expect(try watcher.send("COUNT game WHERE name == \"\(name)\"").status == "+OK 1")
        try watcher.ok("UNWATCH")
        // The stack outlives the suite: what this test wrote goes.
        try editor.ok("DELETE game WHERE name == \"\(name)\"")
        #expect(try editor.send("SAVE").status.hasPrefix("+OK saved: 0 inserted, 0 updated, 1 deleted"))
    }

    @Test func theBalancerServesTheReplicas() throws {
        let stack = try StackEnvironment.current()
        let name = "balanced-" + UUID().uuidString
        let client = try stack.client(stack.balancer)
        try client.ok("INSERT game name=\"\(name)\"")
        #expect(try client.send("SAVE").status.hasPrefix("+OK saved: 1 inserted"))
        try client.ok("DELETE game WHERE name == \"\(name)\"")
        #expect(try client.send("SAVE").status.hasPrefix("+OK saved: 0 inserted, 0 updated, 1 deleted"))
    }

    /// The replicas connect as the role docker/postgres/app-role.sql made: it reads and writes
    /// every table, and can change none.
    @Test func theReplicasServeAsALeastPrivilegedRole() throws {
        let stack = try StackEnvironment.current()
        _ = try stack.client(stack.first).send("COUNT game")
        _ = try stack.client(stack.second).send("COUNT game")
        let db = try Connection(stack.databaseURL)
        let roles = try db.query("""
            SELECT DISTINCT usename::text FROM pg_stat_activity
            WHERE application_name = 'recordsd' AND datname = current_database() AND pid <> pg_backend_pid()
            """)
        #expect(roles.rowCount == 1, "\(roles.column(0))")
        guard let role = roles.string(0, 0) else { return }
        let rights = try db.query("""
            SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb,
                   has_schema_privilege(r.oid, 'public', 'CREATE'),
                   bool_and(has_table_privilege(r.oid, c.oid, 'SELECT, INSERT, UPDATE, DELETE')),
                   bool_or(pg_has_role(r.oid, c.relowner, 'USAGE'))
            FROM pg_roles r, pg_class c
            WHERE r.rolname = $1 AND c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
            GROUP BY r.oid, r.rolsuper, r.rolcreaterole, r.rolcreatedb
            """, [role])
        #expect((0..<6).map { rights.string(0, $0) } == ["f", "f", "f", "f", "t", "f"], "\(role)")
    }
}

/// The migrations this suite's stack applied (the repository's, or the image's).
func migrationFileCount() throws -> Int {
    try FileManager.default.contentsOfDirectory(atPath: TestEnvironment.migrations).filter { $0.hasSuffix(".sql") }.count
}
