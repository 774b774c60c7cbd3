import Foundation

/// A stored record: its table and the text of each key column, as PostgreSQL prints it.
struct DiffKey: Hashable {
    var table: Int
    var values: [String]
}

struct DiffInsert {
    var ref: String
    var table: Int
    var fields: [(column: Int, value: DiffValue)]
    /// Inserted `AS #ref`; an unnamed insert's ref is a placeholder until its reply names it.
    var named: Bool

    func value(_ column: Int) -> DiffValue? { fields.first { $0.column == column }?.value }

    mutating func set(_ column: Int, _ value: DiffValue) {
        if let i = fields.firstIndex(where: { $0.column == column }) { fields[i].value = value } else { fields.append((column, value)) }
    }

    mutating func remove(_ column: Int) { fields.removeAll { $0.column == column } }

    var refs: [String] { fields.compactMap { if case .ref(let r) = $0.value { r } else { nil } } }
}

struct DiffUpdate {
    var key: DiffKey
    var fields: [(column: Int, value: DiffValue)]

    mutating func set(_ column: Int, _ value: DiffValue) {
        if let i = fields.firstIndex(where: { $0.column == column }) { fields[i].value = value } else { fields.append((column, value)) }
    }
}

struct DiffBulk {
    var table: Int
    var predicate: DiffPredicate
    /// nil: DELETE ... WHERE.
    var sets: [(column: Int, value: DiffValue)]?
}

/// One scratchpad of the unit as the test understands the protocol: what SAVE must write.
struct DiffLayer {
    var inserts: [DiffInsert] = []
    var updates: [DiffUpdate] = []
    var bulk: [DiffBulk] = []
    var deletes: [DiffKey] = []

    var isEmpty: Bool { inserts.isEmpty && updates.isEmpty && bulk.isEmpty && deletes.isEmpty }

    func insertIndex(_ ref: String) -> Int? { inserts.firstIndex { $0.ref == ref } }

    /// Whether a DELETE of the pending insert `ref` is refused: something else points at it
    /// (an insert pointing at itself goes with its pointer).
    func hasDependents(_ ref: String) -> Bool {
        inserts.contains { $0.ref != ref && $0.refs.contains(ref) }
            || updates.contains { $0.fields.contains { $0.value == .ref(ref) } }
            || bulk.contains { ($0.sets ?? []).contains { $0.value == .ref(ref) } }
    }

    mutating func setUpdate(_ key: DiffKey, _ fields: [(column: Int, value: DiffValue)]) {
        if let i = updates.firstIndex(where: { $0.key == key }) {
            for f in fields { updates[i].set(f.column, f.value) }
        } else {
            var update = DiffUpdate(key: key, fields: [])
            for f in fields { update.set(f.column, f.value) }
            updates.append(update)
        }
    }
}

/// What the test expects of a command's reply.
enum DiffExpect {
    case ok
    /// `-ERR CODE ...`.
    case error(String)
    /// A read: any answer but INTERNAL; a GET of a pending record may show the key SAVE must give.
    case read(showsKeyOf: String?)
    /// An INSERT without AS: its reply names the ref that replaces the placeholder.
    case insert(placeholder: String)
}

struct DiffCommand {
    var line: String
    var expect: DiffExpect
}

/// A generated unit: its commands, the unit they leave, and how to fix it if SAVE refuses it.
struct DiffGeneratedUnit {
    var commands: [DiffCommand] = []
    var layers: [DiffLayer] = [DiffLayer()]
    var fix: [DiffCommand]?
    var fixedLayer: DiffLayer?
    /// A nested scratchpad is left open on purpose: SAVE must be DENIED, then MERGE saves.
    var nestLeftOpen = false
    /// What was done on purpose to make SAVE fail, if anything.
    var invalid: String?
}

/// Generates units against the current contents of one schema. Choices depend only on the
/// seed and on the contents, listed in the order the records were created, so a seed replays.
final class DiffGenerator {
    let schema: DiffSchema
    var random: SeededRandom
    /// Each table's rows in creation order, every column as text.
    var rows: [[[String?]]] = []
    private var counter = 0

    private var layers: [DiffLayer] = [DiffLayer()]
    private var current: DiffLayer {
        get { layers[layers.count - 1] }
        set { layers[layers.count - 1] = newValue }
    }
    private var commands: [DiffCommand] = []

    static let texts = ["a", "b", "ab", "ba", "b c", "Ab", "q\"uote", "back\\slash", "ünï", "tab\tx", "", "x#1", "+p", "-m", "!b", "two\nlines", "nil", "ABC"]
    static let fragments = ["a", "b", "ab", "A", "x", "-", "q", "c"]

    init(schema: DiffSchema, seed: UInt64) {
        self.schema = schema
        random = SeededRandom(seed: seed)
        rows = schema.tables.map { _ in [] }
    }

    private func fresh() -> Int {
        counter += 1
        return counter
    }

    func freshUUID() -> String {
        let a = random.next(), b = random.next()
        let hex = String(format: "%016llx%016llx", a, b)
        let c = Array(hex)
        let variant = ["8", "9", "a", "b"][Int(b % 4)]
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-4" + String(c[13..<16]) + "-" + variant + String(c[17..<20]) + "-" + String(c[20..<32])
    }

