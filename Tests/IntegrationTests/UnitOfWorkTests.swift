import Foundation
import Postgres
import Testing

/// The issue's scenarios, over TCP against a real server, with the database checked directly.
@Suite struct UnitOfWorkScenarioTests {
    private func scalar(_ db: Connection, _ sql: String) throws -> String? {
        try db.query(sql).string(0, 0)
    }

    @Test func departmentAndEmployeesSavedInDependencyOrder() throws {
        let server = try TestServer()
        let client = try server.client()
        #expect(try client.send(#"INSERT employee first_name="John" last_name="Lim" gender=1 department=#sales"#).status
                == "-ERR NOT_FOUND employee.department: no pending record #sales in this unit of work (a #ref names an INSERT or an UPSERT ... AS #name made before)")
        #expect(try client.send(#"INSERT department AS #sales name="Sales" number=1"#).status == "+OK #sales pending insert department (1 pending)")
        // Employees typed after, but pointing at the department; a second department typed last.
        #expect(try client.send(#"INSERT employee first_name="John" last_name="Lim" gender=1 department=#sales"#).status == "+OK #e1 pending insert employee (2 pending)")
        try client.ok(#"INSERT employee AS #ann first_name="Ann" last_name="Lee" gender=2 age=41 department=#sales"#)
        let changes = try client.send("CHANGES")
        #expect(changes.lines == [
            #"insert #sales department name="Sales" number=1"#,
            #"insert #e1 employee first_name="John" last_name="Lim" gender=1 department=#sales"#,
            #"insert #ann employee first_name="Ann" last_name="Lee" gender=2 age=41 department=#sales"#,
        ])
        #expect(changes.status == "+OK 3 pending change(s): 3 insert, 0 update, 0 delete; depth 0")
        let save = try client.send("SAVE")
        #expect(save.status == "+OK saved: 3 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(save.lines.count == 3)
        #expect(save.lines[0].hasPrefix("#sales department "))
        let db = try server.database()
        #expect(try scalar(db, "SELECT count(*) FROM employee e JOIN department d ON d.id = e.department_id WHERE d.name = 'Sales'") == "2")
        #expect(try client.send("CHANGES").status == "+OK no pending changes")
        #expect(try client.send("SAVE").status == "+OK nothing to save")
    }

    @Test func cascadeAndMovedEmployeeSurvives() throws {
        let server = try TestServer()
        let client = try server.client()
        try client.ok(#"INSERT department AS #d name="Ops" number=7"#)
        try client.ok(#"INSERT employee AS #stay first_name="A" last_name="Stay" gender=1 department=#d"#)
        try client.ok(#"INSERT employee AS #move first_name="B" last_name="Move" gender=2 department=#d"#)
        let ids = Dictionary(uniqueKeysWithValues: try client.send("SAVE").lines.map { line -> (String, String) in
            let parts = line.split(separator: " ")
            return (String(parts[0]), String(parts[2]))
        })
        let department = ids["#d"]!, moved = ids["#move"]!, stayed = ids["#stay"]!
        #expect(try client.send("UPDATE employee \(moved) department=nil").status == "+OK pending update employee \(moved) (1 pending)")
        #expect(try client.send("CHANGES").lines == ["update employee \(moved) department: \(department) -> nil"])
        #expect(try client.send("SAVE").status == "+OK saved: 0 inserted, 1 updated, 0 deleted, 0 cascaded, 0 nullified")
        let delete = try client.send("DELETE department \(department)")
        #expect(delete.status == "+OK pending delete department \(department), cascades to 1 (1 pending)")
        #expect(delete.lines == ["cascade employee 1"])
        #expect(try client.send("SAVE").status == "+OK saved: 0 inserted, 0 updated, 1 deleted, 1 cascaded, 0 nullified")
        let db = try server.database()
        #expect(try scalar(db, "SELECT count(*) FROM employee WHERE id = \(stayed)") == "0")
        #expect(try db.query("SELECT department_id FROM employee WHERE id = \(moved)").isNull(0, 0))
    }

    @Test func nullifyAndDeny() throws {
        let server = try TestServer()
        let client = try server.client()
        try client.ok("INSERT color AS #red number=1 key=\"red\" r=255 g=0 b=0 alpha=1.0")
        try client.ok("INSERT memo uid=\"m1\" body=\"hello\" color=#red")
        try client.ok("INSERT memo uid=\"m2\" color=#red")
        try client.ok("INSERT project AS #p name=\"Apollo\"")
        try client.ok("INSERT employee AS #e first_name=\"E\" last_name=\"F\" gender=1")
        try client.ok("INSERT assignment project=#p employee=#e role=\"lead\"")
        let ids = Dictionary(uniqueKeysWithValues: try client.send("SAVE").lines.map { line -> (String, String) in
            let parts = line.split(separator: " ")
            return (String(parts[0]), String(parts[2]))
        })
        let delete = try client.send("DELETE color \(ids["#red"]!)")
        #expect(delete.status == "+OK pending delete color \(ids["#red"]!), nullifies 2 (1 pending)")
        #expect(delete.lines == ["nullify memo.color 2"])
        #expect(try client.send("SAVE").status == "+OK saved: 0 inserted, 0 updated, 1 deleted, 0 cascaded, 2 nullified")
        let db = try server.database()
        #expect(try scalar(db, "SELECT count(*) FROM memo WHERE color_id IS NULL") == "2")

        let deny = try client.send("DELETE project \(ids["#p"]!)")
        #expect(deny.status == "+OK pending delete project \(ids["#p"]!), DENIED by 1: SAVE will fail unless they go first (1 pending)")
        let refused = try client.send("SAVE")
        #expect(refused.status == "-ERR DENIED the delete is denied: 1 record(s) still point at it with a RESTRICT rule; delete or move them first")
        #expect(refused.lines == ["deny assignment 1"])
        #expect(try scalar(db, "SELECT count(*) FROM project") == "1")
        #expect(try client.send("CHANGES").lines == ["delete project \(ids["#p"]!)"])
        // Deleting the employee cascades to its assignment, after which the project may go.
        try client.ok("DELETE employee \(ids["#e"]!)")
        #expect(try client.send("SAVE").status == "+OK saved: 0 inserted, 0 updated, 2 deleted, 1 cascaded, 0 nullified")
        #expect(try scalar(db, "SELECT count(*) FROM project") == "0")
    }

    @Test func conflictingUpdatesFailThenForce() throws {
        let server = try TestServer()
        let setup = try server.client()
        try setup.ok("INSERT employee AS #e first_name=\"Pat\" last_name=\"Doe\" gender=1 age=30")
        let id = try setup.send("SAVE").lines[0].split(separator: " ")[2]
        let first = try server.client(), second = try server.client()
        try first.ok("UPDATE employee \(id) age=31")
        try second.ok("UPDATE employee \(id) age=35 last_name=\"Roe\"")
        #expect(try first.send("SAVE").ok)
        let conflict = try second.send("SAVE")
        #expect(conflict.status == "-ERR CONFLICT 1 record(s) changed by another session since this unit read them; SAVE FORCE keeps yours, SAVE THEIRS keeps the database's, SAVE MERGE combines fields only one side changed")
        #expect(conflict.lines == ["employee \(id) age: read \"30\", yours \"35\", now \"31\""])
        // The unit is intact: the same changes are still pending.
        #expect(try second.send("CHANGES").status.hasPrefix("+OK 1 pending change(s)"))
        #expect(try second.send("SAVE MERGE").status.hasPrefix("-ERR CONFLICT"))
        #expect(try second.send("SAVE FORCE").status == "+OK saved: 0 inserted, 1 updated, 0 deleted, 0 cascaded, 0 nullified")
        let db = try server.database()
        #expect(try scalar(db, "SELECT age || ' ' || last_name FROM employee WHERE id = \(id)") == "35 Roe")
    }

    @Test func mergeAndTheirsPolicies() throws {
        let server = try TestServer()
        let setup = try server.client()
        try setup.ok("INSERT contact AS #c name=\"Kim\" address=\"Old Road\" phone=\"111\"")
        let id = try setup.send("SAVE").lines[0].split(separator: " ")[2]
        let mine = try server.client(), theirs = try server.client()
        try mine.ok("UPDATE contact \(id) phone=\"222\"")
        try theirs.ok("UPDATE contact \(id) address=\"New Road\"")
        try theirs.ok("SAVE")
        let plain = try mine.send("SAVE")
        #expect(plain.lines == ["contact \(id): changed by another session in fields this unit did not change (address)"])
        #expect(try mine.send("SAVE MERGE").ok)
        let db = try server.database()
        #expect(try scalar(db, "SELECT address || ' ' || phone FROM contact WHERE id = \(id)") == "New Road 222")

        try mine.ok("UPDATE contact \(id) phone=\"333\" name=\"Kim Lee\"")
        try theirs.ok("UPDATE contact \(id) phone=\"444\"")
        try theirs.ok("SAVE")
        let theirsWins = try mine.send("SAVE THEIRS")
        #expect(theirsWins.status == "+OK saved: 0 inserted, 1 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(theirsWins.lines == ["contact \(id): the database's values kept for phone"])
        #expect(try scalar(db, "SELECT name || ' ' || phone FROM contact WHERE id = \(id)") == "Kim Lee 444")
    }

    @Test func discardedScratchpadNeverReachesTheDatabase() throws {
        let server = try TestServer()
        let client = try server.client()
        try client.ok("INSERT journal_entry date=\"2024-05-31T06:00:00Z\" location=\"Pier\" rating=4")
        #expect(try client.send("NEST").status == "+OK nested scratchpad open (depth 1)")
        try client.ok("INSERT journal_entry date=\"2024-06-01T06:00:00Z\" location=\"Cancelled\" rating=2")
        #expect(try client.send("COUNT journal_entry").status == "+OK 2")
        #expect(try client.send("SAVE").status == "-ERR DENIED 1 nested scratchpad(s) open: MERGE or DISCARD before SAVE")
        #expect(try client.send("DISCARD").status == "+OK discarded (depth 0, 1 pending)")
        #expect(try client.send("DISCARD").status == "-ERR VALIDATION no nested scratchpad to discard: NEST opens one")
        #expect(try client.send("SAVE").status == "+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        let db = try server.database()
        #expect(try scalar(db, "SELECT string_agg(location, ',') FROM journal_entry") == "Pier")
    }

    @Test func nestedScratchpadsMergeSeveralLevels() throws {
        let server = try TestServer()
        let client = try server.client()
        try client.ok("NEST")
        try client.ok("INSERT game name=\"Go\"")
        try client.ok("NEST")
        try client.ok("INSERT game name=\"Chess\"")
        try client.ok("NEST")
        try client.ok("INSERT game name=\"Shogi\"")
        #expect(try client.send("DISCARD").status == "+OK discarded (depth 2, 2 pending)")
        #expect(try client.send("MERGE").status == "+OK merged into parent (depth 1, 2 pending)")
        #expect(try client.send("MERGE").status == "+OK merged into parent (depth 0, 2 pending)")
        #expect(try client.send("SAVE").ok)
        #expect(try scalar(try server.database(), "SELECT string_agg(name, ',' ORDER BY name) FROM game") == "Chess,Go")
    }

    @Test func aSaveFailingHalfwayWritesNothingAndSucceedsOnceFixed() throws {
        let server = try TestServer()
        let client = try server.client()
        try client.ok("INSERT setting number=500 key=\"taken\"")
        try client.ok("SAVE")
        var batch = ""
        for i in 1...1000 { batch += "INSERT setting AS #s\(i) number=\(i) key=\"k\(i)\" value=\(i * 2)\n" }
        try client.write(batch)
        for _ in 1...1000 { _ = try client.readReply() }
        let failed = try client.send("SAVE")
        #expect(failed.status == "-ERR VALIDATION #s500: number 500 is already taken (unique constraint setting_number_key)")
        let db = try server.database()
        #expect(try scalar(db, "SELECT count(*) FROM setting") == "1")
        #expect(try client.send("CHANGES").status.hasPrefix("+OK 1000 pending change(s)"))
        try client.ok("UPDATE setting #s500 number=5000")
        #expect(try client.send("SAVE").status == "+OK saved: 1000 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(try scalar(db, "SELECT count(*) FROM setting") == "1001")
    }

    @Test func upsertSeedTwiceLeavesThreeGames() throws {
        let server = try TestServer()
        for round in 1...2 {
            let client = try server.client()
            for name in ["Chess", "Go", "Shogi"] { try client.ok("UPSERT game ON name name=\"\(name)\"") }
            let saved = try client.send("SAVE")
            #expect(saved.ok, "round \(round): \(saved)")
        }
        #expect(try scalar(try server.database(), "SELECT count(*) FROM game") == "3")
        let client = try server.client()
        try client.ok("UPSERT setting ON number number=1 key=\"volume\" value=3")
        try client.ok("SAVE")
        let again = try client.send("UPSERT setting ON number number=1 value=7")
        #expect(again.status.hasPrefix("+OK pending update setting "))
        try client.ok("SAVE")
        #expect(try scalar(try server.database(), "SELECT key || value FROM setting") == "volume7")
        #expect(try client.send("UPSERT setting ON key key=\"x\"").status == "-ERR VALIDATION UPSERT needs a unique attribute: setting.key is not unique")
    }

    /// UPSERT answers with its record as INSERT does and takes `AS #name`; the name stands for
    /// the record whether UPSERT inserted it or found it stored, so a seed script that relates
    /// what it upserts runs the same the second time. A relationship to a unique column other
    /// than the key takes that column's value.
    @Test func upsertNamesItsRecordEitherWay() throws {
        let url = try TestEnvironment.freshDatabase()
        let db = try Connection(url)
        try db.execute("""
            CREATE TABLE genre (id serial PRIMARY KEY, code text NOT NULL UNIQUE, label text);
            CREATE TABLE album (id serial PRIMARY KEY, title text NOT NULL, genre integer REFERENCES genre (id));
            CREATE TABLE badge (id serial PRIMARY KEY, genre text REFERENCES genre (code))
            """)
        let server = try TestServer(databaseURL: url, migrations: nil)
        // The first run inserts.
        let first = try server.client()
        #expect(try first.send(#"UPSERT genre AS #rock ON code code="rock" label="Rock""#).status
                == #"+OK #rock pending insert genre, no code "rock" yet (1 pending)"#)
        #expect(try first.send(#"UPSERT genre ON code code="jazz""#).status == #"+OK #g1 pending insert genre, no code "jazz" yet (2 pending)"#)
        #expect(try first.send(#"UPSERT genre AS #other ON code code="rock" label="Rock!""#).status
                == "-ERR VALIDATION genre with these values is the pending insert #rock: name it #rock")
        #expect(try first.send(#"UPSERT genre AS #rock ON code code="rock" label="Rock""#).status == "+OK #rock pending insert updated (2 pending)")
        try first.ok(#"INSERT album title="One" genre=#rock"#)
        try first.ok("INSERT badge genre=#rock")
        try first.ok("SAVE")
        // The second run finds them: the same lines, and the names stand for the stored records.
        let second = try server.client()
        #expect(try second.send(#"UPSERT genre AS #rock ON code code="rock" label="Rock 2""#).status
                == "+OK pending update genre 1 as #rock, found by code (1 pending)")
        #expect(try second.send(#"INSERT genre AS #rock code="punk""#).status
                == "-ERR VALIDATION #rock already names genre 1, found by an UPSERT in this unit of work")
        // Nor may an UPSERT give it to another record, to insert or found (it did, to insert).
        #expect(try second.send(#"UPSERT genre AS #rock ON code code="blues""#).status
                == "-ERR VALIDATION #rock already names genre 1, found by an UPSERT in this unit of work")
        try second.ok(#"INSERT album title="Two" genre=#rock"#)
        try second.ok("INSERT badge genre=#rock")
        #expect(try second.send("GET genre #rock").lines == [#"{"id":1,"code":"rock","label":"Rock 2"}"#])
        // A name given in a scratchpad that is discarded goes with it.
        try second.ok("NEST")
        try second.ok(#"UPSERT genre AS #j ON code code="jazz""#)
        try second.ok("DISCARD")
        #expect(try second.send(#"INSERT album title="Lost" genre=#j"#).status.hasPrefix("-ERR NOT_FOUND album.genre: no pending record #j"))
        #expect(try second.send("SAVE").status == "+OK saved: 2 inserted, 1 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(try scalar(db, "SELECT string_agg(title || ':' || genre, ',' ORDER BY id) FROM album") == "One:1,Two:1")
        #expect(try scalar(db, "SELECT string_agg(genre, ',' ORDER BY id) FROM badge") == "rock,rock")
        #expect(try scalar(db, "SELECT string_agg(code || ':' || coalesce(label, '-'), ',' ORDER BY id) FROM genre") == "rock:Rock 2,jazz:-")
        // SAVE and ROLLBACK forget the names.
        #expect(try second.send(#"INSERT album title="Three" genre=#rock"#).status.hasPrefix("-ERR NOT_FOUND"))
        try second.ok(#"UPSERT genre AS #rock ON code code="rock""#)
        try second.ok("ROLLBACK")
        #expect(try second.send(#"INSERT album title="Three" genre=#rock"#).status.hasPrefix("-ERR NOT_FOUND"))
    }

    @Test func validationReportsEveryProblemAtOnce() throws {
        let server = try TestServer()
        let client = try server.client()
        try client.ok("INSERT employee AS #a first_name=\"A\"")
        try client.ok("INSERT employee AS #b last_name=\"B\" gender=1")
        try client.ok("INSERT department AS #d number=3")
        let reply = try client.send("SAVE")
        #expect(reply.status == "-ERR VALIDATION 4 problem(s); nothing was saved")
        #expect(reply.lines == [
            "#a employee: last_name is required",
            "#a employee: gender is required",
            "#b employee: first_name is required",
            "#d department: name is required",
        ])
    }

    @Test func wrongValuesAreRefusedAtTheCommand() throws {
        let server = try TestServer()
        let client = try server.client()
        #expect(try client.send("INSERT employee gender=\"male\"").status == "-ERR VALIDATION employee.gender expects an integer, not a string, got \"male\"")
        #expect(try client.send("INSERT employee gender=70000").status == "-ERR VALIDATION employee.gender: 70000 is out of range for a 16-bit integer")
        #expect(try client.send("INSERT employee salary=3").status == "-ERR UNKNOWN employee has no attribute or relationship 'salary'")
        #expect(try client.send("INSERT nobody x=1").status == "-ERR UNKNOWN unknown entity 'nobody': type ENTITIES for the list")
        #expect(try client.send("INSERT journal_entry date=\"yesterday\"").status.hasPrefix("-ERR VALIDATION journal_entry.date expects an ISO-8601 date and time"))
        #expect(try client.send("INSERT friend photo=\"***\"").status == "-ERR VALIDATION friend.photo expects base64 text, got \"***\"")
        #expect(try client.send("UPDATE employee 999999 age=3").status == "-ERR NOT_FOUND no employee with id 999999")
        #expect(try client.send("DELETE employee #nope").status == "-ERR NOT_FOUND no pending employee #nope in this unit of work")
        #expect(try client.send("INSERT department employees=1").status.hasPrefix("-ERR VALIDATION department.employees is to-many"))
        #expect(try client.send("CHANGES").status == "+OK no pending changes")
    }

    @Test func constraintFailuresNameRecordAndField() throws {
        let server = try TestServer()
        let client = try server.client()
        try client.ok("INSERT journal_entry AS #j date=\"2024-01-01\" rating=9")
        let check = try client.send("SAVE")
        #expect(check.status == "-ERR VALIDATION #j: violates check constraint journal_entry_rating_check: CHECK (((rating >= 1) AND (rating <= 5)))")
        try client.ok("ROLLBACK")
        try client.ok("INSERT employee AS #e first_name=\"X\" last_name=\"Y\" gender=1 department=424242")
        #expect(try client.send("SAVE").status == "-ERR VALIDATION #e: department 424242 does not exist in department")
    }

    @Test func readsSeePendingChanges() throws {
        let server = try TestServer()
        let client = try server.client()
        try client.ok("INSERT department AS #d name=\"R&D\" number=1")
        try client.ok("INSERT employee AS #x first_name=\"Xi\" last_name=\"Old\" gender=1 department=#d")
        try client.ok("INSERT employee AS #y first_name=\"Yu\" last_name=\"Young\" gender=2 department=#d")
        let ids = try client.send("SAVE").lines.map { $0.split(separator: " ")[2] }
        try client.ok("INSERT employee AS #z first_name=\"Zed\" last_name=\"New\" gender=1 department=\(ids[0])")
        try client.ok("UPDATE employee \(ids[1]) last_name=\"Changed\"")
        #expect(try client.send("COUNT employee").status == "+OK 3")
        let found = try client.send("FIND employee WHERE last_name IN {\"Old\", \"Changed\", \"New\"} ORDER BY first_name")
        #expect(found.lines.map { $0.contains("\"last_name\":\"Changed\"") || $0.contains("\"last_name\":\"New\"") }.filter { $0 }.count == 2)
        #expect(found.status == "+OK 2 records")
        let pending = try client.send("GET employee #z")
        #expect(pending.lines.count == 1 && pending.lines[0].contains("\"first_name\":\"Zed\""))
        let exported = try client.send("EXPORT employee WHERE last_name IN {\"Changed\", \"New\"} ORDER BY first_name")
        #expect(exported.status == "+OK exported 2 records")
        #expect(exported.lines.dropFirst().map { $0.split(separator: ",")[1] } == ["Xi", "Zed"])
        try client.ok("DELETE department \(ids[0])")
        #expect(try client.send("COUNT employee").status == "+OK 0")
        #expect(try client.send("GET employee \(ids[1])").status == "-ERR NOT_FOUND no employee with id \(ids[1])")
        // Nothing of this reached the database.
        #expect(try scalar(try server.database(), "SELECT string_agg(last_name, ',' ORDER BY id) FROM employee") == "Old,Young")
        try client.ok("ROLLBACK")
        #expect(try client.send("COUNT employee").status == "+OK 2")
    }

    @Test func aDisconnectDropsPendingChanges() throws {
        let server = try TestServer()
        do {
            let client = try server.client()
            try client.ok("INSERT game name=\"Lost\"")
        }
        let client = try server.client()
        #expect(try client.send("COUNT game").status == "+OK 0")
        #expect(try scalar(try server.database(), "SELECT count(*) FROM game") == "0")
    }
}
