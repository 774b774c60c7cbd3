import Foundation
import Postgres
import RecordsProtocol
import Testing

/// A SAVE of more rows of a table than `WritePlan.copiedAbove` (1,000) sends them by COPY, on
/// schemas we did not write: every text arrives as sent, keys of every kind come back, a
/// rule on INSERT still runs, watchers hear every row, and a bad row is named with nothing
/// written. Tables under row-level security keep INSERT (RowLevelSecurityTests).
@Suite struct BulkInsertTests {
    static let schema = """
        CREATE TABLE note (code text PRIMARY KEY, body text, tags text[], score numeric(8,2),
                           parent_code text REFERENCES note (code) ON DELETE CASCADE);
        CREATE TABLE pair (a int, b text, v text NOT NULL, PRIMARY KEY (a, b));
        CREATE TABLE thing (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), label text NOT NULL);
        CREATE TABLE audited (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
        CREATE TABLE audit (id serial PRIMARY KEY, v text);
        CREATE RULE keep AS ON INSERT TO audited DO ALSO INSERT INTO audit (v) VALUES (NEW.v);
        """

    /// Texts COPY's format must escape, or must not: tab, line feed, carriage return,
    /// backslash, a literal `\N`, a lone `\.`, quotes, non-ASCII, empty.
    static let texts = ["a\tb", "two\nlines", "cr\r", "back\\slash", "\\N", "\\.", "q\"uote", "ünï 🙂", "", "plain"]

    /// Sends `lines` pipelined a few hundred at a time; each must be accepted.
    private func send(_ client: LineClient, _ lines: [String]) throws {
        for start in stride(from: 0, to: lines.count, by: 250) {
            let chunk = lines[start..<min(start + 250, lines.count)]
            try client.write(chunk.map { $0 + "\n" }.joined())
            for line in chunk {
                let reply = try client.readReply()
                #expect(reply.isOK, "\(line): \(reply.status)")
            }
        }
    }

    @Test func thousandsOfRowsOfAnyTextArriveAsSent() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let client = try server.client()
        let count = 1_500
        var expected: [String: [String?]] = [:]
        var lines: [String] = []
        for i in 0..<count {
            let code = "k\(i)" + Self.texts[i % Self.texts.count]
            let body: String? = i % 7 == 0 ? nil : Self.texts[(i / 3) % Self.texts.count]
            let parent: String? = i % 3 == 0 ? nil : "k\(i - 1)" + Self.texts[(i - 1) % Self.texts.count]
            let tags = "{\(i),\"t \(i % 4)\"}"
            lines.append("INSERT note AS #n\(i) code=\(quotedString(code)) body=\(body.map(quotedString) ?? "nil") tags=\(quotedString(tags))"
                         + " score=\(i).25 parent_code=\(i % 3 == 0 ? "nil" : "#n\(i - 1)")")
            expected[code] = [body, "{\(i),\"t \(i % 4)\"}", "\(i).25", parent]
        }
        try send(client, lines)
        let saved = try client.send("SAVE")
        #expect(saved.status == "+OK saved: \(count) inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(saved.lines.count == count)
        let rows = try server.database().query("SELECT code, body, tags::text, score::text, parent_code FROM note")
        #expect(rows.rowCount == count)
        var found = 0
        for row in 0..<rows.rowCount {
            let code = rows.string(row, 0)!
            let values = (1...4).map { rows.string(row, $0) }
            #expect(expected[code] == values, "\(code.debugDescription): \(values) against \(String(describing: expected[code]))")
            if expected[code] == values { found += 1 }
        }
        #expect(found == count)
        // Read back through the server as well: the same text.
        let got = try client.send("GET note \(quotedString("k1" + Self.texts[1]))").lines
        #expect(got == [#"{"code":"k1two\nlines","body":"a\tb","tags":["1","t 1"],"score":1.25,"parent_code":"k0a\tb"}"#], "\(got)")
    }

    /// Composite keys given by the client, uuid keys the database makes, and an identity
    /// ALWAYS key, each more than a COPY's worth: the keys SAVE reports are the rows stored.
    @Test func keysOfEveryKindComeBackForEveryRow() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let client = try server.client()
        let count = 1_200
        var lines: [String] = []
        for i in 0..<count {
            lines.append("INSERT pair a=\(i % 7) b=\(quotedString("b\(i)")) v=\(quotedString(Self.texts[i % Self.texts.count]))")
            lines.append("INSERT thing AS #t\(i) label=\(quotedString("t\(i)"))")
            lines.append("INSERT audited AS #a\(i) v=\(quotedString("v\(i)"))")
        }
        try send(client, lines)
        let saved = try client.send("SAVE")
        #expect(saved.status == "+OK saved: \(3 * count) inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        let db = try server.database()
        #expect(try db.query("SELECT count(*)::text FROM pair").string(0, 0) == "\(count)")
        let things = try db.query("SELECT id::text, label FROM thing")
        let stored = Dictionary(uniqueKeysWithValues: (0..<things.rowCount).map { ("\"\(things.string($0, 0)!)\"", things.string($0, 1)!) })
        let keys = saved.savedKeys
        #expect(stored.count == count)
        for i in 0..<count { #expect(keys["#t\(i)"].flatMap { stored[$0] } == "t\(i)", "#t\(i)") }
        let audited = try db.query("SELECT id::text, v FROM audited")
        let byId = Dictionary(uniqueKeysWithValues: (0..<audited.rowCount).map { (audited.string($0, 0)!, audited.string($0, 1)!) })
        for i in 0..<count { #expect(keys["#a\(i)"].flatMap { byId[$0] } == "v\(i)", "#a\(i)") }
        // COPY would pass the rule by: it ran for every row.
        #expect(try db.query("SELECT count(*)::text FROM audit").string(0, 0) == "\(count)")
    }

    /// A rule made after the server read the model (no SIGHUP, no migration): the bulk asks
    /// the catalog before it copies, and inserts instead (a helper saw COPY pass it by).
    @Test func aRuleMadeSinceTheModelWasReadStillRuns() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let client = try server.client()
        let db = try server.database()
        try db.execute("CREATE RULE copy_too AS ON INSERT TO pair DO ALSO INSERT INTO audit (v) VALUES (NEW.v)")
        try send(client, (0..<1_100).map { "INSERT pair a=1 b=\(quotedString("b\($0)")) v=\(quotedString("p\($0)"))" })
        #expect(try client.send("SAVE").status == "+OK saved: 1100 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(try db.query("SELECT count(*)::text FROM audit WHERE v LIKE 'p%'").string(0, 0) == "1100")
    }