    private func freshText(_ prefix: String) -> String {
        let n = fresh()
        switch random.below(6) {
        case 0: return "\(prefix) \(n)"
        case 1: return "\(prefix)\"\(n)"
        case 2: return "\(prefix)\\\(n)"
        default: return "\(prefix)\(n)"
        }
    }

    // MARK: - Naming records

    func key(of row: [String?], in table: Int) -> DiffKey {
        DiffKey(table: table, values: schema.tables[table].keyColumns.map { row[$0] ?? "" })
    }

    /// A stored record's key as a to-one relationship's value.
    private func value(of row: [String?], in table: Int) -> DiffValue {
        let key = schema.tables[table].singleKey!
        let text = row[schema.tables[table].keyColumns[0]]!
        return key.type.isNumeric ? .int(Int(text)!) : .text(text)
    }

    private func word(_ value: DiffValue, _ type: DiffType) -> String {
        value.word(upper: type == .uuid && random.chance(0.2))
    }

    private func label(_ table: Int, _ column: Int) -> String {
        let c = schema.tables[table].columns[column]
        if c.foreignKey != nil && random.chance(0.15) { return c.name }
        return c.label
    }

    private func entity(_ table: Int) -> String {
        let name = schema.tables[table].name
        return random.chance(0.05) ? name.uppercased() : name
    }

    /// How a command names a stored record: its key, its key columns, or now and then a unique key.
    private func address(_ key: DiffKey, row: [String?]?, set: Bool) -> String {
        let table = schema.tables[key.table]
        if let row, uniqueAddressIsSafe(key.table), random.chance(0.2),
           let column = table.nonKeyColumns.first(where: { table.columns[$0].unique && table.columns[$0].isAttribute && row[$0] != nil }) {
            let c = table.columns[column]
            let v: DiffValue = c.type.isNumeric ? .int(Int(row[column]!)!) : .text(row[column]!)
            return "\(c.name)=\(v.word())" + (set ? " SET" : "")
        }
        if table.keyColumns.count == 1 {
            let c = table.columns[table.keyColumns[0]]
            let v: DiffValue = c.type.isNumeric ? .int(Int(key.values[0])!) : .text(key.values[0])
            return word(v, c.type) + (set && random.chance(0.5) ? " SET" : "")
        }
        let parts = zip(table.keyColumns, key.values).map { column, text -> String in
            let c = table.columns[column]
            let v: DiffValue = c.type.isNumeric ? .int(Int(text)!) : .text(text)
            return "\(label(key.table, column))=\(word(v, c.type))"
        }
        return parts.joined(separator: " ") + (set ? " SET" : "")
    }

    /// A unique key names a record through a read of the unit's view: only when no pending
    /// change can make that read ambiguous or miss.
    private func uniqueAddressIsSafe(_ table: Int) -> Bool {
        layers.allSatisfy { layer in
            layer.deletes.isEmpty && layer.bulk.isEmpty
                && !layer.inserts.contains { $0.table == table }
                && !layer.updates.contains { $0.key.table == table }
        }
    }

    // MARK: - Values

    private func attributeValue(_ table: Int, _ column: Int, nullable: Bool) -> DiffValue {
        let c = schema.tables[table].columns[column]
        if nullable && !c.notNull && random.chance(0.15) { return .null }
        switch c.type {
        case .integer, .bigint: return c.unique ? .int(1000 + fresh()) : .int(random.int(-1...9))
        case .text: return c.unique ? .text(freshText("u")) : .text(random.pick(Self.texts))
        case .boolean: return .bool(random.chance(0.5))
        case .uuid: return .text(freshUUID())
        }
    }

    /// A target for a to-one relationship: a pending record of the target, or a stored one.
    private func reference(_ table: Int, _ column: Int, excluding: String? = nil) -> DiffValue? {
        let target = schema.tables[table].columns[column].foreignKey!.target
        let refs = current.inserts.filter { $0.table == target && $0.named && $0.ref != excluding }.map(\.ref)
        if !refs.isEmpty && (rows[target].isEmpty || random.chance(0.45)) { return .ref(random.pick(refs)) }
        if let row = random.pickOrNil(rows[target]) { return value(of: row, in: target) }
        return nil
    }

    /// Whether insert `from` reaches `to` through references that may not be nil.
    private func reaches(_ from: String, _ to: String) -> Bool {
        var seen: Set<String> = []
        var frontier = [from]
        while let ref = frontier.popLast() {
            if ref == to { return true }
            guard seen.insert(ref).inserted, let i = current.insertIndex(ref) else { continue }
            let insert = current.inserts[i]
            let table = schema.tables[insert.table]
            for field in insert.fields {
                guard case .ref(let target) = field.value, target != ref, table.columns[field.column].notNull else { continue }
                frontier.append(target)
            }
        }
        return false
    }

    private func assignments(_ fields: [(column: Int, value: DiffValue)], _ table: Int) -> String {
        fields.map { " \(label(table, $0.column))=\(word($0.value, schema.tables[table].columns[$0.column].type))" }.joined()
    }

