import Foundation
import RecordsProtocol
import RecordsClient
import Postgres

/// A disagreement between recordsd and the reference, with what it takes to reproduce it.
struct DiffMismatch {
    var category: String
    var seed: String
    var unit: Int
    var detail: String
    var report: String
}

struct DiffStats {
    var units = 0
    var commands = 0
    var saved = 0
    var refused = 0
    var invalidUnits = 0
    var fixedAndSaved = 0
    var inserted = 0
    var deleted = 0

    mutating func add(_ other: DiffStats) {
        units += other.units
        commands += other.commands
        saved += other.saved
        refused += other.refused
        invalidUnits += other.invalidUnits
        fixedAndSaved += other.fixedAndSaved
        inserted += other.inserted
        deleted += other.deleted
    }
}

/// Runs the units of one schema through a recordsd session and through the reference, and
/// compares after every SAVE.
final class DiffSchemaRun {
    let schema: DiffSchema
    let seed: String
    private(set) var client: LineClient
    /// Runs before each SAVE and gives the client to go on with: HandOffTests moves the
    /// session to another server there, so every SAVE writes a unit that was handed off.
    var beforeSave: ((LineClient) throws -> LineClient)?
    let served: Connection
    let reference: DiffReference
    let generator: DiffGenerator
    private(set) var mismatches: [DiffMismatch] = []
    private(set) var stats = DiffStats()

    /// What both databases hold (they agree, or were made to after a mismatch), in key order.
    private var contents: [[[String?]]]
    /// Creation order of the records, by table and key: the order the generator sees them in.
    private var ordinals: [[String: Int]]
    private var nextOrdinal = 0
    private var fabricated = 0

    // The unit under way, for the report.
    private var unitIndex = 0
    private var transcript: [String] = []
    private var previous: [String] = []
    private var invalid: String?
    private var before: [[[String?]]] = []

    static let maxMismatchesPerSchema = 10

    init(schema: DiffSchema, seed: String, randomSeed: UInt64, client: LineClient, served: Connection, reference: Connection) throws {
        self.schema = schema
        self.seed = seed
        self.client = client
        self.served = served
        self.reference = DiffReference(schema: schema, db: reference)
        generator = DiffGenerator(schema: schema, seed: randomSeed)
        contents = schema.tables.map { _ in [] }
        ordinals = schema.tables.map { _ in [:] }
    }

    func run(units: Int) throws {
        for index in 0..<units {
            unitIndex = index
            try runUnit()
            stats.units += 1
            if mismatches.count >= Self.maxMismatchesPerSchema { return }
        }
    }

    // MARK: - One unit

    private func rowKey(_ row: [String?], _ table: Int) -> String {
        schema.tables[table].keyColumns.map { row[$0] ?? "" }.joined(separator: "\u{1}")
    }

    /// The contents in creation order (records never seen created go last, in key order).
    private func orderedRows() -> [[[String?]]] {
        contents.enumerated().map { table, rows in
            for row in rows where ordinals[table][rowKey(row, table)] == nil {
                ordinals[table][rowKey(row, table)] = nextOrdinal
                nextOrdinal += 1
            }
            return rows.sorted { ordinals[table][rowKey($0, table)]! < ordinals[table][rowKey($1, table)]! }
        }
    }

    private func runUnit() throws {
        generator.rows = orderedRows()
        let unit = generator.generate()
        previous = transcript
        transcript = []
        before = contents
        invalid = unit.invalid
        if unit.invalid != nil { stats.invalidUnits += 1 }
        var placeholders: [String: String] = [:]
        var shown: [String: String] = [:]
        guard try send(unit.commands, placeholders: &placeholders, shown: &shown) else {
            try rollback()
            try checkUnchanged("after the unit was rolled back")
            return
        }
        var layer = unit.layers[0]
        if unit.nestLeftOpen {
            let refused = try exchange("SAVE")
            if !refused.status.hasPrefix("-ERR DENIED") {
                record("SAVE with a nested scratchpad open", "expected -ERR DENIED (MERGE or DISCARD before SAVE), got \(refused.status)")
                if refused.ok { try resyncFromServed() } else { try rollback() }
                return
            }
            try checkUnchanged("after a SAVE refused for its open scratchpad")
            guard try send(unit.fix ?? [], placeholders: &placeholders, shown: &shown) else { try rollback(); return }
            layer = unit.fixedLayer!
            try save(layer, placeholders: placeholders, shown: shown, fix: nil)
            return
        }
        let fix = unit.fix.map { ($0, unit.fixedLayer!) }
        try save(layer, placeholders: placeholders, shown: shown, fix: fix)
    }

