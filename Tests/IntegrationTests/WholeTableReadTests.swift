import Foundation
import Postgres
@testable import Records
import Testing

/// A FIND or EXPORT of a whole table is read by `COPY table (columns) TO STDOUT`, not through
/// a query: the same rows on every kind of table, or the query where only it reads them all
/// (a partitioned table, which COPY refuses; a parent, whose children COPY leaves out; a
/// generated column, which COPY refuses to name).
/// Each whole read is checked against the same read through a query (ORDER BY its key).
@Suite struct WholeTableReadTests {
    static let schema = #"""
        CREATE TABLE plain (id bigint PRIMARY KEY, label text, doc jsonb, at timestamptz, n numeric, flag boolean);
        CREATE TABLE "Odd ""name""" (id uuid PRIMARY KEY, "we""ird col" text, "UPPER" int);
        CREATE TABLE computed (id int PRIMARY KEY, a int, twice int GENERATED ALWAYS AS (a * 2) STORED);
        CREATE TABLE measurement (id bigint, day date, value double precision, note text,
                                  PRIMARY KEY (id, day)) PARTITION BY RANGE (day);
        CREATE TABLE measurement_2024 PARTITION OF measurement FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
        CREATE TABLE measurement_2025 PARTITION OF measurement FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
        CREATE TABLE animal (id int PRIMARY KEY, name text);
        CREATE TABLE dog (breed text) INHERITS (animal);
        """#

    /// Text with the bytes COPY's text format escapes, quotes, and more than ASCII.
    static func text(_ generator: inout SplitMix) -> String {
        let pieces = ["a", "Z", "\t", "\\", "\n", "\r", "\"", ",", "'", "é", "😀", "\\N", " "]
        return (0..<Int(generator.next() % 12)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined()
    }

    @Test func wholeReadsAreTheQuerysRowsOnEveryKindOfTable() throws {
        let seed = UInt64(TestEnvironment.environment["RECORDS_WHOLE_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970 * 1000) % 100_000
        print("wholeReadsAreTheQuerysRowsOnEveryKindOfTable seed \(seed) (RECORDS_WHOLE_SEED replays it)")
        var generator = SplitMix(seed: seed)
        let server = try TestServer(schema: try Schema(Self.schema))
        let db = try server.database()
        let rows = 200 + Int(generator.next() % 300)
        for index in 0..<rows {
            let label = index % 7 == 0 ? nil : Self.text(&generator)
            _ = try db.query("INSERT INTO plain VALUES ($1, $2, $3::jsonb, '2024-06-01 12:00:00+00', $4, $5)",
                             [String(index), label, index % 5 == 0 ? nil : #"{"s": "\#(index)\t\\"}"#, "\(index).5", index % 2 == 0 ? "t" : nil])
            _ = try db.query(#"INSERT INTO "Odd ""name""" VALUES (gen_random_uuid(), $1, $2)"#, [label, String(index)])
            _ = try db.query("INSERT INTO computed (id, a) VALUES ($1, $2)", [String(index), index % 4 == 0 ? nil : String(index)])
            _ = try db.query("INSERT INTO measurement VALUES ($1, $2::date, $3, $4)",
                             [String(index), index % 2 == 0 ? "2024-03-01" : "2025-03-01", "\(Double(index) / 3)", label])
            _ = try db.query(index % 3 == 0 ? "INSERT INTO dog VALUES ($1, $2, 'collie')" : "INSERT INTO animal VALUES ($1, $2)",
                             [String(index), label])
        }
        try db.execute("ANALYZE")

        // What the catalog says decides the statement: only ordinary tables without children are read whole.
        let model = try ModelReflector.reflect(db)
        #expect(model.entity(exactly: "plain")?.readsWhole == true)
        #expect(model.entity(exactly: #"Odd "name""#)?.readsWhole == true)
        #expect(model.entity(exactly: "measurement")?.readsWhole == false)
        #expect(model.entity(exactly: "animal")?.readsWhole == false)

        let client = try server.client()
        let entities = ["plain", #""Odd \"name\"""#, "computed", "measurement", "animal"]
        let keys = ["id", "id", "id", "id, day", "id"]
        for (entity, key) in zip(entities, keys) {
            let whole = try client.send("FIND \(entity)")
            let ordered = try client.send("FIND \(entity) ORDER BY \(key)")
            #expect(whole.status == "+OK \(rows) records", "seed \(seed): FIND \(entity)")
            #expect(whole.lines.count == rows && whole.lines.sorted() == ordered.lines.sorted(), "seed \(seed): FIND \(entity)")
            let export = try client.send("EXPORT \(entity)")
            let orderedExport = try client.send("EXPORT \(entity) ORDER BY \(key)")
            #expect(export.status == "+OK exported \(rows) records", "seed \(seed): EXPORT \(entity)")
            #expect(export.lines.first == orderedExport.lines.first, "seed \(seed): EXPORT \(entity)'s header")
            #expect(export.lines.sorted() == orderedExport.lines.sorted(), "seed \(seed): EXPORT \(entity)")
        }
        // A child's rows are the parent's: read, not left out.
        #expect(try client.send("FIND animal").lines.filter { $0.contains(#""id":3,"#) }.count == 1)

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
}