    // MARK: - Units

    func generate() -> DiffGeneratedUnit {
        layers = [DiffLayer()]
        commands = []
        var unit = DiffGeneratedUnit()
        // Mostly short units; now and then a long one, for multi-row statements and orderings;
        // rarely a bulk of one table, more rows than go by INSERT (`WritePlan.copiedAbove`).
        if random.chance(0.004) {
            let table = random.below(schema.tables.count)
            for _ in 0..<random.int(1_001...1_040) { _ = insert(table) }
        }
        for _ in 0..<(random.chance(0.06) ? random.int(12...30) : random.int(1...9)) { step() }
        while layers.count > 1 {
            if random.chance(0.7) {
                commands.append(DiffCommand(line: "MERGE", expect: .ok))
                let top = layers.removeLast()
                current = top
            } else {
                commands.append(DiffCommand(line: "DISCARD", expect: .ok))
                layers.removeLast()
            }
        }
        if random.chance(0.14) { invalidate(&unit) }
        unit.commands = commands
        unit.layers = layers
        return unit
    }

    private func step() {
        let action = random.weighted([
            ("insert", 30), ("updateStored", 12), ("updatePending", 8), ("deleteStored", 8), ("deletePending", 3),
            ("bulkUpdate", 7), ("bulkDelete", 5), ("nest", layers.count < 3 ? 3 : 0), ("close", layers.count > 1 ? 6 : 0),
            ("read", 4), ("rollback", 1), ("error", 3),
        ])
        switch action {
        case "insert": _ = insert(random.below(schema.tables.count))
        case "updateStored": updateStored()
        case "updatePending": updatePending()
        case "deleteStored": deleteStored()
        case "deletePending": deletePending()
        case "bulkUpdate": bulkUpdate()
        case "bulkDelete": bulkDelete()
        case "nest":
            commands.append(DiffCommand(line: "NEST", expect: .ok))
            layers.append(current)
        case "close":
            if random.chance(0.6) {
                commands.append(DiffCommand(line: "MERGE", expect: .ok))
                let top = layers.removeLast()
                current = top
            } else {
                commands.append(DiffCommand(line: "DISCARD", expect: .ok))
                layers.removeLast()
            }
        case "read": read()
        case "rollback":
            commands.append(DiffCommand(line: "ROLLBACK", expect: .ok))
            layers = [DiffLayer()]
        default: expectedError()
        }
    }

    /// A valid INSERT of `table`, when the records it must point at exist; returns its ref.
    @discardableResult
    private func insert(_ table: Int, named forced: Bool = false) -> String? {
        guard let (insert, follow) = insertFields(table, named: forced || random.chance(0.9)) else { return nil }
        let t = schema.tables[table]
        let line = "INSERT \(entity(table))" + (insert.named ? " AS #\(insert.ref)" : "") + assignments(insert.fields, table)
        commands.append(DiffCommand(line: line, expect: insert.named ? .ok : .insert(placeholder: insert.ref)))
        current.inserts.append(insert)
        if let column = follow {
            // A required reference to its own table with nothing to point at: itself.
            commands.append(DiffCommand(line: "UPDATE \(t.name) #\(insert.ref) \(label(table, column))=#\(insert.ref)", expect: .ok))
            current.inserts[current.inserts.count - 1].set(column, .ref(insert.ref))
        }
        return insert.ref
    }

    private func insertFields(_ table: Int, named: Bool) -> (DiffInsert, Int?)? {
        let t = schema.tables[table]
        let ref = named ? "n\(fresh())" : "?\(fresh())"
        var insert = DiffInsert(ref: ref, table: table, fields: [], named: named)
        var selfPointing: Int?
        switch t.key {
        case .identityAlways: break
        case .identityByDefault, .serial:
            if random.chance(0.1) { insert.set(t.keyColumns[0], .int(100_000 + 1000 * fresh())) }
        case .uuidDefault:
            if random.chance(0.1) { insert.set(t.keyColumns[0], .text(freshUUID())) }
        case .uuidGiven: insert.set(t.keyColumns[0], .text(freshUUID()))
        case .textGiven: insert.set(t.keyColumns[0], .text(freshText("k")))
        case .intGiven: insert.set(t.keyColumns[0], .int(10_000 + fresh()))
        case .compositeGiven:
            insert.set(0, .int(fresh()))
            insert.set(1, .text(random.chance(0.5) ? random.pick(Self.texts) : freshText("k")))
        case .compositeFKGiven:
            guard let first = reference(table, 0) else { return nil }
            insert.set(0, first)
            insert.set(1, .int(fresh()))
        case .compositeFK:
            var found = false
            for _ in 0..<8 {
                guard let first = reference(table, 0), let second = reference(table, 1) else { return nil }
                if !pairTaken(table, first, second) {
                    insert.set(0, first)
                    insert.set(1, second)
                    found = true
                    break
                }
            }
            guard found else { return nil }
        }
        for column in random.shuffled(t.nonKeyColumns) {
            let c = t.columns[column]
            if c.foreignKey != nil {
                if c.notNull {
                    if let v = reference(table, column) {
                        insert.set(column, v)
                    } else if c.foreignKey!.target == table && named {
                        selfPointing = column
                    } else {
                        return nil
                    }
                } else {
                    switch random.below(20) {
                    case 0..<10: if let v = reference(table, column) { insert.set(column, v) }
                    case 10..<13: insert.set(column, .null)
                    default: break
                    }
                }
            } else if c.notNull {
                insert.set(column, attributeValue(table, column, nullable: false))
            } else {
                switch random.below(20) {
                case 0..<11: insert.set(column, attributeValue(table, column, nullable: false))
                case 11..<13: insert.set(column, .null)
                default: break
                }
            }
        }
        insert.fields = random.shuffled(insert.fields)
        return (insert, selfPointing)
    }

