import Foundation
import Postgres
import Testing

/// A database as people already have one (Tests/Fixtures/toolshed.sql: triggers, partitions,
/// domains, enums, arrays, plural and quoted names, views), served as it is. Each test answers
/// one thing a user found wrong on such databases; the expected value comes from PostgreSQL.
@Suite struct ExistingDatabaseTests {
    static var toolshed: String {
        get throws { try String(contentsOfFile: TestEnvironment.root + "/Tests/Fixtures/toolshed.sql", encoding: .utf8) }
    }

    /// Some rows in every table, as plain SQL.
    static let rows = """
        INSERT INTO branches VALUES ('NOR', 'North', 'Oslo', '2020-01-01'), ('SOU', 'South', 'Bergen', NULL);
        INSERT INTO members (email, "Full Name", home, interests) VALUES
            ('ann@lee.io', 'Ann Lee', 'NOR', '{wood,metal}'), ('bo@chan.io', 'Bo Chan', 'SOU', '{}'), ('cy@x.io', 'Cy', 'NOR', '{bikes}');
        UPDATE members SET sponsor_id = 1 WHERE id IN (2, 3);
        INSERT INTO tools (name, branch, tags, sizes, deposit, weight_kg, service, serials) VALUES
            ('Drill', 'NOR', '{power,Trailers}', '{8,10}', 25.50, 1.5, '{2026-01-05,2026-06-01}', '{6f1c0d52-0000-4000-8000-000000000001}'),
            ('Saw', 'SOU', NULL, '{}', 10, 0.8, NULL, NULL),
            ('Sander', 'NOR', '{power}', '{120,240,60}', 12.25, 2.25, '{2026-03-03}', NULL);
        INSERT INTO categories VALUES (1, 'Power tools', NULL), (2, 'Drills', 1), (3, 'Hand tools', NULL);
        INSERT INTO tools_categories VALUES (1, 1), (1, 2), (2, 3), (3, 1);
        INSERT INTO repairs VALUES (1, 1, '2026-07-20 10:05:00+00', 12.5), (3, 2, '2026-02-01 08:00:00+00', 3);
        INSERT INTO loans (tool_id, member_id, lent_on, fee) VALUES
            (1, 1, '2026-02-01', 1.25), (2, 2, '2026-08-01', 2.50), (1, 2, '2026-08-03', 3.33), (3, 3, '2026-03-09', 0.10);
        INSERT INTO orders (member_id, total) VALUES (1, 35.75), (2, 10);
        INSERT INTO order_lines VALUES (1, 1, 1, 25.5), (1, 2, 3, 10.25), (2, 1, 2, 10);
        REFRESH MATERIALIZED VIEW branch_stock;
        """

    /// A server of the toolshed on a fresh database, with its rows.
    static func toolshedServer(_ arguments: [String] = []) throws -> (TestServer, Connection, LineClient) {
        let schema = try Schema(try toolshed + "\n" + rows)
        let server = try TestServer(schema: schema, arguments: arguments)
        return (server, try server.database(), try server.client())
    }

