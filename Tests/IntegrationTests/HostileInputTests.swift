import Foundation
import Postgres
import Testing

/// Hostile input in every position of every verb, and a bounded protocol fuzzer.
@Suite struct HostileInputTests {
    static let payloads = [
        "'", "\"", "';--", "\"; DROP TABLE employee; --", "$1", "$$", "/*", "*/", "\\\\", "%", "_", "\\u0000",
        "\\u202e", "ünïcødé", "🙂", "NULL", "nil", "1; DELETE FROM game", "99999999999999999999999999",
        "-0", "1e309", "(SELECT 1)", "pg_sleep(10)", "records.users", "public.game", "\"quoted\"", "#ref", "AS", "WHERE",
    ]

    /// Roles in the cluster but those other suites make meanwhile (app_...).
    static let roles = "SELECT count(*) FROM pg_roles WHERE rolname NOT LIKE 'pg\\_%' AND rolname NOT LIKE 'app\\_%'"

    @Test func injectionInEveryPositionChangesNothingElse() throws {
        let server = try TestServer()
        let db = try server.database()
        try db.execute("INSERT INTO game (name) VALUES ('Go'); INSERT INTO department (name, number) VALUES ('Sales', 1)")
        let rolesBefore = try db.query(Self.roles).string(0, 0)
        let client = try server.client()
        var sent = 0
        for payload in Self.payloads {
            let quoted = "\"" + payload.replacingOccurrences(of: "\"", with: "\\\"") + "\""
            let lines = [
                "INSERT game name=\(quoted)",
                "INSERT \(payload) name=\"x\"",
                "INSERT game \(payload)=\"x\"",
                "UPDATE game 1 name=\(quoted)",
                "UPDATE game \(payload) name=\"x\"",
                "DELETE game \(payload)",
                "DELETE \(payload) 1",
                "UPSERT game ON name name=\(quoted)",
                "UPSERT game ON \(payload) name=\"x\"",
                "GET game \(payload)",
                "GET \(payload) 1",
                "FIND game WHERE name == \(quoted)",
                "FIND game WHERE \(payload) == 1",
                "FIND game ORDER BY \(payload)",
                "FIND game INCLUDE \(payload)",
                "FIND game LIMIT \(payload)",
                "COUNT \(payload)",
                "COUNT game WHERE name BEGINSWITH \(quoted)",
                "DESCRIBE \(payload)",
                "EXPLAIN FIND game WHERE name MATCHES \(quoted)",
                "HELP \(payload)",
                "PING \(payload)",
                "EXPORT game WHERE name == \(quoted)",
                "EXPORT game WHERE name BEGINSWITH \(quoted) ORDER BY \(payload)",
                // The query forms of issue #21.
                "AGGREGATE game count() GROUP BY \(payload)",
                "AGGREGATE game max(\(payload))",
                "AGGREGATE game count() AS \(payload)",
                "AGGREGATE game count() HAVING count() > \(quoted)",
                "AGGREGATE game min(name) GROUP BY id HAVING min(name) > \(quoted)",
                "AGGREGATE game count() ORDER BY \(payload)",
                "FIND game SELECT \(payload)",
                "FIND game SELECT DISTINCT name WHERE name == \(quoted)",
                "EXPORT game SELECT \(payload)",
                "FIND game WHERE name == \(payload)",
                "FIND game ORDER BY name[c], \(payload)",
                "FIND department WHERE SUBQUERY(employees, $e, $e.last_name == \(quoted)).@count > 0",
                "FIND department WHERE SUBQUERY(\(payload), $e, $e.age > 1).@count > 0",
                "FIND department INCLUDE employees ORDER BY \(payload) LIMIT 1",
                "EXPLAIN AGGREGATE game count() GROUP BY \(payload)",
            ]
            for line in lines {
                let reply = try client.send(line)
                sent += 1
                #expect(reply.status.hasPrefix("+OK") || reply.status.hasPrefix("-ERR "), "\(line) -> \(reply)")
                #expect(!reply.status.hasPrefix("-ERR INTERNAL"), "\(line) -> \(reply)")
            }
            try client.ok("ROLLBACK")
        }
        #expect(sent == Self.payloads.count * 39)
        // Nothing beyond the data itself: same tables, same rows, no new roles.
        #expect(try db.query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").string(0, 0) == "11")
        #expect(try db.query("SELECT string_agg(name, ',') FROM game").string(0, 0) == "Go")
        #expect(try db.query("SELECT count(*) FROM department").string(0, 0) == "1")
        #expect(try db.query(Self.roles).string(0, 0) == rolesBefore)
        // Stored verbatim when saved: the value is data, never SQL.
        for payload in ["'; DROP TABLE game; --", "$1", "\\u0000x"] {
            let quoted = "\"" + payload + "\""
            let reply = try client.send("INSERT game name=\(quoted)")
            if payload.contains("u0000") {
                #expect(reply.status.hasPrefix("-ERR SYNTAX"))  // NUL is refused
            } else {
                try client.ok("SAVE")
                #expect(try db.query("SELECT count(*) FROM game WHERE name = $1", [payload]).string(0, 0) == "1")
            }
        }
    }