    /// A join record with these two ends exists or is pending.
    private func pairTaken(_ table: Int, _ a: DiffValue, _ b: DiffValue) -> Bool {
        if layers.contains(where: { $0.inserts.contains { $0.table == table && $0.value(0) == a && $0.value(1) == b } }) { return true }
        guard let x = a.canonical, let y = b.canonical else { return false }
        return rows[table].contains { $0[0] == x && $0[1] == y }
    }

    private func storedCandidates(_ table: Int) -> [[String?]] {
        let deleted = Set(current.deletes)
        return rows[table].filter { !deleted.contains(key(of: $0, in: table)) }
    }

    private func newValues(_ table: Int, count: Int, pending: String?, bulk: Bool) -> [(column: Int, value: DiffValue)] {
        let t = schema.tables[table]
        var columns = t.nonKeyColumns
        if bulk { columns = columns.filter { !t.columns[$0].unique || random.chance(0.03) } }
        var fields: [(column: Int, value: DiffValue)] = []
        for column in random.shuffled(columns).prefix(count) {
            let c = t.columns[column]
            if c.foreignKey != nil {
                if !c.notNull && random.chance(0.2) {
                    fields.append((column, .null))
                } else if let pending, c.notNull {
                    // From a pending insert, a required reference must not close a loop.
                    let refs = current.inserts.filter { $0.table == c.foreignKey!.target && $0.named && ($0.ref == pending || !reaches($0.ref, pending)) }.map(\.ref)
                    if !refs.isEmpty && random.chance(0.5) {
                        fields.append((column, .ref(random.pick(refs))))
                    } else if let row = random.pickOrNil(rows[c.foreignKey!.target]) {
                        fields.append((column, value(of: row, in: c.foreignKey!.target)))
                    }
                } else if pending != nil {
                    // A nullable reference may point anywhere, later inserts and loops included.
                    let refs = current.inserts.filter { $0.table == c.foreignKey!.target && $0.named }.map(\.ref)
                    if !refs.isEmpty && random.chance(0.6) {
                        fields.append((column, .ref(random.pick(refs))))
                    } else if let row = random.pickOrNil(rows[c.foreignKey!.target]) {
                        fields.append((column, value(of: row, in: c.foreignKey!.target)))
                    }
                } else if let v = reference(table, column) {
                    fields.append((column, v))
                }
            } else {
                fields.append((column, attributeValue(table, column, nullable: true)))
            }
        }
        return fields
    }

    private func updateStored() {
        let tables = schema.tables.indices.filter { !schema.tables[$0].nonKeyColumns.isEmpty && !storedCandidates($0).isEmpty }
        guard let table = random.pickOrNil(tables) else { return }
        let row = random.pick(storedCandidates(table))
        let key = self.key(of: row, in: table)
        let fields = newValues(table, count: random.int(1...2), pending: nil, bulk: false)
        guard !fields.isEmpty else { return }
        commands.append(DiffCommand(line: "UPDATE \(entity(table)) \(address(key, row: row, set: true))\(assignments(fields, table))", expect: .ok))
        current.setUpdate(key, fields)
    }

    private func updatePending() {
        let candidates = current.inserts.filter { $0.named && !schema.tables[$0.table].nonKeyColumns.isEmpty }
        guard let insert = random.pickOrNil(candidates) else { return }
        var fields = newValues(insert.table, count: random.int(1...2), pending: insert.ref, bulk: false)
        let t = schema.tables[insert.table]
        if (t.key == .textGiven || t.key == .intGiven || t.key == .uuidGiven) && random.chance(0.1) {
            // A pending record's given key may still change; what points at it follows.
            fields.append((t.keyColumns[0], t.key == .intGiven ? .int(10_000 + fresh()) : (t.key == .uuidGiven ? .text(freshUUID()) : .text(freshText("k")))))
        }
        guard !fields.isEmpty else { return }
        commands.append(DiffCommand(line: "UPDATE \(entity(insert.table)) #\(insert.ref)\(random.chance(0.3) ? " SET" : "")\(assignments(fields, insert.table))", expect: .ok))
        let i = current.insertIndex(insert.ref)!
        for f in fields { current.inserts[i].set(f.column, f.value) }
    }

