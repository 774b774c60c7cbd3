import Foundation
import Postgres
import Testing

/// A FIND of a whole large table (SplitRead.minimumBlocks, 8 MiB, and more) is read in two
/// halves of its blocks at once, the second on another pooled connection that imports the
/// first's snapshot, when the pool has a worker to spare (`--pool-size 4` here; the tests'
/// usual 3 keeps it whole). Checked against the same records read in one piece (ORDER BY),
/// on keys we did not choose, while rows move under the read, under row-level security, and
/// when either half's backend dies or the client leaves.
@Suite struct SplitReadTests {
    static let rows = 40_000  // of some 250 bytes: about 1,300 blocks
    static let schema = """
        CREATE TABLE by_uuid (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), n int NOT NULL, pad text);
        CREATE TABLE by_text (code text PRIMARY KEY, parent text REFERENCES by_text (code), pad text);
        CREATE TABLE by_pair (a int, b text, pad text, PRIMARY KEY (a, b));
        CREATE TABLE ledger (id bigint PRIMARY KEY, n int NOT NULL, pad text);
        CREATE TABLE wide (id int PRIMARY KEY, pad text);
        """
    /// About a kilobyte of text that does not compress: 40 MB of rows, more than the sockets
    /// and the server's output buffer hold for a client that reads nothing.
    static let kilobyte = "(SELECT string_agg(md5(i::text || '.' || j::text), '') FROM generate_series(1, 30) j)"
    static let fill = """
        INSERT INTO by_uuid (n, pad) SELECT i, repeat(chr(65 + i % 26), 200) || E'\\t"\\\\' FROM generate_series(1, \(rows)) i;
        INSERT INTO by_text SELECT 'k' || i, CASE WHEN i > 1 THEN 'k' || (i / 2) END, repeat('é', 100) FROM generate_series(1, \(rows)) i;
        INSERT INTO by_pair SELECT i % 1000, 'b' || (i / 1000), repeat('p', 200) FROM generate_series(0, \(rows) - 1) i;
        INSERT INTO ledger SELECT i, 1, repeat('l', 200) FROM generate_series(1, \(rows)) i;
        INSERT INTO wide SELECT i, \(kilobyte) FROM generate_series(1, \(rows)) i;
        ANALYZE;
        """

    static func server(_ arguments: [String] = ["--pool-size", "4", "--admin-listen", "127.0.0.1:0"]) throws -> (TestServer, Connection) {
        let server = try TestServer(schema: try Schema(schema), arguments: arguments)
        let db = try server.database()
        try db.execute(fill)
        return (server, db)
    }

    /// The COPY statements running in the database while `line` streams to a client that
    /// reads nothing (it holds them); the client is returned for the test to read or drop.
    static func copies(_ server: TestServer, _ db: Connection, _ line: String, count: Int = 2,
                       reader: LineClient? = nil) throws -> ([String], LineClient) {
        let running = """
            SELECT coalesce(string_agg(query, E'\\n' ORDER BY query), '') FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active' AND query LIKE 'COPY %'
            """
        _ = try eventually({ try db.query(running).string(0, 0) ?? "" }, until: { $0.isEmpty })
        let reader = try reader ?? server.client()
        try reader.write(line + "\n")
        let seen = try eventually({ try db.query(running).string(0, 0) ?? "" }, until: { $0.split(separator: "\n").count >= count })
        return (seen.split(separator: "\n").map(String.init), reader)
    }

    @Test func aLargeTableIsReadInTwoHalvesWithTheRecordsReadInOnePiece() throws {
        let (server, db) = try Self.server()
        let client = try server.client()
        // Each FIND of a whole table is read in two halves (the server's count says so: a
        // client that holds a read, below, keeps two workers and the next reads whole).
        for (table, order) in [("by_uuid", "id"), ("by_text", "code"), ("by_pair", "a, b"), ("ledger", "id")] {
            #expect(try db.query("SELECT (pg_relation_size($1) / 8192 >= 1024)::text", [table]).string(0, 0) == "true", "\(table) is large enough to split")
            let halvesBefore = try server.metric(Self.twoHalves)
            let split = try client.send("FIND \(table)")
            #expect(try server.metric(Self.twoHalves) == halvesBefore + 1, "\(table) was read in two halves")
            let whole = try client.send("FIND \(table) ORDER BY \(order)")
            #expect(split.status == "+OK \(Self.rows) records", "\(table)")
            #expect(whole.status == "+OK \(Self.rows) records", "\(table)")
            #expect(split.lines.sorted() == whole.lines.sorted(), "\(table)")
            #expect(Set(split.lines).count == Self.rows, "\(table)")
        }
        #expect(try server.metric(Self.readWhole) == 0)
        // What PostgreSQL runs: two COPYs, one from block 0, the other from the middle.
        let (running, reader) = try Self.copies(server, db, "FIND wide")
        #expect(running.count == 2 && running.allSatisfy { $0.contains("t0.ctid >= ") }, "\(running)")
        #expect(running.contains { $0.contains("t0.ctid >= '(0,0)'::tid") }, "\(running)")
        reader.shutdown()
        // Read by its own pool of 3, the same table is read whole: the reserve is kept. Whole
        // means one COPY with no block range; whether it is the table's own COPY or a query
        // that selects xmin depends on other transactions in the cluster (CI's other suites).
        let (small, smallDB) = try Self.server(["--admin-listen", "127.0.0.1:0"])
        let smallClient = try small.client()
        #expect(try smallClient.send("FIND ledger").status == "+OK \(Self.rows) records")
        #expect(try small.metric(Self.readWhole) == 1)
        #expect(try small.metric(Self.twoHalves) == 0)
        let (one, held) = try Self.copies(small, smallDB, "FIND wide", count: 1)
        #expect(one.count == 1 && one.allSatisfy { $0.contains(#""public"."wide""#) && !$0.contains("ctid") }, "\(one)")
        held.shutdown()
    }

