import Postgres

/// Writes a change set to PostgreSQL inside a transaction the caller opened.
///
/// Used twice: by SAVE (with version checks, delete-rule counts, then COMMIT by the caller)
/// and by reads that must see pending changes (apply, query, ROLLBACK by the caller).
struct Saver {
    let model: Model
    let connection: Connection
    let changes: ChangeSet
    /// Rows per INSERT statement; 1 when diagnosing which record a failure belongs to.
    var rowsPerStatement = 50_000

    /// A statement and the records it writes, so a failure can name them.
    struct Failure: Error {
        var error: PostgresError
        var records: [String]
        var entity: String
    }

    struct Outcome: Sendable {
        /// Each pending insert's ref and the id PostgreSQL gave it.
        var assigned: [(ref: String, entity: String, id: String)] = []
        var inserted = 0
        var updated = 0
        var deleted = 0
        var cascaded = 0
        var nullified = 0
        var notes: [String] = []
    }

    // MARK: - Validation

    /// Every problem the model can see without PostgreSQL, one line each.
    func validate() -> [String] {
        var problems: [String] = []
        for insert in changes.inserts {
            guard let entity = model.entity(named: insert.entity) else {
                problems.append("#\(insert.ref): entity \(insert.entity) no longer exists")
                continue
            }
            for attribute in entity.attributes where attribute.isRequired {
                let value = insert.value(of: attribute.name)
                if value == nil || value == .null {
                    problems.append("\(entity.name) #\(insert.ref): \(attribute.name) is required")
                }
            }
            for relationship in entity.toOneRelationships where relationship.isRequired {
                let value = insert.value(of: relationship.column)
                if value == nil || value == .null {
                    problems.append("\(entity.name) #\(insert.ref): \(relationship.name) is required")
                }
            }
            for (column, value) in insert.fields {
                if case .ref(let ref) = value, changes.insert(ref) == nil {
                    problems.append("\(entity.name) #\(insert.ref): \(column) points at #\(ref), which is no longer pending")
                }
            }
        }
        for key in changes.updateOrder {
            guard let update = changes.updates[key], let entity = model.entity(named: update.entity) else { continue }
            for column in update.order where update.fields[column] == .null {
                if let attribute = entity.attribute(named: column), attribute.isNotNull {
                    problems.append("\(entity.name) \(update.id): \(column) is required")
                }
                if let relationship = entity.toOneRelationships.first(where: { $0.column == column }), relationship.isRequired {
                    problems.append("\(entity.name) \(update.id): \(relationship.name) is required")
                }
            }
        }
        return problems
    }

    // MARK: - Applying

    /// Inserts, updates and deletes everything pending, without version checks.
    /// Returns ref -> id for the inserts.
    func apply() throws -> [String: String] {
        var ids = try insertAll()
        try updateAll(ids: &ids, skipping: [:])
        try deleteAll(tolerant: true)
        return ids
    }

    /// SAVE: checks versions under the merge policy, inserts, updates, previews and runs deletes.
    func save(policy: MergePolicy, outcome: inout Outcome) throws {
        let resolution = try ConflictCheck(model: model, connection: connection, changes: changes).resolve(policy: policy)
        outcome.notes = resolution.notes
        var ids = try insertAll()
        outcome.inserted = changes.inserts.count
        outcome.assigned = changes.inserts.map { ($0.ref, $0.entity, ids[$0.ref] ?? "?") }
        outcome.updated = try updateAll(ids: &ids, skipping: resolution.droppedFields)
        let deletes = changes.deleteOrder.filter { !resolution.droppedDeletes.contains($0) }
        let preview = try DeletePreview.compute(
            model: model, roots: grouped(deletes).map { ($0.0, $0.1.map(\.id)) }, connection: connection)
        if preview.deniedCount > 0 {
            throw CommandError(.denied, "the delete is denied: \(preview.deniedCount) record(s) still point at it with a RESTRICT rule; delete or move them first",
                               details: preview.lines.filter { $0.hasPrefix("deny") })
        }
        outcome.deleted = try deleteAll(only: Set(deletes))
        outcome.cascaded = preview.cascadedCount
        outcome.nullified = preview.nullifiedCount
    }

    // MARK: - Inserts