    /// Records that point at `key` with a RESTRICT rule, as the contents stand.
    private func restricting(_ key: DiffKey) -> [DiffKey] {
        guard schema.tables[key.table].singleKey != nil else { return [] }
        var found: [DiffKey] = []
        for inverse in schema.tables[key.table].inverses {
            let source = schema.tables[inverse.source]
            guard source.columns[inverse.column].foreignKey!.rule == .restrict else { continue }
            for row in rows[inverse.source] where row[inverse.column] == key.values[0] {
                found.append(self.key(of: row, in: inverse.source))
            }
        }
        return found
    }

    private func deleteStored() {
        let tables = schema.tables.indices.filter { !storedCandidates($0).isEmpty }
        guard let table = random.pickOrNil(tables) else { return }
        var candidates = storedCandidates(table)
        if random.chance(0.8) {
            let free = candidates.filter { restricting(self.key(of: $0, in: table)).isEmpty }
            if !free.isEmpty { candidates = free }
        }
        let row = random.pick(candidates)
        let key = self.key(of: row, in: table)
        commands.append(DiffCommand(line: "DELETE \(entity(table)) \(address(key, row: row, set: false))", expect: .ok))
        current.updates.removeAll { $0.key == key }
        current.deletes.append(key)
        if random.chance(0.05) {
            commands.append(DiffCommand(line: "DELETE \(schema.tables[table].name) \(address(key, row: nil, set: false))", expect: .ok))
        }
    }

    private func deletePending() {
        let candidates = current.inserts.filter { $0.named && !current.hasDependents($0.ref) }
        guard let insert = random.pickOrNil(candidates) else { return }
        commands.append(DiffCommand(line: "DELETE \(entity(insert.table)) #\(insert.ref)", expect: .ok))
        current.inserts.remove(at: current.insertIndex(insert.ref)!)
    }

    private func bulkUpdate() {
        let tables = schema.tables.indices.filter { !schema.tables[$0].nonKeyColumns.isEmpty }
        guard let table = random.pickOrNil(tables) else { return }
        var fields = newValues(table, count: random.int(1...2), pending: nil, bulk: true)
        // Never nil into a required column here: that is an invalid unit of its own.
        fields = fields.filter { !(schema.tables[table].columns[$0.column].notNull && $0.value == .null) }
        guard !fields.isEmpty else { return }
        let predicate = self.predicate(table, depth: 0)
        let text = DiffPredicateWriter(schema: schema).text(predicate, table: table, symbols: random.chance(0.2))
        commands.append(DiffCommand(line: "UPDATE \(entity(table)) WHERE \(text) SET" + assignments(fields, table), expect: .ok))
        current.bulk.append(DiffBulk(table: table, predicate: predicate, sets: fields))
    }

    private func bulkDelete() {
        let table = random.below(schema.tables.count)
        let predicate = self.predicate(table, depth: 0)
        let text = DiffPredicateWriter(schema: schema).text(predicate, table: table, symbols: random.chance(0.2))
        commands.append(DiffCommand(line: "DELETE \(entity(table)) WHERE \(text)", expect: .ok))
        current.bulk.append(DiffBulk(table: table, predicate: predicate, sets: nil))
    }

    private func read() {
        let table = random.below(schema.tables.count)
        let t = schema.tables[table]
        let pending = current.inserts.filter { $0.table == table && $0.named }
        if t.key.isDefaulted, let insert = random.pickOrNil(pending), random.chance(0.6) {
            commands.append(DiffCommand(line: "GET \(t.name) #\(insert.ref)", expect: .read(showsKeyOf: insert.ref)))
            return
        }
        switch random.below(3) {
        case 0: commands.append(DiffCommand(line: "COUNT \(t.name)", expect: .read(showsKeyOf: nil)))
        case 1:
            let text = DiffPredicateWriter(schema: schema).text(predicate(table, depth: 0), table: table, symbols: false)
            commands.append(DiffCommand(line: "COUNT \(t.name) WHERE \(text)", expect: .read(showsKeyOf: nil)))
        default:
            // Every record, or those a predicate picks: which records a read saw (and keeps the
            // versions of) must not depend on the order of random uuid keys, or a seed would
            // not replay.
            let filter = random.chance(0.5) ? " WHERE " + DiffPredicateWriter(schema: schema).text(predicate(table, depth: 0), table: table, symbols: false) : ""
            commands.append(DiffCommand(line: "FIND \(t.name)\(filter)", expect: .read(showsKeyOf: nil)))
        }
    }