    /// EXPORT inlines a WHERE's values as literals (COPY takes no parameters): every payload
    /// stored as a name must select exactly its own row.
    @Test func exportInlinesEveryPayloadAsExactlyItsValue() throws {
        let server = try TestServer()
        let db = try server.database()
        let stored = Self.payloads.filter { !$0.contains("u0000") }
        for payload in stored { _ = try db.query("INSERT INTO game (name) VALUES ($1)", [payload]) }
        let client = try server.client()
        for payload in stored {
            let quoted = "\"" + payload.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
            let reply = try client.send("EXPORT game WHERE name == \(quoted)")
            #expect(reply.status == "+OK exported 1 record", "\(payload) -> \(reply)")
            let id = try db.query("SELECT id::text FROM game WHERE name = $1", [payload]).string(0, 0)!
            #expect(reply.lines.count == 2 && reply.lines[1].hasPrefix(id + ","), "\(payload) -> \(reply.lines)")
        }
    }

    @Test func fuzzedLinesEachGetExactlyOneStatusLine() throws {
        let server = try TestServer(arguments: ["--max-line-length", "2048"])
        var random = SplitMix(seed: 6)
        let verbs = ["PING", "HELP", "INFO", "ENTITIES", "DESCRIBE", "INSERT", "UPDATE", "DELETE", "UPSERT", "CHANGES",
                     "SAVE", "ROLLBACK", "NEST", "MERGE", "DISCARD", "GET", "FIND", "COUNT", "EXPLAIN", "AUTH", "USER", "BOGUS"]
        let words = ["game", "employee", "department", "name=\"x\"", "age=3", "WHERE", "ORDER", "BY", "LIMIT", "AFTER", "c00",
                     "INCLUDE", "employees", "==", "(", ")", "{", "}", ",", "#r", "AS", "ON", "1", "-1", "\"", "'", "[c]",
                     "ANY", "@count", "nil", "true", "\u{0}", "\u{FF}", "é", "\t", "FORCE", "LIST", "ADD"]
        var tried = 0
        for _ in 0..<15 {
            let client = try server.client()
            var batch: [UInt8] = []
            var complete = 0
            for _ in 0..<200 {
                var line = verbs[Int(random.next() % UInt64(verbs.count))]
                for _ in 0..<Int(random.next() % 8) { line += " " + words[Int(random.next() % UInt64(words.count))] }
                var bytes = Array(line.utf8)
                if random.next() % 10 == 0 {  // binary junk
                    bytes = (0..<Int(random.next() % 64)).map { _ in UInt8(truncatingIfNeeded: random.next()) }.filter { $0 != 10 }
                }
                batch += bytes + [random.next() % 4 == 0 ? 13 : 32].filter { $0 == 13 } + [10]
                complete += 1
            }
            batch += Array("PING half-line-without-newline".utf8)  // never completed: no reply owed
            try client.writeBytes(batch)
            var statuses = 0
            while statuses < complete {
                _ = try client.readReply()
                statuses += 1
            }
            tried += complete
            #expect(statuses == complete)
        }
        #expect(tried == 3000)
        #expect(try server.client().send("PING alive").status == "+OK alive")
    }

    /// Lines from the protocol's grammar and past its edges, pipelined: every line gets exactly
    /// one status line, nothing is INTERNAL, the server stays up and its memory bounded.
    /// `RECORDS_FUZZ_LINES` (200,000 by default) and `RECORDS_FUZZ_SEED` replay a run;
    /// bench/soak.sh runs a million.
    @Test func grammarAwareFuzzingGetsOneStatusALine() throws {
        let environment = ProcessInfo.processInfo.environment
        let total = environment["RECORDS_FUZZ_LINES"].flatMap { Int($0) } ?? 200_000
        let seed = environment["RECORDS_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...UInt64(UInt32.max))
        let server = try TestServer(arguments: ["--pool-size", "2"])
        try server.database().execute("""
            INSERT INTO department (id, name, number) VALUES (1, 'Sales', 1), (2, 'Ops', 2);
            INSERT INTO employee (first_name, last_name, gender, age, department_id)
            SELECT 'f' || i, 'l' || i, 1 + i % 2, 20 + i % 40, 1 + i % 2 FROM generate_series(1, 50) i;
            """)
        var fuzzer = GrammarFuzzer(seed: seed)
        let client = try server.client()
        var sent = 0, statuses = 0, internals: [String] = []
        while sent < total {
            var batch: [String] = []
            while batch.count < 400 && sent + batch.count < total {
                batch.append(batch.count == 0 ? "ROLLBACK" : fuzzer.line())  // units stay small
            }
            try client.write(batch.joined(separator: "\n") + "\n")
            var answered = 0
            while answered < batch.count {
                guard let line = try client.readLine() else { throw TestFailure("seed \(seed): the server closed the connection after \(sent + answered) lines") }
                guard line.hasPrefix("+OK") || line.hasPrefix("-ERR") else { continue }
                if line.hasPrefix("-ERR INTERNAL") && internals.count < 10 { internals.append("\(batch[answered].prefix(200)) -> \(line)") }
                answered += 1
            }
            sent += batch.count
            statuses += answered
        }
        #expect(statuses == sent, "seed \(seed)")
        #expect(internals.isEmpty, "seed \(seed): \(internals)")
        #expect(try server.client().send("PING alive").status == "+OK alive", "seed \(seed)")
        let peak = (try? String(contentsOfFile: "/proc/\(server.process.processIdentifier)/status", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? "?"
        print("grammar fuzzing: seed \(seed), \(sent) lines, \(statuses) statuses, server peak \(peak)")
    }
}
