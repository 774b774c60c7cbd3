import Foundation
import RecordsProtocol
import Testing

@Suite struct ServerVerbTests {
    @Test func bannerPingAndQuit() throws {
        let server = try TestServer()
        let client = try server.client()
        #expect(client.banner == "+OK recordsd 0.1.0 ready (no authentication); type HELP for commands")
        #expect(try client.send("PING").status == "+OK PONG")
        #expect(try client.send("ping hello there").status == "+OK hello there")
        #expect(try client.send("QUIT").status == "+OK bye")
        #expect(try client.readToEnd().isEmpty)
    }

    /// A key the client gave a pending insert names it, however the number is written, as
    /// `id=...` does (found by an attack: UPDATE and DELETE answered NOT_FOUND).
    @Test func aPendingInsertIsNamedByTheKeyTheClientGaveIt() throws {
        let server = try TestServer()
        let client = try server.client()
        let id = Int.random(in: 900_000_000...999_999_999)
        try client.ok("INSERT game AS #g id=+\(id) name=\"pending \(id)\"")
        #expect(try client.send("UPDATE game 0\(id) SET name=\"renamed \(id)\"").status == "+OK #g pending insert updated (1 pending)")
        #expect(try client.send("GET game \(id)").lines.first?.contains("renamed \(id)") == true)
        #expect(try client.send("DELETE game \(id)").status == "+OK #g pending insert dropped (0 pending)")
        #expect(try client.send("COUNT game WHERE id == \(id)").status == "+OK 0")
    }

