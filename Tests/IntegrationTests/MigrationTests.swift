import Foundation
import Postgres
import Testing

@Suite struct MigrationTests {
    /// A copy of the repository's migrations that a test may change.
    private func migrationsCopy() throws -> String {
        let directory = NSTemporaryDirectory() + "migrations-" + UUID().uuidString
        try FileManager.default.copyItem(atPath: TestEnvironment.migrations, toPath: directory)
        return directory
    }

    @Test func appliedOnceAndOnlyOnce() throws {
        let url = try TestEnvironment.freshDatabase()
        let first = try runRecordsd(["migrate", "--database", url, "--migrations", TestEnvironment.migrations])
        #expect(first.status == 0, "\(first.error)")
        #expect(first.output == "applied 2 migration(s): 0001_sample_domain, 0002_per_user_records\n")
        let second = try runRecordsd(["migrate", "--database", url, "--migrations", TestEnvironment.migrations])
        #expect(second.output == "up to date: 2 migration(s) applied before\n")
        let status = try runRecordsd(["migrate", "status", "--database", url, "--migrations", TestEnvironment.migrations])
        #expect(status.output.hasPrefix("0001  sample_domain                 applied 20"))
        let db = try Connection(url)
        #expect(try db.query("SELECT count(*) FROM records.schema_migrations").string(0, 0) == "2")
        #expect(try db.query("SELECT version, name, length(checksum) FROM records.schema_migrations").string(0, 2) == "64")
    }

    /// The compose stack's owner is named `records`, like recordsd's own schema, so its
    /// search_path ("$user", public) began with that schema: the sample tables were created
    /// there and the replicas served 0 entities. Migrations create in the served schema.
    @Test func migrationsCreateTheServedSchemasTablesWhateverTheOwnersPath() throws {
        let url = try TestEnvironment.freshDatabase()
        var owner = URLComponents(string: url)!
        owner.queryItems = [URLQueryItem(name: "options", value: "-csearch_path=records,public")]
        let migrated = try runRecordsd(["migrate", "--database", owner.string!, "--migrations", TestEnvironment.migrations])
        #expect(migrated.status == 0, "\(migrated.error)")
        let db = try Connection(url)
        #expect(try db.query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").string(0, 0) == "11")
        let client = try TestServer(databaseURL: url, arguments: ["--no-migrate"]).client()
        #expect(try client.send("ENTITIES").status == "+OK 11 entities")
    }

