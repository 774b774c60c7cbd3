/// A parsed WHERE clause, NSPredicate-like. Pure syntax: names are checked against the model
/// when it is compiled to SQL. AND and OR hold all their operands in one list, so a predicate
/// of thousands of terms is a wide tree, never a deep one.
public indirect enum Predicate: Equatable, Sendable, Codable {
    case constant(Bool)
    case not(Predicate)
    case and([Predicate])
    case or([Predicate])
    case comparison(Comparison)
    /// `SUBQUERY(employees, $e, $e.age > 30 AND $e.gender == 1).@count > 2`.
    case subquery(Subquery)
}

/// NSPredicate's SUBQUERY: the records of a to-many key path that match a predicate of their
/// own (its key paths start with the variable), counted and compared.
public struct Subquery: Equatable, Sendable, Codable {
    public var collection: String
    public var variable: String
    public var predicate: Predicate
    public var op: Comparison.Operator
    public var count: Int
    public var offset: Int
}

public struct Comparison: Equatable, Sendable, Codable {
    public enum Quantifier: String, Equatable, Sendable, Codable { case any = "ANY", all = "ALL", none = "NONE" }

    public enum Operator: String, Equatable, Sendable, CaseIterable, Codable {
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
        case beginsWith = "BEGINSWITH", endsWith = "ENDSWITH", contains = "CONTAINS", like = "LIKE", matches = "MATCHES"
        case `in` = "IN", between = "BETWEEN"

        /// The comparisons written as symbols, with the spellings each takes (one table for
        /// predicates, SUBQUERY's count and HAVING).
        public init?(symbol: String) {
            switch symbol {
            case "==", "=": self = .equal
            case "!=", "<>": self = .notEqual
            case "<": self = .less
            case "<=", "=<": self = .lessOrEqual
            case ">": self = .greater
            case ">=", "=>": self = .greaterOrEqual
            default: return nil
            }
        }

        public var isStringOperator: Bool {
            switch self {
            case .beginsWith, .endsWith, .contains, .like, .matches: true
            default: false
            }
        }
    }

    public var quantifier: Quantifier?
    /// `department.name`, `employees.@count`.
    public var keyPath: String
    public var keyPathOffset: Int
    public var op: Operator
    /// `[c]`: case-insensitive. `[d]`: diacritic-insensitive.
    public var caseInsensitive: Bool
    public var diacriticInsensitive: Bool
    /// One value, or the list of `IN {..}` / `BETWEEN {low, high}`.
    public var values: [Value]
    public var valueOffset: Int
    /// `first_name == last_name`, `age > department.number`: the right side is another key
    /// path of the same record (`values` is then empty).
    public var rightKeyPath: String? = nil

    public var comparesFields: Bool { rightKeyPath != nil }
}

extension Predicate {
    /// The predicate as text without the positions it was typed at: the same for the same
    /// query however it was spaced (a cursor's fingerprint).
    var canonical: String {
        switch self {
        case .constant(let value): value ? "TRUE" : "FALSE"
        case .not(let inner): "NOT(" + inner.canonical + ")"
        case .and(let operands): "AND(" + operands.map(\.canonical).joined(separator: ",") + ")"
        case .or(let operands): "OR(" + operands.map(\.canonical).joined(separator: ",") + ")"
        case .subquery(let s):
            "SUBQUERY(" + [s.collection.lowercased(), s.variable, s.predicate.canonical, s.op.rawValue, String(s.count)].joined(separator: "\u{1}") + ")"
        case .comparison(let c):
            [c.quantifier?.rawValue ?? "", c.keyPath.lowercased(), c.op.rawValue, (c.caseInsensitive ? "c" : "") + (c.diacriticInsensitive ? "d" : ""),
             c.values.map { String(reflecting: $0) }.joined(separator: ","), c.rightKeyPath.map { "@" + $0.lowercased() } ?? ""].joined(separator: "\u{1}")
        }
    }
}
