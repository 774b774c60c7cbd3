import Foundation

/// SplitMix64: small, fast and seedable, so one seed gives the same schemas and units on
/// every machine (Swift's own generators are not seedable).
struct SeededRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    /// A seed for the `index`th independent stream of `seed`.
    static func mix(_ seed: UInt64, _ index: UInt64) -> UInt64 {
        var random = SeededRandom(seed: seed ^ (index &* 0xD1B5_4A32_D192_ED03))
        _ = random.next()
        return random.next()
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func below(_ n: Int) -> Int {
        precondition(n > 0)
        return Int(next() % UInt64(n))
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + below(range.count) }

    mutating func chance(_ p: Double) -> Bool { Double(next() >> 11) / Double(1 << 53) < p }

    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    mutating func pickOrNil<T>(_ items: [T]) -> T? { items.isEmpty ? nil : pick(items) }

    /// One of `items`, each as likely as its weight.
    mutating func weighted<T>(_ items: [(T, Int)]) -> T {
        var roll = below(items.reduce(0) { $0 + $1.1 })
        for (item, weight) in items {
            if roll < weight { return item }
            roll -= weight
        }
        return items[items.count - 1].0
    }

    mutating func shuffled<T>(_ items: [T]) -> [T] {
        var copy = items
        if copy.count < 2 { return copy }
        for i in stride(from: copy.count - 1, to: 0, by: -1) { copy.swapAt(i, below(i + 1)) }
        return copy
    }
}

// MARK: - Schemas

enum DiffType: Equatable {
    case integer, bigint, text, boolean, uuid

    var sql: String {
        switch self {
        case .integer: "integer"
        case .bigint: "bigint"
        case .text: "text"
        case .boolean: "boolean"
        case .uuid: "uuid"
        }
    }

    /// Typed bare in commands (`42`), not quoted.
    var isNumeric: Bool { self == .integer || self == .bigint }
}

enum DiffKeyKind: String, CaseIterable {
    case identityAlways, identityByDefault, serial, uuidDefault, uuidGiven, textGiven, intGiven
    case compositeFK, compositeGiven, compositeFKGiven

    var isComposite: Bool { self == .compositeFK || self == .compositeGiven || self == .compositeFKGiven }
    /// The server gives the key when the client does not (a sequence or a default).
    var isDefaulted: Bool { self == .identityAlways || self == .identityByDefault || self == .serial || self == .uuidDefault }
    /// A sequence the client may also write past (`id=100000`).
    var takesGivenNumber: Bool { self == .identityByDefault || self == .serial }
}

enum DiffDeleteRule: Equatable {
    case cascade, setNull, restrict

    var sql: String {
        switch self {
        case .cascade: "CASCADE"
        case .setNull: "SET NULL"
        case .restrict: "RESTRICT"
        }
    }
}

struct DiffForeignKey: Equatable {
    var target: Int
    var rule: DiffDeleteRule
    /// The to-one relationship's name: the column without `_id`.
    var relationship: String
}

struct DiffColumn {
    var name: String
    var type: DiffType
    var notNull: Bool
    var unique: Bool
    var isKey: Bool
    var foreignKey: DiffForeignKey?

    /// The name commands use: the relationship's for a foreign key.
    var label: String { foreignKey?.relationship ?? name }
    var isAttribute: Bool { foreignKey == nil }
}

/// A to-many relationship: the inverse of a foreign key of `source`.
struct DiffInverse {
    var name: String
    var source: Int
    var column: Int
}

struct DiffTable {
    var index: Int
    var name: String
    var key: DiffKeyKind
    var columns: [DiffColumn]
    var keyColumns: [Int]
    var inverses: [DiffInverse] = []

    var singleKey: DiffColumn? { keyColumns.count == 1 ? columns[keyColumns[0]] : nil }
    var nonKeyColumns: [Int] { columns.indices.filter { !columns[$0].isKey } }
    var foreignKeys: [Int] { columns.indices.filter { columns[$0].foreignKey != nil } }

    /// `"id"`, or `"k0", "k1"`: the ORDER BY of a comparison.
    var keyList: String { keyColumns.map { "\"\(columns[$0].name)\"" }.joined(separator: ", ") }
}

/// One generated schema: 2 to 6 tables named `s<number>_a`, `s<number>_b`, ..., every key kind,
/// foreign keys between them (acyclic but for self-references) with every delete rule.
struct DiffSchema {
    var number: Int
    var tables: [DiffTable]

    static let letters = ["a", "b", "c", "d", "e", "f"]

