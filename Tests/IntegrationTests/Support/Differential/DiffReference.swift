import Foundation
import Postgres

/// What the reference transaction did: the counts SAVE's reply should give, or why it failed.
struct DiffOutcome {
    var error: String?
    var inserted = 0
    var updated = 0
    var deleted = 0
    var cascaded = 0
    var nullified = 0
    /// Every statement run, in order, for the failure report.
    var statements: [String] = []

    var summary: String { "\(inserted) inserted, \(updated) updated, \(deleted) deleted, \(cascaded) cascaded, \(nullified) nullified" }
}

/// The expectation: a database of the same DDL that the test drives with plain SQL, one
/// statement per change, in the order the README gives for SAVE: inserts (in an order the
/// foreign keys allow; references to records not written yet go in as NULL and are set after
/// all inserts), updates by record, changes by predicate in the order typed, then the deletes
/// by record and by predicate (those matching once the updates are done), the database applying
/// cascades and SET NULL itself; a delete that a RESTRICT denies in every order fails the unit.
final class DiffReference {
    let schema: DiffSchema
    let db: Connection

    init(schema: DiffSchema, db: Connection) {
        self.schema = schema
        self.db = db
    }

    /// Every table, every column as text, in key order.
    static func contents(_ schema: DiffSchema, _ db: Connection) throws -> [[[String?]]] {
        let statements = schema.tables.map { table -> (sql: String, parameters: [String?]) in
            let columns = table.columns.map { "\"\($0.name)\"::text" }.joined(separator: ", ")
            return ("SELECT \(columns) FROM \(table.name) ORDER BY \(table.keyList)", [])
        }
        return try db.pipeline(statements).map { result in
            (0..<result.rowCount).map { row in (0..<result.columnCount).map { result.string(row, $0) } }
        }
    }

    /// Makes the reference hold exactly `contents` (after a mismatch, to go on from the same state).
    func resync(to contents: [[[String?]]]) throws {
        try db.execute("BEGIN")
        do {
            try db.execute("SET LOCAL session_replication_role = replica")
            for table in schema.tables { try db.execute("DELETE FROM \(table.name)") }
            for (index, table) in schema.tables.enumerated() where !contents[index].isEmpty {
                let columns = table.columns.map { "\"\($0.name)\"" }.joined(separator: ", ")
                let values = contents[index].map { row in
                    "(" + zip(table.columns, row).map { DiffText.sql($1, $0.type) }.joined(separator: ", ") + ")"
                }.joined(separator: ", ")
                try db.execute("INSERT INTO \(table.name) (\(columns)) OVERRIDING SYSTEM VALUE VALUES \(values)")
            }
            try db.execute("COMMIT")
        } catch {
            _ = try? db.execute("ROLLBACK")
            throw error
        }
    }

    private final class StatementLog {
        var statements: [String] = []
    }

