/// Request lines drawn from the protocol's grammar and past its edges: predicates nested deeper
/// than the limit, flat runs of thousands of terms, runs of NOT, huge and odd numbers, long
/// strings, escapes, key paths good and bad, long lines, and junk. Seeded: a seed gives the
/// same lines again.
struct GrammarFuzzer {
    private var random: SplitMix

    init(seed: UInt64) { random = SplitMix(seed: seed) }

    private mutating func below(_ n: Int) -> Int { Int(random.next() % UInt64(max(1, n))) }
    private mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    private mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    static let entities = ["employee", "department", "game", "memo", "color", "assignment", "nosuch", "\"quoted name\""]
    static let paths = ["age", "first_name", "last_name", "gender", "department", "department.name", "department.number",
                        "ANY employees.age", "employees.@count", "ALL employees.first_name", "NONE assignments.role",
                        "id", "name", "number", "body", "color.number", "nosuch", "department.nosuch", "@count", "a.b.c.d.e",
                        "employees", "department_id"]

    mutating func value() -> String {
        switch below(14) {
        case 0: return String(below(1000))
        case 1: return "-" + String(below(100))
        case 2: return pick(["99999999999999999999999", "9223372036854775807", "-9223372036854775808", "1e309", "-0", "0.000001", "1.5"])
        case 3: return "\"" + pick(["", "x", "Sales", "ünïcødé 🙂", "a\\\"b", "\\n\\t\\r", "\\u00e9", "\\ud83d\\ude00", "\\ud83d", "%_*?", "\\\\"]) + "\""
        case 4: return "\"" + String(repeating: pick(["a", "é", "z"]), count: chance(5) ? below(3000) : below(30)) + "\""
        case 5: return pick(["nil", "null", "true", "false", "yes"])
        case 6: return "#" + pick(["r1", "e1", "nope", "d"])
        case 7: return "'" + pick(["single", "it''s", ""]) + "'"
        case 8: return pick(["\"2024-05-31\"", "\"2024-05-31T14:30:00Z\"", "\"31/05/2024\"", "\"0b9f6f2a-5d3c-4e53-9a52-2f6c1e0d8a11\""])
        default: return String(below(50))
        }
    }

    mutating func comparison() -> String {
        let path = pick(Self.paths)
        switch below(10) {
        case 0: return path + " IN {" + (0..<below(20)).map { _ in value() }.joined(separator: ", ") + "}"
        case 1: return path + " BETWEEN {" + value() + ", " + value() + "}"
        case 2: return path + " " + pick(["BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE"]) + pick(["", "[c]", "[cd]", "[d]", "[x]"]) + " " + value()
        case 3: return path + " MATCHES " + pick(["\"a.*\"", "\"x)|(?:.*\"", "\"[a-z]+\"", "\"(\"", "\"[[:alpha:]]\""])
        case 4: return path + pick([" == nil", " != nil"])
        default: return path + " " + pick(["==", "!=", "<", "<=", ">", ">=", "=", "<>", "=>", "=<", "===", "~"]) + " " + value()
        }
    }

    /// A predicate `depth` levels of parentheses deep at most.
    mutating func predicate(depth: Int) -> String {
        if depth <= 0 || chance(40) {
            let not = chance(15) ? String(repeating: pick(["NOT ", "! "]), count: below(chance(2) ? 6000 : 4)) : ""
            return not + comparison()
        }
        // Wide near the leaves, a chain further up: deep, never exponential.
        let count = depth > 3 ? 1 + below(2) : 1 + below(4)
        let joiner = pick([" AND ", " OR ", " && ", " || "])
        return "(" + (0..<count).map { _ in predicate(depth: depth - 1) }.joined(separator: joiner) + ")"
    }

