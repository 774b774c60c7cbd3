#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import RecordsClient
import RecordsProtocol
import Testing

/// --durable-units: each session's state is written as it changes, before the replies that
/// changed it, so a replica killed with SIGKILL loses nothing it answered.
@Suite struct DurableUnitsTests {
    /// The token of the durable notice a client was pushed (after its first change).
    static func token(_ client: LineClient) throws -> String {
        try client.ok("PING")
        guard let notice = client.pushed.last(where: { $0.hasPrefix("! handoff ") }) else { throw TestFailure("no handoff notice: \(client.pushed)") }
        return String(notice.split(separator: " ")[2])
    }

    @Test func aCrashLosesNothingThatWasAnswered() throws {
        let replicas = try Replicas(arguments: ["--durable-units"])
        let setup = try replicas.servers[1].client()
        try setup.ok(#"INSERT employee AS #e first_name="Ann" last_name="Lee" gender=1 age=40"#)
        let employee = try setup.ok("SAVE").savedKeys["#e"]!

        let client = try replicas.servers[0].client()
        try client.ok(#"INSERT department AS #d name="Kept" number=1"#)
        let token = try Self.token(client)
        #expect(client.pushed == ["! handoff \(token) (1 pending change(s)): RESUME \(token) on any server within 900 s restores this session"])
        try client.ok(#"INSERT employee AS #n first_name="Bo" last_name="Yu" gender=2 department=#d"#)
        let shown = try client.ok("GET employee #n").lines
        try client.ok("GET employee \(employee)")
        try client.ok("UPDATE employee \(employee) SET age=41")
        try client.ok("NEST")
        try client.ok(#"INSERT project name="Nested""#)
        let before = try client.ok("CHANGES")
        // The notice came once: later writes keep the token.
        #expect(client.pushed.filter { $0.hasPrefix("! handoff ") }.count == 1)

        kill(replicas.servers[0].process.processIdentifier, SIGKILL)
        replicas.servers[0].process.waitUntilExit()
        let moved = try replicas.servers[1].client()
        #expect(try moved.send("RESUME \(token)").status == "+OK resumed: 4 pending change(s), 1 nested scratchpad(s) open")
        #expect(try moved.ok("CHANGES") == before)
        #expect(try moved.ok("GET employee #n").lines == shown)
        // Versions read before the crash still catch a change made meanwhile.
        try setup.ok("UPDATE employee \(employee) SET age=50")
        try setup.ok("SAVE")
        try moved.ok("MERGE")
        #expect(try moved.send("SAVE").status.hasPrefix("-ERR CONFLICT"))
        try moved.ok("SAVE FORCE")
        let db = try replicas.servers[1].database()
        #expect(try db.query("SELECT count(*) FROM employee WHERE first_name = 'Bo' AND department_id = (SELECT id FROM department WHERE name = 'Kept')").string(0, 0) == "1")
        #expect(try db.query("SELECT age FROM employee WHERE id = $1", [employee]).string(0, 0) == "41")
        #expect(try db.query("SELECT count(*) FROM project WHERE name = 'Nested'").string(0, 0) == "1")
    }

    @Test func aSessionStillOpenIsNotTakenAndOneThatQuitIsGone() throws {
        let replicas = try Replicas(arguments: ["--durable-units"])
        let open = try replicas.servers[0].client()
        try open.ok(#"INSERT project name="Mine""#)
        let token = try Self.token(open)
        let thief = try replicas.servers[1].client()
        #expect(try thief.send("RESUME \(token)").status == "-ERR UNAVAILABLE this session is still open on its server: RESUME once that connection has closed")
        // A client whose connection broke may come back for it.
        open.shutdown()
        let back = try replicas.servers[1].client()
        let resumed = eventually(tries: 50, { (try? back.send("RESUME \(token)"))?.status ?? "" }, until: { !$0.hasPrefix("-ERR UNAVAILABLE") })
        #expect(resumed == "+OK resumed: 1 pending change(s)")
        // QUIT drops the changes: nothing is left to resume.
        let quitter = try replicas.servers[0].client()
        try quitter.ok(#"INSERT project name="Dropped""#)
        let gone = try Self.token(quitter)
        try quitter.ok("QUIT")
        let late = try replicas.servers[1].client()
        let answer = eventually(tries: 50, { (try? late.send("RESUME \(gone)"))?.status ?? "" }, until: { !$0.hasPrefix("-ERR UNAVAILABLE") })
        #expect(answer == "-ERR NOT_FOUND no session to resume with this token: it is unknown, or was already resumed (a token works once)")
    }

    /// RESUMEs sent the moment a replica is killed, several at once for one token (a client
    /// retrying on many connections): one wins, the others are told the token was used; none
    /// is told the session is still open (its server is gone).
    @Test func concurrentResumesRightAfterACrashHaveOneWinner() throws {
        let replicas = try Replicas(arguments: ["--durable-units"])
        let open = try replicas.servers[0].client()
        try open.ok(#"INSERT project name="Raced""#)
        let token = try Self.token(open)
        let racers = try (0..<4).map { _ in try replicas.servers[1].client() }
        kill(replicas.servers[0].process.processIdentifier, SIGKILL)
        for racer in racers { try racer.write("RESUME \(token)\n") }
        let answers = try racers.map { try $0.readReply().status }.sorted()
        #expect(answers == ["+OK resumed: 1 pending change(s)"]
                + Array(repeating: "-ERR NOT_FOUND no session to resume with this token: it is unknown, or was already resumed (a token works once)", count: 3),
                "\(answers)")
        replicas.servers[0].process.waitUntilExit()
    }

    /// A SAVE that committed as its server died, its reply lost: the durable state written
    /// before it names the commit mark the SAVE writes, so RESUME finds the unit saved and a
    /// SAVE sent again writes nothing twice.
    @Test func aSaveWhoseReplyWasLostIsNotWrittenAgain() throws {
        let replicas = try Replicas(arguments: ["--durable-units"])
        let db = try replicas.servers[1].database()
        let markOf = "SELECT state->>'nextSaveMark' FROM records.handoff WHERE token_hash = sha256(convert_to($1, 'UTF8'))"
        // The mark a state names is the one its SAVE writes.
        let saver = try replicas.servers[0].client()
        try saver.ok(#"INSERT project name="Once""#)
        let saverToken = try Self.token(saver)
        let named = try #require(try db.query(markOf, [saverToken]).string(0, 0))
        try saver.ok("SAVE")
        #expect(try db.query("SELECT count(*) FROM records.save_marks WHERE nonce = $1::bigint", [named]).string(0, 0) == "1")
        // The SAVE alone writes no state (the mark tells RESUME); the next change does, with
        // the next SAVE's own mark.
        #expect(try db.query(markOf, [saverToken]).string(0, 0) == named)
        try saver.ok(#"INSERT project name="Twice""#)
        try saver.ok("PING")
        #expect(try db.query(markOf, [saverToken]).string(0, 0) != named)

        // A unit written, then the server dies; its SAVE had committed (the mark is there).
        let client = try replicas.servers[0].client()
        try client.ok(#"INSERT project name="Lost reply""#)
        let token = try Self.token(client)
        let mark = try #require(try db.query(markOf, [token]).string(0, 0))
        // And one whose SAVE was answered just before the crash: its state was not written again.
        let answered = try replicas.servers[0].client()
        try answered.ok(#"INSERT project name="Answered""#)
        let answeredToken = try Self.token(answered)
        try answered.ok("SAVE")
        kill(replicas.servers[0].process.processIdentifier, SIGKILL)
        replicas.servers[0].process.waitUntilExit()
        try db.query("INSERT INTO records.save_marks (xid, nonce) VALUES (pg_current_xact_id(), $1::bigint)", [mark])
        let moved = try replicas.servers[1].client()
        #expect(try moved.send("RESUME \(token)").status
                == "+OK resumed: 0 pending change(s); its last SAVE committed (its reply may have been lost): the unit is saved, and nothing sent after that SAVE was kept")
        #expect(try moved.send("SAVE").status == "+OK nothing to save")
        let back = try replicas.servers[1].client()
        #expect(try back.send("RESUME \(answeredToken)").status
                == "+OK resumed: 0 pending change(s); its last SAVE committed (its reply may have been lost): the unit is saved, and nothing sent after that SAVE was kept")
        #expect(try back.send("SAVE").status == "+OK nothing to save")
        #expect(try db.query("SELECT count(*) FROM project WHERE name = 'Answered'").string(0, 0) == "1")
    }

    /// Server backends that are doing something (besides the asking one): a killed server's
    /// SAVE goes on in PostgreSQL until it ends by itself.
    static let busyBackends = """
        SELECT count(*) FROM pg_stat_activity
        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle' AND datname = current_database()
        """

    /// A server killed while its SAVE waits in PostgreSQL, its COMMIT already sent (the insert
    /// of a key another transaction is inserting waits for that one): the SAVE goes on after the
    /// RESUME elsewhere. It must not commit the unit the resumed session then saves again.
    @Test func aSaveStillRunningForAKilledServerIsNotWrittenTwice() throws {
        let replicas = try Replicas(arguments: ["--durable-units", "--lock-timeout", "60"])
        let db = try replicas.servers[1].database()
        let client = try replicas.servers[0].client()
        try client.ok(#"INSERT project id=990001 name="Once""#)
        let token = try Self.token(client)
        let blocker = try replicas.servers[1].database()
        try blocker.execute("BEGIN; INSERT INTO project (id, name) VALUES (990001, 'Blocker')")
        try client.write("SAVE\n")
        let waiting = try eventually({ try db.query("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").string(0, 0) }, until: { $0 == "1" })
        #expect(waiting == "1")
        kill(replicas.servers[0].process.processIdentifier, SIGKILL)
        replicas.servers[0].process.waitUntilExit()

        let moved = try replicas.servers[1].client()
        #expect(try moved.send("RESUME \(token)").status == "+OK resumed: 1 pending change(s)")
        // The old SAVE's insert goes on now, and the rest of its round (its mark, COMMIT).
        try blocker.execute("ROLLBACK")
        #expect(try eventually({ try db.query(Self.busyBackends).string(0, 0) }, until: { $0 == "0" }) == "0")
        #expect(try db.query("SELECT count(*) FROM project WHERE id = 990001").string(0, 0) == "0")
        let saved = try moved.send("SAVE").status
        #expect(saved == "+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(try db.query("SELECT name FROM project WHERE id = 990001").string(0, 0) == "Once")
    }

    /// A RESUME on a durable server writes the session's state under its new token in the
    /// transaction that spends the old one, and answers after it: a crash right after the RESUME
    /// (its state's write queued behind a SAVE that waits for a row) loses nothing.
    @Test func aResumedSessionIsDurableBeforeItsReply() throws {
        let replicas = try Replicas(arguments: ["--durable-units", "--pool-size", "1", "--lock-timeout", "60"])
        let setup = try replicas.servers[1].client()
        try setup.ok(#"INSERT project id=990010 name="b""#)
        try setup.ok(#"INSERT project id=990011 name="c""#)
        try setup.ok("SAVE")
        let first = try replicas.servers[0].client()
        try first.ok(#"INSERT project name="midresume""#)
        let token = try Self.token(first)
        kill(replicas.servers[0].process.processIdentifier, SIGKILL)
        replicas.servers[0].process.waitUntilExit()

        let db = try replicas.servers[1].database()
        let x = try replicas.servers[1].client(), resumer = try replicas.servers[1].client(), y = try replicas.servers[1].client()
        try x.ok(#"UPDATE project 990010 SET name="x""#)
        try y.ok(#"UPDATE project 990011 SET name="y""#)
        try resumer.ok("GET project 990011")  // a quick job first: the pool serves it in turn with Y
        let holdB = try replicas.servers[1].database(), holdC = try replicas.servers[1].database()
        try holdB.execute("BEGIN; SELECT 1 FROM project WHERE id = 990010 FOR UPDATE")
        try holdC.execute("BEGIN; SELECT 1 FROM project WHERE id = 990011 FOR UPDATE")
        // The one pooled connection: X's SAVE waits for row b; the RESUME, then Y's SAVE (which
        // will wait for row c) queue behind it.
        try x.write("SAVE\n")
        #expect(try eventually({ try db.query("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()").string(0, 0) }, until: { $0 == "1" }) == "1")
        try resumer.write("RESUME \(token)\n")
        usleep(300_000)
        try y.write("SAVE\n")
        usleep(300_000)
        try holdB.execute("ROLLBACK")
        let resumed = try resumer.readReply()
        #expect(resumed.status == "+OK resumed: 1 pending change(s)")
        let notice = try #require(resumer.pushed.last { $0.hasPrefix("! handoff ") })
        let next = String(notice.split(separator: " ")[2])
        #expect(next != token)
        kill(replicas.servers[1].process.processIdentifier, SIGKILL)
        replicas.servers[1].process.waitUntilExit()
        try holdC.execute("ROLLBACK")

        let fresh = try TestServer(databaseURL: replicas.databaseURL, arguments: replicas.arguments)
        let back = try fresh.client()
        #expect(try back.send("RESUME \(token)").status.hasPrefix("-ERR NOT_FOUND"))
        #expect(eventually(tries: 50, { (try? back.send("RESUME \(next)"))?.status ?? "" }, until: { !$0.hasPrefix("-ERR UNAVAILABLE") })
                == "+OK resumed: 1 pending change(s)")
        try back.ok("SAVE")
        #expect(try db.query("SELECT count(*) FROM project WHERE name = 'midresume'").string(0, 0) == "1")
    }

    /// A token is its owner's: when another user signs in on the session, its state moves to a
    /// new token of the new user's (the client is told), and the old one is gone.
    @Test func anotherUserSigningInMovesTheStateToTheirToken() throws {
        let replicas = try Replicas(arguments: ["--durable-units"])
        let setup = try replicas.servers[0].client()
        try setup.ok(#"USER ADD alice writer "alice-password""#)
        try setup.ok(#"USER ADD bob writer "bob-password""#)
        let client = try replicas.servers[0].client()
        try client.ok("AUTH alice alice-password")
        try client.ok(#"INSERT project name="by alice""#)
        let alices = try Self.token(client)
        // What alice left pending is never bob's: he signs in once it is saved or gone.
        #expect(try client.send("AUTH bob bob-password").status.hasPrefix("-ERR AUTH this session holds pending changes made as alice"))
        try client.ok("ROLLBACK")
        try client.ok("AUTH bob bob-password")
        try client.ok(#"INSERT project name="by bob""#)
        let bobs = try Self.token(client)
        #expect(bobs != alices)
        // Told when the state moved to bob's token, as he signed in.
        #expect(client.pushed.last == "! handoff \(bobs) (0 pending change(s)): RESUME \(bobs) on any server within 900 s restores this session")
        kill(replicas.servers[0].process.processIdentifier, SIGKILL)
        replicas.servers[0].process.waitUntilExit()
        let asAlice = try replicas.servers[1].client()
        try asAlice.ok("AUTH alice alice-password")
        #expect(eventually(tries: 50, { (try? asAlice.send("RESUME \(alices)"))?.status ?? "" }, until: { !$0.hasPrefix("-ERR UNAVAILABLE") })
                == "-ERR NOT_FOUND no session to resume with this token: it is unknown, or was already resumed (a token works once)")
        let asBob = try replicas.servers[1].client()
        try asBob.ok("AUTH bob bob-password")
        #expect(try asBob.send("RESUME \(bobs)").status == "+OK resumed: 1 pending change(s)")
        #expect(try asBob.ok("CHANGES").lines.count == 1)
    }

    /// Served by a newer server than the last `recordsd migrate` (--no-migrate): without the
    /// marks' single-use index RESUME could not fence, so it refuses and keeps the token.
    @Test func resumeWithoutTheFenceIndexIsRefusedAndTheTokenKept() throws {
        let replicas = try Replicas(arguments: ["--durable-units"])
        let db = try replicas.servers[1].database()
        let client = try replicas.servers[0].client()
        try client.ok(#"INSERT project name="Fenced""#)
        let token = try Self.token(client)
        kill(replicas.servers[0].process.processIdentifier, SIGKILL)
        replicas.servers[0].process.waitUntilExit()
        try db.execute("DROP INDEX records.save_marks_fence")
        let moved = try replicas.servers[1].client()
        #expect(try moved.send("RESUME \(token)").status == "-ERR UNAVAILABLE records.save_marks has no single-use index yet (run `recordsd migrate` with this version): without it a unit could be saved twice, so RESUME is refused (the token is kept)")
        try db.execute("CREATE UNIQUE INDEX save_marks_fence ON records.save_marks (nonce)")
        #expect(try moved.send("RESUME \(token)").status == "+OK resumed: 1 pending change(s)")
    }

    /// The server's liveness lock lost for a moment (its connection dropped): a session still
    /// open there can be resumed elsewhere. The copy left behind cannot save the unit again;
    /// it is told so and closed.
    @Test func aCopyLeftBehindBySessionResumedElsewhereCannotSave() throws {
        let replicas = try Replicas(arguments: ["--durable-units"])
        let db = try replicas.servers[1].database()
        let original = try replicas.servers[0].client()
        try original.ok(#"INSERT project name="Only once""#)
        let token = try Self.token(original)
        let taker = try replicas.servers[1].client()
        // Each server's watcher holds its lock; dropped, the lock is free until it reconnects.
        let resumed = eventually(tries: 100, every: 20_000, {
            _ = try? db.query("""
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE application_name = 'recordsd-watcher' AND datname = current_database()
                """)
            _ = eventually(tries: 50, every: 10_000, { (try? db.query("""
                SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """))?.string(0, 0) ?? "" },
                           until: { $0 == "0" })
            return (try? taker.send("RESUME \(token)"))?.status ?? ""
        }, until: { !$0.hasPrefix("-ERR UNAVAILABLE") })
        #expect(resumed == "+OK resumed: 1 pending change(s)")
        #expect(try original.send("SAVE").status == "-ERR CONFLICT this session was resumed elsewhere (RESUME with its token) and its unit lives on there: nothing was saved here, and this connection closes")
        #expect(try original.readToEnd() == [])
        let saved = try taker.send("SAVE").status
        #expect(saved == "+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(try db.query("SELECT count(*) FROM project WHERE name = 'Only once'").string(0, 0) == "1")
    }

    /// A durable session idle longer than --resume-ttl, then its server killed: the state did
    /// not expire while the server lived.
    @Test func anIdleSessionsStateOutlivesTheTTLWhileItsServerLives() throws {
        let replicas = try Replicas(arguments: ["--durable-units", "--resume-ttl", "1"])
        let client = try replicas.servers[0].client()
        try client.ok(#"INSERT project name="Idle""#)
        let token = try Self.token(client)
        sleep(3)
        kill(replicas.servers[0].process.processIdentifier, SIGKILL)
        replicas.servers[0].process.waitUntilExit()
        let moved = try replicas.servers[1].client()
        #expect(try moved.send("RESUME \(token)").status == "+OK resumed: 1 pending change(s)")
    }

    /// Makes every write of a session's state fail (PostgreSQL refusing it), until `undo`.
    static func refuseStateWrites(_ db: Connection) throws {
        try db.execute("""
            CREATE FUNCTION records.refuse_state() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
            CREATE TRIGGER refuse_state BEFORE INSERT OR UPDATE ON records.handoff FOR EACH ROW EXECUTE FUNCTION records.refuse_state();
            """)
    }

    static func acceptStateWrites(_ db: Connection) throws {
        try db.execute("DROP TRIGGER refuse_state ON records.handoff; DROP FUNCTION records.refuse_state()")
    }

    /// A change whose state write failed is answered with `! durable: ...`: the copy kept is
    /// older than the reply. The token is good again once a later write succeeds, and the
    /// server says so with the handoff notice again; a crash before that would resume the
    /// older copy, which a client must not do in silence.
    @Test func aFailedStateWriteIsToldAndTheTokenGivenAgainOnceWritten() throws {
        let replicas = try Replicas(arguments: ["--durable-units"])
        let db = try replicas.servers[1].database()
        let client = try replicas.servers[0].client()
        try client.ok(#"INSERT project name="first""#)
        let token = try Self.token(client)
        try Self.refuseStateWrites(db)
        try client.ok(#"INSERT project name="second""#)
        try client.ok("PING")
        #expect(client.pushed.last == "! " + Notice.durableFailed.text, "\(client.pushed)")
        try Self.acceptStateWrites(db)
        try client.ok(#"INSERT project name="third""#)
        try client.ok("PING")
        #expect(client.pushed.last == "! handoff \(token) (3 pending change(s)): RESUME \(token) on any server within 900 s restores this session", "\(client.pushed)")
        kill(replicas.servers[0].process.processIdentifier, SIGKILL)
        replicas.servers[0].process.waitUntilExit()
        #expect(try replicas.servers[1].client().send("RESUME \(token)").status == "+OK resumed: 3 pending change(s)")
    }

    /// The library never resumes an older copy in silence: a state write failed, then the
    /// server crashed, and the next request fails saying the session's changes are lost. (It
    /// resumed the copy written before the failure, and a SAVE then wrote one insert of two.)
    @Test func theLibraryDoesNotResumeACopyOlderThanItWasTold() async throws {
        let stack = try BalancedStack(arguments: ["--durable-units"])
        let db = try Connection(stack.databaseURL)
        let client = try await RecordsClient.connect(stack.url)
        _ = try await client.insert("project", ["name": "older-1"])
        _ = try await client.pendingCount()  // the handoff notice read
        try Self.refuseStateWrites(db)
        _ = try await client.insert("project", ["name": "older-2"])
        _ = try await client.pendingCount()  // the durable notice read
        try Self.acceptStateWrites(db)
        stack.stop(0, signal: SIGKILL)
        stack.stop(1, signal: SIGKILL)
        try stack.start(0)
        try stack.start(1)
        do {
            let count = try await client.pendingCount().pending
            Issue.record("the session was resumed with \(count) pending change(s) after a write of its state failed")
        } catch RecordsError.connection(let text) {
            #expect(text.hasPrefix("the server went away and could not keep this session"), "\(text)")
        }
        #expect(try db.query("SELECT count(*) FROM project WHERE name LIKE 'older-%'").string(0, 0) == "0")
    }

    /// Behind the balancer, one replica killed with SIGKILL: library clients resume on the
    /// other by themselves; every unit saves exactly its changes.
    @Test func libraryClientsFollowTheirSessionsThroughACrash() async throws {
        let stack = try BalancedStack(arguments: ["--durable-units"])
        var clients: [RecordsClient] = []
        for index in 0..<6 {
            let client = try await RecordsClient.connect(stack.url)
            for row in 0...index { _ = try await client.insert("project", ["name": "k\(index)-\(row)"]) }
            clients.append(client)
        }
        stack.stop(0, signal: SIGKILL)
        try stack.start(0)
        stack.stop(1, signal: SIGKILL)
        try stack.start(1)
        for (index, client) in clients.enumerated() {
            #expect(try await client.pendingCount().pending == index + 1, "client \(index)")
            #expect(try await client.save().ids.count == index + 1, "client \(index)")
        }
        let db = try Connection(stack.databaseURL)
        for index in 0..<clients.count {
            #expect(try db.query("SELECT count(DISTINCT name) || '/' || count(*) FROM project WHERE name LIKE $1", ["k\(index)-%"]).string(0, 0) == "\(index + 1)/\(index + 1)")
        }
    }

    /// Both replicas away for longer than the client's ten seconds of reconnecting (a deploy
    /// that stops them together; the compose stack's balancer once lost DNS for 40 s): the
    /// request in flight fails saying so, the client keeps its session's token, and the next
    /// request, and `save(key:)` within its patience, resume it once a replica is back. The
    /// old client answered every later request `connection: closed` and lost the unit.
    @Test func aSessionOutlivesAnOutageLongerThanTheClientsReconnecting() async throws {
        let stack = try BalancedStack(arguments: ["--durable-units"])
        let client = try await RecordsClient.connect(stack.url)
        for row in 0..<2 { _ = try await client.insert("project", ["name": "outage-\(row)"]) }
        stack.stop(0)
        stack.stop(1)
        do {
            _ = try await client.pendingCount()
            Issue.record("a request with no server to take the session answered")
        } catch RecordsError.connection(let text) {
            #expect(text.hasPrefix("no server took this session back yet"), "\(text)")
        }
        #expect(await client.isWaitingForServer)
        let restarted = Task.detached {
            try await Task.sleep(nanoseconds: 12_000_000_000)  // past one round of reconnecting
            try stack.start(0)
            try stack.start(1)
        }
        let saved = try await client.save(key: "outage-" + UUID().uuidString.lowercased(), patience: 60)
        try await restarted.value
        #expect(saved.ids.count == 2)
        #expect(!(await client.isWaitingForServer))
        #expect(try Connection(stack.databaseURL).query("SELECT count(DISTINCT name) || '/' || count(*) FROM project WHERE name LIKE 'outage-%'").string(0, 0) == "2/2")
    }

    /// The same over TLS (STARTTLS through the balancer): an idle client learns its server died
    /// before its next request leaves, and that request runs once on the resumed session.
    @Test func libraryClientsOverTLSFollowTheirSessionsThroughACrash() async throws {
        let certificates = try TestCertificates()
        let stack = try BalancedStack(arguments: ["--durable-units", "--tls-cert", certificates.cert, "--tls-key", certificates.key])
        let client = try await RecordsClient.connect("records://localhost:\(stack.balancerPort)?tls=require", caFile: certificates.ca)
        _ = try await client.insert("project", ["name": "over-tls"])
        for replica in 0..<2 {
            stack.stop(replica, signal: SIGKILL)
            try stack.start(replica)
        }
        #expect(try await client.pendingCount().pending == 1)
        #expect(try await client.save().ids.count == 1)
        #expect(try Connection(stack.databaseURL).query("SELECT count(*) FROM project WHERE name = 'over-tls'").string(0, 0) == "1")
    }
}
