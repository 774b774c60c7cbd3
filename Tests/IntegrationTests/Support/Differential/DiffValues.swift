import Foundation
import RecordsProtocol

/// A value a command sets: typed as the protocol takes it. Foreign keys to stored records are
/// `.int` or `.text` (the target's key), to pending records `.ref`.
enum DiffValue: Equatable, Hashable {
    case null
    case int(Int)
    case text(String)
    case bool(Bool)
    case ref(String)

    /// As PostgreSQL prints it (`::text`), nil for NULL; a `#ref` has no text of its own.
    var canonical: String? {
        switch self {
        case .null, .ref: nil
        case .int(let i): String(i)
        case .text(let s): s
        case .bool(let b): b ? "true" : "false"
        }
    }

    /// As a command takes it; a uuid may be typed in upper case (the server folds it).
    func word(upper: Bool = false) -> String {
        switch self {
        case .null: "nil"
        case .int(let i): String(i)
        case .text(let s): quotedString(upper ? s.uppercased() : s)
        case .bool(let b): b ? "true" : "false"
        case .ref(let r): "#" + r
        }
    }
}

enum DiffText {
    /// A SQL literal of `type`, or NULL.
    static func sql(_ text: String?, _ type: DiffType) -> String {
        guard let text else { return "NULL" }
        return "'" + text.replacingOccurrences(of: "'", with: "''") + "'::" + type.sql
    }

    /// Reads a protocol/JSON string literal starting at `index` (a `"`); returns the text and
    /// the index after the closing quote.
    static func unquote(_ chars: [Character], from start: Int) -> (String, Int)? {
        guard start < chars.count, chars[start] == "\"" else { return nil }
        var out = ""
        var i = start + 1
        while i < chars.count {
            let c = chars[i]
            if c == "\"" { return (out, i + 1) }
            if c == "\\", i + 1 < chars.count {
                let e = chars[i + 1]
                switch e {
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                case "/": out.append("/")
                case "u":
                    guard i + 5 < chars.count, let code = UInt32(String(chars[(i + 2)...(i + 5)]), radix: 16),
                          let scalar = Unicode.Scalar(code) else { return nil }
                    out.unicodeScalars.append(scalar)
                    i += 4
                default: out.append(e)
                }
                i += 2
                continue
            }
            out.append(c)
            i += 1
        }
        return nil
    }
}

// MARK: - Predicates

enum DiffOperator: String {
    case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    case equalFolded = "==[c]", beginsWith = "BEGINSWITH", endsWith = "ENDSWITH", contains = "CONTAINS"
    case beginsWithFolded = "BEGINSWITH[c]", containsFolded = "CONTAINS[c]"
    case `in` = "IN", between = "BETWEEN"
}

/// What a comparison's left side is.
enum DiffOperand {
    /// An attribute, a key column, or a to-one relationship (compared with the target's key).
    case column(Int)
    /// A to-one relationship, then an attribute of its target (`f0.c1`).
    case path(foreignKey: Int, column: Int)
    /// `ANY`/`ALL`/`NONE` over a to-many relationship, then an attribute of its records.
    case quantified(String, inverse: Int, column: Int)
    /// `inverse.@count`.
    case count(inverse: Int)
}

indirect enum DiffPredicate {
    case compare(DiffOperand, DiffOperator, [DiffValue])
    case not(DiffPredicate)
    case and(DiffPredicate, DiffPredicate)
    case or(DiffPredicate, DiffPredicate)
}

/// Renders a predicate both ways: as the protocol takes it, and as plain SQL with NSPredicate's
/// two-valued logic (a comparison with nil is false, `!=` matches nil, NOT of a comparison that
/// is false is true), written independently of the server's translation.
struct DiffPredicateWriter {
    let schema: DiffSchema
    /// NSPredicate's logic (the default); false: SQL's three-valued logic, where NOT of a
    /// comparison with NULL is not true either (`RECORDS_DIFF_LOGIC=sql`, to look past that
    /// difference for others).
    var twoValued = DiffPredicateWriter.defaultTwoValued

    static let defaultTwoValued = ProcessInfo.processInfo.environment["RECORDS_DIFF_LOGIC"] != "sql"

    func text(_ p: DiffPredicate, table: Int, symbols: Bool) -> String {
        switch p {
        case .compare(let operand, let op, let values):
            return operandText(operand, table: table) + " " + op.rawValue + " " + valuesText(op, values)
        case .not(let inner): return (symbols ? "!" : "NOT ") + "(" + text(inner, table: table, symbols: symbols) + ")"
        case .and(let a, let b):
            return "(" + text(a, table: table, symbols: symbols) + (symbols ? " && " : " AND ") + text(b, table: table, symbols: symbols) + ")"
        case .or(let a, let b):
            return "(" + text(a, table: table, symbols: symbols) + (symbols ? " || " : " OR ") + text(b, table: table, symbols: symbols) + ")"
        }
    }

