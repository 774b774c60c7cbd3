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

    /// Inserts, updates and deletes everything pending, without version checks, for a read's
    /// view. Returns ref -> id for the inserts.
    func apply() throws -> [String: String] {
        var ids = try allocateIDs(extra: []).ids
        try write(insertWrites(ids: &ids) + updateWrites(ids: ids, skipping: [:]))
        try deleteTolerantly()
        return ids
    }

    /// SAVE, in as few round trips as the unit allows: [BEGIN, id allocation, version locks],
    /// then [inserts, updates] and, when there are deletes, the delete-rule preview, then
    /// [deletes, COMMIT]. The caller rolls back on any error.
    func save(policy: MergePolicy, outcome: inout Outcome) throws {
        if try saveSingleInsert(&outcome) { return }
        let check = ConflictCheck(model: model, connection: connection, changes: changes)
        let locks = check.lockStatements()
        let allocated = try allocateIDs(extra: [(sql: "BEGIN", parameters: [])] + locks.map { (sql: $0.sql, parameters: $0.parameters) })
        var ids = allocated.ids
        let resolution = try check.resolve(policy: policy, locked: Array(allocated.extra.dropFirst()), statements: locks)
        outcome.notes = resolution.notes
        let deletes = changes.deleteOrder.filter { !resolution.droppedDeletes.contains($0) }
        let inserts = try insertWrites(ids: &ids)
        let updates = try updateWrites(ids: ids, skipping: resolution.droppedFields)
        outcome.inserted = changes.inserts.count
        outcome.assigned = changes.inserts.map { ($0.ref, $0.entity, ids[$0.ref] ?? "?") }
        let commit = Write(sql: "COMMIT", parameters: [], entity: "", records: [])
        if deletes.isEmpty {
            let results = try write(inserts + updates + [commit])
            outcome.updated = results[inserts.count..<(inserts.count + updates.count)].reduce(0) { $0 + $1.affectedRows }
            return
        }
        let results = try write(inserts + updates)
        outcome.updated = results.dropFirst(inserts.count).reduce(0) { $0 + $1.affectedRows }
        let preview = try DeletePreview.compute(
            model: model, roots: grouped(deletes).map { ($0.0, $0.1.map(\.id)) }, connection: connection)
        if preview.deniedCount > 0 {
            throw CommandError(.denied, "the delete is denied: \(preview.deniedCount) record(s) still point at it with a RESTRICT rule; delete or move them first",
                               details: preview.lines.filter { $0.hasPrefix("deny") })
        }
        let deleteResults = try write(deleteWrites(Set(deletes)) + [commit])
        outcome.deleted = deleteResults.dropLast().reduce(0) { $0 + $1.affectedRows }
        outcome.cascaded = preview.cascadedCount
        outcome.nullified = preview.nullifiedCount
    }

    /// A unit of one insert is one statement: atomic by itself, so it runs prepared, in
    /// autocommit, in a single round trip (like a form saved, the most common unit of all).
    private func saveSingleInsert(_ outcome: inout Outcome) throws -> Bool {
        guard changes.inserts.count == 1, changes.updates.isEmpty, changes.deletes.isEmpty,
              let row = changes.inserts.first, let entity = model.entity(named: row.entity),
              !row.fields.contains(where: { if case .ref = $0.value { return true }; return false }) else { return false }
        let columns = row.fields.map(\.column)
        let returning = " RETURNING \(SQL.identifier(entity.primaryKey.name))::text"
        let sql = columns.isEmpty
            ? "INSERT INTO \(model.table(entity)) DEFAULT VALUES" + returning
            : "INSERT INTO \(model.table(entity)) (\(columns.map(SQL.identifier).joined(separator: ", "))) OVERRIDING SYSTEM VALUE VALUES ("
                + (1...columns.count).map { "$\($0)" }.joined(separator: ", ") + ")" + returning
        let result: QueryResult
        do {
            result = try connection.queryPrepared(sql, try row.fields.map { try bind($0.value, ids: [:]) })
        } catch let error as PostgresError {
            throw Failure(error: error, records: ["#" + row.ref], entity: entity.name)
        }
        outcome.inserted = 1
        outcome.assigned = [(row.ref, entity.name, result.string(0, 0) ?? "?")]
        return true
    }

    // MARK: - Planning writes

    /// A statement and the records it writes, so a failure can name them.
    struct Write {
        var sql: String
        var parameters: [String?]
        var entity: String
        var records: [String]
    }

    /// Runs writes as one pipeline; a failure names the statement's records.
    @discardableResult
    private func write(_ writes: [Write]) throws -> [QueryResult] {
        do {
            return try connection.pipeline(writes.map { ($0.sql, $0.parameters) })
        } catch let failure as Connection.PipelineFailure {
            let failed = writes[failure.index]
            throw Failure(error: failure.error, records: failed.records, entity: failed.entity)
        }
    }

    /// Entities with pending inserts, parents before children.
    private var insertOrder: [String] { dependencyOrder(changes.inserts.map(\.entity)) }

    /// Ids for pending inserts, allocated up front where a sequence backs the key: references
    /// resolve without a round trip per row, and multi-row INSERTs need no RETURNING order.
    /// `extra` statements ride in the same round trip, first; their results come back too.
    private func allocateIDs(extra: [(sql: String, parameters: [String?])]) throws -> (ids: [String: String], extra: [QueryResult]) {
        var ids: [String: String] = [:]
        var requests: [(refs: [String], sql: String, parameters: [String?])] = []
        let byEntity = Dictionary(grouping: changes.inserts, by: \.entity)
        for name in insertOrder {
            guard let entity = model.entity(named: name), let rows = byEntity[name] else { continue }
            var needing: [String] = []
            for row in rows {
                if case .text(let given)? = row.value(of: entity.primaryKey.name) { ids[row.ref] = given } else { needing.append(row.ref) }
            }
            if let sequence = entity.keySequence, !needing.isEmpty {
                requests.append((needing, "SELECT nextval($1::regclass)::text FROM generate_series(1, $2::int)", [sequence, String(needing.count)]))
            }
        }
        let results: [QueryResult]
        do {
            results = try connection.pipeline(extra + requests.map { ($0.sql, $0.parameters) })
        } catch let failure as Connection.PipelineFailure {
            throw failure.error
        }
        for (request, result) in zip(requests, results.dropFirst(extra.count)) {
            for (i, ref) in request.refs.enumerated() { ids[ref] = result.string(i, 0) }
        }
        return (ids, Array(results.prefix(extra.count)))
    }

    /// The INSERTs, parents first. Rows whose key has neither a sequence nor a given value are
    /// inserted here and now, one by one, for RETURNING to give their ids to later rows.
    private func insertWrites(ids: inout [String: String]) throws -> [Write] {
        var writes: [Write] = []
        let byEntity = Dictionary(grouping: changes.inserts, by: \.entity)
        for name in insertOrder {
            guard let entity = model.entity(named: name), let rows = byEntity[name] else { continue }
            writes += try insertWrites(rows, of: entity, ids: &ids, before: writes)
        }
        return writes
    }

    private func insertWrites(_ rows: [PendingInsert], of entity: Entity, ids: inout [String: String], before: [Write]) throws -> [Write] {
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
        var writes: [Write] = []
        let types = Dictionary(entity.columns.map { ($0.column, $0.sqlType) }, uniquingKeysWith: { a, _ in a })
        for columns in groupOrder {
            let members = groups[columns]!
            if ids[members[0].ref] == nil {
                // No id known in advance: what precedes must be written first, then row by row.
                try write(before + writes)
                for row in members { try insertReturning(row, columns: columns, entity: entity, ids: &ids) }
                return []
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
                writes.append(Write(sql: sql, parameters: parameters, entity: entity.name, records: chunk.map { "#" + $0.ref }))
            }
        }
        return writes
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
        let result = try write([Write(sql: sql, parameters: parameters, entity: entity.name, records: ["#" + row.ref])])
        ids[row.ref] = result[0].string(0, 0)
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

    /// One UPDATE per record, of the fields that change: fields set back to what was read need
    /// no write, nor do the ones the database wins.
    private func updateWrites(ids: [String: String], skipping dropped: [RecordKey: Set<String>]) throws -> [Write] {
        var writes: [Write] = []
        for key in changes.updateOrder {
            guard let update = changes.updates[key], let entity = model.entity(named: update.entity) else { continue }
            let skip = dropped[key] ?? []
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
            writes.append(Write(sql: sql, parameters: parameters, entity: entity.name, records: ["\(entity.name) \(update.id)"]))
        }
        return writes
    }

    /// One DELETE per entity, children before parents, so a RESTRICT between two deleted
    /// records does not fire.
    private func deleteWrites(_ keys: Set<RecordKey>) -> [Write] {
        let members = changes.deleteOrder.filter { keys.contains($0) }
        let order = dependencyOrder(members.map(\.entity)).reversed()
        let byEntity = Dictionary(grouping: members, by: \.entity)
        return order.compactMap { name in
            guard let entity = model.entity(named: name), let doomed = byEntity[name] else { return nil }
            let sql = "DELETE FROM \(model.table(entity)) WHERE \(SQL.identifier(entity.primaryKey.name)) = ANY($1::\(entity.primaryKey.sqlType)[])"
            return Write(sql: sql, parameters: [SQL.arrayLiteral(doomed.map(\.id))], entity: entity.name,
                         records: doomed.map { "\(entity.name) \($0.id)" })
        }
    }

    /// For a read's view: a delete that its rules deny is left out (under a savepoint)
    /// instead of failing the read; SAVE reports it.
    private func deleteTolerantly() throws {
        for delete in deleteWrites(Set(changes.deleteOrder)) {
            try connection.execute("SAVEPOINT tolerant_delete")
            do {
                try write([delete])
                try connection.execute("RELEASE SAVEPOINT tolerant_delete")
            } catch let failure as Failure where failure.error.sqlState == .foreignKeyViolation || failure.error.sqlState == .restrictViolation {
                try connection.execute("ROLLBACK TO SAVEPOINT tolerant_delete")
            }
        }
    }

    // MARK: - Helpers

    private func grouped(_ keys: [RecordKey]) -> [(Entity, [RecordKey])] {
        orderedEntities(keys.map(\.entity)).compactMap { name in
            model.entity(named: name).map { entity in (entity, keys.filter { $0.entity == name }) }
        }
    }

    /// The distinct entities of `names`, each after the entities it points at.
    private func dependencyOrder(_ names: [String]) -> [String] {
        InsertOrder.sorted(orderedEntities(names)) { name in
            model.entity(named: name)?.toOneRelationships.map(\.target) ?? []
        }
    }

    private func orderedEntities(_ names: [String]) -> [String] {
        var seen: Set<String> = []
        return names.filter { seen.insert($0).inserted }
    }
}