    /// A command the server must refuse, leaving the unit as it was.
    private func expectedError() {
        switch random.below(5) {
        case 0:
            // UPDATE of a record pending deletion.
            guard let key = random.pickOrNil(current.deletes), !schema.tables[key.table].nonKeyColumns.isEmpty else { return }
            let column = random.pick(schema.tables[key.table].nonKeyColumns.filter { schema.tables[key.table].columns[$0].isAttribute } + [-1])
            guard column >= 0 else { return }
            let v = attributeValue(key.table, column, nullable: false)
            commands.append(DiffCommand(line: "UPDATE \(schema.tables[key.table].name) \(address(key, row: nil, set: true)) \(schema.tables[key.table].columns[column].name)=\(v.word())", expect: .error("VALIDATION")))
        case 1:
            // UPDATE of a record that does not exist.
            let table = random.below(schema.tables.count)
            let t = schema.tables[table]
            guard let key = t.singleKey, let column = t.nonKeyColumns.first(where: { t.columns[$0].isAttribute }) else { return }
            let missing: DiffValue = key.type.isNumeric ? .int(999_999_999) : (key.type == .uuid ? .text(freshUUID()) : .text("missing\(fresh())"))
            commands.append(DiffCommand(line: "UPDATE \(t.name) \(missing.word()) SET \(t.columns[column].name)=\(attributeValue(table, column, nullable: false).word())", expect: .error("NOT_FOUND")))
        case 2:
            // DELETE of a pending record that others point at.
            guard let insert = random.pickOrNil(current.inserts.filter { $0.named && current.hasDependents($0.ref) }) else { return }
            commands.append(DiffCommand(line: "DELETE \(schema.tables[insert.table].name) #\(insert.ref)", expect: .error("DENIED")))
        case 3:
            // A string where a number goes.
            let table = random.below(schema.tables.count)
            let t = schema.tables[table]
            guard let column = t.nonKeyColumns.first(where: { t.columns[$0].type == .integer && t.columns[$0].isAttribute }) else { return }
            commands.append(DiffCommand(line: "INSERT \(t.name) \(t.columns[column].name)=\"7\"", expect: .error("VALIDATION")))
        default:
            // A #ref that names no pending insert.
            let table = random.below(schema.tables.count)
            let t = schema.tables[table]
            guard let column = t.foreignKeys.first else { return }
            commands.append(DiffCommand(line: "INSERT \(t.name) \(t.columns[column].label)=#nowhere\(fresh())", expect: .error("NOT_FOUND")))
        }
    }

    // MARK: - Predicates

    func predicate(_ table: Int, depth: Int) -> DiffPredicate {
        if depth < 2 && random.chance(0.35) {
            switch random.below(3) {
            case 0: return .not(predicate(table, depth: depth + 1))
            case 1: return .and(predicate(table, depth: depth + 1), predicate(table, depth: depth + 1))
            default: return .or(predicate(table, depth: depth + 1), predicate(table, depth: depth + 1))
            }
        }
        return atom(table)
    }

    private func atom(_ table: Int) -> DiffPredicate {
        let t = schema.tables[table]
        let plain = t.columns.indices.filter { t.columns[$0].foreignKey == nil && t.columns[$0].type != .uuid }
        let references = t.foreignKeys
        let paths = references.flatMap { fk -> [(Int, Int)] in
            let target = schema.tables[t.columns[fk].foreignKey!.target]
            return target.columns.indices.filter { target.columns[$0].isAttribute && target.columns[$0].type != .uuid }.map { (fk, $0) }
        }
        let quantified = t.inverses.indices.flatMap { i -> [(Int, Int)] in
            let source = schema.tables[t.inverses[i].source]
            return source.columns.indices.filter { source.columns[$0].isAttribute && !source.columns[$0].isKey && source.columns[$0].type != .uuid }.map { (i, $0) }
        }
        let kind = random.weighted([("plain", plain.isEmpty ? 0 : 6), ("fk", references.isEmpty ? 0 : 2), ("path", paths.isEmpty ? 0 : 2),
                                    ("quantified", quantified.isEmpty ? 0 : 2), ("count", t.inverses.isEmpty ? 0 : 1), ("key", 1)])
        switch kind {
        case "plain":
            let column = random.pick(plain)
            let (op, values) = comparison(t.columns[column].type, observed: rows[table].map { $0[column] })
            return .compare(.column(column), op, values)
        case "fk":
            let column = random.pick(references)
            let target = t.columns[column].foreignKey!.target
            switch random.below(4) {
            case 0: return .compare(.column(column), .equal, [.null])
            case 1: return .compare(.column(column), .notEqual, [.null])
            default:
                guard let row = random.pickOrNil(rows[target]) else { return .compare(.column(column), .equal, [.null]) }
                return .compare(.column(column), random.chance(0.7) ? .equal : .notEqual, [value(of: row, in: target)])
            }
        case "path":
            let (fk, column) = random.pick(paths)
            let target = t.columns[fk].foreignKey!.target
            let (op, values) = comparison(schema.tables[target].columns[column].type, observed: rows[target].map { $0[column] })
            return .compare(.path(foreignKey: fk, column: column), op, values)
        case "quantified":
            let (inverse, column) = random.pick(quantified)
            let source = t.inverses[inverse].source
            let (op, values) = comparison(schema.tables[source].columns[column].type, observed: rows[source].map { $0[column] })
            return .compare(.quantified(random.pick(["ANY", "ANY", "ALL", "NONE"]), inverse: inverse, column: column), op, values)
        case "count":
            let inverse = random.below(t.inverses.count)
            return .compare(.count(inverse: inverse), random.pick([.equal, .notEqual, .greater, .less, .greaterOrEqual]), [.int(random.int(0...2))])
        default:
            // The key: numbers compared, strings matched.
            let column = t.keyColumns[random.below(t.keyColumns.count)]
            let c = t.columns[column]
            guard let row = random.pickOrNil(rows[table]) else { return .compare(.column(column), .notEqual, [.null]) }
            let v: DiffValue = c.type.isNumeric ? .int(Int(row[column]!)!) : .text(row[column]!)
            if c.type.isNumeric { return .compare(.column(column), random.pick([.less, .greaterOrEqual, .equal, .notEqual]), [v]) }
            return .compare(.column(column), random.pick([.equal, .notEqual]), [v])
        }
    }

