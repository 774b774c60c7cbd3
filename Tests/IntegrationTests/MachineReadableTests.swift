import Foundation
import Testing

/// FORMAT JSON, and the Swift models `records codegen swift` writes from it.
@Suite struct MachineReadableTests {
    @Test func descriptiveRepliesAsJSON() throws {
        let server = try TestServer()
        let client = try server.client()
        #expect(try client.send("FORMAT XML").status.hasPrefix("-ERR SYNTAX"))
        #expect(try client.send("FORMAT JSON").status == "+OK format json")
        let entities = try client.send("ENTITIES")
        #expect(entities.lines.contains(#"{"name":"employee","served":true,"attributes":5,"relationships":2,"rowLevelSecurity":false}"#))
        #expect(entities.lines.contains(#"{"name":"memo","served":true,"attributes":5,"relationships":1,"rowLevelSecurity":true}"#))
        let employee = try client.send("DESCRIBE employee")
        #expect(employee.status == "+OK employee")
        #expect(employee.lines == [
            #"{"name":"employee","key":["id"],"attributes":["#
            + #"{"name":"id","type":"integer","sqlType":"bigint","required":false,"nullable":false,"key":true,"unique":true,"generated":false,"default":"identity"},"#
            + #"{"name":"first_name","type":"string","sqlType":"text","required":true,"nullable":false,"key":false,"unique":false,"generated":false,"default":null},"#
            + #"{"name":"last_name","type":"string","sqlType":"text","required":true,"nullable":false,"key":false,"unique":false,"generated":false,"default":null},"#
            + #"{"name":"gender","type":"integer","sqlType":"smallint","required":true,"nullable":false,"key":false,"unique":false,"generated":false,"default":null},"#
            + #"{"name":"age","type":"integer","sqlType":"integer","required":false,"nullable":true,"key":false,"unique":false,"generated":false,"default":null}],"#
            + #""relationships":[{"name":"assignments","target":"assignment","toMany":true,"required":false,"inverse":"employee","deleteRule":"cascade"},"#
            + #"{"name":"department","target":"department","toMany":false,"required":false,"inverse":"employees","deleteRule":"cascade"}],"rowLevelSecurity":false}"#,
        ])
        try client.ok(##"INSERT department AS #d name="Ops" number=1"##)
        let saved = try client.send("SAVE")
        #expect(saved.lines == [##"{"ref":"#d","entity":"department","key":"1"}"##])
        let info = try client.send("INFO")
        // Numbers as numbers (they were strings: "sessions":"1").
        let object = try #require(try JSONSerialization.jsonObject(with: Data(info.lines[0].utf8)) as? [String: Any])
        #expect(object["version"] as? String == "0.1.0" && object["sessions"] as? Int == 1 && object["uptime_seconds"] is Int, "\(object)")
        #expect(object["pending_changes"] as? Int == 0 && object["primary_changes"] as? Int == 0 && object["session"] as? String != nil)
        #expect((object["pool"] as? [String: Any])?["size"] as? Int == 3, "\(object)")
        // AGGREGATE's objects are written as every other reply's, without spaces.
        #expect(try client.send("AGGREGATE department count() AS n").lines == [#"{"n":1}"#])
        let plan = try client.send("EXPLAIN FIND employee WHERE age > 30")
        let explained = try #require(try JSONSerialization.jsonObject(with: Data(plan.lines[0].utf8)) as? [String: Any])
        #expect(explained["parameters"] as? [String] == ["30"] && (explained["plan"] as? [String])?.isEmpty == false)
        #expect(try client.send("FORMAT TEXT").status == "+OK format text")
        #expect(try client.send("DESCRIBE game").lines.first?.hasPrefix("attribute") == true)
    }

    /// CHANGES COUNT is one JSON line in either format; CHANGES under FORMAT JSON is one object
    /// a change, values typed as FIND writes them, a pending record's as {"ref":...}.
    @Test func pendingChangesAsJSON() throws {
        let server = try TestServer()
        let client = try server.client()
        #expect(try client.send("CHANGES COUNT").lines == [#"{"pending":0,"inserts":0,"updates":0,"deletes":0,"byPredicate":0,"depth":0}"#])
        try client.ok(##"INSERT department AS #d name="Ops" number=1"##)
        try client.ok(##"INSERT department AS #o name="Old" number=3"##)
        try client.ok("SAVE")
        try client.ok(##"INSERT department AS #s name="Sales" number=2"##)
        try client.ok(##"INSERT employee AS #e first_name="A" last_name="B" gender=1 department=#s"##)
        try client.ok(##"UPDATE department 1 name="Ops 2""##)
        try client.ok("NEST")
        try client.ok("DELETE department 2")
        try client.ok(##"DELETE employee WHERE last_name == "Z""##)
        let count = try client.send("CHANGES COUNT")
        #expect(count.status == "+OK 5 pending change(s): 2 insert, 1 update, 1 delete, 1 by predicate; depth 1")
        #expect(count.lines == [#"{"pending":5,"inserts":2,"updates":1,"deletes":1,"byPredicate":1,"depth":1}"#])
        try client.ok("FORMAT JSON")
        let changes = try client.send("CHANGES")
        #expect(changes.lines == [
            ##"{"op":"insert","ref":"#s","entity":"department","values":{"name":"Sales","number":2}}"##,
            ##"{"op":"insert","ref":"#e","entity":"employee","values":{"first_name":"A","last_name":"B","gender":1,"department":{"ref":"#s"}}}"##,
            ##"{"op":"update","entity":"department","key":"1","changes":{"name":{"old":"Ops","new":"Ops 2"}}}"##,
            ##"{"op":"deleteWhere","entity":"employee","text":"DELETE employee WHERE last_name == \"Z\""}"##,
            ##"{"op":"delete","entity":"department","key":"2"}"##,
        ], "\(changes)")
    }

    @Test func codegenWritesTheModelsAProgramDecodes() throws {
        let server = try TestServer()
        let run = try runProcess(CLITests.binary, ["-p", String(server.port), "codegen", "swift", "employee", "memo", "journal_entry"],
                                 environment: ["NO_COLOR": "1", "RECORDS_URL": nil])
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output.contains("""
            public struct Employee: RecordsEntity, Codable, Equatable {
                public static let entityName = "employee"
                public var id: Int
                public var firstName: String
                public var lastName: String
                public var gender: Int
                public var age: Int?
                /// The department record's key.
                public var department: Int?
            }
            """), "\(run.output)")
        #expect(run.output.contains("public var lastmodified: Date\n"))
        #expect(run.output.contains("public struct JournalEntry: RecordsEntity"))
    }
}