    /// `film.fulltext` is NOT NULL without a default, and a BEFORE INSERT trigger fills it:
    /// the model must not refuse what PostgreSQL takes. What the trigger leaves null is
    /// PostgreSQL's NOT NULL, answered as VALIDATION naming the record.
    @Test func aColumnATriggerFillsIsNotRequiredUpFront() throws {
        let (_, db, client) = try Self.toolshedServer()
        try client.ok(#"INSERT members AS #m email="dee@x.io" "Full Name"="Dee Ray""#)
        let shown = try client.send("GET members #m")
        #expect(shown.lines.first?.contains(#""search":"'dee':1 'ray':2""#) == true, "\(shown)")
        try client.ok("ROLLBACK")
        try client.ok(#"INSERT members AS #m email="dee@x.io" "Full Name"="Dee Ray""#)
        try client.ok(#"INSERT tools AS #t name="Plane" branch="SOU""#)
        #expect(try client.send("SAVE").status.hasPrefix("+OK saved: 2 inserted"))
        #expect(try db.query(#"SELECT search::text FROM members WHERE email = 'dee@x.io'"#).string(0, 0) == "'dee':1 'ray':2")
        #expect(try db.query("SELECT last_update IS NOT NULL FROM tools WHERE name = 'Plane'").bool(0, 0) == true)
        // DESCRIBE says why it is not required.
        #expect(try client.send("DESCRIBE members").lines.contains { $0.hasPrefix("search ") && $0.contains(" trigger ") })
        // A NOT NULL column the trigger does not fill: PostgreSQL refuses, the record is named.
        try client.ok(#"INSERT members AS #nomail "Full Name"="No Mail""#)
        let refused = try client.send("SAVE")
        #expect(refused.status.hasPrefix("-ERR VALIDATION #nomail"), "\(refused)")
        #expect(refused.status.contains("email"), "\(refused)")
    }

    /// An INCLUDE's ORDER BY takes the keys FIND's own ORDER BY takes: a to-one relationship,
    /// its column, a key path through to-one relationships, `[c]`.
    @Test func anIncludesOrderTakesEverySortKeyFindTakes() throws {
        let (_, db, client) = try Self.toolshedServer()
        func included(_ line: String, _ relationship: String) throws -> [[String: Any]] {
            let reply = try client.send(line)
            guard reply.ok else { throw TestFailure("\(line) -> \(reply)") }
            return try reply.lines.flatMap { line -> [[String: Any]] in
                let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                return object?[relationship] as? [[String: Any]] ?? []
            }
        }
        func column(_ sql: String) throws -> [Int] { try db.query(sql).column(0).map { Int($0!)! } }
        let bySponsor = try included("FIND members WHERE id == 1 INCLUDE members ORDER BY sponsor DESC", "members").map { $0["id"] as! Int }
        #expect(bySponsor == (try column("SELECT id FROM members WHERE sponsor_id = 1 ORDER BY sponsor_id DESC, id")))
        let byColumn = try included("FIND branches INCLUDE tools ORDER BY branch DESC", "tools").map { $0["id"] as! Int }
        // Each branch's tools (the branches in key order) by their branch column, then their key.
        #expect(byColumn == (try column("SELECT id FROM tools ORDER BY branch, id")))
        let byPath = try included(#"FIND tools INCLUDE repairs ORDER BY member.email[c] DESC"#, "repairs").map { $0["tool"] as! Int }
        #expect(byPath == (try column("SELECT r.tool_id FROM repairs r JOIN members m ON m.id = r.member_id ORDER BY r.tool_id, lower(m.email) DESC")))
        let limited = try included("FIND categories WHERE id == 1 INCLUDE tools_categories ORDER BY tool DESC LIMIT 1", "tools_categories")
        #expect(limited.map { $0["tool"] as! Int } == [3])
        #expect(try client.send("FIND branches INCLUDE tools ORDER BY nope").status
                == "-ERR UNKNOWN INCLUDE tools ORDER BY nope: unknown key path 'nope': tools has no attribute or relationship 'nope'")
    }

    /// avg and sum of numeric are numeric, every digit PostgreSQL computes.
    @Test func aggregatesOfNumericStayExact() throws {
        let (_, db, client) = try Self.toolshedServer()
        let reply = try client.send("AGGREGATE loans avg(fee) sum(fee) min(fee)")
        let expected = try db.query("SELECT avg(fee)::text, sum(fee)::text, min(fee)::text FROM loans")
        #expect(reply.lines == [#"{"avg_fee":\#(expected.string(0, 0)!),"sum_fee":\#(expected.string(0, 1)!),"min_fee":\#(expected.string(0, 2)!)}"#], "\(reply)")
        #expect(expected.string(0, 0) == "1.7950000000000000")
    }

    /// A table named in the plural gives its name as it is to the inverse relationship.
    @Test func pluralTablesAreNotPluralisedTwice() throws {
        let (_, _, client) = try Self.toolshedServer()
        func inverses(_ entity: String) throws -> [String] {
            try client.send("DESCRIBE \(entity)").lines.drop { !$0.hasPrefix("relationship ") }.dropFirst()
                .filter { $0.contains("to-many") }.map { String($0.split(separator: " ")[0]) }
        }
        #expect(try inverses("tools") == ["loans", "order_lines", "repairs", "tools_categories"])
        #expect(try inverses("members") == ["loans", "members", "orders", "repairs"])
        #expect(try client.send(#"DESCRIBE branches"#).lines.contains { $0.hasPrefix("Shift Plans ") })
        #expect(try client.send("FIND members WHERE orders.@count > 0 ORDER BY id").lines.count == 2)
    }

    /// Every reply shows a timestamp as GET does, in ISO 8601: UPDATE's reply named the record
    /// by PostgreSQL's text of its key.
    @Test func aTimestampKeyReadsAsGetShowsIt() throws {
        let (_, _, client) = try Self.toolshedServer()
        let reply = try client.send(#"UPDATE repairs tool=1 member=1 done_at="2026-07-20T10:05:00Z" SET cost=13"#)
        #expect(reply.status == #"+OK pending update repairs tool=1 member=1 done_at="2026-07-20T10:05:00+00:00" (1 pending)"#)
        #expect(try client.send("CHANGES").lines.first?.hasPrefix(#"update repairs tool=1 member=1 done_at="2026-07-20T10:05:00+00:00""#) == true)
        let get = try client.send(#"GET repairs tool=1 member=1 done_at="2026-07-20T10:05:00+00:00""#)
        #expect(get.lines.first?.contains(#""done_at":"2026-07-20T10:05:00+00:00""#) == true, "\(get)")
    }

    /// Keys declared on each partition (none on the partitioned table) are the table's
    /// relationships: in DESCRIBE, in a delete's preview, and in SAVE's answer.
    @Test func keysOnPartitionsAreTheirTablesRelationships() throws {
        let (_, db, client) = try Self.toolshedServer()
        let described = try client.send("DESCRIBE loans")
        #expect(described.lines.contains { $0.hasPrefix("tool ") && $0.contains("tools") && $0.contains("cascade") }, "\(described)")
        #expect(described.lines.contains { $0.hasPrefix("member ") && $0.contains("members") && $0.contains("deny") }, "\(described)")
        #expect(try client.send("DESCRIBE tools").lines.contains { $0.hasPrefix("loans ") && $0.contains("to-many") })
        // Member 3 has a loan in the first half: the preview denies, and so does SAVE.
        let denied = try client.send("DELETE members 3")
        #expect(denied.lines == ["deny loans 1"] && denied.status.hasPrefix("+OK pending delete members 3, DENIED by 1"), "\(denied)")
        #expect(try client.send("SAVE").status.hasPrefix("-ERR DENIED"))
        try client.ok("ROLLBACK")
        // Tool 1's loans are in both halves: the cascade counts them all, as PostgreSQL takes them.
        let expected = try db.query("SELECT count(*) FROM loans WHERE tool_id = 1").int(0, 0)!
        let cascade = try client.send("DELETE tools 1")
        #expect(cascade.lines.contains("cascade loans \(expected)"), "\(cascade)")
        #expect(try client.send("SAVE").status.hasPrefix("+OK saved: 0 inserted, 0 updated, 1 deleted"))
        #expect(try db.query("SELECT count(*) FROM loans WHERE tool_id = 1").int(0, 0) == 0)
        #expect(try client.send("FIND loans INCLUDE member").lines.count == (try db.query("SELECT count(*) FROM loans").int(0, 0)!))
    }

    /// Writes made straight into a partition, by SQL, are told to a WATCH of its table, as
    /// writes through the table are.
    @Test func watchHearsWritesIntoPartitions() throws {
        let (_, db, client) = try Self.toolshedServer()
        try client.ok("WATCH loans")
        try db.execute("INSERT INTO loans_2026_h2 (id, tool_id, member_id, lent_on) VALUES (900, 2, 1, '2026-09-09')")
        try db.execute("UPDATE loans_2026_h1 SET fee = 9 WHERE id = 1")
        try db.execute("INSERT INTO loans (id, tool_id, member_id, lent_on) VALUES (901, 2, 1, '2026-03-09')")
        try db.execute("DELETE FROM loans_2026_h2 WHERE id = 900")
        var events: [String] = []
        while events.count < 4, let line = try client.readLine() { if line.hasPrefix("! loans ") { events.append(line) } }
        #expect(events == [#"! loans id=900 lent_on="2026-09-09" inserted"#, #"! loans id=1 lent_on="2026-02-01" updated"#,
                           #"! loans id=901 lent_on="2026-03-09" inserted"#, #"! loans id=900 lent_on="2026-09-09" deleted"#])
    }

    /// ENTITIES accounts for every relation of the schema: what it does not serve, with why.
    @Test func entitiesListsWhatIsNotServedAndWhy() throws {
        let (_, _, client) = try Self.toolshedServer()
        let lines = try client.send("ENTITIES").lines
        for expected in ["available_tools   not served: a view (views have no key to address a record by)",
                         "branch_stock      not served: a materialized view (no key to address a record by)",
                         "loans_2026_h1     not served: a partition of loans: its records are served as that table's",
                         "visits            not served: no primary key"] {
            #expect(lines.contains(expected), "\(lines)")
        }
        #expect(try client.send("FIND loans_2026_h1").status == "-ERR UNKNOWN 'loans_2026_h1' is not served: a partition of loans: its records are served as that table's")
    }

    /// Arrays are arrays: JSON arrays in replies, `[...]` literals on writes (each element
    /// checked against the element's type), their elements compared with ANY, ALL, NONE and
    /// CONTAINS, their length with @count, the whole with == — each read against PostgreSQL's
    /// own answer to the same question.
    @Test func arraysAreServedAsArrays() throws {
        let (_, db, client) = try Self.toolshedServer()
        let reads: [(String, String)] = [
            (#"tags CONTAINS "power""#, "'power' = ANY(tags)"),
            (#"tags CONTAINS[c] "trailers""#, "EXISTS (SELECT 1 FROM unnest(tags) v WHERE lower(v) = 'trailers')"),
            (#"ANY tags BEGINSWITH "Tr""#, "EXISTS (SELECT 1 FROM unnest(tags) v WHERE v LIKE 'Tr%')"),
            ("ALL sizes > 50", "NOT EXISTS (SELECT 1 FROM unnest(sizes) v WHERE (v > 50) IS NOT TRUE)"),
            (#"NONE tags == "power""#, "NOT EXISTS (SELECT 1 FROM unnest(tags) v WHERE v = 'power')"),
            ("sizes.@count >= 2", "coalesce(cardinality(sizes), 0) >= 2"),
            (#"tags == ["power"]"#, "tags = ARRAY['power']"),
            ("tags == nil", "tags IS NULL"),
            (#"ANY service > "2026-05-01""#, "EXISTS (SELECT 1 FROM unnest(service) v WHERE v > '2026-05-01')"),
            (#"ANY serials == "6f1c0d52-0000-4000-8000-000000000001""#, "'6f1c0d52-0000-4000-8000-000000000001' = ANY(serials)"),
        ]
        for (predicate, sql) in reads {
            let reply = try client.send("FIND tools WHERE \(predicate) SELECT id")
            let ids = reply.lines.map { $0.replacingOccurrences(of: #"{"id":"#, with: "").replacingOccurrences(of: "}", with: "") }
            let expected = try db.query("SELECT id::text FROM tools WHERE \(sql) ORDER BY id").column(0).compactMap { $0 }
            #expect(reply.ok && ids == expected, "\(predicate): \(reply) against \(expected)")
        }
        #expect(try client.send(#"FIND branches WHERE open_days CONTAINS "mon" SELECT code"#).lines.count == 2)
        // Writes: literals of text, integers with nil, dates, uuids, an enum's array.
        try client.ok(#"INSERT tools AS #a name="Axe" branch="NOR" tags=["a", "b c", "q\"x"] sizes=[1, nil, 3] service=["2026-01-01"] serials=["6F1C0D52-0000-4000-8000-000000000009"]"#)
        try client.ok(#"INSERT branches code="EAS" name="East" open_days=["mon", "sun"]"#)
        let shown = try client.send("GET tools #a").lines.first ?? ""
        #expect(shown.contains(#""tags":["a","b c","q\"x"],"sizes":[1,null,3],"service":["2026-01-01"],"serials":["6f1c0d52-0000-4000-8000-000000000009"]"#), "\(shown)")
        #expect(try client.send("SAVE").ok)
        let stored = try db.query(#"""
            SELECT tags = ARRAY['a', 'b c', 'q"x'] AND sizes = ARRAY[1, NULL, 3] AND service = ARRAY['2026-01-01'::date]
                   AND serials = ARRAY['6f1c0d52-0000-4000-8000-000000000009'::uuid]
            FROM tools WHERE name = 'Axe'
            """#)
        #expect(stored.bool(0, 0) == true)
        #expect(try db.query("SELECT open_days::text FROM branches WHERE code = 'EAS'").string(0, 0) == "{mon,sun}")
        // CHANGES shows arrays as replies do.
        try client.ok("UPDATE tools 3 SET tags=[] sizes=nil")
        #expect(try client.send("CHANGES").lines == ["update tools 3 tags: [\"power\"] -> [], sizes: [120,240,60] -> nil"])
        try client.ok("ROLLBACK")
        // What does not fit is refused at the command, naming the element.
        #expect(try client.send(#"INSERT tools name="Bad" branch="NOR" sizes=[1, "x"]"#).status
                == #"-ERR VALIDATION tools.sizes[2] expects an integer, not a string, got "x""#)
        #expect(try client.send(#"INSERT branches code="WES" name="West" open_days=["someday"]"#).ok)
        #expect(try client.send("SAVE").status.hasPrefix("-ERR VALIDATION"))
        #expect(try client.send(#"FIND tools WHERE tags BEGINSWITH "x""#).status
                == "-ERR VALIDATION 'tags' is an array: compare its elements (ANY, ALL or NONE tags BEGINSWITH ..., tags CONTAINS value) or its @count")
    }

    /// A key changes where PostgreSQL lets it: the reply previews each foreign key's ON
    /// UPDATE rule as a delete's preview does, the records with ON UPDATE CASCADE follow, and
    /// a key still pointed at without it is DENIED.
    @Test func aKeyChangesWherePostgreSQLLetsIt() throws {
        let (_, db, client) = try Self.toolshedServer()
        let renamed = try client.send(#"UPDATE branches "SOU" SET code="STH""#)
        #expect(renamed.lines == ["cascade members.home 1", "cascade tools.branch 1"], "\(renamed)")
        #expect(renamed.status == #"+OK pending update branches "SOU", the key changes, cascades to 2 (1 pending)"#)
        #expect(try client.send("SAVE").status.hasPrefix("+OK saved: 0 inserted, 1 updated"))
        #expect(try db.query("SELECT string_agg(branch, ',') FROM tools WHERE name = 'Saw'").string(0, 0) == "STH")
        #expect(try db.query(#"SELECT home FROM members WHERE email = 'bo@chan.io'"#).string(0, 0) == "STH")
        // A join table's key: one of its columns changes.
        try client.ok("UPDATE tools_categories tool=1 category=1 SET category=3")
        #expect(try client.send("SAVE").ok)
        #expect(try db.query("SELECT count(*) FROM tools_categories WHERE tool_id = 1 AND category_id = 3").int(0, 0) == 1)
        // A category's children point at it with NO ACTION: the change is refused, as PostgreSQL would.
        let denied = try client.send("UPDATE categories 1 SET id=10")
        #expect(denied.lines.contains("deny categories.parent 1") && denied.status.contains("DENIED by 1"), "\(denied)")
        let refused = try client.send("SAVE")
        #expect(refused.status.hasPrefix("-ERR DENIED categories 1: categories records still point at the value it had"), "\(refused)")
        try client.ok("ROLLBACK")
        #expect(try client.send("UPDATE tools 1 SET id=nil").status == "-ERR VALIDATION id is part of the key: it cannot be nil")
    }

    /// A database loaded as its owner made it, not through recordsd's migrations.
    static func existingDatabase() throws -> (url: String, db: Connection) {
        let url = try TestEnvironment.freshDatabase()
        let db = try Connection(url)
        try db.execute(try toolshed + "\n" + rows)
        return (url, db)
    }

    /// Every table's rows, as one text per table, to compare before and after.
    static func contents(_ db: Connection) throws -> [String] {
        let tables = try db.query("SELECT oid::regclass::text FROM pg_class WHERE relnamespace IN ('public'::regnamespace, 'audit'::regnamespace) AND relkind IN ('r', 'p', 'm') ORDER BY 1")
            .column(0).compactMap { $0 }
        return try tables.map { table in
            table + ": " + (try db.query("SELECT coalesce(string_agg(t::text, ';' ORDER BY t::text), '') FROM \(table) t").string(0, 0) ?? "")
        }
    }

    /// Serving a database from the repository's folder used to create the sample domain in it
    /// (`--migrations` defaulted to ./migrations): a database you name gets none of ours.
    @Test func aDatabaseYouNameGetsNoSampleTables() throws {
        let (url, db) = try Self.existingDatabase()
        let migrated = try runRecordsd(["migrate", "--database", url])
        #expect(migrated.status == 0, "\(migrated.error)")
        #expect(migrated.output == "recordsd's own schema is in place; no migrations applied (none given: --migrations DIR)\n")
        let server = try TestServer(databaseURL: url, migrations: nil)
        let entities = try server.client().send("ENTITIES")
        #expect(entities.lines.first?.hasPrefix("Shift Plan ") == true, "\(entities)")
        #expect(!entities.lines.contains { $0.hasPrefix("department") })
        #expect(try db.query("SELECT to_regclass('public.department') IS NULL AND to_regclass('public.game') IS NULL").bool(0, 0) == true)
        #expect(try runRecordsd(["migrate", "status", "--database", url]).status == 2)
    }

    /// `recordsd uninstall` takes away what recordsd put in a database and nothing else; it
    /// says what it would do first, refuses while a server is connected, and stops when an
    /// object of the database depends on one of recordsd's.
    @Test func uninstallLeavesTheDatabaseAsItWas() throws {
        let (url, db) = try Self.existingDatabase()
        try db.execute("CREATE SCHEMA IF NOT EXISTS keep; CREATE TABLE keep.notes (id int PRIMARY KEY, body text); INSERT INTO keep.notes VALUES (1, 'mine')")
        let before = try Self.contents(db)
        do {
            let server = try TestServer(databaseURL: url, migrations: nil)
            let client = try server.client()
            try client.ok("WATCH tools")
            try client.ok(#"USER ADD ops admin "ops-password-1""#)
            #expect(try runRecordsd(["uninstall", "--database", url, "--yes"]).error.contains("1 recordsd server(s) are connected to this database: stop them first"))
            server.stop()
        }
        // Its backends end a moment after the server: until then the server counts as connected.
        _ = eventually(tries: 100, { try? db.query("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'recordsd-watcher' AND datname = current_database()").int(0, 0) },
                       until: { $0 == 0 })
        #expect(try db.query("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'records\\_notify\\_%'").int(0, 0)! > 0)
        let asked = try runRecordsd(["uninstall", "--database", url])
        #expect(asked.status == 1 && asked.error.contains("nothing was removed: run again with --yes"), "\(asked)")
        #expect(asked.output.contains("would drop the change-feed triggers of 12 table(s): \"Shift Plan\", branches, categories, loans, loans_2026_h1, loans_2026_h2, members"), "\(asked.output)")
        #expect(asked.output.contains("would drop schema records"))
        #expect(try Uninstall_isInstalled(db))
        try db.execute("CREATE VIEW keep.admins AS SELECT name FROM records.users")
        let blocked = try runRecordsd(["uninstall", "--database", url, "--yes"])
        #expect(blocked.status == 1 && blocked.error.contains("view keep.admins depends on table records.users"), "\(blocked)")
        try db.execute("DROP VIEW keep.admins")
        let removed = try runRecordsd(["uninstall", "--database", url, "--yes"])
        #expect(removed.status == 0, "\(removed)")
        #expect(try !Uninstall_isInstalled(db))
        #expect(try db.query("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'records\\_%'").int(0, 0) == 0)
        #expect(try db.query("SELECT count(*) FROM pg_extension WHERE extname = 'pgcrypto'").int(0, 0) == 0)
        #expect(try Self.contents(db) == before)
        #expect(try runRecordsd(["uninstall", "--database", url, "--yes"]).output == "recordsd is not installed in this database: nothing to remove\n")
    }

    private func Uninstall_isInstalled(_ db: Connection) throws -> Bool {
        try db.query("SELECT to_regnamespace('records') IS NOT NULL").bool(0, 0) == true
    }
}