    private func insertAll() throws -> [String: String] {
        var ids: [String: String] = [:]
        let byEntity = Dictionary(grouping: changes.inserts, by: \.entity)
        let order = InsertOrder.sorted(orderedEntities(changes.inserts.map(\.entity))) { name in
            model.entity(named: name)?.toOneRelationships.map(\.target) ?? []
        }
        // Allocate ids up front where a sequence backs the key: references resolve without
        // a round trip per row, and multi-row INSERTs need no RETURNING order.
        for name in order {
            guard let entity = model.entity(named: name), let rows = byEntity[name] else { continue }
            let pk = entity.primaryKey.name
            var needing: [String] = []
            for row in rows {
                if case .text(let given)? = row.value(of: pk) { ids[row.ref] = given } else { needing.append(row.ref) }
            }
            if let sequence = entity.keySequence, !needing.isEmpty {
                let result = try connection.query(
                    "SELECT nextval($1::regclass)::text FROM generate_series(1, $2::int)", [sequence, String(needing.count)])
                for (i, ref) in needing.enumerated() { ids[ref] = result.string(i, 0) }
            }
        }
        for name in order {
            guard let entity = model.entity(named: name), let rows = byEntity[name] else { continue }
            try insert(rows, of: entity, ids: &ids)
        }
        return ids
    }

    private func insert(_ rows: [PendingInsert], of entity: Entity, ids: inout [String: String]) throws {
        let pk = entity.primaryKey.name
        let table = model.table(entity)
        // Rows that set the same columns share statements; the others keep their defaults.
        var groups: [[String]: [PendingInsert]] = [:]
        var groupOrder: [[String]] = []
        for row in rows {
            var columns = row.fields.map(\.column).filter { $0 != pk }
            if ids[row.ref] != nil { columns.insert(pk, at: 0) }
            if groups[columns] == nil { groupOrder.append(columns) }
            groups[columns, default: []].append(row)
        }
        let types = Dictionary(entity.columns.map { ($0.column, $0.sqlType) }, uniquingKeysWith: { a, _ in a })
        for columns in groupOrder {
            let members = groups[columns]!
            if ids[members[0].ref] == nil {
                // No id known in advance: one row at a time, the id from RETURNING.
                for row in members { try insertReturning(row, columns: columns, entity: entity, ids: &ids) }
                continue
            }
            // Each column travels as one array parameter: a small statement whatever the row count.
            let casts = columns.enumerated().map { "$\($0.offset + 1)::\(types[$0.element] ?? "text")[]" }
            let sql = "INSERT INTO \(table) (\(columns.map(SQL.identifier).joined(separator: ", "))) OVERRIDING SYSTEM VALUE "
                + "SELECT * FROM unnest(\(casts.joined(separator: ", ")))"
            var start = 0
            while start < members.count {
                let chunk = members[start..<min(start + rowsPerStatement, members.count)]
                start += chunk.count
                var parameters: [String?] = []
                for column in columns {
                    var values: [String?] = []
                    values.reserveCapacity(chunk.count)
                    for row in chunk {
                        values.append(column == pk ? ids[row.ref] : try bind(row.value(of: column) ?? .null, ids: ids))
                    }
                    parameters.append(SQL.arrayLiteral(values))
                }
                try run(sql, parameters, entity: entity.name, records: chunk.map { "#" + $0.ref })
            }
        }
    }

    private func insertReturning(_ row: PendingInsert, columns: [String], entity: Entity, ids: inout [String: String]) throws {
        let table = model.table(entity)
        let returning = " RETURNING \(SQL.identifier(entity.primaryKey.name))::text"
        let sql: String
        var parameters: [String?] = []
        if columns.isEmpty {
            sql = "INSERT INTO \(table) DEFAULT VALUES" + returning
        } else {
            for column in columns { parameters.append(try bind(row.value(of: column) ?? .null, ids: ids)) }
            let placeholders = (1...columns.count).map { "$\($0)" }.joined(separator: ", ")
            sql = "INSERT INTO \(table) (\(columns.map(SQL.identifier).joined(separator: ", "))) VALUES (\(placeholders))" + returning
        }
        let result = try run(sql, parameters, entity: entity.name, records: ["#" + row.ref])
        ids[row.ref] = result.string(0, 0)
    }