    /// Sends `commands` pipelined and checks each reply; false when one was not as expected.
    private func send(_ commands: [DiffCommand], placeholders: inout [String: String], shown: inout [String: String]) throws -> Bool {
        guard !commands.isEmpty else { return true }
        stats.commands += commands.count
        try client.write(commands.map { $0.line + "\n" }.joined())
        var good = true
        for command in commands {
            let reply = try client.readReply()
            transcript.append("> " + command.line)
            transcript += reply.lines.map { "< " + $0 }
            transcript.append("< " + reply.status)
            guard good else { continue }
            switch command.expect {
            case .ok:
                if !reply.ok { good = false; record("command refused", "\(command.line)\nexpected +OK, got \(reply.status)") }
            case .error(let code):
                if !reply.status.hasPrefix("-ERR \(code)") { good = false; record("command not refused", "\(command.line)\nexpected -ERR \(code), got \(reply.status)") }
            case .insert(let placeholder):
                if reply.ok, let ref = reply.status.split(separator: " ").dropFirst().first, ref.hasPrefix("#") {
                    placeholders[placeholder] = String(ref.dropFirst())
                } else {
                    good = false
                    record("command refused", "\(command.line)\nexpected +OK #ref pending insert ..., got \(reply.status)")
                }
            case .read(let ref):
                if reply.status.hasPrefix("-ERR INTERNAL") || reply.status.hasPrefix("-ERR SYNTAX") || reply.status.hasPrefix("-ERR UNKNOWN") {
                    good = false
                    record("read failed", "\(command.line)\ngot \(reply.status)")
                } else if let ref, reply.ok, let line = reply.lines.first, shown[ref] == nil {
                    if let data = line.data(using: .utf8), let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any], let id = object["id"] {
                        shown[ref] = (id as? String) ?? "\(id)"
                    }
                }
            }
        }
        return good
    }

    private func exchange(_ line: String) throws -> WireReply {
        if line == "SAVE", let beforeSave { client = try beforeSave(client) }
        let reply = try client.send(line)
        transcript.append("> " + line)
        transcript += reply.lines.map { "< " + $0 }
        transcript.append("< " + reply.status)
        return reply
    }

    private func rollback() throws {
        let reply = try exchange("ROLLBACK")
        if !reply.ok { record("command refused", "ROLLBACK\nexpected +OK, got \(reply.status)") }
    }

    private func save(_ layer: DiffLayer, placeholders: [String: String], shown: [String: String],
                      fix: ([DiffCommand], DiffLayer)?) throws {
        let reply = try exchange("SAVE")
        if reply.ok {
            try saved(layer, reply, placeholders: placeholders, shown: shown)
            return
        }
        stats.refused += 1
        if reply.status.hasPrefix("-ERR INTERNAL") { record("internal error", "SAVE answered \(reply.status)") }
        try checkUnchanged("after SAVE was refused (\(reply.status))")
        // The reference must refuse it too: keys SAVE never gave are made up.
        var keys: [String: [String]] = [:]
        for insert in layer.inserts where schema.tables[insert.table].key.isDefaulted {
            let table = schema.tables[insert.table]
            fabricated += 1
            keys[insert.ref] = [table.singleKey!.type == .uuid ? String(format: "ffffffff-ffff-4fff-8fff-%012x", fabricated) : String(900_000_000 + fabricated)]
        }
        let outcome = reference.apply(layer, keys: keys, before: contents, commit: false)
        if outcome.error == nil {
            record("SAVE refused a unit the database accepts", "recordsd: \(reply.status)\nreference: the same changes commit (\(outcome.summary))", statements: outcome.statements)
        }
        guard let (commands, fixed) = fix else {
            try rollback()
            return
        }
        var placeholders = placeholders
        var shown = shown
        guard try send(commands, placeholders: &placeholders, shown: &shown) else {
            try rollback()
            return
        }
        let again = try exchange("SAVE")
        if again.ok {
            stats.fixedAndSaved += 1
            try saved(fixed, again, placeholders: placeholders, shown: shown)
            return
        }
        stats.refused += 1
        if again.status.hasPrefix("-ERR INTERNAL") { record("internal error", "SAVE answered \(again.status)") }
        try checkUnchanged("after the fixed unit's SAVE was refused (\(again.status))")
        try rollback()
    }

    /// SAVE said +OK: the reference applies the same changes with the keys SAVE gave, and the
    /// two databases must hold the same rows.
    private func saved(_ layer: DiffLayer, _ reply: WireReply, placeholders: [String: String], shown: [String: String]) throws {
        stats.saved += 1
        if layer.isEmpty {
            if reply.status != "+OK nothing to save" { record("counts differ", "an empty unit: expected +OK nothing to save, got \(reply.status)") }
            return
        }
        // The keys SAVE reported, by the refs the model uses.
        var reported: [String: String] = [:]
        for line in reply.lines where line.hasPrefix("#") {
            let parts = line.dropFirst().split(separator: " ", maxSplits: 2)
            if parts.count == 3 { reported[String(parts[0])] = String(parts[2]) }
        }
        var keys: [String: [String]] = [:]
        var problems: [String] = []
        for insert in layer.inserts {
            let wire = insert.named ? insert.ref : (placeholders[insert.ref] ?? insert.ref)
            let table = schema.tables[insert.table]
            guard let text = reported[wire], let values = parseKey(text, table) else {
                problems.append("#\(wire) \(table.name): no key line in SAVE's reply")
                continue
            }
            keys[insert.ref] = values
            for (position, column) in table.keyColumns.enumerated() {
                guard let given = insert.value(column), given != .null else { continue }
                let expected: String?
                if case .ref(let target) = given {
                    expected = keys[target]?[0] ?? reportedKey(target, layer, reported, placeholders)
                } else {
                    expected = given.canonical
                }
                if let expected, expected != values[position] {
                    problems.append("#\(wire) \(table.name): reported \(table.columns[column].label)=\(values[position]), the unit gave \(expected)")
                }
            }
            if let seen = shown[insert.ref], table.keyColumns.count == 1, seen != values[0] {
                problems.append("#\(wire) \(table.name): GET showed key \(seen), SAVE gave \(values[0])")
            }
        }
        if reply.lines.filter({ $0.hasPrefix("#") }).count != layer.inserts.count {
            problems.append("SAVE reported \(reply.lines.filter { $0.hasPrefix("#") }.count) keys for \(layer.inserts.count) inserts")
        }
        if !problems.isEmpty { record("reported keys", problems.joined(separator: "\n")) }
        // Keys still missing (no line for them) are made up so the reference can go on.
        for insert in layer.inserts where keys[insert.ref] == nil {
            fabricated += 1
            keys[insert.ref] = schema.tables[insert.table].keyColumns.map { _ in String(900_000_000 + fabricated) }
        }
        // Creation order first: after a mismatch (and a resync) the generator must still see
        // these records in the same order on every run.
        for insert in layer.inserts {
            ordinals[insert.table][keys[insert.ref]!.joined(separator: "\u{1}")] = nextOrdinal
            nextOrdinal += 1
        }
        let outcome = reference.apply(layer, keys: keys, before: contents, commit: true)
        if let error = outcome.error {
            record("SAVE accepted a unit the database refuses", "recordsd: \(reply.status)\nreference: \(error)", statements: outcome.statements)
            try resyncFromServed()
            return
        }
        let now = try DiffReference.contents(schema, served)
        let expected = try DiffReference.contents(schema, reference.db)
        if now != expected {
            record("contents differ", "recordsd: \(reply.status)\n" + difference(now, expected, left: "recordsd", right: "reference"), statements: outcome.statements)
            try resyncFromServed()
            return
        }
        let counts = reply.status.replacingOccurrences(of: "+OK saved: ", with: "").split(separator: " (").first.map(String.init) ?? ""
        if counts != outcome.summary {
            record("counts differ", "recordsd: \(reply.status)\nreference: \(outcome.summary)", statements: outcome.statements)
        }
        stats.inserted += outcome.inserted
        stats.deleted += outcome.deleted + outcome.cascaded
        contents = expected
    }

    private func reportedKey(_ ref: String, _ layer: DiffLayer, _ reported: [String: String], _ placeholders: [String: String]) -> String? {
        guard let insert = layer.inserts.first(where: { $0.ref == ref }) else { return nil }
        let wire = insert.named ? ref : (placeholders[ref] ?? ref)
        return reported[wire].flatMap { parseKey($0, schema.tables[insert.table])?.first }
    }

    /// `42`, `"text"`, or `f0=1 k1="x"`: the key columns' values in key order.
    func parseKey(_ text: String, _ table: DiffTable) -> [String]? {
        let chars = Array(text)
        func value(_ start: Int) -> (String, Int)? {
            if start < chars.count, chars[start] == "\"" { return DiffText.unquote(chars, from: start) }
            var end = start
            while end < chars.count, chars[end] != " " { end += 1 }
            return (String(chars[start..<end]), end)
        }
        if table.keyColumns.count == 1 {
            guard let (v, end) = value(0), end == chars.count else { return nil }
            return [v]
        }
        var found: [String: String] = [:]
        var i = 0
        while i < chars.count {
            guard let equals = chars[i...].firstIndex(of: "=") else { return nil }
            let label = String(chars[i..<equals])
            guard let (v, end) = value(equals + 1) else { return nil }
            found[label] = v
            i = end
            while i < chars.count, chars[i] == " " { i += 1 }
        }
        let values = table.keyColumns.compactMap { found[table.columns[$0].label] }
        return values.count == table.keyColumns.count ? values : nil
    }

    // MARK: - Checks

    /// After a refused SAVE (or a rollback) recordsd's database must hold what it held.
    private func checkUnchanged(_ when: String) throws {
        let now = try DiffReference.contents(schema, served)
        if now != contents {
            record("refused SAVE changed the database", when + "\n" + difference(now, contents, left: "recordsd", right: "before"))
            try resyncFromServed()
        }
    }

    /// Makes the reference hold what recordsd's database holds, to go on after a mismatch.
    private func resyncFromServed() throws {
        let now = try DiffReference.contents(schema, served)
        try reference.resync(to: now)
        contents = now
    }

    private func difference(_ a: [[[String?]]], _ b: [[[String?]]], left: String, right: String) -> String {
        var out: [String] = []
        for (index, table) in schema.tables.enumerated() where a[index] != b[index] {
            let keysA = Dictionary(a[index].map { (rowKey($0, index), $0) }, uniquingKeysWith: { x, _ in x })
            let keysB = Dictionary(b[index].map { (rowKey($0, index), $0) }, uniquingKeysWith: { x, _ in x })
            for row in a[index] where keysB[rowKey(row, index)] == nil { out.append("  \(table.name) only in \(left): \(show(row))") }
            for row in b[index] where keysA[rowKey(row, index)] == nil { out.append("  \(table.name) only in \(right): \(show(row))") }
            for row in a[index] {
                if let other = keysB[rowKey(row, index)], other != row {
                    out.append("  \(table.name) \(left): \(show(row))\n  \(table.name) \(right): \(show(other))")
                }
            }
        }
        return out.joined(separator: "\n")
    }

    private func show(_ row: [String?]) -> String {
        "(" + row.map { $0.map { quotedString($0) } ?? "NULL" }.joined(separator: ", ") + ")"
    }

    private func record(_ category: String, _ detail: String, statements: [String] = []) {
        var report = "[\(category)] seed \(seed), unit \(unitIndex)\n\(detail)\n"
        report += "-- schema:\n\(schema.ddl)\n"
        report += "-- rows before the unit (columns in DDL order):\n"
        for (index, table) in schema.tables.enumerated() {
            report += "  \(table.name): " + (before[index].isEmpty ? "(none)" : before[index].prefix(60).map(show).joined(separator: " ")) + "\n"
        }
        if !previous.isEmpty { report += "-- the unit before it (> sent, < received):\n" + previous.joined(separator: "\n") + "\n" }
        report += "-- the unit (> sent, < received)" + (invalid.map { ", made invalid on purpose (\($0)) before its fix" } ?? "") + ":\n"
            + transcript.joined(separator: "\n") + "\n"
        if !statements.isEmpty { report += "-- the reference transaction:\n" + statements.joined(separator: ";\n") + ";\n" }
        mismatches.append(DiffMismatch(category: category, seed: seed, unit: unitIndex, detail: detail, report: report))
    }
}
