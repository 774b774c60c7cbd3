import Testing
@testable import Records
import RecordsProtocol

@Suite struct CommandParserTests {
    @Test func verbsAreCaseInsensitive() throws {
        #expect(try CommandParser.parse("ping") == .ping(nil))
        #expect(try CommandParser.parse("PiNg hello world") == .ping("hello world"))
        #expect(try CommandParser.parse("describe Employee") == .describe("Employee"))
    }

    @Test func insertWithRefAndValues() throws {
        let command = try CommandParser.parse(#"INSERT employee AS #john first_name="John" age=31 score=-1.5 active=true department=#sales photo=nil"#)
        guard case .insert(let entity, let ref, let values) = command else { Issue.record("not an insert"); return }
        #expect(entity == "employee")
        #expect(ref == "john")
        #expect(values.map(\.name) == ["first_name", "age", "score", "active", "department", "photo"])
        #expect(values.map(\.value) == [.string("John"), .number("31"), .number("-1.5"), .bool(true), .ref("sales"), .null])
    }

    @Test func stringEscapes() throws {
        let command = try CommandParser.parse(#"INSERT contact name="a\"b\\c\nd\te\u00e9""#)
        guard case .insert(_, _, let values) = command else { Issue.record("not an insert"); return }
        #expect(values[0].value == .string("a\"b\\c\nd\te\u{e9}"))
    }

    @Test func updateDeleteGetTakeIdsOrRefs() throws {
        #expect(try CommandParser.parse("DELETE department 3") == .delete(entity: "department", id: .key("3")))
        #expect(try CommandParser.parse("DELETE department #d1") == .delete(entity: "department", id: .pending("d1")))
        #expect(try CommandParser.parse("GET employee 42") == .get(entity: "employee", id: .key("42"), include: []))
        guard case .update(_, .key("7"), let values) = try CommandParser.parse("UPDATE employee 7 age=40") else {
            Issue.record("not an update"); return
        }
        #expect(values.count == 1)
        guard case .update(_, .key("7"), let set) = try CommandParser.parse("UPDATE employee 7 SET age=40") else {
            Issue.record("not an update with SET"); return
        }
        #expect(set.count == 1)
    }

    @Test func recordsAreNamedByKeyFieldsOrUniqueKeys() throws {
        guard case .delete(_, .fields(let pairs)) = try CommandParser.parse("DELETE project_member project=3 employee=7") else {
            Issue.record("not a delete by fields"); return
        }
        #expect(pairs.map(\.name) == ["project", "employee"])
        #expect(pairs.map(\.value) == [.number("3"), .number("7")])
        guard case .get(_, .fields(let unique), let include, _) = try CommandParser.parse(#"GET memo uid="m1" INCLUDE color"#) else {
            Issue.record("not a get by fields"); return
        }
        #expect(unique.map(\.name) == ["uid"])
        #expect(include == ["color"])
        guard case .update(_, .fields(let named), let values) = try CommandParser.parse(#"UPDATE memo uid="m1" SET body="x""#) else {
            Issue.record("not an update by fields"); return
        }
        #expect(named.count == 1 && values.map(\.name) == ["body"])
        // Without SET the pairs that name the record and the new values cannot be told apart.
        #expect(throws: CommandError.self) { try CommandParser.parse(#"UPDATE memo uid="m1" body="x""#) }
    }

    @Test func changesByPredicate() throws {
        guard case .updateWhere(let entity, _, let values, let text) = try CommandParser.parse("UPDATE employee WHERE age > 60 SET department=nil") else {
            Issue.record("not an update by predicate"); return
        }
        #expect(entity == "employee" && values.map(\.name) == ["department"])
        #expect(text == "UPDATE employee WHERE age > 60 SET department=nil")
        guard case .deleteWhere(_, .comparison(let c), _) = try CommandParser.parse("DELETE employee WHERE age > 60") else {
            Issue.record("not a delete by predicate"); return
        }
        #expect(c.keyPath == "age")
        #expect(throws: CommandError.self) { try CommandParser.parse("UPDATE employee WHERE age > 60 age=3") }
    }

    @Test func savePolicies() throws {
        #expect(try CommandParser.parse("SAVE") == .save(.fail, key: nil))
        #expect(try CommandParser.parse("save force") == .save(.force, key: nil))
        #expect(try CommandParser.parse("SAVE THEIRS") == .save(.theirs, key: nil))
        #expect(try CommandParser.parse("SAVE MERGE") == .save(.merge, key: nil))
        #expect(try CommandParser.parse("SAVE KEY order-17") == .save(.fail, key: "order-17"))
        #expect(try CommandParser.parse(#"SAVE FORCE KEY "a b""#) == .save(.force, key: "a b"))
        #expect(throws: CommandError.self) { try CommandParser.parse("SAVE NOW") }
        #expect(throws: CommandError.self) { try CommandParser.parse("SAVE KEY") }
    }

    @Test func unknownVerbSuggests() {
        #expect(throws: CommandError(.unknown, "unknown verb 'FIDN' (did you mean FIND?): type HELP for the list")) {
            try CommandParser.parse("FIDN employee")
        }
    }

    @Test func syntaxErrorsNameTheColumn() {
        #expect(throws: CommandError(.syntax, "at 26: expected a value after '>', found '>'")) {
            try CommandParser.parse("FIND employee WHERE age >> 3")
        }
        #expect(throws: CommandError(.syntax, "at 18: unterminated string")) {
            try CommandParser.parse(#"INSERT game name="Go"#)
        }
        #expect(throws: CommandError(.syntax, "at 18: expected '=' after 'name', found \"x\"")) {
            try CommandParser.parse(#"INSERT game name "x""#)
        }
    }

    @Test func duplicateAttributeIsRefused() {
        #expect(throws: CommandError.self) { try CommandParser.parse("INSERT game name=\"a\" name=\"b\"") }
        // `Name` and `name` may be two columns: the model tells, when the command runs.
        #expect(throws: Never.self) { try CommandParser.parse("INSERT game name=\"a\" NAME=\"b\"") }
    }

    @Test func trailingInputIsRefused() {
        #expect(throws: CommandError(.syntax, "at 6: unexpected input, found 'now'")) { try CommandParser.parse("QUIT now") }
    }

    @Test func emptyLine() {
        #expect(throws: CommandError(.syntax, "empty line: type HELP for the list of verbs")) { try CommandParser.parse("   ") }
    }

    @Test func findClauses() throws {
        let command = try CommandParser.parse("FIND employee WHERE age > 30 ORDER BY last_name DESC, first_name LIMIT 10 OFFSET 20")
        guard case .find(let request) = command else { Issue.record("not a find"); return }
        #expect(request.order.map(\.path) == ["last_name", "first_name"])
        #expect(request.order.map(\.ascending) == [false, true])
        #expect(request.limit == 10)
        #expect(request.offset == 20)
    }

    @Test func theVerbOfALineIsItsFirstWordWhateverTheCase() {
        #expect(Verb.of("import game") == .import)
        #expect(Verb.of(" \tRollBack") == .rollback)
        #expect(Verb.of("GETS game 1") == nil)
        #expect(Verb.of("ROLLBACKS") == nil)
        #expect(Verb.of("") == nil)
    }
}
