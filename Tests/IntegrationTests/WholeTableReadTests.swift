import Foundation
import Postgres
import Testing

/// A FIND or EXPORT of a whole table is read by `COPY table (columns) TO STDOUT`, not through
/// a query, where the catalog says COPY reads what the query would: not a partitioned table
/// (COPY refuses it), a parent (COPY leaves its children out) or a table with a generated
/// column (COPY refuses to name one), asked when the read runs, not when the model was read.
/// Each whole read is checked against the same read through a query (ORDER BY its key).
@Suite struct WholeTableReadTests {
    static let schema = #"""
        CREATE TABLE plain (id bigint PRIMARY KEY, label text, doc jsonb, at timestamptz, n numeric, flag boolean);
        CREATE TABLE "Odd ""name""" (id uuid PRIMARY KEY, "we""ird col" text, "UPPER" int);
        CREATE TABLE computed (id int PRIMARY KEY, a int, twice int GENERATED ALWAYS AS (a * 2) STORED);
        CREATE TABLE dept (id int PRIMARY KEY);
        CREATE TABLE gfk (id int PRIMARY KEY, raw int, dept_id int GENERATED ALWAYS AS (raw % 3) STORED REFERENCES dept (id));
        CREATE TABLE measurement (id bigint, day date, value double precision, note text,
                                  PRIMARY KEY (id, day)) PARTITION BY RANGE (day);
        CREATE TABLE measurement_2024 PARTITION OF measurement FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
        CREATE TABLE measurement_2025 PARTITION OF measurement FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
        CREATE TABLE animal (id int PRIMARY KEY, name text);
        CREATE TABLE dog (breed text) INHERITS (animal);
        CREATE TABLE solo (id int PRIMARY KEY, v text);
        CREATE TABLE relaid (id int PRIMARY KEY, v text);
        CREATE TABLE regrown (id int PRIMARY KEY, v text);
        CREATE TABLE bulk (id int PRIMARY KEY, v text);
        """#

    /// Text with the bytes COPY's text format escapes, quotes, and more than ASCII.
    static func text(_ generator: inout SplitMix) -> String {
        let pieces = ["a", "Z", "\t", "\\", "\n", "\r", "\"", ",", "'", "é", "😀", "\\N", " "]
        return (0..<Int(generator.next() % 12)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined()
    }

    /// FIND and EXPORT of the whole of `entity` give the rows and lines the query forms give.
    static func expectWholeReadsMatch(_ client: LineClient, _ entity: String, key: String, rows: Int, _ note: String) throws {
        let whole = try client.send("FIND \(entity)")
        let ordered = try client.send("FIND \(entity) ORDER BY \(key)")
        #expect(whole.status == "+OK \(rows) record\(rows == 1 ? "" : "s")", "\(note): FIND \(entity)")
        #expect(whole.lines.count == rows && whole.lines.sorted() == ordered.lines.sorted(), "\(note): FIND \(entity)")
        let export = try client.send("EXPORT \(entity)")
        let orderedExport = try client.send("EXPORT \(entity) ORDER BY \(key)")
        #expect(export.status == "+OK exported \(rows) record\(rows == 1 ? "" : "s")", "\(note): EXPORT \(entity)")
        #expect(export.lines.first == orderedExport.lines.first, "\(note): EXPORT \(entity)'s header")
        #expect(export.lines.sorted() == orderedExport.lines.sorted(), "\(note): EXPORT \(entity)")
    }

    @Test func wholeReadsAreTheQuerysRowsOnEveryKindOfTable() throws {
        let seed = TestEnvironment.seed("RECORDS_WHOLE_SEED", for: "wholeReadsAreTheQuerysRowsOnEveryKindOfTable")
        var generator = SplitMix(seed: seed)
        let server = try TestServer(schema: try Schema(Self.schema))
        let db = try server.database()
        let rows = 200 + Int(generator.next() % 300)
        try db.execute("INSERT INTO dept VALUES (0), (1), (2)")
        for index in 0..<rows {
            let label = index % 7 == 0 ? nil : Self.text(&generator)
            _ = try db.query("INSERT INTO plain VALUES ($1, $2, $3::jsonb, '2024-06-01 12:00:00+00', $4, $5)",
                             [String(index), label, index % 5 == 0 ? nil : #"{"s": "\#(index)\t\\"}"#, "\(index).5", index % 2 == 0 ? "t" : nil])
            _ = try db.query(#"INSERT INTO "Odd ""name""" VALUES (gen_random_uuid(), $1, $2)"#, [label, String(index)])
            _ = try db.query("INSERT INTO computed (id, a) VALUES ($1, $2)", [String(index), index % 4 == 0 ? nil : String(index)])
            _ = try db.query("INSERT INTO gfk (id, raw) VALUES ($1, $2)", [String(index), index % 4 == 0 ? nil : String(index)])
            _ = try db.query("INSERT INTO measurement VALUES ($1, $2::date, $3, $4)",
                             [String(index), index % 2 == 0 ? "2024-03-01" : "2025-03-01", "\(Double(index) / 3)", label])
            _ = try db.query(index % 3 == 0 ? "INSERT INTO dog VALUES ($1, $2, 'collie')" : "INSERT INTO animal VALUES ($1, $2)",
                             [String(index), label])
        }
        let client = try server.client()
        let tables = [("plain", "id"), (#""Odd \"name\"""#, "id"), ("computed", "id"), ("gfk", "id"), ("measurement", "id, day"), ("animal", "id")]
        for (entity, key) in tables {
            try Self.expectWholeReadsMatch(client, entity, key: key, rows: rows, "seed \(seed)")
        }
        // A child's rows are the parent's: read, not left out.
        #expect(try client.send("FIND animal").lines.filter { $0.contains(#""id":3,"#) }.count == 1)
        // A generated column is PostgreSQL's to compute: EXPORT leaves it out, a to-one's too.
        #expect(try client.send("EXPORT gfk").lines.first == "id,raw")
        #expect(try client.send("EXPORT computed").lines.first == "id,a")

        // Pending changes are part of what a whole read sees, as of every read.
        try client.ok(#"INSERT plain id=100000 label="pending""#)
        try client.ok("DELETE plain 0")
        try client.ok(#"UPDATE plain 1 label="changed""#)
        let seen = try client.send("FIND plain")
        #expect(seen.status == "+OK \(rows) records")
        #expect(seen.lines.contains { $0.hasPrefix(#"{"id":100000,"label":"pending""#) })
        #expect(seen.lines.contains { $0.hasPrefix(#"{"id":1,"label":"changed""#) })
        #expect(!seen.lines.contains { $0.hasPrefix(#"{"id":0,"#) })
        let exported = try client.send("EXPORT plain")
        #expect(exported.status == "+OK exported \(rows) records")
        #expect(exported.lines.contains { $0.hasPrefix("100000,pending,") })
        try client.ok("ROLLBACK")
        #expect(try client.send("FIND plain").lines.sorted() == (try client.send("FIND plain ORDER BY id")).lines.sorted())
    }

    /// The catalog is asked when the read runs: a table changed since the model was read (no
    /// migrate, no SIGHUP) is read as a query would read it, its new children's rows included.
    @Test func aTableChangedSinceTheModelWasReadIsReadAsAQueryWould() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let db = try server.database()
        try db.execute("""
            INSERT INTO solo VALUES (1, 's'); INSERT INTO relaid VALUES (1, 'r'), (2, 'q'); INSERT INTO regrown VALUES (1, 'g');
            """)
        let client = try server.client()
        try Self.expectWholeReadsMatch(client, "solo", key: "id", rows: 1, "before")
        try db.execute("""
            CREATE TABLE solo_kid (id int PRIMARY KEY, v text); INSERT INTO solo_kid VALUES (2, 'k');
            ALTER TABLE solo_kid INHERIT solo;
            DROP TABLE relaid; CREATE TABLE relaid (id int PRIMARY KEY, v text) PARTITION BY HASH (id);
            CREATE TABLE relaid_0 PARTITION OF relaid FOR VALUES WITH (MODULUS 1, REMAINDER 0);
            INSERT INTO relaid VALUES (1, 'r'), (2, 'q');
            ALTER TABLE regrown DROP COLUMN v; ALTER TABLE regrown ADD COLUMN v text GENERATED ALWAYS AS ('g' || id) STORED;
            """)
        try Self.expectWholeReadsMatch(client, "solo", key: "id", rows: 2, "a child added")
        try Self.expectWholeReadsMatch(client, "relaid", key: "id", rows: 2, "partitioned since")
        #expect(try client.send("FIND regrown").status == "+OK 1 record")
        #expect(try client.send("FIND regrown").lines == [#"{"id":1,"v":"g1"}"#])
    }

    /// Which statement a whole read runs, seen in `pg_stat_activity` while a client that does
    /// not read holds it: the table's own COPY, or the query's once the table has a child.
    @Test func theTableIsCopiedItselfOnlyWhileCopyReadsWhatAQueryWould() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let db = try server.database()
        // Enough rows that a client reading none holds the statement (some 20 MB of lines).
        try db.execute("INSERT INTO bulk SELECT i, repeat('x', 40) FROM generate_series(1, 300000) i")
        let copying = """
            SELECT query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND state = 'active' AND query LIKE 'COPY %'
            """
        /// The statement a read ran with a snapshot that stands for its rows' versions. With
        /// any transaction in the cluster in progress (the suites run in parallel), the read
        /// selects each row's `xmin` instead (SnapshotVersion): that read is tried again.
        func statement(_ line: String) throws -> String {
            try eventually(tries: 40, every: 0, { try running(line) }, until: { !$0.contains(".xmin") })
        }
        func running(_ line: String) throws -> String {
            // The last reader's stream ends once the server sees it gone.
            _ = try eventually({ try db.query(copying).rowCount }, until: { $0 == 0 })
            let reader = try server.client()
            defer { reader.shutdown() }
            try reader.write(line + "\n")
            let sql = try eventually({ try db.query(copying).string(0, 0) }, until: { $0 != nil })
            return sql ?? "no COPY seen"
        }
        let find = try statement("FIND bulk"), export = try statement("EXPORT bulk")
        #expect(find == #"COPY "public"."bulk" ("id", "v") TO STDOUT"#)
        #expect(export == #"COPY "public"."bulk" ("id", "v") TO STDOUT WITH (FORMAT csv)"#)
        try db.execute("CREATE TABLE bulk_kid () INHERITS (bulk)")
        let findWithChild = try statement("FIND bulk"), exportWithChild = try statement("EXPORT bulk")
        #expect(findWithChild == #"COPY (SELECT t0."id", t0."v" FROM "public"."bulk" AS t0) TO STDOUT"#)
        #expect(exportWithChild == #"COPY (SELECT t0."id", t0."v" FROM "public"."bulk" AS t0) TO STDOUT WITH (FORMAT csv)"#)
    }
}