    private struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Applies `layer` in one transaction. `keys` gives each pending insert's key columns that
    /// the unit did not set (the keys SAVE reported, or made-up ones); `before` is what the
    /// tables held when the unit began, for the count of records an update really changes.
    func apply(_ layer: DiffLayer, keys: [String: [String]], before: [[[String?]]], commit: Bool) -> DiffOutcome {
        var outcome = DiffOutcome()
        let log = StatementLog()
        let db = self.db
        func run(_ sql: String) throws -> QueryResult {
            log.statements.append(sql)
            return try db.query(sql)
        }
        let index = Dictionary(uniqueKeysWithValues: layer.inserts.enumerated().map { ($1.ref, $0) })

        func keyValues(_ ref: String) throws -> [String] {
            guard let i = index[ref] else { throw Failure(description: "#\(ref) is not pending") }
            let insert = layer.inserts[i]
            let table = schema.tables[insert.table]
            return try table.keyColumns.enumerated().map { position, column in
                if let value = insert.value(column), value != .null, let text = try resolve(value) { return text }
                guard let given = keys[ref], position < given.count else { throw Failure(description: "no key for #\(ref)") }
                return given[position]
            }
        }
        func resolve(_ value: DiffValue) throws -> String? {
            if case .ref(let target) = value { return try keyValues(target)[0] }
            return value.canonical
        }
        func keyCondition(_ table: DiffTable, _ values: [String]) -> String {
            zip(table.keyColumns, values).map { "\"\(table.columns[$0].name)\" = \(DiffText.sql($1, table.columns[$0].type))" }.joined(separator: " AND ")
        }

        do {
            _ = try run("BEGIN")
            // Inserts: after the records they must point at; the rest in the order typed.
            let dependencies: [Set<Int>] = layer.inserts.map { insert in
                let table = schema.tables[insert.table]
                return Set(insert.fields.compactMap { field -> Int? in
                    guard case .ref(let target) = field.value, target != insert.ref, table.columns[field.column].notNull else { return nil }
                    return index[target]
                })
            }
            // Rows of one table that must point at each other (a loop through required keys) go in
            // one statement: PostgreSQL checks its keys at the statement's end.
            var groups: [[Int]] = []
            var placed = Set<Int>()
            while placed.count < layer.inserts.count {
                if let next = layer.inserts.indices.first(where: { !placed.contains($0) && dependencies[$0].isSubset(of: placed) }) {
                    placed.insert(next)
                    groups.append([next])
                } else {
                    let stuck = layer.inserts.indices.first { !placed.contains($0) }!
                    let group = layer.inserts.indices.filter { !placed.contains($0) && layer.inserts[$0].table == layer.inserts[stuck].table }
                    placed.formUnion(group)
                    groups.append(group)
                }
            }
            var written = Set<String>()
            var later: [(table: DiffTable, key: [String], column: Int, target: String)] = []
            for group in groups {
                let table = schema.tables[layer.inserts[group[0]].table]
                let together = Set(group.map { layer.inserts[$0].ref })
                var columns = table.keyColumns
                for i in group {
                    for field in layer.inserts[i].fields where !table.columns[field.column].isKey && !columns.contains(field.column) {
                        columns.append(field.column)
                    }
                }
                var rows: [String] = []
                for i in group {
                    let insert = layer.inserts[i]
                    let key = try keyValues(insert.ref)
                    var values = zip(table.keyColumns, key).map { DiffText.sql($1, table.columns[$0].type) }
                    for column in columns.dropFirst(table.keyColumns.count) {
                        guard let field = insert.fields.first(where: { $0.column == column }) else {
                            values.append("DEFAULT")
                            continue
                        }
                        let definition = table.columns[column]
                        var text: String?
                        if case .ref(let target) = field.value, target != insert.ref, !written.contains(target), !together.contains(target), !definition.notNull {
                            later.append((table, key, column, target))
                            text = nil
                        } else {
                            text = try resolve(field.value)
                        }
                        values.append(DiffText.sql(text, definition.type))
                    }
                    rows.append("(" + values.joined(separator: ", ") + ")")
                }
                let names = columns.map { "\"\(table.columns[$0].name)\"" }.joined(separator: ", ")
                _ = try run("INSERT INTO \(table.name) (\(names)) OVERRIDING SYSTEM VALUE VALUES \(rows.joined(separator: ", "))")
                written.formUnion(together)
                outcome.inserted += group.count
            }
            for fixup in later {
                let column = fixup.table.columns[fixup.column]
                _ = try run("UPDATE \(fixup.table.name) SET \"\(column.name)\" = \(DiffText.sql(try keyValues(fixup.target)[0], column.type)) WHERE \(keyCondition(fixup.table, fixup.key))")
            }
            // Updates by record: a record counts as updated when a value really changes.
            for update in layer.updates {
                let table = schema.tables[update.key.table]
                let sets = try update.fields.map { "\"\(table.columns[$0.column].name)\" = \(DiffText.sql(try resolve($0.value), table.columns[$0.column].type))" }
                _ = try run("UPDATE \(table.name) SET \(sets.joined(separator: ", ")) WHERE \(keyCondition(table, update.key.values))")
                let old = before[update.key.table].first { row in zip(table.keyColumns, update.key.values).allSatisfy { row[$0] == $1 } }
                let changes = update.fields.contains { field in
                    if case .ref = field.value { return true }
                    return old?[field.column] != field.value.canonical
                }
                if changes { outcome.updated += 1 }
            }
            // Changes by predicate, in the order typed; DELETE ... WHERE picks its records now.
            let writer = DiffPredicateWriter(schema: schema)
            var roots: [DiffKey] = layer.deletes
            for change in layer.bulk {
                let table = schema.tables[change.table]
                let condition = writer.sql(change.predicate, table: change.table, alias: "a")
                if let sets = change.sets {
                    let assignments = try sets.map { "\"\(table.columns[$0.column].name)\" = \(DiffText.sql(try resolve($0.value), table.columns[$0.column].type))" }
                    outcome.updated += try run("UPDATE \(table.name) AS a SET \(assignments.joined(separator: ", ")) WHERE \(condition)").affectedRows
                }
            }
            for change in layer.bulk where change.sets == nil {
                let table = schema.tables[change.table]
                let condition = writer.sql(change.predicate, table: change.table, alias: "a")
                let keyColumns = table.keyColumns.map { "a.\"\(table.columns[$0].name)\"::text" }.joined(separator: ", ")
                let found = try run("SELECT \(keyColumns) FROM \(table.name) AS a WHERE \(condition)")
                for row in 0..<found.rowCount {
                    roots.append(DiffKey(table: change.table, values: (0..<found.columnCount).map { found.string(row, $0) ?? "" }))
                }
            }
            var seen = Set<DiffKey>()
            roots = roots.filter { seen.insert($0).inserted }
            if !roots.isEmpty { try delete(roots, &outcome, run, keyCondition) }
            _ = try run(commit ? "COMMIT" : "ROLLBACK")
        } catch {
            outcome.error = "\(error)"
            _ = try? db.execute("ROLLBACK")
        }
        outcome.statements = log.statements
        return outcome
    }

