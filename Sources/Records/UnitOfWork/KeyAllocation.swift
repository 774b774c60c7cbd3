/// Keys for pending inserts, known before any of them is written: given by the client, taken
/// through a `#ref` from the record a key column points at (a join table's key), assigned
/// earlier, or allocated now from each key column's sequence or default. With every key known
/// up front, references resolve without a round trip per row, rows go in multi-row statements,
/// and a pending insert keeps the id it was first shown. Pure.
enum KeyAllocation {
    /// Every key value known without PostgreSQL, by `#ref`.
    static func known(_ changes: ChangeSet, model: Model, assigned: [String: AssignedKey]) -> [String: AssignedKey] {
        var known: [String: AssignedKey] = [:]
        var visiting: Set<String> = []
        func resolve(_ ref: String) -> AssignedKey? {
            if let done = known[ref] { return done }
            guard let insert = changes.insert(ref), let entity = model.entity(named: insert.entity),
                  visiting.insert(ref).inserted else { return nil }
            defer { visiting.remove(ref) }
            var values: [String: String] = [:]
            let columns = entity.keyColumns + entity.allocatedColumns.map(\.name).filter { !entity.keyColumns.contains($0) }
            for column in columns {
                switch insert.value(of: column) {
                case .text(let text)?: values[column] = text
                case .ref(let target)?:
                    guard let relationship = entity.relationship(column: column), let targetKey = resolve(target) else { continue }
                    if let value = targetKey.values[relationship.referencedColumn] {
                        values[column] = value
                    } else if case .text(let text)? = changes.insert(target)?.value(of: relationship.referencedColumn) {
                        values[column] = text
                    }
                default:
                    if let previous = assigned[ref], previous.entity == entity.name, let value = previous.values[column] {
                        values[column] = value
                    }
                }
            }
            let key = AssignedKey(entity: entity.name, values: values)
            known[ref] = key
            return key
        }
        for insert in changes.inserts { _ = resolve(insert.ref) }
        return known
    }

    /// One statement per entity and set of missing columns, filling `refs` in order.
    struct Request: Sendable {
        var statement: Statement
        var entity: String
        var columns: [String]
        var refs: [String]
    }

    /// The statements that allocate the key values still missing (those a column's sequence or
    /// default can give; a column with neither is the client's to give, which validation says).
    static func requests(_ changes: ChangeSet, model: Model, known: [String: AssignedKey],
                         skip: Set<ChangeID> = []) -> [Request] {
        var byShape: [String: Int] = [:]
        var requests: [Request] = []
        for insert in changes.inserts where !skip.contains(.insert(insert.ref)) {
            guard let entity = model.entity(named: insert.entity) else { continue }
            let missing = entity.allocatedColumns.filter { attribute in
                known[insert.ref]?.values[attribute.name] == nil && insert.value(of: attribute.name) == nil
            }
            guard !missing.isEmpty else { continue }
            let shape = entity.name + "\u{0}" + missing.map(\.name).joined(separator: "\u{0}")
            if let index = byShape[shape] {
                requests[index].refs.append(insert.ref)
            } else {
                byShape[shape] = requests.count
                requests.append(Request(statement: Statement(""), entity: entity.name, columns: missing.map(\.name), refs: [insert.ref]))
            }
        }
        for index in requests.indices {
            let entity = model.entity(named: requests[index].entity)!
            var sql = SQLText()
            let count = sql.bind(String(requests[index].refs.count))
            let columns = requests[index].columns.map { column -> String in
                switch entity.allocatedColumns.first(where: { $0.name == column })!.allocation! {
                case .sequence(let sequence): return "nextval(\(sql.bind(sequence))::regclass)::text"
                // The column's default, as the catalog prints it: evaluated once a row.
                case .expression(let expression): return "(\(expression))::text"
                }
            }
            sql.text = "SELECT \(columns.joined(separator: ", ")) FROM generate_series(1, \(count)::int)"
            requests[index].statement = sql.statement
        }
        return requests
    }

    /// The columns an entity's pending inserts are written with: every one any of them sets,
    /// with the key's and the ones given values before SAVE, in the table's order. One set per
    /// entity puts all its rows in the same statements, so records of one table that point at
    /// each other are written together, whatever each one typed.
    static func columns(of entity: Entity, rows: [PendingInsert]) -> [String] {
        var set = Set(entity.allocatedColumns.map(\.name))
        for row in rows { for field in row.fields { set.insert(field.column) } }
        return entity.keyColumns + entity.columns.map(\.column).filter { set.contains($0) && !entity.keyColumns.contains($0) }
    }

    /// For the columns a pending insert leaves out that others of its entity set: the column's
    /// default, evaluated now (as the INSERT would have, in the same transaction). A column
    /// without one is nil. Not kept by the unit: a read evaluates them afresh.
    static func fills(_ changes: ChangeSet, model: Model, known: [String: AssignedKey], skip: Set<ChangeID> = []) -> [Request] {
        let rows = changes.inserts.filter { !skip.contains(.insert($0.ref)) }
        var byShape: [String: Int] = [:]
        var requests: [Request] = []
        for (name, members) in Dictionary(grouping: rows, by: \.entity) {
            guard let entity = model.entity(named: name) else { continue }
            let allocated = Set(entity.allocatedColumns.map(\.name))
            let columns = Self.columns(of: entity, rows: members).filter { !allocated.contains($0) }
            for row in members {
                let missing = columns.filter { column in
                    row.value(of: column) == nil && known[row.ref]?.values[column] == nil
                        && entity.attribute(named: column).map { $0.defaultValue != nil && $0.identity == nil && !$0.isGenerated } == true
                }
                guard !missing.isEmpty else { continue }
                let shape = name + "\u{0}" + missing.joined(separator: "\u{0}")
                if let index = byShape[shape] {
                    requests[index].refs.append(row.ref)
                } else {
                    byShape[shape] = requests.count
                    requests.append(Request(statement: Statement(""), entity: name, columns: missing, refs: [row.ref]))
                }
            }
        }
        for index in requests.indices {
            let entity = model.entity(named: requests[index].entity)!
            var sql = SQLText()
            let count = sql.bind(String(requests[index].refs.count))
            let columns = requests[index].columns.map { "(\(entity.attribute(named: $0)!.defaultValue!))::text" }
            sql.text = "SELECT \(columns.joined(separator: ", ")) FROM generate_series(1, \(count)::int)"
            requests[index].statement = sql.statement
        }
        return requests
    }

    /// `keys` with the filled values added, for writing (the unit keeps `keys` only).
    static func merged(_ keys: [String: AssignedKey], _ fills: [String: AssignedKey]) -> [String: AssignedKey] {
        var all = keys
        for (ref, fill) in fills {
            all[ref] = AssignedKey(entity: fill.entity, values: (all[ref]?.values ?? [:]).merging(fill.values) { known, _ in known })
        }
        return all
    }

    /// The values the requests' results hold, by `#ref`.
    static func allocated(_ requests: [Request], results: [StatementResult]) -> [String: AssignedKey] {
        var keys: [String: AssignedKey] = [:]
        for (request, result) in zip(requests, results) {
            for (row, ref) in request.refs.enumerated() where row < result.rows.count {
                var values: [String: String] = [:]
                for (column, name) in request.columns.enumerated() {
                    if let value = result.rows[row][column] { values[name] = value }
                }
                keys[ref] = AssignedKey(entity: request.entity, values: values)
            }
        }
        return keys
    }

    private static func isRef(_ value: FieldValue?) -> Bool {
        if case .ref? = value { return true }
        return false
    }
}