    /// An operator and values for a column of `type`, often values the column holds.
    private func comparison(_ type: DiffType, observed: [String?]) -> (DiffOperator, [DiffValue]) {
        let seen = observed.compactMap { $0 }
        if random.chance(0.12) { return (random.chance(0.5) ? .equal : .notEqual, [.null]) }
        switch type {
        case .integer, .bigint:
            func number() -> DiffValue {
                if let s = random.pickOrNil(seen), random.chance(0.6), let n = Int(s) { return .int(n) }
                return .int(random.int(-1...9))
            }
            let op = random.pick([DiffOperator.equal, .notEqual, .less, .lessOrEqual, .greater, .greaterOrEqual, .in, .between])
            switch op {
            case .in: return (op, [number(), number(), number()])
            case .between:
                let (a, b) = (number(), number())
                return (op, [a, b])
            default: return (op, [number()])
            }
        case .text, .uuid:
            let op = random.pick([DiffOperator.equal, .notEqual, .equalFolded, .beginsWith, .endsWith, .contains, .beginsWithFolded, .containsFolded, .less, .greater, .in])
            switch op {
            case .beginsWith, .endsWith, .contains, .beginsWithFolded, .containsFolded:
                return (op, [.text(random.pick(Self.fragments))])
            case .in:
                return (op, [.text(random.pickOrNil(seen) ?? "a"), .text(random.pick(Self.texts))])
            default:
                return (op, [.text(random.chance(0.6) ? (random.pickOrNil(seen) ?? "a") : random.pick(Self.texts))])
            }
        case .boolean:
            return (random.pick([.equal, .notEqual]), [.bool(random.chance(0.5))])
        }
    }

    // MARK: - Units SAVE must refuse

    private func invalidate(_ unit: inout DiffGeneratedUnit) {
        let kinds = ["missingRequired", "duplicateUnique", "restrict", "missingTarget", "nestOpen", "nilIntoRequired", "restrictedByPending"]
        for _ in 0..<4 {
            let kind = random.pick(kinds)
            if invalidate(kind, &unit) {
                unit.invalid = kind
                return
            }
        }
    }

