import Testing
@testable import Records

/// Thousands of random and mutated predicates: none may crash or hang, and each must become
/// either SQL whose every value is a parameter, or a clean error.
@Suite struct GeneratedPredicateTests {
    private static let fragments = [
        "age", "first_name", "department", "department.name", "department.number", "employees", "employees.age",
        "employees.@count", "ANY", "ALL", "NONE", "SOME", "NOT", "AND", "OR", "&&", "||", "!", "(", ")", "{", "}", ",",
        "==", "=", "!=", "<>", "<", "<=", ">", ">=", "=>", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES",
        "IN", "BETWEEN", "[c]", "[d]", "[cd]", "nil", "true", "false", "42", "-7", "3.5", "1e3", "\"Sales\"",
        "\"a\\\"b\"", "'x'", "\"%_\"", "#ref", "TRUEPREDICATE", "@count", "\"\\u00e9\"", ";", "--", "$1", "\u{0}",
        "DROP", "TABLE", "'; --", "..", "department..name", "\u{202E}", "9999999999999999999999",
        "gender", "manager.age", "reports.@avg.age", "reports.@max.first_name", "@sum", "@avg", "reports.@sum.first_name",
        "SUBQUERY(", "SUBQUERY", "reports", "$e", "$e.age", "$e.manager.age", ").@count", ".@count", "$", "$1e",
    ]

    private static let valid = [
        "age > 30 AND department.name == \"Sales\"",
        "first_name BEGINSWITH[c] \"jo\" OR NOT age IN {1, 2, nil}",
        "ANY employees.age BETWEEN {20, 30}",
        "department.number >= 3 && (age == nil || first_name MATCHES \"J.*\")",
        "age > department.number OR first_name ==[cd] manager.first_name",
        "reports.@avg.age > 30 AND reports.@max.first_name BEGINSWITH[c] \"a\"",
        "SUBQUERY(reports, $r, $r.age > 30 AND NOT $r.first_name BEGINSWITH[c] \"a\").@count > 1",
    ]

    private static let validEntities = ["employee", "employee", "department", "employee", "employee", "employee", "employee"]

    /// Checks one WHERE text; returns true when it compiled.
    @discardableResult
    private func check(_ entity: String, _ predicate: String) -> Bool {
        let line = "FIND \(entity) WHERE \(predicate)"
        do {
            guard case .find(let request) = try CommandParser.parse(line) else {
                Issue.record("not a FIND: \(line)")
                return false
            }
            let select = try QueryBuilder.select(request, model: SampleModel.model)
            // Every $n refers to a parameter, and no parameter text appears in the SQL.
            let highest = select.sql.split(separator: "$").dropFirst().compactMap { Int($0.prefix { $0.isNumber }) }.max() ?? 0
            #expect(highest == select.parameters.count, "\(line)")
            for case let value? in select.parameters where value.count > 3 && !value.hasPrefix("{") {
                #expect(!select.sql.contains(value), "value spliced into SQL: \(line)")
            }
            #expect(!select.sql.contains(";"), "\(line)")
            return true
        } catch {
            #expect([.syntax, .unknown, .validation, .limit].contains(error.code), "\(line) -> \(error)")
            return false
        }
    }

    @Test func randomTokenSequences() {
        var random = Generator(seed: 42)
        var compiled = 0
        for _ in 0..<4000 {
            let count = 1 + Int(random.next() % 12)
            let text = (0..<count).map { _ in Self.fragments[Int(random.next() % UInt64(Self.fragments.count))] }.joined(separator: " ")
            if check("employee", text) { compiled += 1 }
        }
        #expect(compiled > 0)
    }

    /// AGGREGATE lines from random pieces: SQL with every value a parameter, or a clean error.
    @Test func randomAggregates() {
        let pieces = ["count()", "count(age)", "sum(age)", "avg(age)", "min(first_name)", "max(department.number)", "avg(first_name)",
                      "sum(reports.@count)", "AS", "n", "x_1", "GROUP", "BY", "department.name", "gender", ",", "HAVING", "count()", ">", "2",
                      "\"x\"", "ORDER", "DESC", "avg_age", "LIMIT", "3", "WHERE", "age", "> 30", "AND", "reports", "(", ")", "';--", "$1"]
        var random = Generator(seed: 7)
        var compiled = 0
        for _ in 0..<3000 {
            let count = 1 + Int(random.next() % 10)
            let line = "AGGREGATE employee " + (0..<count).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined(separator: " ")
            do {
                guard case .aggregate(let request) = try CommandParser.parse(line) else { Issue.record("not an AGGREGATE: \(line)"); continue }
                let query = try QueryBuilder.aggregate(request, model: SampleModel.model)
                let highest = query.sql.split(separator: "$").dropFirst().compactMap { Int($0.prefix { $0.isNumber }) }.max() ?? 0
                #expect(highest == query.parameters.count, "\(line)")
                #expect(!query.sql.contains(";") && !query.sql.contains("--"), "\(line)")
                compiled += 1
            } catch {
                #expect([.syntax, .unknown, .validation, .limit].contains(error.code), "\(line) -> \(error)")
            }
        }
        #expect(compiled > 0)
    }

    @Test func mutationsOfValidPredicates() {
        var random = Generator(seed: 7)
        var compiled = 0
        for _ in 0..<4000 {
            let index = Int(random.next() % UInt64(Self.valid.count))
            var characters = Array(Self.valid[index])
            for _ in 0..<(1 + Int(random.next() % 3)) {
                let position = Int(random.next() % UInt64(characters.count))
                switch random.next() % 3 {
                case 0: characters.remove(at: position)
                case 1: characters.insert(Array("(){}\"'=<>!,.[]#@ aZ9\\")[Int(random.next() % 21)], at: position)
                default: characters.swapAt(position, Int(random.next() % UInt64(characters.count)))
                }
                if characters.isEmpty { characters = ["x"] }
            }
            if check(Self.validEntities[index], String(characters)) { compiled += 1 }
        }
        #expect(compiled > 100)
    }

    @Test func theValidOnesCompile() {
        for (entity, predicate) in zip(Self.validEntities, Self.valid) {
            #expect(check(entity, predicate), "\(predicate)")
        }
    }
}

struct Generator {
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
