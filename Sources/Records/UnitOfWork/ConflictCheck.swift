import Postgres

/// Optimistic concurrency for SAVE: locks the records the unit updates or deletes and compares
/// their `xmin` with the version each was read at, then applies the merge policy
/// (as Npgsql uses xmin for concurrency tokens, and Core Data applies its merge policies).
struct ConflictCheck {
    let model: Model
    let connection: Connection
    let changes: ChangeSet

    struct Resolution {
        /// Fields the database wins (SAVE THEIRS), per record.
        var droppedFields: [RecordKey: Set<String>] = [:]
        /// Deletes that no longer apply.
        var droppedDeletes: Set<RecordKey> = []
        /// What the policy decided, for the reply.
        var notes: [String] = []
    }

    private struct Current {
        var version: String
        var values: [String: String?]
    }

    /// `SELECT ... FOR UPDATE` of every record the unit updates or deletes, one statement per
    /// entity, to run inside the save's transaction.
    struct Lock {
        var sql: String
        var parameters: [String?]
        var entity: Entity
        var columns: [String]
    }

    func lockStatements() -> [Lock] {
        var byEntity: [String: [String]] = [:]
        var order: [String] = []
        for key in changes.updateOrder + changes.deleteOrder {
            if byEntity[key.entity] == nil { order.append(key.entity) }
            byEntity[key.entity, default: []].append(key.id)
        }
        return order.compactMap { name in
            guard let entity = model.entity(named: name) else { return nil }
            let columns = entity.columns.map(\.column)
            let select = columns.map { SQL.identifier($0) + "::text" }.joined(separator: ", ")
            let sql = """
                SELECT xmin::text, \(select) FROM \(model.table(entity))
                WHERE \(SQL.identifier(entity.primaryKey.name)) = ANY($1::\(entity.primaryKey.sqlType)[])
                ORDER BY \(SQL.identifier(entity.primaryKey.name)) FOR UPDATE
                """
            return Lock(sql: sql, parameters: [SQL.arrayLiteral(byEntity[name]!)], entity: entity, columns: columns)
        }
    }

    /// Compares the locked rows (`locked[i]` is the result of `statements[i]`) with the versions
    /// the unit read, under the policy.
    func resolve(policy: MergePolicy, locked: [QueryResult], statements: [Lock]) throws -> Resolution {
        var resolution = Resolution()
        var conflicts: [String] = []
        var conflicted = 0
        var current: [RecordKey: Current] = [:]
        for (lock, result) in zip(statements, locked) {
            for row in 0..<result.rowCount {
                var values: [String: String?] = [:]
                for (i, column) in lock.columns.enumerated() { values[column] = result.string(row, i + 1) }
                let id = values[lock.entity.primaryKey.name]!!
                current[RecordKey(entity: lock.entity.name, id: id)] = Current(version: result.string(row, 0)!, values: values)
            }
        }

        for key in changes.updateOrder {
            guard let update = changes.updates[key] else { continue }
            let label = "\(key.entity) \(key.id)"
            guard let now = current[key] else {
                switch policy {
                case .fail, .merge:
                    conflicted += 1
                    conflicts.append("\(label): deleted by another session since it was read")
                case .force, .theirs:
                    resolution.droppedFields[key] = Set(update.order)
                    resolution.notes.append("\(label) was deleted by another session: its update is dropped")
                }
                continue
            }
            guard now.version != update.version else { continue }
            let both = update.order.filter { column in
                let read = update.baseline[column] ?? nil
                let theirs = now.values[column] ?? nil
                guard read != theirs else { return false }
                if case .text(let mine) = update.fields[column], mine == theirs { return false }
                if update.fields[column] == .null, theirs == nil { return false }
                return true
            }
            let lines = both.map { column in
                "\(label) \(column): read \(show(update.baseline[column] ?? nil)), yours \(update.fields[column]!), now \(show(now.values[column] ?? nil))"
            }
            switch policy {
            case .force:
                if !both.isEmpty { resolution.notes.append("\(label): yours kept for \(both.joined(separator: ", "))") }
            case .theirs:
                resolution.droppedFields[key] = Set(both)
                if !both.isEmpty { resolution.notes.append("\(label): the database's values kept for \(both.joined(separator: ", "))") }
            case .merge:
                if !both.isEmpty {
                    conflicted += 1
                    conflicts.append(contentsOf: lines)
                }
            case .fail:
                conflicted += 1
                if lines.isEmpty {
                    let others = changedColumns(read: update.baseline, now: now.values)
                    conflicts.append("\(label): changed by another session in fields this unit did not change (\(others.joined(separator: ", ")))")
                } else {
                    conflicts.append(contentsOf: lines)
                }
            }
        }

        for key in changes.deleteOrder {
            guard let delete = changes.deletes[key] else { continue }
            let label = "\(key.entity) \(key.id)"
            guard let now = current[key] else {
                resolution.notes.append("\(label) was already deleted by another session")
                continue
            }
            guard now.version != delete.version else { continue }
            switch policy {
            case .force: resolution.notes.append("\(label): deleted although another session changed it")
            case .theirs:
                resolution.droppedDeletes.insert(key)
                resolution.notes.append("\(label): changed by another session, so the database wins and it is kept")
            case .fail, .merge:
                conflicted += 1
                conflicts.append("\(label): changed by another session since this unit chose to delete it")
            }
        }

        if !conflicts.isEmpty {
            throw CommandError(.conflict,
                "\(conflicted) record(s) changed by another session since this unit read them; SAVE FORCE keeps yours, SAVE THEIRS keeps the database's, SAVE MERGE combines fields only one side changed",
                details: conflicts)
        }
        return resolution
    }

    private func changedColumns(read: [String: String?], now: [String: String?]) -> [String] {
        now.keys.sorted().filter { (read[$0] ?? nil) != (now[$0] ?? nil) }
    }

    private func show(_ text: String?) -> String { text.map(JSON.quote) ?? "nil" }
}