    mutating func whereClause() -> String {
        switch below(1000) {
        case 0: return " WHERE " + (0..<(2_000 + below(9_000))).map { "id == \($0)" }.joined(separator: " OR ")
        case 1...9: return " WHERE " + String(repeating: "(", count: 30 + below(3_000)) + "age == 1" + String(repeating: ")", count: 30 + below(3_000))
        case 10...600: return " WHERE " + predicate(depth: below(chance(5) ? 40 : 4))
        default: return ""
        }
    }

    mutating func assignments() -> String {
        let count = below(500) == 0 ? 5_000 + below(30_000) : below(6)
        return (0..<count).map { index in
            (index < 6 ? pick(["name", "first_name", "last_name", "gender", "age", "department", "number", "uid", "body", "x"]) : "a\(index)")
                + "=" + value()
        }.joined(separator: " ")
    }

    mutating func line() -> String {
        let entity = pick(Self.entities)
        switch below(100) {
        case 0..<25: return "INSERT \(entity)" + (chance(20) ? " AS #r\(below(5))" : "") + " " + assignments()
        case 25..<30: return "UPDATE \(entity) " + pick(["#r1", "1", "\"x\"", "id=1", "uid=\"m\" SET"]) + " " + assignments()
        case 30..<33: return "UPDATE \(entity)" + whereClause() + " SET " + assignments()
        case 33..<35: return "DELETE \(entity)" + (chance(50) ? whereClause() : " " + pick(["1", "#r1", "\"k\"", "project=1 employee=2"]))
        case 35..<48: return "FIND \(entity)" + whereClause() + (chance(30) ? " ORDER BY " + pick(Self.paths) + pick(["", " DESC", " ASC"]) : "")
            + (chance(30) ? " LIMIT " + pick(["0", "1", "9223372036854775807", "99999999999999999999", "-1", "x"]) : "")
            + (chance(10) ? " OFFSET " + pick(["0", "9223372036854775807"]) : "")
            + (chance(10) ? " AFTER " + pick(["c00", "c", "cZZ", "c5b5d", "x"]) : "")
            + (chance(10) ? " INCLUDE " + pick(["employees", "department", "employees.department", "a.b.c.d.e", "nosuch"]) : "")
        case 48..<56: return "COUNT \(entity)" + whereClause() + (chance(10) ? " ESTIMATE" : "")
        case 56..<58: return "WATCH \(entity)" + whereClause()
        case 58..<60: return "UNWATCH" + (chance(50) ? " \(entity)" : "")
        case 60..<64: return "GET \(entity) " + pick(["1", "#r1", "\"x\"", "uid=\"m1\"", "999999999999999999999", "1.5"])
            + (chance(20) ? " INCLUDE " + pick(["employees", "department"]) : "")
        case 64..<68: return pick(["NEST", "MERGE", "DISCARD", "CHANGES", "ROLLBACK"])
        case 68..<70: return "EXPLAIN " + pick(["FIND", "COUNT", "GET"]) + " \(entity)" + whereClause()
        case 70..<72: return "UPSERT \(entity) ON " + pick(["name", "uid", "nosuch", "name, number"]) + " " + assignments()
        case 72..<74: return "EXPORT \(entity)" + whereClause()
        case 74..<78: return pick(["PING", "HELP", "HELP FIND", "HELP NOSUCH", "INFO", "ENTITIES", "DESCRIBE \(entity)", "AUTH x y", "USER LIST"])
        case 78..<80: return "SAVE" + pick(["", " FORCE", " THEIRS", " MERGE", " KEY k\(below(100))", " NOW"])
        case 80..<85: return pick(["", " ", "\t", "#", "((((", "FIND", "INSERT", "=", "\"unterminated", "WHERE WHERE"])
        default:
            // Junk: random printable and not so printable characters, no line break.
            let alphabet = Array("abcXYZ019 ()[]{}=!<>\"'\\#@.,;:%_*?é🙂\t")
            return String((0..<below(200)).map { _ in alphabet[below(alphabet.count)] })
        }
    }
}
