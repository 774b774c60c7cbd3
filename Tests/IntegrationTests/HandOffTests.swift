#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Testing

/// A server that stops hands each session off (`records.handoff`); RESUME on any server takes
/// it back exactly: the same pending changes, scratchpads, keys shown, read versions, watches.
@Suite struct HandOffTests {
    @Test func aResumedSessionIsTheSameSessionOnTheOtherServer() throws {
        let replicas = try Replicas()
        let setup = try replicas.servers[1].client()
        try setup.ok(#"INSERT department AS #d name="Ops" number=1"#)
        try setup.ok(#"INSERT employee AS #e first_name="Ann" last_name="Lee" gender=1 age=40 department=#d"#)
        let stored = try setup.ok("SAVE").savedKeys
        let employee = stored["#e"]!, department = stored["#d"]!

        let client = try replicas.servers[0].client()
        try client.ok(#"INSERT department AS #s name="Sales" number=2"#)
        try client.ok(#"INSERT employee AS #n first_name="Bo" last_name="Yu" gender=2 department=#s"#)
        let shown = try client.ok("GET employee #n").lines  // the key #n was shown keeps
        try client.ok("GET employee \(employee)")
        try client.ok("UPDATE employee \(employee) SET age=41")
        try client.ok(#"UPDATE department WHERE name BEGINSWITH "Op" SET phone="555""#)
        try client.ok("NEST")
        try client.ok(#"INSERT project AS #p name="Nested""#)
        try client.ok("FORMAT JSON")
        let before = try client.ok("CHANGES")

        let (moved, resumed, farewell) = try replicas.move(client, from: 0)
        #expect(farewell.pushed.count == 2, "\(farewell.pushed)")
        #expect(farewell.pushed.last == "! shutdown recordsd is stopping")
        let token = try #require(farewell.token)
        #expect(farewell.pushed.first == "! handoff \(token) (5 pending change(s)): RESUME \(token) on any server within 900 s restores this session")
        #expect(resumed?.status == "+OK resumed: 5 pending change(s), 1 nested scratchpad(s) open")
        // The same unit, in the format it had.
        #expect(try moved.ok("CHANGES") == before)
        #expect(try moved.ok("GET employee #n").lines == shown)
        try moved.ok("MERGE")
        let saved = try moved.ok("SAVE")
        #expect(saved.status == #"+OK {"saved":true,"inserted":3,"updated":2,"deleted":0,"cascaded":0,"nullified":0}"# || saved.status.hasPrefix("+OK saved: 3 inserted, 2 updated"), "\(saved)")
        let db = try replicas.servers[1].database()
        #expect(try db.query("SELECT age FROM employee WHERE id = $1", [employee]).string(0, 0) == "41")
        #expect(try db.query("SELECT phone FROM department WHERE id = $1", [department]).string(0, 0) == "555")
        #expect(try db.query("SELECT count(*) FROM employee WHERE first_name = 'Bo' AND department_id = (SELECT id FROM department WHERE name = 'Sales')").string(0, 0) == "1")
        #expect(try db.query("SELECT count(*) FROM project WHERE name = 'Nested'").string(0, 0) == "1")
        #expect(try db.query("SELECT count(*) FROM records.handoff WHERE spent_at IS NULL").string(0, 0) == "0")
        // The token works once.
        let again = try replicas.servers[1].client()
        #expect(try again.send("RESUME \(token)").status == "-ERR NOT_FOUND no session to resume with this token: it is unknown, or was already resumed (a token works once)")
    }

    /// A client still sending when its server stops (a pipeline it reads no reply of): it gets
    /// every reply, its token and the goodbye, then the end of the stream, never a reset that
    /// throws away what it had not read yet.
    /// With --durable-units too: there a state write ending during the shutdown closed the
    /// connection without its notices (found by the fourth attack).
    @Test(arguments: [false, true])
    func aClientStillSendingAtShutdownGetsItsTokenAndNoReset(durable: Bool) throws {
        let replicas = try Replicas(arguments: durable ? ["--durable-units"] : [])
        let client = try replicas.servers[0].client()
        let lines = (0..<200_000).map { #"INSERT project name="p\#($0)""# }.joined(separator: "\n") + "\n"
        let handed = Handed(client)
        let writer = Thread { try? handed.value.write(lines) }
        writer.start()
        usleep(500_000)
        kill(replicas.servers[0].process.processIdentifier, SIGTERM)
        usleep(1_500_000)
        var replies = 0
        var rest: [String] = []
        while let line = try client.readLine() {
            if line.hasPrefix("+OK") { replies += 1 } else { rest.append(line) }
        }
        #expect(replies > 0)
        // Durable: the token came with the first change, and again at the shutdown.
        #expect(rest.count == (durable ? 3 : 2) && rest.last == "! shutdown recordsd is stopping", "\(rest.prefix(3))")
        #expect(rest.dropLast().allSatisfy { $0.hasPrefix("! handoff ") }, "\(rest.prefix(3))")
        let token = try #require(rest.last { $0.hasPrefix("! handoff ") }.map { String($0.split(separator: " ")[2]) })
        let moved = try replicas.servers[1].client()
        #expect(try moved.send("RESUME \(token)").status == "+OK resumed: \(replies) pending change(s)")
    }

    /// A client that stopped reading a FIND when its server stopped: the server waits past
    /// the grace (up to the hand-off deadline) for it to read the stream's end, its token and
    /// the goodbye, instead of leaving with them unsent.
    @Test func aSlowReaderStillGetsItsTokenAfterTheGrace() throws {
        let replicas = try Replicas(arguments: ["--shutdown-grace", "2"])
        try replicas.servers[1].database().execute("INSERT INTO project (name) SELECT repeat('x', 1000) || i FROM generate_series(1, 5000) i")
        let client = try replicas.servers[0].client()
        try client.ok(#"INSERT project name="slow reader""#)
        try client.write("FIND project\n")
        usleep(500_000)
        kill(replicas.servers[0].process.processIdentifier, SIGTERM)
        sleep(10)  // past the grace and the 5 s given to cancelled commands, within the hand-off deadline
        var lines: [String] = []
        while let line = try client.readLine() { lines.append(line) }
        #expect(lines.contains { $0.hasPrefix("-ERR UNAVAILABLE the server is stopping") })
        #expect(lines.last == "! shutdown recordsd is stopping")
        let token = try #require(lines.first { $0.hasPrefix("! handoff ") }.map { String($0.split(separator: " ")[2]) })
        let moved = try replicas.servers[1].client()
        #expect(try moved.send("RESUME \(token)").status == "+OK resumed: 1 pending change(s)")
    }

    @Test func versionsReadBeforeTheMoveStillCatchConflicts() throws {
        let replicas = try Replicas()
        let setup = try replicas.servers[1].client()
        try setup.ok(#"INSERT employee AS #e first_name="Ann" last_name="Lee" gender=1 age=40"#)
        let employee = try setup.ok("SAVE").savedKeys["#e"]!

        let client = try replicas.servers[0].client()
        try client.ok("GET employee \(employee)")
        try client.ok("UPDATE employee \(employee) SET age=41")
        let (moved, resumed, _) = try replicas.move(client, from: 0)
        #expect(resumed?.status == "+OK resumed: 1 pending change(s)")
        // Meanwhile someone else changes the record.
        try setup.ok("UPDATE employee \(employee) SET age=50")
        try setup.ok("SAVE")
        #expect(try moved.send("SAVE").status.hasPrefix("-ERR CONFLICT"))
        #expect(try replicas.servers[1].database().query("SELECT age FROM employee WHERE id = $1", [employee]).string(0, 0) == "50")
    }

    @Test func onlyItsUserResumesASessionOnceBeforeItExpires() throws {
        let replicas = try Replicas(arguments: ["--resume-ttl", "2"])
        let admin = try replicas.servers[1].client()
        try admin.ok(#"USER ADD root admin "root-password""#)
        try admin.ok(#"USER ADD carol writer "carol-password""#)
        try admin.ok(#"USER ADD dave writer "dave-password""#)
        // Servers started before the first user serve loopback sessions without sign-in:
        // both replicas are started again so that they ask for it.
        _ = try replicas.restart(0)
        _ = try replicas.restart(1)

        let carol = try replicas.servers[0].client()
        try carol.ok(#"AUTH carol "carol-password""#)
        try carol.ok(#"INSERT project name="Carol's""#)
        let farewell = try replicas.restart(0, reading: [carol])[0]
        let token = try #require(farewell.token)

        let anonymous = try replicas.servers[1].client()
        #expect(try anonymous.send("RESUME \(token)").status.hasPrefix("-ERR AUTH sign in first"))
        let dave = try replicas.servers[1].client()
        try dave.ok(#"AUTH dave "dave-password""#)
        #expect(try dave.send("RESUME \(token)").status == "-ERR FORBIDDEN this token belongs to another user: AUTH as the user whose session it was")
        let back = try replicas.servers[1].client()
        try back.ok(#"AUTH carol "carol-password""#)
        #expect(try back.send("RESUME rt12").status == "-ERR SYNTAX not a resume token: expected rt and 32 hex digits, as the handoff notice gave it")
        #expect(try back.send("RESUME \(token)").status == "+OK resumed: 1 pending change(s)")
        // A session with changes of its own does not take another.
        let second = try replicas.servers[1].client()
        try second.ok(#"AUTH carol "carol-password""#)
        try second.ok(#"INSERT project name="Second""#)
        let late = try replicas.restart(1, reading: [back, second])
        let lateToken = try #require(late[0].token)
        let other = try #require(late[1].token)
        let busy = try replicas.servers[0].client()
        try busy.ok(#"AUTH carol "carol-password""#)
        #expect(try busy.send("RESUME \(other)").status == "+OK resumed: 1 pending change(s)")
        #expect(try busy.send("RESUME \(lateToken)").status == "-ERR DENIED this session has 1 pending change(s): SAVE or ROLLBACK before RESUME (a resumed session replaces the unit)")
        // Past --resume-ttl the session is gone, and the reply says so.
        Thread.sleep(forTimeInterval: 2.5)
        let expired = try replicas.servers[0].client()
        try expired.ok(#"AUTH carol "carol-password""#)
        #expect(try expired.send("RESUME \(lateToken)").status == "-ERR NOT_FOUND this token has expired (a handed-off session waits --resume-ttl seconds): its pending changes are gone")
    }

    @Test func aUserRemovedAndAddedAgainIsAnotherUser() throws {
        let replicas = try Replicas()
        let admin = try replicas.servers[1].client()
        try admin.ok(#"USER ADD root admin "root-password""#)
        try admin.ok(#"USER ADD alice writer "alice-password""#)
        _ = try replicas.restart(0)
        let alice = try replicas.servers[0].client()
        try alice.ok(#"AUTH alice "alice-password""#)
        try alice.ok(#"INSERT project name="Alice's""#)
        let token = try #require(try replicas.restart(0, reading: [alice])[0].token)
        try admin.ok("USER REMOVE alice")
        try admin.ok(#"USER ADD alice writer "another-password""#)
        let impostor = try replicas.servers[0].client()
        try impostor.ok(#"AUTH alice "another-password""#)
        #expect(try impostor.send("RESUME \(token)").status == "-ERR FORBIDDEN this token belongs to another user: AUTH as the user whose session it was")
    }

    /// A FIND still streaming at the shutdown deadline ends with its status line, and its session
    /// is handed off; an IMPORT under way is let finish and answered first.
    @Test func streamsAndImportsUnderWayEndCleanlyAndAreHandedOff() throws {
        let server = try TestServer(arguments: ["--shutdown-grace", "1"])
        try server.database().execute("INSERT INTO employee (first_name, last_name, gender) SELECT 'f' || i, 'l' || i, 1 FROM generate_series(1, 200000) i")
        let reader = try server.client()
        try reader.ok(#"INSERT project name="Kept""#)
        try reader.write("FIND employee\n")  // not read until the server stops
        let importer = try server.client()
        try importer.ok(#"INSERT project name="Also kept""#)
        try importer.write("IMPORT game (name)\nChess\nGo\n")
        usleep(300_000)
        kill(server.process.processIdentifier, SIGTERM)
        usleep(1_500_000)  // past the grace: the FIND is stopped; the IMPORT waits for its client
        try importer.write("Hex\n.\nPING\n")
        #expect(try importer.readReply().status == "+OK imported 3 records")
        let importerFarewell = try importer.readToEnd()
        #expect(importerFarewell.count == 2 && importerFarewell[0].hasPrefix("! handoff rt") && importerFarewell[0].contains("(1 pending change(s))")
                && importerFarewell[1] == "! shutdown recordsd is stopping", "\(importerFarewell)")  // PING, sent after the stop began, is not run
        let found = try reader.readReply()
        #expect(found.status.hasPrefix("-ERR UNAVAILABLE the server is stopping: the FIND stopped after ") && found.lines.count < 200_000, "\(found.status)")
        let farewell = try reader.readToEnd()
        #expect(farewell.count == 2 && farewell[0].hasPrefix("! handoff rt") && farewell[0].contains("(1 pending change(s))")
                && farewell[1] == "! shutdown recordsd is stopping", "\(farewell)")
        server.process.waitUntilExit()
        #expect(server.process.terminationStatus == 0)
    }

    /// A client that reads nothing and has nothing handed off (only goodbye to be told) does
    /// not hold the shutdown past its grace: the server waited 15 s more for it to read a
    /// notice it did not have, and said so in its log. One that was handed off reads its token.
    @Test func aClientOwedOnlyGoodbyeDoesNotHoldTheShutdown() throws {
        let server = try TestServer(arguments: ["--shutdown-grace", "1", "--admin-listen", "127.0.0.1:0"])
        let admin = try server.adminPort()
        let deaf = Handed(try server.client())
        // 20 MB of replies, more than the sockets hold: the server stops reading this client
        // (its writes then block, on a thread of their own) with replies still to send.
        let writer = Thread { _ = try? deaf.value.write(String(repeating: "PING\n", count: 2_000_000)) }
        writer.start()
        var last = -1
        let pings = { () -> Int in
            let line = try adminGet(admin, "/metrics").body.first { $0.hasPrefix(#"recordsd_commands_total{verb="PING",outcome="ok"}"#) }
            return Int(line?.split(separator: " ").last ?? "") ?? 0
        }
        let stalled = try eventually(tries: 100, every: 300_000, { () -> Bool in
            let now = try pings()
            defer { last = now }
            return now > 0 && now == last
        }, until: { $0 })
        #expect(stalled)
        let kept = try server.client()
        try kept.ok(#"INSERT project name="Kept""#)
        kill(server.process.processIdentifier, SIGTERM)
        let farewell = try kept.readToEnd()
        #expect(farewell.count == 2 && farewell[0].hasPrefix("! handoff rt") && farewell[1] == "! shutdown recordsd is stopping", "\(farewell)")
        server.process.waitUntilExit()
        #expect(server.process.terminationStatus == 0)
        #expect(!server.log.contains("read nothing up to the deadline"), "\(server.log)")
    }

    @Test func aSessionWithNothingToKeepIsToldGoodbyeOnly() throws {
        let replicas = try Replicas()
        let idle = try replicas.servers[0].client()
        try idle.send("GET department 1")
        let saved = try replicas.servers[0].client()
        try saved.ok(#"INSERT project name="Saved""#)
        try saved.ok("SAVE")
        let farewells = try replicas.restart(0, reading: [idle, saved])
        #expect(farewells.map(\.pushed) == [["! shutdown recordsd is stopping"], ["! shutdown recordsd is stopping"]])
        #expect(try replicas.servers[1].database().query("SELECT count(*) FROM records.handoff WHERE spent_at IS NULL").string(0, 0) == "0")
    }

    @Test func theTokenIsNotStoredAndTheStateIsNoServedRoles() throws {
        let replicas = try Replicas()
        let client = try replicas.servers[0].client()
        try client.ok(#"INSERT project name="Secret plans""#)
        let token = try #require(try replicas.restart(0, reading: [client])[0].token)
        let db = try replicas.servers[1].database()
        let row = try db.query("SELECT h::text, encode(token_hash, 'hex') FROM records.handoff h")
        #expect(row.rowCount == 1)
        #expect(!(row.string(0, 0) ?? "").contains(token))
        #expect(row.string(0, 1)?.count == 64)  // SHA-256
        // A role the server's login serves as (a user's --db-role), granted recordsd's tables as
        // the README says, sees no row there, and writes none.
        let role = "handoff_probe_\(UInt32.random(in: 0...UInt32.max))"
        try db.execute("CREATE ROLE \(role) NOLOGIN; GRANT USAGE ON SCHEMA records TO \(role); GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA records TO \(role)")
        defer { _ = try? db.execute("RESET ROLE; REVOKE ALL ON ALL TABLES IN SCHEMA records FROM \(role); REVOKE ALL ON SCHEMA records FROM \(role); DROP ROLE \(role)") }
        try db.execute("SET ROLE \(role)")
        #expect(try db.query("SELECT count(*) FROM records.handoff").string(0, 0) == "0")
        #expect(try db.query("UPDATE records.handoff SET open = true").affectedRows == 0)
        var refused: PostgresError?
        do { _ = try db.query("INSERT INTO records.handoff (token_hash, state, pending, expires_at) VALUES ('x', '{}', 0, now())") } catch { refused = error }
        #expect(refused?.sqlState == .insufficientPrivilege, "\(String(describing: refused))")
    }

    @Test func aResumedWatchHearsLaterChangesAndIsToldOfTheGap() throws {
        let replicas = try Replicas()
        let watcher = try replicas.servers[0].client()
        try watcher.ok("WATCH project")
        let (moved, resumed, farewell) = try replicas.move(watcher, from: 0)
        #expect(farewell.pushed.first?.hasPrefix("! handoff ") == true && farewell.pushed.first?.contains("(0 pending change(s))") == true, "\(farewell.pushed)")
        #expect(resumed?.status == "+OK resumed: 0 pending change(s)")
        #expect(resumed?.lines.count == 1 && resumed?.lines.first?.hasPrefix("watching project again: changes committed while the session moved (") == true,
                "\(String(describing: resumed))")
        let writer = try replicas.servers[1].client()
        try writer.ok(#"INSERT project AS #p name="After""#)
        let id = try writer.ok("SAVE").savedKeys["#p"]!
        let event = eventually(tries: 100, { (try? moved.send("PING")).map { _ in moved.pushed } ?? [] }, until: { !$0.isEmpty })
        #expect(event == ["! project \(id) inserted"])
    }

    /// A watch whose WHERE names a column dropped while the session moved would never fire
    /// again: RESUME drops it and says so, and keeps the watch that still applies.
    @Test func aResumedWatchWhoseColumnWasDroppedIsDroppedAndSaid() throws {
        let replicas = try Replicas()
        let db = try replicas.servers[0].database()
        // Servers reload their model when told the schema changed (as `recordsd migrate` does).
        try db.execute("ALTER TABLE project ADD COLUMN stage text; NOTIFY records_schema")
        let watcher = try replicas.servers[0].client()
        let watching = eventually(tries: 100, { (try? watcher.send(#"WATCH project WHERE stage == "x""#))?.status ?? "" }, until: { $0.hasPrefix("+OK") })
        #expect(watching == "+OK watching project where the predicate matches")
        let other = try replicas.servers[1].client()
        _ = eventually(tries: 100, { (try? other.send(#"COUNT project WHERE stage == "x""#))?.status ?? "" }, until: { $0 == "+OK 0" })
        try watcher.ok("WATCH department")
        let farewell = try replicas.restart(0, reading: [watcher])[0]
        let token = try #require(farewell.token)
        try db.execute("ALTER TABLE project DROP COLUMN stage; NOTIFY records_schema")
        let moved = try replicas.servers[1].client()
        // The other server's model follows the drop before the RESUME.
        _ = eventually(tries: 100, { (try? moved.send(#"COUNT project WHERE stage == "x""#))?.status ?? "" }, until: { $0.hasPrefix("-ERR UNKNOWN") })
        let resumed = try moved.send("RESUME \(token)")
        #expect(resumed.status == "+OK resumed: 0 pending change(s)")
        #expect(resumed.lines.count == 2 && resumed.lines[0].hasPrefix("watching department again")
                && resumed.lines[1] == "1 watch(es) dropped: their entities, or columns their WHERE names, are no longer served", "\(resumed.lines)")
    }

    /// Generated schemas (uuid, text, client-given and composite keys, self-references, join
    /// tables, every delete rule) and generated units, as DifferentialTests runs them, with
    /// every unit handed to the other server before its SAVE: both databases must still agree.
    @Test func generatedUnitsSavedAfterAMoveAgreeWithPlainSQL() throws {
        let seed = DifferentialTests.defaultSeed &+ 23
        let schemas = (0..<4).map { DifferentialTests.schema($0, seed: seed) }
        let ddl = schemas.map(\.ddl).joined(separator: "\n")
        let file = try Schema(ddl)
        let replicas = try Replicas(schema: file)
        let referenceURL = try TestEnvironment.freshDatabase()
        let reference = try Connection(referenceURL)
        try reference.execute(ddl)
        let served = try replicas.servers[0].database()
        var current = 0
        var moves = 0, resumedChanges = 0
        var client = try replicas.servers[current].client()
        for schema in schemas {
            let label = "\(seed):\(schema.number)"
            let run = try DiffSchemaRun(schema: schema, seed: label, randomSeed: SeededRandom.mix(seed, UInt64(schema.number) * 2 + 1),
                                        client: client, served: served, reference: reference)
            run.beforeSave = { old in
                let (moved, resumed, farewell) = try replicas.move(old, from: current)
                current = 1 - current
                moves += 1
                if let resumed {
                    guard resumed.ok else { throw TestFailure("seed \(label): RESUME answered \(resumed.status)") }
                    resumedChanges += Int(resumed.message.split(separator: " ")[1]) ?? 0
                } else if farewell.pushed != ["! shutdown recordsd is stopping"] {
                    throw TestFailure("seed \(label): no handoff notice: \(farewell.pushed)")
                }
                return moved
            }
            try run.run(units: 6)
            client = run.client
            print("hand-off differential: seed \(label), \(run.stats.units) units, \(run.stats.saved) saved, \(run.stats.refused) refused")
            for mismatch in run.mismatches { Issue.record(Comment(rawValue: mismatch.report)) }
        }
        print("hand-off differential: \(moves) moves, \(resumedChanges) pending changes resumed")
        #expect(moves >= 20)
        #expect(resumedChanges > 0)
    }
}