    private func operandText(_ operand: DiffOperand, table: Int) -> String {
        let t = schema.tables[table]
        switch operand {
        case .column(let c): return t.columns[c].label
        case .path(let fk, let c):
            let target = schema.tables[t.columns[fk].foreignKey!.target]
            return t.columns[fk].label + "." + target.columns[c].label
        case .quantified(let q, let inverse, let c):
            let inv = t.inverses[inverse]
            return q + " " + inv.name + "." + schema.tables[inv.source].columns[c].label
        case .count(let inverse): return t.inverses[inverse].name + ".@count"
        }
    }

    private func valuesText(_ op: DiffOperator, _ values: [DiffValue]) -> String {
        switch op {
        case .in, .between: "{" + values.map { $0.word() }.joined(separator: ", ") + "}"
        default: values[0].word()
        }
    }

    /// SQL over the row aliased `alias` of `table`.
    func sql(_ p: DiffPredicate, table: Int, alias: String, depth: Int = 0) -> String {
        switch p {
        case .compare(let operand, let op, let values):
            let t = schema.tables[table]
            switch operand {
            case .column(let c):
                return condition("\(alias).\"\(t.columns[c].name)\"", t.columns[c].type, op, values)
            case .path(let fk, let c):
                let target = schema.tables[t.columns[fk].foreignKey!.target]
                let x = "p\(depth)"
                let expression = "(SELECT \(x).\"\(target.columns[c].name)\" FROM \(target.name) AS \(x) WHERE \(x).\"\(target.singleKey!.name)\" = \(alias).\"\(t.columns[fk].name)\")"
                return condition(expression, target.columns[c].type, op, values)
            case .quantified(let q, let inverse, let c):
                let inv = t.inverses[inverse]
                let source = schema.tables[inv.source]
                let y = "q\(depth)"
                let link = "\(y).\"\(source.columns[inv.column].name)\" = \(alias).\"\(t.singleKey!.name)\""
                let test = condition("\(y).\"\(source.columns[c].name)\"", source.columns[c].type, op, values)
                switch q {
                case "ANY": return "EXISTS (SELECT 1 FROM \(source.name) AS \(y) WHERE \(link) AND \(test))"
                case "NONE": return "NOT EXISTS (SELECT 1 FROM \(source.name) AS \(y) WHERE \(link) AND \(test))"
                default: return "NOT EXISTS (SELECT 1 FROM \(source.name) AS \(y) WHERE \(link) AND NOT coalesce(\(test), false))"
                }
            case .count(let inverse):
                let inv = t.inverses[inverse]
                let source = schema.tables[inv.source]
                let y = "q\(depth)"
                let expression = "(SELECT count(*) FROM \(source.name) AS \(y) WHERE \(y).\"\(source.columns[inv.column].name)\" = \(alias).\"\(t.singleKey!.name)\")"
                return condition(expression, .bigint, op, values)
            }
        case .not(let inner): return "(NOT \(sql(inner, table: table, alias: alias, depth: depth + 1)))"
        case .and(let a, let b): return "(\(sql(a, table: table, alias: alias, depth: depth + 1)) AND \(sql(b, table: table, alias: alias, depth: depth + 1)))"
        case .or(let a, let b): return "(\(sql(a, table: table, alias: alias, depth: depth + 1)) OR \(sql(b, table: table, alias: alias, depth: depth + 1)))"
        }
    }

    /// One comparison, never NULL: true or false as NSPredicate evaluates it.
    private func condition(_ e: String, _ type: DiffType, _ op: DiffOperator, _ values: [DiffValue]) -> String {
        func lit(_ v: DiffValue) -> String { DiffText.sql(v.canonical, type) }
        func known(_ sql: String) -> String { twoValued ? "coalesce(\(sql), false)" : "(\(sql))" }
        if values.count == 1, values[0] == .null {
            return op == .notEqual ? "(\(e) IS NOT NULL)" : "(\(e) IS NULL)"
        }
        switch op {
        case .equal: return known("\(e) = \(lit(values[0]))")
        case .notEqual: return "(\(e) IS DISTINCT FROM \(lit(values[0])))"
        case .less: return known("\(e) < \(lit(values[0]))")
        case .lessOrEqual: return known("\(e) <= \(lit(values[0]))")
        case .greater: return known("\(e) > \(lit(values[0]))")
        case .greaterOrEqual: return known("\(e) >= \(lit(values[0]))")
        case .equalFolded: return known("lower(\(e)) = lower(\(lit(values[0])))")
        case .beginsWith: return known("starts_with(\(e), \(lit(values[0])))")
        case .beginsWithFolded: return known("starts_with(lower(\(e)), lower(\(lit(values[0]))))")
        case .endsWith: return known("right(\(e), \(values[0].canonical!.count)) = \(lit(values[0]))")
        case .contains: return known("strpos(\(e), \(lit(values[0]))) > 0")
        case .containsFolded: return known("strpos(lower(\(e)), lower(\(lit(values[0])))) > 0")
        case .in: return known("\(e) IN (\(values.map(lit).joined(separator: ", ")))")
        case .between: return known("(\(e) >= \(lit(values[0])) AND \(e) <= \(lit(values[1])))")
        }
    }
}