    static let twoHalves = #"recordsd_split_reads_total{outcome="two_halves"}"#
    static let readWhole = #"recordsd_split_reads_total{outcome="whole"}"#

    /// Rows move (an UPDATE writes each row's new version elsewhere, maybe in the other half)
    /// while a slow client reads, and each transaction moves a unit between two rows: every
    /// FIND still shows one snapshot, each key once and the ledger's sum whole.
    @Test func bothHalvesSeeOneSnapshotWhileRowsMove() throws {
        let (server, db) = try Self.server()
        let writer = Handed(try server.database())  // the writing thread's only
        let stop = Locked(false)
        let done = DispatchSemaphore(value: 0)
        let seed = UInt64(ProcessInfo.processInfo.environment["RECORDS_SPLIT_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)
        print("split read under writes: seed \(seed) (RECORDS_SPLIT_SEED replays it)")
        Thread.detachNewThread {
            var generator = SplitMix(seed: seed)
            while !stop.value {
                let a = 1 + Int(generator.next() % UInt64(Self.rows)), b = 1 + Int(generator.next() % UInt64(Self.rows))
                guard a != b else { continue }
                // Each UPDATE writes the row's new version elsewhere (the pages are full).
                _ = try? writer.value.execute("""
                    BEGIN;
                    UPDATE ledger SET n = n - 1, pad = pad || 'x' WHERE id = \(a);
                    UPDATE ledger SET n = n + 1, pad = pad || 'y' WHERE id = \(b);
                    COMMIT;
                    """)
            }
            done.signal()
        }
        defer { stop.with { $0 = true }; done.wait() }
        let client = try server.client()
        for round in 0..<3 {
            try client.write("FIND ledger\n")
            var ids = Set<Int>(), sum = 0, lines = 0
            while let line = try client.readLine(), !line.hasPrefix("+") && !line.hasPrefix("-") {
                lines += 1
                if lines % 500 == 0 { usleep(15_000) }  // a slow reader: the writes go on meanwhile
                guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      let id = object["id"] as? Int, let n = object["n"] as? Int else { continue }
                ids.insert(id)
                sum += n
            }
            #expect(lines == Self.rows && ids.count == Self.rows && sum == Self.rows, "round \(round), seed \(seed): \(lines) lines, \(ids.count) keys, sum \(sum)")
        }
        #expect(try db.query("SELECT sum(n)::text FROM ledger").string(0, 0) == String(Self.rows))
    }

    /// The helper reads as the user who asked: each writer's FIND has their own records only,
    /// the admin's all of them, from both halves.
    @Test func rowLevelSecurityHoldsInBothHalves() throws {
        let s = try RowLevelSecurityTests.Stack(arguments: ["--pool-size", "4", "--admin-listen", "127.0.0.1:0"])
        try s.owner.execute("""
            INSERT INTO memo (uid, body, owner) SELECT 'm' || i, \(Self.kilobyte), CASE WHEN i % 2 = 0 THEN 'alice' ELSE 'bob' END
            FROM generate_series(1, \(Self.rows)) i;
            ANALYZE memo;
            """)
        for (client, owner, count) in [(s.alice, "alice", Self.rows / 2), (s.bob, "bob", Self.rows / 2), (s.boss, nil, Self.rows)] {
            let halvesBefore = try s.server.metric(Self.twoHalves)
            let reply = try client.send("FIND memo")
            #expect(try s.server.metric(Self.twoHalves) == halvesBefore + 1, "\(owner ?? "admin")'s FIND was read in two halves")
            #expect(reply.status == "+OK \(count) records", "\(owner ?? "admin")")
            if let owner {
                #expect(reply.lines.allSatisfy { $0.contains(#""owner":"\#(owner)""#) }, "\(owner)")
            }
        }
        let ids = try s.ids(s.alice, "FIND memo")
        #expect(ids.count == Self.rows / 2 && ids.allSatisfy { $0 % 2 == 0 })
        // Last: a client that holds a read keeps both workers a while.
        let db = try s.server.database()
        let alice = try s.server.client()
        try alice.ok("AUTH alice alice-password")
        let (running, reader) = try Self.copies(s.server, db, "FIND memo", reader: alice)
        #expect(running.count == 2, "\(running)")
        reader.shutdown()
    }

    /// Either half's backend terminated mid-read: the FIND ends with an error after the
    /// records sent, both connections go back to the pool, and the next FIND is whole.
    @Test func aHalfWhoseBackendDiesEndsTheFindAndFreesBoth() throws {
        let (server, db) = try Self.server()
        for half in ["leader", "helper"] {
            let (running, reader) = try Self.copies(server, db, "FIND wide")
            #expect(running.count == 2, "\(running)")
            let condition = half == "leader" ? "query LIKE '%ctid >= ''(0,0)''%'" : "query NOT LIKE '%ctid >= ''(0,0)''%'"
            let killed = try db.query("""
                SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'COPY %' AND \(condition)
                """).string(0, 0)
            #expect(killed == "1", "\(half)")
            var lines = 0
            var status = ""
            while let line = try reader.readLine() {
                if line.hasPrefix("+") || line.hasPrefix("-") { status = line; break }
                lines += 1
            }
            #expect(status.hasPrefix("-ERR UNAVAILABLE "), "\(half): \(status)")
            #expect(lines < Self.rows, "\(half)")
            let again = try reader.send("FIND wide")
            #expect(again.status == "+OK \(Self.rows) records", "\(half)")
            #expect(Set(again.lines).count == Self.rows, "\(half)")
        }
    }

    /// A client that reads slowly but steadily never stalls, and PostgreSQL's own timeout
    /// reaches it only behind the rows already in the sockets: the stream's clock stops a
    /// FIND (split or not) or an EXPORT at `--bulk-timeout`, the count its lines.
    @Test func aSlowSteadyReaderIsStoppedAtTheBulkTimeout() throws {
        let (server, db) = try Self.server(["--pool-size", "4", "--bulk-timeout", "2"])
        for (line, verb, header) in [("FIND wide", "FIND", 0), ("FIND wide WHERE id > 0", "FIND", 0), ("EXPORT wide", "EXPORT", 1)] {
            let client = try server.client()
            try client.write(line + "\n")
            var lines = 0
            var status = ""
            while let next = try client.readLine() {
                if next.hasPrefix("+OK") || next.hasPrefix("-ERR") { status = next; break }
                lines += 1
                if lines % 64 == 0 { usleep(20_000) }  // some 3 MB a second
            }
            let records = lines - header
            #expect(status == "-ERR LIMIT the \(verb) ran past its time limit (--bulk-timeout, 2 s): it stopped after \(records) record(s), to free its connection", "\(line)")
            #expect(records < Self.rows, "\(line)")
        }
        let running = """
            SELECT count(*)::text FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'COPY %' AND state <> 'idle'
            """
        #expect(try eventually({ try db.query(running).string(0, 0) }, until: { $0 == "0" }) == "0")
        #expect(try server.client().send("COUNT wide").status == "+OK \(Self.rows)")
    }

    /// A client that leaves mid-read frees both connections: the pool serves two more split
    /// reads in full at once.
    @Test func aClientThatLeavesFreesBothConnections() throws {
        let (server, db) = try Self.server()
        for _ in 0..<3 {
            let (_, reader) = try Self.copies(server, db, "FIND wide")
            _ = try reader.readLine()
            reader.shutdown()
        }
        let idle = """
            SELECT count(*)::text FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'COPY %' AND state <> 'idle'
            """
        #expect(try eventually({ try db.query(idle).string(0, 0) }, until: { $0 == "0" }) == "0")
        let first = try server.client(), second = try server.client()
        try first.write("FIND by_text\n")
        try second.write("FIND by_text\n")
        for client in [first, second] {
            let reply = try client.readReply()
            #expect(reply.status == "+OK \(Self.rows) records")
            #expect(Set(reply.lines).count == Self.rows)
        }
        // Every read counted once, the ones whose clients left too, and those under their
        // outcome. A command is counted when its work returns, which may be a little after
        // its COPYs end (the worker then ends its transaction): on a busy machine, after.
        #expect(try server.metric(Self.twoHalves) + server.metric(Self.readWhole) == 5)
        let left = #"recordsd_commands_total{verb="FIND",outcome="client_left"}"#
        _ = try eventually({ try server.metric(left) }, until: { $0 >= 3 })
        let finds = try adminGet(try server.adminPort(), "/metrics").body.filter { $0.contains(#"verb="FIND""#) }
        #expect(try server.metric(left) == 3, "\(finds)")
        #expect(try server.metric(#"recordsd_commands_total{verb="FIND",outcome="ok"}"#) == 2, "\(finds)")
    }
}