    @Test func helpListsEveryVerbAndExplainsOne() throws {
        let server = try TestServer()
        let client = try server.client()
        let help = try client.send("HELP")
        #expect(help.status == "+OK \(Verb.allCases.count) verbs; HELP <verb> for one, with an example")
        for verb in ["HELP", "PING", "QUIT", "INFO", "ENTITIES", "DESCRIBE", "INSERT", "UPDATE", "DELETE", "UPSERT",
                     "CHANGES", "SAVE", "ROLLBACK", "NEST", "MERGE", "DISCARD", "GET", "FIND", "COUNT", "EXPLAIN", "STARTTLS", "AUTH", "USER", "WATCH", "UNWATCH", "EXPORT", "IMPORT"] {
            #expect(help.lines.contains { $0.hasPrefix(verb + " ") || $0 == verb || $0.hasPrefix(verb + "  ") }, "HELP lacks \(verb)")
        }
        let insert = try client.send("help insert")
        #expect(insert.status == "+OK INSERT")
        #expect(insert.lines == [
            "usage: INSERT entity [AS #ref] attr=value ...",
            "add a pending insert; replies with its #ref for later commands",
            "example: INSERT employee first_name=\"John\" last_name=\"Lim\" gender=1 department=#sales",
            "needs: the writer role; adds pending changes",
        ])
        #expect(try client.send("HELP SAEV").status == "-ERR UNKNOWN unknown verb 'SAEV' (did you mean SAVE?): type HELP for the list")
    }

    @Test func infoReportsServerState() throws {
        let server = try TestServer()
        let client = try server.client()
        let second = try server.client()
        let info = try client.send("INFO")
        #expect(info.status == "+OK recordsd 0.1.0")
        #expect(info.lines[0] == "version: 0.1.0")
        #expect(info.lines[1].hasPrefix("uptime: "))
        #expect(info.lines[2] == "sessions: 2")
        #expect(info.lines[3].hasPrefix("database: ") && info.lines[3].contains("dbname="))
        // The watcher looks at the primary before the server listens: one server, no standby.
        #expect(info.lines[4].hasPrefix("primary: 127.0.0.1:") && info.lines[4].hasSuffix(", no standby (a lone primary: a crash of it stops every write until it is back); primary changes seen: 0"), "\(info.lines[4])")
        #expect(info.lines[5].hasPrefix("pool: size 3, open "))
        #expect(info.lines.last == "unit: no pending changes, 0 nested scratchpad(s)")
        _ = second
    }

    @Test func entitiesListsTheSampleDomain() throws {
        let server = try TestServer()
        let reply = try server.client().send("ENTITIES")
        #expect(reply.status == "+OK 11 entities")
        #expect(reply.lines == [
            "assignment     2 attributes, 2 relationships",
            "color          7 attributes, 1 relationship",
            "contact        5 attributes, 0 relationships, row-level security",
            "department     4 attributes, 1 relationship",
            "employee       5 attributes, 2 relationships",
            "friend         6 attributes, 0 relationships, row-level security",
            "game           2 attributes, 0 relationships",
            "journal_entry  8 attributes, 0 relationships, row-level security",
            "memo           5 attributes, 1 relationship, row-level security",
            "project        2 attributes, 1 relationship",
            "setting        4 attributes, 0 relationships",
        ])
    }

    @Test func describeShowsAttributesAndRelationships() throws {
        let server = try TestServer()
        let client = try server.client()
        let employee = try client.send("DESCRIBE Employee")
        #expect(employee.status == "+OK employee: 5 attributes, 2 relationships")
        #expect(employee.lines == [
            "attribute   type                required  default   unique",
            "id (key)    integer (bigint)    no        identity  yes",
            "first_name  string (text)       yes       -         no",
            "last_name   string (text)       yes       -         no",
            "gender      integer (smallint)  yes       -         no",
            "age         integer (integer)   no        -         no",
            "",
            "relationship  target      kind     inverse    delete rule",
            "assignments   assignment  to-many  employee   cascade (on delete of this)",
            "department    department  to-one   employees  cascade",
        ])
        let memo = try client.send("DESCRIBE memo")
        #expect(memo.status == "+OK memo: 5 attributes, 1 relationship, row-level security")
        #expect(memo.lines.contains("color         color   to-one  memos    nullify"))
        #expect(memo.lines.last == "row-level security: PostgreSQL's policies decide which records each user reads and writes")
        let project = try client.send("DESCRIBE project")
        #expect(project.lines.last == "assignments   assignment  to-many  project  deny (on delete of this)")
        #expect(try client.send("DESCRIBE nothing").status == "-ERR UNKNOWN unknown entity 'nothing': type ENTITIES for the list")
    }

    @Test func unknownVerbsAndSyntaxErrorsKeepTheSessionUsable() throws {
        let server = try TestServer()
        let client = try server.client()
        #expect(try client.send("FROB").status == "-ERR UNKNOWN unknown verb 'FROB': type HELP for the list")
        #expect(try client.send("123").status == "-ERR SYNTAX at 1: expected a verb (type HELP), found 123")
        #expect(try client.send("").status == "-ERR SYNTAX empty line: type HELP for the list of verbs")
        #expect(try client.send("INSERT game name=\"unterminated").status == "-ERR SYNTAX at 18: unterminated string")
        #expect(try client.send("PING").ok)
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let server = try TestServer()
        let client = try server.client()
        var batch = ""
        for i in 0..<2000 { batch += i % 100 == 99 ? "COUNT game\r\n" : "PING \(i)\n" }
        try client.write(batch)
        for i in 0..<2000 {
            let reply = try client.readReply()
            #expect(reply.status == (i % 100 == 99 ? "+OK 0" : "+OK \(i)"))
        }
    }

    @Test func overlongLinesInvalidUTF8AndNULAreRefusedAndTheConnectionLives() throws {
        let server = try TestServer(arguments: ["--max-line-length", "64"])
        let client = try server.client()
        try client.write("PING " + String(repeating: "x", count: 500) + "\n")
        #expect(try client.readReply().status == "-ERR LIMIT line too long (505+ bytes; the limit is 64)")
        #expect(try client.send("PING after").status == "+OK after")
        try client.writeBytes(Array("PING ".utf8) + [0xc3, 0x28] + [10])
        #expect(try client.readReply().status == "-ERR SYNTAX line is not valid UTF-8")
        try client.writeBytes(Array("PING a".utf8) + [0] + Array("b\n".utf8))
        #expect(try client.readReply().status == "-ERR SYNTAX NUL byte in line")
        #expect(try client.send("PING still here").status == "+OK still here")
    }

    @Test func garbageNeverCrashesOrHangsTheServer() throws {
        let server = try TestServer(arguments: ["--max-line-length", "4096"])
        var generator = SplitMix(seed: 7878)
        for round in 0..<20 {
            let client = try server.client()
            var bytes: [UInt8] = []
            var lines = 0
            for _ in 0..<50 {
                let length = Int(generator.next() % 200)
                for _ in 0..<length {
                    var byte = UInt8(truncatingIfNeeded: generator.next())
                    if byte == 10 || byte == 13 { byte = 32 }
                    bytes.append(byte)
                }
                bytes.append(10)
                lines += 1
            }
            try client.writeBytes(bytes)
            var statuses = 0
            for _ in 0..<lines {
                let reply = try client.readReply()
                if reply.status.hasPrefix("+OK") || reply.status.hasPrefix("-ERR") { statuses += 1 }
                if reply.status.hasPrefix("+OK bye") { break }
            }
            #expect(statuses > 0, "round \(round)")
        }
        #expect(try server.client().send("PING alive").status == "+OK alive")
    }

    @Test func helpAndVersionFlags() throws {
        let help = try runRecordsd(["--help"])
        #expect(help.status == 0)
        for flag in ["--listen", "--database", "--migrations", "--data-dir", "--pool-size", "--log-level", "DATABASE_URL", "examples:"] {
            #expect(help.output.contains(flag), "--help lacks \(flag)")
        }
        let bad = try runRecordsd(["--pool-size", "zero"])
        #expect(bad.status == 2)
        #expect(bad.error.contains("--pool-size takes a whole number above 0, not 'zero'"))
        #expect(bad.error == "recordsd: --pool-size takes a whole number above 0, not 'zero'\ntry `recordsd --help`\n", "\(bad.error)")
        #expect(try runRecordsd(["--version"]).output == "recordsd 0.1.0\n")
    }
}

/// A small deterministic generator, so a failing fuzz round can be replayed.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }
}
