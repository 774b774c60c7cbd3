import Testing
@testable import Records

@Suite struct PredicateParserTests {
    private func predicate(_ text: String) throws -> Predicate {
        guard case .find(let request) = try CommandParser.parse("FIND e WHERE " + text), let p = request.predicate else {
            throw CommandError(.internal, "no predicate")
        }
        return p
    }

    private func keys(_ p: Predicate) -> String {
        switch p {
        case .constant(let b): return b ? "T" : "F"
        case .not(let inner): return "!(\(keys(inner)))"
        case .and(let a, let b): return "(\(keys(a)) & \(keys(b)))"
        case .or(let a, let b): return "(\(keys(a)) | \(keys(b)))"
        case .comparison(let c): return c.keyPath
        }
    }

    @Test func andBindsTighterThanOr() throws {
        #expect(keys(try predicate("a == 1 OR b == 2 AND c == 3")) == "(a | (b & c))")
        #expect(keys(try predicate("a == 1 && b == 2 || c == 3")) == "((a & b) | c)")
    }

    @Test func notBindsTighterThanAnd() throws {
        #expect(keys(try predicate("NOT a == 1 AND b == 2")) == "(!(a) & b)")
        #expect(keys(try predicate("!(a == 1 OR b == 2)")) == "!((a | b))")
    }

    @Test func operatorsAndModifiers() throws {
        guard case .comparison(let c) = try predicate(#"name BEGINSWITH[c] "jo""#) else { Issue.record("not a comparison"); return }
        #expect(c.op == .beginsWith)
        #expect(c.caseInsensitive)
        #expect(!c.diacriticInsensitive)
        guard case .comparison(let d) = try predicate("age <> 3") else { Issue.record("not a comparison"); return }
        #expect(d.op == .notEqual)
        guard case .comparison(let e) = try predicate("age = 3") else { Issue.record("not a comparison"); return }
        #expect(e.op == .equal)
    }

    @Test func listsAndQuantifiers() throws {
        guard case .comparison(let c) = try predicate("ANY employees.age IN {30, 40, nil}") else { Issue.record("not a comparison"); return }
        #expect(c.quantifier == .any)
        #expect(c.values == [.number("30"), .number("40"), .null])
        guard case .comparison(let b) = try predicate("age BETWEEN {20, 30}") else { Issue.record("not a comparison"); return }
        #expect(b.values.count == 2)
        #expect(throws: CommandError.self) { try predicate("age BETWEEN {20}") }
    }

    @Test func errorsSayWhatWasExpected() {
        #expect(throws: CommandError(.syntax, "at 18: expected an operator after 'age', found 3")) { try predicate("age 3") }
        #expect(throws: CommandError(.syntax, "at 23: expected ')'")) { try predicate("(age == 3") }
    }
}