    @Test func aChangedAppliedFileStopsStartUp() throws {
        let url = try TestEnvironment.freshDatabase()
        let directory = try migrationsCopy()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try runRecordsd(["migrate", "--database", url, "--migrations", directory]).status == 0)
        let file = directory + "/0001_sample_domain.sql"
        try (try String(contentsOfFile: file, encoding: .utf8) + "\n-- edited\n").write(toFile: file, atomically: false, encoding: .utf8)
        let serve = try runRecordsd(["serve", "--listen", "127.0.0.1:0", "--database", url, "--migrations", directory])
        #expect(serve.status == 1)
        #expect(serve.error.contains("migration 0001_sample_domain.sql was changed after it was applied"))
        let status = try runRecordsd(["migrate", "status", "--database", url, "--migrations", directory])
        #expect(status.output.contains("CHANGED since applied"))
        #expect(status.status == 1)
    }

    @Test func aFailingMigrationIsRolledBackAndNamed() throws {
        let url = try TestEnvironment.freshDatabase()
        let directory = try migrationsCopy()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "CREATE TABLE broken (id bigint PRIMARY KEY);\nSELECT no_such_function();\n"
            .write(toFile: directory + "/0099_broken.sql", atomically: false, encoding: .utf8)
        let result = try runRecordsd(["migrate", "--database", url, "--migrations", directory])
        #expect(result.status == 1)
        #expect(result.error.contains("migration 0099_broken.sql failed and was rolled back"))
        let db = try Connection(url)
        #expect(try db.query("SELECT to_regclass('public.broken') IS NULL").bool(0, 0) == true)
        #expect(try db.query("SELECT count(*) FROM records.schema_migrations").string(0, 0) == "2")
    }

    @Test func twoServersStartingTogetherApplyTheSchemaOnce() throws {
        let url = try TestEnvironment.freshDatabase()
        let started = Locked<[TestServer]>([])
        let errors = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            do {
                let server = try TestServer(databaseURL: url)
                started.with { $0.append(server) }
            } catch {
                errors.with { $0.append("\(error)") }
            }
        }
        let servers = started.value, failures = errors.value
        #expect(failures.isEmpty, "\(failures)")
        #expect(servers.count == 2)
        for server in servers { #expect(try server.client().send("ENTITIES").status == "+OK 11 entities") }
        #expect(try Connection(url).query("SELECT count(*) FROM records.schema_migrations").string(0, 0) == "2")
        let applied = servers.map { $0.log.contains("applied migration 0001_sample_domain.sql") }
        #expect(applied.filter { $0 }.count == 1)
    }

    @Test func theModelReloadsWhenAnotherProcessMigrates() throws {
        let url = try TestEnvironment.freshDatabase()
        let directory = try migrationsCopy()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try TestServer(databaseURL: url, arguments: ["--migrations", directory])
        let client = try server.client()
        #expect(try client.send("DESCRIBE ticket").status.hasPrefix("-ERR UNKNOWN"))
        try "CREATE TABLE ticket (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, title text NOT NULL);\nCREATE TABLE log_line (message text);\n"
            .write(toFile: directory + "/0099_ticket.sql", atomically: false, encoding: .utf8)
        #expect(try runRecordsd(["migrate", "--database", url, "--migrations", directory]).status == 0)
        let reply = try eventually({ try client.send("DESCRIBE ticket") }, until: { $0.ok })
        #expect(reply.status == "+OK ticket: 2 attributes, 0 relationships")
        #expect(try client.send("DESCRIBE log_line").status == "-ERR UNKNOWN 'log_line' is not served: no primary key")
        #expect(try client.send("ENTITIES").lines.contains("log_line       not served: no primary key"))
        // GENERATED ALWAYS identity keys take pre-allocated ids too.
        try client.ok("INSERT ticket AS #t title=\"first\"")
        #expect(try client.send("SAVE").status == "+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
    }

    /// A pending value for a column a migration dropped is refused at SAVE, not lost (it was
    /// written without it, and SAVE said +OK).
    @Test func aValueForADroppedColumnIsRefusedNotLost() throws {
        let server = try TestServer()
        let client = try server.client()
        try server.database().execute("CREATE TABLE sticker (id serial PRIMARY KEY, label text, color text)")
        kill(server.process.processIdentifier, SIGHUP)
        _ = try eventually({ try client.send("DESCRIBE sticker") }, until: { $0.ok })
        try client.ok(#"INSERT sticker AS #s label="one" color="blue""#)
        try server.database().execute("ALTER TABLE sticker DROP COLUMN color")
        kill(server.process.processIdentifier, SIGHUP)
        _ = try eventually({ try client.send("DESCRIBE sticker") }, until: { $0.status == "+OK sticker: 2 attributes, 0 relationships" })
        let refused = try client.send("SAVE")
        #expect(refused.status.hasPrefix("-ERR VALIDATION"), "\(refused)")
        #expect(refused.lines.contains("#s sticker: color no longer exists (the model changed since it was set): ROLLBACK, or set the unit again"), "\(refused)")
        #expect(try server.database().query("SELECT count(*) FROM sticker").string(0, 0) == "0")
    }

    @Test func sighupReloadsTheModel() throws {
        let server = try TestServer()
        let client = try server.client()
        try server.database().execute("CREATE TABLE widget (id serial PRIMARY KEY, label text)")
        kill(server.process.processIdentifier, SIGHUP)
        let reply = try eventually({ try client.send("DESCRIBE widget") }, until: { $0.ok })
        #expect(reply.status == "+OK widget: 2 attributes, 0 relationships")
    }

    @Test func pendingChangesKeepTheirExactTableAcrossAReload() throws {
        let (server, db, client) = try TestServer.serving(#"CREATE TABLE "Foo" (id int PRIMARY KEY, v text); CREATE TABLE foo (id int PRIMARY KEY, v text)"#,
                                                          table: "Foo")
        try client.ok(#"INSERT Foo id=1 v="meant for Foo""#)
        try db.execute(#"DROP TABLE "Foo""#)
        kill(server.process.processIdentifier, SIGHUP)
        _ = eventually({ server.log.components(separatedBy: "model reloaded").count }, until: { $0 >= 3 })
        // "Foo" is gone: the insert is refused, never written into foo.
        let saved = try client.send("SAVE")
        #expect(saved.status == "-ERR VALIDATION 1 problem(s); nothing was saved")
        #expect(saved.lines == ["#F1 Foo: the entity no longer exists"])
        #expect(try db.query("SELECT count(*) FROM foo").string(0, 0) == "0")
    }

    /// A session keeps what its INSERT lines' names named, and their bytes around the values:
    /// after a reload the same line is read against the new model, never the kept one.
    @Test func insertLinesOfAKeptShapeFollowAReload() throws {
        let (server, db, client) = try TestServer.serving("CREATE TABLE gauge (id serial PRIMARY KEY, label text, reading integer)", table: "gauge")
        // Three lines of one shape: the third is read by its bytes, with the kept plan.
        for (index, value) in ["1", "2", "3"].enumerated() {
            #expect(try client.send("INSERT gauge label=\"g\" reading=\(value)").status == "+OK #g\(index + 1) pending insert gauge (\(index + 1) pending)")
        }
        try db.execute("ALTER TABLE gauge RENAME COLUMN reading TO level; ALTER TABLE gauge ALTER COLUMN label TYPE integer USING 0")
        kill(server.process.processIdentifier, SIGHUP)
        _ = try eventually({ try client.send("DESCRIBE gauge") }, until: { $0.lines.contains { $0.hasPrefix("level") } })
        let stale = try client.send("INSERT gauge label=\"g\" reading=4").status
        #expect(stale == "-ERR VALIDATION gauge.label expects an integer, not a string, got \"g\"", "\(stale)")
        #expect(try client.send("INSERT gauge label=5 reading=4").status == "-ERR UNKNOWN gauge has no attribute or relationship 'reading'")
        #expect(try client.send("INSERT gauge label=5 level=4").status == "+OK #g4 pending insert gauge (4 pending)")
        #expect(try client.send("ROLLBACK").status == "+OK rolled back 4 pending change(s)")
    }
}
