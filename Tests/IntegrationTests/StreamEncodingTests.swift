import Foundation
import RecordsProtocol
import Testing

/// FIND streams through `COPY ... TO STDOUT` and GET reads a query's rows: two decoders of
/// PostgreSQL's text, one JSON. Generated values of every byte a text can hold are written by
/// libpq, then read back both ways and against the values themselves.
@Suite(.serialized) struct StreamEncodingTests {
    static let schema = """
        CREATE TABLE oddity (id text PRIMARY KEY, body text, doc json, docb jsonb, raw bytea,
                             at timestamptz, n numeric, f double precision, flag boolean, tags text[]);
        """

    /// Every ASCII character but NUL (PostgreSQL's text cannot hold it), and a few beyond.
    static let alphabet: [String] = (1..<128).map { String(UnicodeScalar(UInt8($0))) }
        + ["é", "😀", "\u{2028}", "\\N", "\\t", "\\\\"]

    static func text(_ generator: inout SplitMix, length: Int) -> String {
        (0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }.joined()
    }

    /// The string as the protocol quotes it.
    static func quoted(_ text: String) -> String { quotedString(text) }

    @Test func findWritesEveryValueAsGetDoes() throws {
        let seed = TestEnvironment.seed("RECORDS_STREAM_SEED", for: "findWritesEveryValueAsGetDoes")
        var generator = SplitMix(seed: seed)
        let server = try TestServer(schema: try Schema(Self.schema))
        let db = try server.database()
        var bodies: [String: String] = [:]
        for index in 0..<60 {
            // The dash ends the number, so "k1" and a suffix never make "k10".
            let id = "k\(index)-" + Self.text(&generator, length: Int(generator.next() % 4))
            let body = Self.text(&generator, length: Int(generator.next() % 40))
            bodies[id] = body
            // A json document keeps its line breaks between tokens; a record is one line.
            let doc = "{\n\t\"s\" : " + Self.quoted(body) + ",\r\n \"n\": [1,\n2]}"
            let number = ["1.5", "NaN", "-Infinity", "12345678901234567890.000001", "0"][index % 5]
            _ = try db.query("""
                INSERT INTO oddity VALUES ($1, $2, $3::json, $3::jsonb, convert_to($2, 'UTF8'),
                                          '2024-06-01 12:00:00+00', $4::numeric, $4::float8, $5, ARRAY[$2, NULL, 'x'])
                """, [id, body, doc, number, index % 3 == 0 ? nil : (index % 2 == 0 ? "t" : "f")])
        }
        _ = try db.query("INSERT INTO oddity (id) VALUES ('nulls')")
        bodies["nulls"] = nil
        let client = try server.client()
        let found = try client.send("FIND oddity ORDER BY id")
        #expect(found.status == "+OK 61 records", "seed \(seed)")
        var ids: [String] = []
        for line in found.lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "seed \(seed): \(line)")
            let id = try #require(object["id"] as? String)
            ids.append(id)
            let get = try client.send("GET oddity " + Self.quoted(id))
            #expect(get.lines == [line], "seed \(seed): FIND and GET differ for \(Self.quoted(id))")
            guard let body = bodies[id] else {
                #expect(object["body"] is NSNull && object["doc"] is NSNull && object["tags"] is NSNull, "\(line)")
                continue
            }
            #expect(object["body"] as? String == body, "seed \(seed): \(line)")
            let doc = try #require(object["doc"] as? [String: Any], "seed \(seed): \(line)")
            #expect(doc["s"] as? String == body && (doc["n"] as? [Int]) == [1, 2], "seed \(seed): \(line)")
            #expect((object["docb"] as? [String: Any])?["s"] as? String == body, "seed \(seed): \(line)")
            #expect(object["raw"] as? String == Data(body.utf8).base64EncodedString(), "seed \(seed): \(line)")
            #expect(object["at"] as? String == "2024-06-01T12:00:00+00:00")
            // The values as a WHERE gives them (COPY has them inlined) select their own row.
            let match = try client.send("FIND oddity WHERE body == " + Self.quoted(body) + " AND id == " + Self.quoted(id))
            #expect(match.lines == [line], "seed \(seed): WHERE body == \(Self.quoted(body))")
        }
        #expect(Set(ids) == Set(bodies.keys).union(["nulls"]), "seed \(seed)")
        // Pages by keyset over keys of any text give the same records in the same order.
        var paged: [String] = []
        var after = ""
        for _ in 0..<40 {
            let page = try client.send("FIND oddity ORDER BY id LIMIT 7" + after)
            #expect(page.ok, "seed \(seed): \(page.status)")
            paged += page.lines
            guard let range = page.status.range(of: "AFTER ") else { break }
            after = " AFTER " + page.status[range.upperBound...]
        }
        #expect(paged == found.lines, "seed \(seed)")
    }

    /// A composite type's column compared with text: PostgreSQL cannot take the value, and
    /// says so as the request's error, in FIND, COUNT and a cursor's next page alike.
    @Test func aValueTheColumnsTypeCannotTakeIsTheRequestsError() throws {
        let server = try TestServer(schema: try Schema("""
            CREATE TYPE pair AS (a text, b int);
            CREATE TABLE item (id serial PRIMARY KEY, comp pair);
            INSERT INTO item (comp) VALUES (ROW('x', 1)), (ROW('y', 2));
            """))
        let client = try server.client()
        for request in [#"FIND item WHERE comp == "(x,1)""#, #"COUNT item WHERE comp == "(x,1)""#] {
            let reply = try client.send(request)
            #expect(reply.status.hasPrefix("-ERR VALIDATION PostgreSQL cannot do this: "), "\(request): \(reply.status)")
        }
        let page = try client.send("FIND item ORDER BY comp LIMIT 1")
        #expect(page.lines.count == 1, "\(page.status)")
        if let range = page.status.range(of: "AFTER ") {
            let next = try client.send("FIND item ORDER BY comp LIMIT 1 AFTER " + page.status[range.upperBound...])
            #expect(next.ok || next.status.hasPrefix("-ERR VALIDATION"), "\(next.status)")
        }
        #expect(try client.send("PING").status == "+OK PONG")
    }

    /// PostgreSQL's backend killed while the worker waits for the client to read: the rows
    /// already read reach the client, then the stream ends with the reason, and the server
    /// goes on. (libpq closes its socket; the stream once polled it forever.)
    @Test func aBackendKilledWhileTheClientIsSlowEndsTheStream() throws {
        let server = try TestServer()
        let db = try server.database()
        try db.execute("INSERT INTO employee (first_name, last_name, gender) SELECT 'f' || i, repeat('x', 200), 1 FROM generate_series(1, 100000) i")
        let client = try server.client()
        try client.write("FIND employee\n")
        // Until the FIND's COPY is running (it stays: the client does not read), however loaded the machine.
        let killed = try eventually(tries: 100, every: 100_000, {
            try db.query("""
                SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity
                WHERE datname = current_database() AND query LIKE 'COPY%' AND pid <> pg_backend_pid()
                """).string(0, 0)
        }, until: { $0 == "1" })
        #expect(killed == "1")
        var status = ""
        while !status.hasPrefix("+OK") && !status.hasPrefix("-ERR") { status = try client.readLine() ?? "-ERR closed" }
        #expect(status.hasPrefix("-ERR UNAVAILABLE PostgreSQL is unavailable"), "\(status)")
        #expect(try client.send("COUNT employee").status == "+OK 100000")
    }

    /// A value a read keeps as the record's version for SAVE's check is the FIND's too: a
    /// record read by FIND and changed by someone else is a conflict at SAVE.
    @Test func findRecordsVersionsFromTheStream() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let db = try server.database()
        _ = try db.query("INSERT INTO oddity (id, body) VALUES ($1, 'a')", ["tab\there"])
        let client = try server.client()
        #expect(try client.send("FIND oddity").lines.count == 1)
        _ = try db.query("UPDATE oddity SET body = 'b'")
        try client.ok(#"UPDATE oddity "tab\there" body="c""#)
        let save = try client.send("SAVE")
        #expect(save.status.hasPrefix("-ERR CONFLICT"), "\(save.status)")
    }
}