    private func invalidate(_ kind: String, _ unit: inout DiffGeneratedUnit) -> Bool {
        switch kind {
        case "missingRequired":
            let tables = schema.tables.indices.filter { table in
                let t = schema.tables[table]
                return t.columns.indices.contains { t.columns[$0].notNull && !(t.columns[$0].isKey && t.key.isDefaulted) }
            }
            guard let table = random.pickOrNil(tables), let (insert, follow) = insertFields(table, named: true), follow == nil else { return false }
            let t = schema.tables[table]
            let required = insert.fields.filter { t.columns[$0.column].notNull && !(t.columns[$0.column].isKey && t.key.isDefaulted) }
            guard let missing = random.pickOrNil(required) else { return false }
            var partial = insert
            partial.remove(missing.column)
            commands.append(DiffCommand(line: "INSERT \(t.name) AS #\(insert.ref)" + assignments(partial.fields, table), expect: .ok))
            current.inserts.append(partial)
            unit.fix = [DiffCommand(line: "UPDATE \(t.name) #\(insert.ref) \(t.columns[missing.column].label)=\(missing.value.word())", expect: .ok)]
            var fixed = current
            fixed.inserts[fixed.insertIndex(insert.ref)!].set(missing.column, missing.value)
            unit.fixedLayer = fixed
            return true
        case "duplicateUnique":
            let candidates = schema.tables.indices.flatMap { table in
                schema.tables[table].nonKeyColumns.filter { schema.tables[table].columns[$0].unique }.map { (table, $0) }
            }.filter { table, column in rows[table].contains { $0[column] != nil } }
            guard let (table, column) = random.pickOrNil(candidates) else { return false }
            let t = schema.tables[table]
            let taken = random.pick(rows[table].filter { $0[column] != nil })[column]!
            let value: DiffValue = t.columns[column].type.isNumeric ? .int(Int(taken)!) : .text(taken)
            let freshValue = attributeValue(table, column, nullable: false)
            let others = storedCandidates(table).filter { $0[column] != taken }
            if random.chance(0.5), let row = random.pickOrNil(others) {
                let key = self.key(of: row, in: table)
                commands.append(DiffCommand(line: "UPDATE \(t.name) \(address(key, row: nil, set: true)) \(t.columns[column].name)=\(value.word())", expect: .ok))
                current.setUpdate(key, [(column, value)])
                unit.fix = [DiffCommand(line: "UPDATE \(t.name) \(address(key, row: nil, set: true)) \(t.columns[column].name)=\(freshValue.word())", expect: .ok)]
                var fixed = current
                fixed.setUpdate(key, [(column, freshValue)])
                unit.fixedLayer = fixed
                return true
            }
            guard let (insert, follow) = insertFields(table, named: true), follow == nil else { return false }
            var duplicate = insert
            duplicate.set(column, value)
            commands.append(DiffCommand(line: "INSERT \(t.name) AS #\(insert.ref)" + assignments(duplicate.fields, table), expect: .ok))
            current.inserts.append(duplicate)
            unit.fix = [DiffCommand(line: "UPDATE \(t.name) #\(insert.ref) \(t.columns[column].name)=\(freshValue.word())", expect: .ok)]
            var fixed = current
            fixed.inserts[fixed.insertIndex(insert.ref)!].set(column, freshValue)
            unit.fixedLayer = fixed
            return true
        case "restrict":
            let candidates = schema.tables.indices.flatMap { table in storedCandidates(table).map { key(of: $0, in: table) } }
                .filter { !restricting($0).isEmpty }
            guard let key = random.pickOrNil(candidates) else { return false }
            commands.append(DiffCommand(line: "DELETE \(schema.tables[key.table].name) \(address(key, row: nil, set: false))", expect: .ok))
            current.updates.removeAll { $0.key == key }
            current.deletes.append(key)
            // The fix: delete what restricts it too (which may be restricted in turn).
            var fixed = current
            var fix: [DiffCommand] = []
            for child in restricting(key) where !fixed.deletes.contains(child) {
                fix.append(DiffCommand(line: "DELETE \(schema.tables[child.table].name) \(address(child, row: nil, set: false))", expect: .ok))
                fixed.updates.removeAll { $0.key == child }
                fixed.deletes.append(child)
            }
            unit.fix = fix
            unit.fixedLayer = fixed
            return true
        case "missingTarget":
            let candidates = schema.tables.indices.filter { !schema.tables[$0].foreignKeys.isEmpty }
            guard let table = random.pickOrNil(candidates), let (insert, follow) = insertFields(table, named: true), follow == nil else { return false }
            let t = schema.tables[table]
            let column = random.pick(t.foreignKeys)
            let type = t.columns[column].type
            let missing: DiffValue = type.isNumeric ? .int(888_888_888) : (type == .uuid ? .text(freshUUID()) : .text("missing\(fresh())"))
            var broken = insert
            broken.set(column, missing)
            commands.append(DiffCommand(line: "INSERT \(t.name) AS #\(insert.ref)" + assignments(broken.fields, table), expect: .ok))
            current.inserts.append(broken)
            let repaired = insert.value(column) ?? .null
            unit.fix = [DiffCommand(line: "UPDATE \(t.name) #\(insert.ref) \(t.columns[column].label)=\(repaired.word())", expect: .ok)]
            var fixed = current
            fixed.inserts[fixed.insertIndex(insert.ref)!].set(column, repaired)
            unit.fixedLayer = fixed
            return true
        case "nestOpen":
            commands.append(DiffCommand(line: "NEST", expect: .ok))
            layers.append(current)
            insert(random.below(schema.tables.count))
            unit.nestLeftOpen = true
            unit.fix = [DiffCommand(line: "MERGE", expect: .ok)]
            unit.fixedLayer = current
            return true
        case "nilIntoRequired":
            let candidates = schema.tables.indices.flatMap { table in
                schema.tables[table].nonKeyColumns.filter { schema.tables[table].columns[$0].notNull }.map { (table, $0) }
            }
            guard let (table, column) = random.pickOrNil(candidates) else { return false }
            let predicate = self.predicate(table, depth: 1)
            let text = DiffPredicateWriter(schema: schema).text(predicate, table: table, symbols: false)
            commands.append(DiffCommand(line: "UPDATE \(schema.tables[table].name) WHERE \(text) SET \(schema.tables[table].columns[column].label)=nil", expect: .ok))
            current.bulk.append(DiffBulk(table: table, predicate: predicate, sets: [(column, .null)]))
            return true
        default:  // restrictedByPending
            let candidates = schema.tables.indices.flatMap { table in
                schema.tables[table].nonKeyColumns.filter { schema.tables[table].columns[$0].foreignKey?.rule == .restrict }.map { (table, $0) }
            }
            guard let (table, column) = random.pickOrNil(candidates) else { return false }
            let target = schema.tables[table].columns[column].foreignKey!.target
            guard let row = random.pickOrNil(storedCandidates(target)), let (insert, follow) = insertFields(table, named: true), follow == nil else { return false }
            let t = schema.tables[table]
            var pointing = insert
            pointing.set(column, value(of: row, in: target))
            commands.append(DiffCommand(line: "INSERT \(t.name) AS #\(insert.ref)" + assignments(pointing.fields, table), expect: .ok))
            current.inserts.append(pointing)
            let key = self.key(of: row, in: target)
            commands.append(DiffCommand(line: "DELETE \(schema.tables[target].name) \(address(key, row: nil, set: false))", expect: .ok))
            current.updates.removeAll { $0.key == key }
            current.deletes.append(key)
            unit.fix = [DiffCommand(line: "DELETE \(t.name) #\(insert.ref)", expect: .ok)]
            var fixed = current
            fixed.inserts.remove(at: fixed.insertIndex(insert.ref)!)
            unit.fixedLayer = fixed
            return true
        }
    }
}