    @Test func aBadRowAmongThousandsIsNamedAndNothingIsWritten() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let client = try server.client()
        try client.ok(#"INSERT note code="taken""#)
        #expect(try client.send("SAVE").isOK)
        try send(client, (0..<1_100).map { "INSERT note AS #n\($0) code=\(quotedString($0 == 700 ? "taken" : "k\($0)"))" })
        #expect(try client.send("SAVE").status == #"-ERR VALIDATION #n700: code "taken" is already taken (unique constraint note_pkey)"#)
        let db = try server.database()
        #expect(try db.query("SELECT count(*)::text FROM note").string(0, 0) == "1")
        // The unit is kept: fixed, it saves whole.
        try client.ok(#"UPDATE note #n700 code="k700""#)
        #expect(try client.send("SAVE").status == "+OK saved: 1100 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(try db.query("SELECT count(*)::text FROM note").string(0, 0) == "1101")
    }

    /// A value longer than `varchar(n)`, `char(n)` or `bit(n)` takes is refused and its record
    /// named, in a small unit as in a bulk, and never matches a shorter stored key: an explicit
    /// cast to the declared type cut it (a helper found `"abcdefgh"` saved as `abcde`).
    @Test func aValueLongerThanItsTypeTakesIsRefusedNotCut() throws {
        let server = try TestServer(schema: try Schema("""
            CREATE TABLE sized (code varchar(5) PRIMARY KEY, ch char(3), bt bit(4), amount numeric(6,2));
            """))
        let client = try server.client()
        try client.ok(#"INSERT sized code="abcde" ch="x" bt="1010" amount=1.005"#)
        #expect(try client.send("SAVE").isOK)
        // PostgreSQL's words follow its locale (CI runs it in French): the record named is ours.
        for line in [#"INSERT sized AS #s code="abcdefgh""#, #"INSERT sized AS #s code="ab" ch="abcd""#, #"INSERT sized AS #s code="ab" bt="10""#] {
            try client.ok(line)
            let refused = try client.send("SAVE").status
            #expect(refused.hasPrefix("-ERR VALIDATION #s: ") && refused.contains(line.contains("bt=") ? "bit(4)" : line.contains("ch=") ? "(3)" : "(5)"),
                    "\(line): \(refused)")
            try client.ok("ROLLBACK")
        }
        #expect(try client.send(#"GET sized "abcdefgh""#).status == #"-ERR NOT_FOUND no sized with code "abcdefgh""#)
        #expect(try client.send(#"COUNT sized WHERE code == "abcdefgh""#).status == "+OK 0")
        // char(n) ignores trailing spaces, in IN as in == (IN compared as text did not).
        #expect(try client.send(#"COUNT sized WHERE ch == "x ""#).status == "+OK 1")
        #expect(try client.send(#"COUNT sized WHERE ch IN {"x  ", "y"}"#).status == "+OK 1")
        #expect(try client.send(#"GET sized "abcde""#).lines == [#"{"code":"abcde","ch":"x  ","bt":"1010","amount":1.01}"#])
        try send(client, (0..<1_100).map { "INSERT sized AS #b\($0) code=\(quotedString($0 == 900 ? "b900xx" : "b\($0)"))" })
        let refused = try client.send("SAVE").status
        #expect(refused.hasPrefix("-ERR VALIDATION #b900: ") && refused.contains("(5)"), "\(refused)")
        #expect(try server.database().query("SELECT count(*)::text FROM sized").string(0, 0) == "1")
    }

    @Test func watchersHearEveryRowOfABulk() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let watcher = try server.client(), writer = try server.client()
        #expect(try watcher.send("WATCH note").status == "+OK watching note")
        let count = 1_100
        try send(writer, (0..<count).map { "INSERT note code=\(quotedString("w\($0)"))" })
        #expect(try writer.send("SAVE").status == "+OK saved: \(count) inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        var heard: [String] = []
        while heard.count < count, let line = try watcher.readLine() {
            if line.hasPrefix("! ") { heard.append(String(line.dropFirst(2))) }
        }
        #expect(Set(heard) == Set((0..<count).map { "note \"w\($0)\" inserted" }))
    }
}