    /// Deletes `roots` and everything their CASCADEs take, denied when a record left behind
    /// points at one of them with RESTRICT; each in its own statement, in whatever order no
    /// RESTRICT refuses (one statement per table for what is left when that is the only way);
    /// counts what cascaded and what was set to NULL.
    private func delete(_ roots: [DiffKey], _ outcome: inout DiffOutcome, _ run: (String) throws -> QueryResult,
                        _ keyCondition: (DiffTable, [String]) -> String) throws {
        let total = "SELECT " + schema.tables.map { "(SELECT count(*) FROM \($0.name))" }.joined(separator: " + ")
        let before = Int(try run(total).string(0, 0) ?? "0") ?? 0
        var nullable: [(table: DiffTable, column: DiffColumn, keys: Set<String>)] = []
        for table in schema.tables {
            for column in table.foreignKeys where table.columns[column].foreignKey!.rule == .setNull {
                let c = table.columns[column]
                let found = try run("SELECT concat_ws(chr(1), \(table.keyColumns.map { "\"\(table.columns[$0].name)\"::text" }.joined(separator: ", "))) FROM \(table.name) WHERE \"\(c.name)\" IS NOT NULL")
                nullable.append((table, c, Set(found.column(0).compactMap { $0 })))
            }
        }
        func attempt(_ sql: String) throws -> Bool {
            _ = try run("SAVEPOINT d")
            do {
                _ = try run(sql)
                _ = try run("RELEASE SAVEPOINT d")
                return true
            } catch let error as PostgresError where error.sqlState == .foreignKeyViolation || error.sqlState == .restrictViolation {
                _ = try run("ROLLBACK TO SAVEPOINT d")
                _ = try run("RELEASE SAVEPOINT d")
                return false
            }
        }
        // What the deletes take: the roots and, through every CASCADE, what points at them.
        func keyText(_ table: DiffTable, alias: String) -> String {
            table.keyColumns.map { "\(alias).\"\(table.columns[$0].name)\"::text" }.joined(separator: ", ")
        }
        var closure = Set(roots)
        var frontier = roots
        while let next = frontier.popLast() {
            let target = schema.tables[next.table]
            guard target.keyColumns.count == 1 else { continue }  // keys point at single-column keys only
            for (index, table) in schema.tables.enumerated() {
                for column in table.foreignKeys where table.columns[column].foreignKey!.target == next.table
                    && table.columns[column].foreignKey!.rule == .cascade {
                    let found = try run("SELECT \(keyText(table, alias: "t")) FROM \(table.name) AS t WHERE t.\"\(table.columns[column].name)\"::text = '\(next.values[0].replacingOccurrences(of: "'", with: "''"))'")
                    for row in 0..<found.rowCount {
                        let key = DiffKey(table: index, values: (0..<found.columnCount).map { found.string(row, $0) ?? "" })
                        if closure.insert(key).inserted { frontier.append(key) }
                    }
                }
            }
        }
        // Denied when a record the deletes do not take points at one they take with RESTRICT.
        for key in closure {
            let target = schema.tables[key.table]
            guard target.keyColumns.count == 1 else { continue }
            for (index, table) in schema.tables.enumerated() {
                for column in table.foreignKeys where table.columns[column].foreignKey!.target == key.table
                    && table.columns[column].foreignKey!.rule == .restrict {
                    let found = try run("SELECT \(keyText(table, alias: "t")) FROM \(table.name) AS t WHERE t.\"\(table.columns[column].name)\"::text = '\(key.values[0].replacingOccurrences(of: "'", with: "''"))'")
                    for row in 0..<found.rowCount where !closure.contains(DiffKey(table: index, values: (0..<found.columnCount).map { found.string(row, $0) ?? "" })) {
                        throw Failure(description: "denied: a RESTRICT keeps a record the unit deletes")
                    }
                }
            }
        }
        // Every record taken, one at a time, in whatever order works (a record is deleted once
        // nothing left restricts it; what cascades may already be gone).
        var remaining = Array(closure).sorted { ($0.table, $0.values.joined(separator: "\u{1}")) < ($1.table, $1.values.joined(separator: "\u{1}")) }
        while !remaining.isEmpty {
            var left: [DiffKey] = []
            for key in remaining {
                let table = schema.tables[key.table]
                if try !attempt("DELETE FROM \(table.name) WHERE \(keyCondition(table, key.values))") { left.append(key) }
            }
            if left.count == remaining.count {
                // Records that hold each other (a RESTRICT self-reference): each table's rest at once.
                for table in Set(left.map(\.table)).sorted() {
                    let t = schema.tables[table]
                    let keys = left.filter { $0.table == table }.map { "(" + keyCondition(t, $0.values) + ")" }
                    if try attempt("DELETE FROM \(t.name) WHERE " + keys.joined(separator: " OR ")) { left.removeAll { $0.table == table } }
                }
                if left.count == remaining.count {
                    throw Failure(description: "denied: a RESTRICT keeps \(left.count) record(s) from being deleted in any order")
                }
            }
            remaining = left
        }
        let after = Int(try run(total).string(0, 0) ?? "0") ?? 0
        outcome.deleted = roots.count
        outcome.cascaded = before - after - roots.count
        for entry in nullable {
            let found = try run("SELECT concat_ws(chr(1), \(entry.table.keyColumns.map { "\"\(entry.table.columns[$0].name)\"::text" }.joined(separator: ", "))) FROM \(entry.table.name) WHERE \"\(entry.column.name)\" IS NULL")
            outcome.nullified += found.column(0).compactMap { $0 }.filter { entry.keys.contains($0) }.count
        }
    }
}