    static func generate(number: Int, random: inout SeededRandom) -> DiffSchema {
        var tables: [DiffTable] = []
        let count = random.int(2...6)
        for index in 0..<count {
            let name = "s\(number)_\(letters[index])"
            let targets = tables.filter { $0.singleKey != nil }.map(\.index)
            var kinds: [DiffKeyKind] = [.identityAlways, .identityByDefault, .serial, .uuidDefault, .uuidGiven, .textGiven, .intGiven, .compositeGiven]
            if !targets.isEmpty { kinds += [.compositeFK, .compositeFK, .compositeFKGiven] }
            let key = random.pick(kinds)
            var columns: [DiffColumn] = []
            var fkNumber = 0
            func foreignKey(to target: Int, keyColumn: Bool, notNull: Bool, rule: DiffDeleteRule) -> DiffColumn {
                let type = target == index ? singleKeyType(key) : tables[target].singleKey!.type
                let relationship = "f\(fkNumber)"
                fkNumber += 1
                return DiffColumn(name: relationship + "_id", type: type, notNull: keyColumn || notNull, unique: false, isKey: keyColumn,
                                  foreignKey: DiffForeignKey(target: target, rule: rule, relationship: relationship))
            }
            switch key {
            case .compositeGiven:
                columns.append(DiffColumn(name: "k0", type: .integer, notNull: true, unique: false, isKey: true))
                columns.append(DiffColumn(name: "k1", type: .text, notNull: true, unique: false, isKey: true))
            case .compositeFK:
                columns.append(foreignKey(to: random.pick(targets), keyColumn: true, notNull: true, rule: random.pick([.cascade, .cascade, .restrict])))
                columns.append(foreignKey(to: random.pick(targets), keyColumn: true, notNull: true, rule: random.pick([.cascade, .cascade, .restrict])))
            case .compositeFKGiven:
                columns.append(foreignKey(to: random.pick(targets), keyColumn: true, notNull: true, rule: random.pick([.cascade, .restrict])))
                columns.append(DiffColumn(name: "k0", type: .integer, notNull: true, unique: false, isKey: true))
            default:
                columns.append(DiffColumn(name: "id", type: singleKeyType(key), notNull: true, unique: false, isKey: true))
            }
            for attribute in 0..<random.int(1...4) {
                let type = random.pick([DiffType.integer, .integer, .text, .text, .boolean])
                columns.append(DiffColumn(name: "c\(attribute)", type: type, notNull: random.chance(0.3),
                                          unique: type != .boolean && random.chance(0.2), isKey: false))
            }
            let selfTarget = key.isComposite ? [] : [index]
            let candidates = targets + selfTarget
            if !candidates.isEmpty {
                for _ in 0..<random.weighted([(0, 3), (1, 5), (2, 3), (3, 1)]) {
                    let target = random.pick(candidates + selfTarget)
                    let notNull = random.chance(target == index ? 0.1 : 0.3)
                    let rule: DiffDeleteRule = notNull ? random.pick([.cascade, .restrict]) : random.pick([.cascade, .setNull, .setNull, .restrict])
                    columns.append(foreignKey(to: target, keyColumn: false, notNull: notNull, rule: rule))
                }
            }
            let keyColumns = columns.indices.filter { columns[$0].isKey }
            tables.append(DiffTable(index: index, name: name, key: key, columns: columns, keyColumns: keyColumns))
        }
        // Inverses, named as the server names them: the source pluralised, `_by_<relationship>`
        // when one table has several keys to the same target.
        for source in tables.indices {
            for column in tables[source].foreignKeys {
                let fk = tables[source].columns[column].foreignKey!
                var name = plural(tables[source].name)
                let same = tables[source].foreignKeys.filter { tables[source].columns[$0].foreignKey!.target == fk.target }
                if same.count > 1 { name += "_by_" + fk.relationship }
                tables[fk.target].inverses.append(DiffInverse(name: name, source: source, column: column))
            }
        }
        return DiffSchema(number: number, tables: tables)
    }

    private static func singleKeyType(_ key: DiffKeyKind) -> DiffType {
        switch key {
        case .identityAlways: .bigint
        case .identityByDefault, .serial, .intGiven: .integer
        case .uuidDefault, .uuidGiven: .uuid
        case .textGiven: .text
        case .compositeFK, .compositeGiven, .compositeFKGiven: .integer
        }
    }

    static func plural(_ word: String) -> String {
        let lower = word.lowercased()
        if lower.hasSuffix("s") || lower.hasSuffix("x") || lower.hasSuffix("z") || lower.hasSuffix("ch") || lower.hasSuffix("sh") {
            return word + "es"
        }
        if lower.hasSuffix("y"), let before = lower.dropLast().last, !"aeiou".contains(before) { return word.dropLast() + "ies" }
        return word + "s"
    }

    var ddl: String {
        tables.map { table in
            var lines: [String] = []
            for column in table.columns {
                var line = "  \"\(column.name)\" \(column.type.sql)"
                if column.isKey && table.keyColumns.count == 1 {
                    switch table.key {
                    case .identityAlways: line += " GENERATED ALWAYS AS IDENTITY"
                    case .identityByDefault: line += " GENERATED BY DEFAULT AS IDENTITY"
                    case .serial: line = "  \"\(column.name)\" serial"
                    case .uuidDefault: line += " DEFAULT gen_random_uuid()"
                    default: break
                    }
                    line += " PRIMARY KEY"
                } else if column.notNull {
                    line += " NOT NULL"
                }
                if column.unique { line += " UNIQUE" }
                if let fk = column.foreignKey {
                    let target = tables[fk.target]
                    line += " REFERENCES \(target.name) (\"\(target.singleKey!.name)\") ON DELETE \(fk.rule.sql)"
                }
                lines.append(line)
            }
            if table.keyColumns.count > 1 { lines.append("  PRIMARY KEY (\(table.keyList))") }
            return "CREATE TABLE \(table.name) (\n" + lines.joined(separator: ",\n") + "\n);"
        }.joined(separator: "\n")
    }
}
