import Testing
@testable import Records

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
        #expect(try CommandParser.parse("DELETE department 3") == .delete(entity: "department", id: .stored("3")))
        #expect(try CommandParser.parse("DELETE department #d1") == .delete(entity: "department", id: .pending("d1")))
        #expect(try CommandParser.parse("GET employee 42") == .get(entity: "employee", id: .stored("42"), include: []))
        guard case .update(_, .stored("7"), let values) = try CommandParser.parse("UPDATE employee 7 age=40") else {
            Issue.record("not an update"); return
        }
        #expect(values.count == 1)
    }

    @Test func savePolicies() throws {
        #expect(try CommandParser.parse("SAVE") == .save(.fail))
        #expect(try CommandParser.parse("save force") == .save(.force))
        #expect(try CommandParser.parse("SAVE THEIRS") == .save(.theirs))
        #expect(try CommandParser.parse("SAVE MERGE") == .save(.merge))
        #expect(throws: CommandError.self) { try CommandParser.parse("SAVE NOW") }
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
        #expect(throws: CommandError.self) { try CommandParser.parse("INSERT game name=\"a\" NAME=\"b\"") }
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
        #expect(CommandParser.verb(of: "import game") == .import)
        #expect(CommandParser.verb(of: " \tRollBack") == .rollback)
        #expect(CommandParser.verb(of: "GETS game 1") == nil)
        #expect(CommandParser.verb(of: "ROLLBACKS") == nil)
        #expect(CommandParser.verb(of: "") == nil)
    }
}
