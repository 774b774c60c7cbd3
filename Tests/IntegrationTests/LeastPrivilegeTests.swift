import Foundation
import Postgres
import Testing

/// recordsd served as the role `docker/postgres/app-role.sql` makes: data, never schema.
@Suite struct LeastPrivilegeTests {
    static var psql: String {
        (TestEnvironment.environment["RECORDSD_PG_BIN"].map { $0 + "/psql" }) ?? "/usr/bin/psql"
    }

    /// A fresh database whose owner (the cluster's superuser) ran app-role.sql, then applied
    /// the migrations; `app` connects as the role made, `role` is its name (app_...).
    static func appRoleDatabase() throws -> (owner: String, app: String, role: String) {
        let owner = try TestEnvironment.freshDatabase()
        let role = "app_" + UUID().uuidString.prefix(8).lowercased()
        let grant = try runProcess(psql, [owner, "-v", "ON_ERROR_STOP=1", "-v", "app_role=\(role)", "-v", "app_password=app-secret-1",
                                          "-v", "owner=postgres", "-f", TestEnvironment.root + "/docker/postgres/app-role.sql"])
        guard grant.status == 0 else { throw TestFailure("app-role.sql: \(grant.error)") }
        let migrated = try runRecordsd(["migrate", "--database", owner, "--migrations", TestEnvironment.migrations])
        guard migrated.status == 0 else { throw TestFailure("migrate: \(migrated.error)") }
        var components = URLComponents(string: owner)!
        components.user = role
        components.password = "app-secret-1"
        return (owner, components.string!, role)
    }

    @Test func theAppRoleServesEverythingButCannotChangeTheSchema() throws {
        let (_, app, _) = try Self.appRoleDatabase()
        let server = try TestServer(databaseURL: app, arguments: ["--no-migrate"])
        let client = try server.client()
        let watcher = try server.client()
        try watcher.ok("WATCH game")
        try client.ok(#"INSERT department AS #d name="Ops" number=7"#)
        try client.ok("INSERT employee first_name=\"A\" last_name=\"B\" gender=1 department=#d")
        #expect(try client.send("SAVE").status.hasPrefix("+OK saved: 2 inserted"))
        #expect(try client.send("COUNT employee").status == "+OK 1")
        try client.write("IMPORT game\nid,name\n100,Chess\n.\n")
        #expect(try client.readReply().status == "+OK imported 1 record")
        #expect(try client.send("USER ADD ops admin \"ops-password\"").status == "+OK user ops added (admin)")
        let pushed = eventually(tries: 50, { _ = try? watcher.send("PING"); return watcher.pushed }, until: { !$0.isEmpty })
        #expect(pushed.first?.hasPrefix("! game ") == true, "\(pushed)")
        // The schema is out of its reach.
        let connection = try Connection(app)
        #expect(throws: PostgresError.self) { try connection.execute("DROP TABLE game") }
        #expect(throws: PostgresError.self) { try connection.execute("CREATE TABLE intruder (id int)") }
        #expect(throws: PostgresError.self) { try connection.execute("ALTER TABLE employee ADD COLUMN x int") }
    }
}
