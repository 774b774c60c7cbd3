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
    /// `migratedFirst`: the migrations ran before app-role.sql (a database that was served
    /// before); `ownerPath`: the owner's search_path while it migrates.
    static func appRoleDatabase(migratedFirst: Bool = false, ownerPath: String? = nil) throws -> (owner: String, app: String, role: String) {
        let owner = try TestEnvironment.freshDatabase()
        let role = "app_" + UUID().uuidString.prefix(8).lowercased()
        func grant() throws {
            let grant = try runProcess(psql, [owner, "-v", "ON_ERROR_STOP=1", "-v", "app_role=\(role)", "-v", "app_password=app-secret-1",
                                              "-v", "owner=postgres", "-f", TestEnvironment.root + "/docker/postgres/app-role.sql"])
            guard grant.status == 0 else { throw TestFailure("app-role.sql: \(grant.error)") }
        }
        if !migratedFirst { try grant() }
        var migrating = URLComponents(string: owner)!
        if let ownerPath { migrating.queryItems = [URLQueryItem(name: "options", value: "-csearch_path=\(ownerPath)")] }
        let migrated = try runRecordsd(["migrate", "--database", migrating.string!, "--migrations", TestEnvironment.migrations])
        guard migrated.status == 0 else { throw TestFailure("migrate: \(migrated.error)") }
        if migratedFirst { try grant() }
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

    /// The file says it may run on a database migrated before it: under PostgreSQL 15 the
    /// tables in `public` (a schema pg_database_owner owns) were left out, and the role could
    /// read nothing.
    @Test func theAppRoleMadeAfterTheMigrationsServesToo() throws {
        let (_, app, _) = try Self.appRoleDatabase(migratedFirst: true)
        let client = try TestServer(databaseURL: app, arguments: ["--no-migrate"]).client()
        try client.ok(#"INSERT department name="Late" number=8"#)
        #expect(try client.send("SAVE").status.hasPrefix("+OK saved: 1 inserted"))
        #expect(try client.send("COUNT department").status == "+OK 1")
    }

    /// An owner whose search_path starts with recordsd's own schema (the compose stack's owner
    /// is named `records`: "$user" is that schema) once got pgcrypto there, out of the app
    /// role's path: adding a user and every sign-in failed (`function gen_salt does not exist`).
    @Test func usersWorkForTheAppRoleWhereverPgcryptoIs() throws {
        let (_, app, _) = try Self.appRoleDatabase(ownerPath: "records,public")
        let added = try runRecordsd(["user", "add", "ops", "--role", "admin", "--no-migrate", "--database", app], input: "ops-password-1\n")
        #expect(added.status == 0, "\(added.error)")
        let client = try TestServer(databaseURL: app, arguments: ["--no-migrate"]).client()
        #expect(try client.send("AUTH ops ops-password-1").status == "+OK signed in as ops (admin)")
    }
}
