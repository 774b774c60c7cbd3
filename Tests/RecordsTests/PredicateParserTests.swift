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
        case .and(let operands): return "(" + operands.map(keys).joined(separator: " & ") + ")"
        case .or(let operands): return "(" + operands.map(keys).joined(separator: " | ") + ")"
        case .comparison(let c): return c.keyPath
        case .subquery(let s): return "SUBQUERY(\(s.collection), \(s.variable), \(keys(s.predicate)))\(s.op.rawValue)\(s.count)"
        }
    }

    @Test func subqueries() throws {
        #expect(keys(try predicate("SUBQUERY(employees, $e, $e.age > 30 AND $e.gender == 1).@count > 2 OR name == \"x\""))
                == "(SUBQUERY(employees, $e, ($e.age & $e.gender))>2 | name)")
        #expect(throws: CommandError.self) { try predicate("SUBQUERY(employees, e, e.age > 30).@count > 2") }
        #expect(throws: CommandError.self) { try predicate("SUBQUERY(employees, $e, $e.age > 30) > 2") }
        #expect(throws: CommandError.self) { try predicate("SUBQUERY(employees, $e, $e.age > 30).@count > \"x\"") }
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

    @Test func flatListsForLongRunsOfOneOperator() throws {
        #expect(keys(try predicate("a == 1 OR b == 2 OR c == 3 OR (d == 4 OR e == 5)")) == "(a | b | c | d | e)")
        #expect(keys(try predicate("a == 1 AND b == 2 AND c == 3")) == "(a & b & c)")
        let wide = (0..<5_000).map { "id == \($0)" }.joined(separator: " OR ")
        guard case .or(let terms) = try predicate(wide) else { Issue.record("not an OR"); return }
        #expect(terms.count == 5_000)
    }

    @Test func runsOfNotFold() throws {
        #expect(keys(try predicate(String(repeating: "NOT ", count: 5_000) + "a == 1")) == "a")
        #expect(keys(try predicate(String(repeating: "! ", count: 5_001) + "a == 1")) == "!(a)")
    }

    @Test func depthAndSizeAreBounded() throws {
        let deep = String(repeating: "(", count: 2_000) + "age == 1" + String(repeating: ")", count: 2_000)
        #expect(throws: CommandError(.limit, "at 46: parentheses nest deeper than 32 levels")) { try predicate(deep) }
        let shallow = String(repeating: "(", count: 32) + "age == 1" + String(repeating: ")", count: 32)
        #expect(keys(try predicate(shallow)) == "age")
        let many = (0...PredicateParser.maxTerms).map { "id == \($0)" }.joined(separator: " OR ")
        #expect(throws: CommandError(.limit, "the predicate has more than 10000 comparisons")) { try predicate(many) }
    }

    @Test func errorsSayWhatWasExpected() {
        #expect(throws: CommandError(.syntax, "at 18: expected an operator after 'age', found 3")) { try predicate("age 3") }
        #expect(throws: CommandError(.syntax, "at 23: expected ')'")) { try predicate("(age == 3") }
    }
}
