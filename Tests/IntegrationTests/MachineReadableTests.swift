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
        let object = try #require(try JSONSerialization.jsonObject(with: Data(info.lines[0].utf8)) as? [String: String])
        #expect(object["version"] == "0.1.0" && object["sessions"] == "1")
        let plan = try client.send("EXPLAIN FIND employee WHERE age > 30")
        let explained = try #require(try JSONSerialization.jsonObject(with: Data(plan.lines[0].utf8)) as? [String: Any])
        #expect(explained["parameters"] as? [String] == ["30"] && (explained["plan"] as? [String])?.isEmpty == false)
        #expect(try client.send("FORMAT TEXT").status == "+OK format text")
        #expect(try client.send("DESCRIBE game").lines.first?.hasPrefix("attribute") == true)
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