    private func bind(_ value: FieldValue, ids: [String: String]) throws -> String? {
        switch value {
        case .null: return nil
        case .text(let text): return text
        case .ref(let ref):
            guard let id = ids[ref] else {
                throw CommandError(.validation, "#\(ref) has no id yet: it is part of a reference cycle between entities")
            }
            return id
        }
    }

    // MARK: - Updates

    @discardableResult
    private func updateAll(ids: inout [String: String], skipping dropped: [RecordKey: Set<String>]) throws -> Int {
        var count = 0
        for key in changes.updateOrder {
            guard let update = changes.updates[key], let entity = model.entity(named: update.entity) else { continue }
            let skip = dropped[key] ?? []
            // Fields set back to what was read need no write; nor do the database's winners.
            let columns = update.order.filter { column in
                guard !skip.contains(column), let value = update.fields[column] else { return false }
                if case .text(let text) = value, let old = update.baseline[column], old == text { return false }
                if value == .null, let old = update.baseline[column], old == nil { return false }
                return true
            }
            guard !columns.isEmpty else { continue }
            var parameters: [String?] = []
            var sets: [String] = []
            for column in columns {
                parameters.append(try bind(update.fields[column]!, ids: ids))
                sets.append("\(SQL.identifier(column)) = $\(parameters.count)")
            }
            parameters.append(update.id)
            let sql = "UPDATE \(model.table(entity)) SET \(sets.joined(separator: ", ")) WHERE \(SQL.identifier(entity.primaryKey.name)) = $\(parameters.count)"
            count += try run(sql, parameters, entity: entity.name, records: ["\(entity.name) \(update.id)"]).affectedRows
        }
        return count
    }

    // MARK: - Deletes

    @discardableResult
    /// - Parameter tolerant: for a read's view: a delete that its rules deny is left out
    ///   (under a savepoint) instead of failing the read; SAVE reports it.
    private func deleteAll(only: Set<RecordKey>? = nil, tolerant: Bool = false) throws -> Int {
        let keys = changes.deleteOrder.filter { only?.contains($0) ?? true }
        var count = 0
        // Children before parents, so a RESTRICT between two deleted records does not fire.
        let order = InsertOrder.sorted(orderedEntities(keys.map(\.entity))) { name in
            model.entity(named: name)?.toOneRelationships.map(\.target) ?? []
        }.reversed()
        let byEntity = Dictionary(grouping: keys, by: \.entity)
        for name in order {
            guard let entity = model.entity(named: name), let members = byEntity[name] else { continue }
            let sql = "DELETE FROM \(model.table(entity)) WHERE \(SQL.identifier(entity.primaryKey.name)) = ANY($1::\(entity.primaryKey.sqlType)[])"
            let parameters = [SQL.arrayLiteral(members.map(\.id))]
            let records = members.map { "\(entity.name) \($0.id)" }
            guard tolerant else {
                count += try run(sql, parameters, entity: entity.name, records: records).affectedRows
                continue
            }
            try connection.execute("SAVEPOINT tolerant_delete")
            do {
                count += try run(sql, parameters, entity: entity.name, records: records).affectedRows
                try connection.execute("RELEASE SAVEPOINT tolerant_delete")
            } catch let failure as Failure where failure.error.sqlState == .foreignKeyViolation || failure.error.sqlState == .restrictViolation {
                try connection.execute("ROLLBACK TO SAVEPOINT tolerant_delete")
            }
        }
        return count
    }

    // MARK: - Helpers

    /// Runs one write; a failure carries the records it was writing.
    @discardableResult
    private func run(_ sql: String, _ parameters: [String?], entity: String, records: [String]) throws(Failure) -> QueryResult {
        do {
            return try connection.query(sql, parameters)
        } catch {
            throw Failure(error: error, records: records, entity: entity)
        }
    }

    private func grouped(_ keys: [RecordKey]) -> [(Entity, [RecordKey])] {
        orderedEntities(keys.map(\.entity)).compactMap { name in
            model.entity(named: name).map { entity in (entity, keys.filter { $0.entity == name }) }
        }
    }

    private func orderedEntities(_ names: [String]) -> [String] {
        var seen: Set<String> = []
        return names.filter { seen.insert($0).inserted }
    }
}
