/// Optimistic concurrency for SAVE: the records the unit updates or deletes are locked and
/// their `xmin` compared with the version the unit read, then the merge policy decides (as
/// Npgsql uses xmin for concurrency tokens, and Core Data applies its merge policies). Pure:
/// it writes the lock statements and judges their results.
struct ConflictCheck {
    let model: Model
    let changes: ChangeSet

    struct Resolution: Sendable {
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

    /// `SELECT xmin, columns ... FOR UPDATE` of the records one entity's changes touch.
    struct Lock: Sendable {
        var statement: Statement
        var entity: String
        var columns: [String]
        /// A plain read of the same records, without the lock, on a table with row-level
        /// security: a record it finds that the lock does not is one the policies let the user
        /// read but not change (FOR UPDATE applies the UPDATE policy too), not a deleted one.
        var readOnly = false
    }

    /// One statement per entity, records in key order (two saves lock in the same order).
    func locks() -> [Lock] {
        var byEntity: [String: [RecordKey]] = [:]
        var order: [String] = []
        for key in changes.updateOrder + changes.deleteOrder {
            if byEntity[key.entity] == nil { order.append(key.entity) }
            byEntity[key.entity, default: []].append(key)
        }
        return order.sorted().flatMap { (name: String) -> [Lock] in
            guard let entity = model.entity(exactly: name) else { return [] }
            let columns = entity.columns.map(\.column)
            var sql = SQLText()
            let match = entity.keyMatch(Array(Set(byEntity[name]!)), alias: nil, into: &sql)
            let select = "SELECT xmin::text, \(entity.keyText(alias: nil)), " + columns.map { SQL.identifier($0) + "::text" }.joined(separator: ", ")
                + " FROM \(model.table(entity)) WHERE \(match) ORDER BY \(entity.keyList(alias: nil))"
            sql.text = select + " FOR UPDATE"
            let lock = Lock(statement: sql.statement, entity: entity.name, columns: columns)
            guard entity.hasRowSecurity else { return [lock] }
            return [lock, Lock(statement: Statement(select, sql.parameters), entity: entity.name, columns: columns, readOnly: true)]
        }
    }

    /// Compares the locked rows (`results[i]` answers `locks[i]`) with the versions the unit
    /// read, under the policy.
    func resolve(policy: MergePolicy, locks: [Lock], results: [StatementResult]) throws(CommandError) -> Resolution {
        let (current, readable) = lockedRows(locks, results)
        try refuseUnchangeable(current: current, readable: readable)
        var verdict = Verdict(model: model)
        for key in changes.updateOrder {
            guard let update = changes.updates[key] else { continue }
            judge(update: update, key, now: current[key], policy, &verdict)
        }
        for key in changes.deleteOrder {
            guard let delete = changes.deletes[key] else { continue }
            judge(delete: delete, key, now: current[key], policy, &verdict)
        }
        if !verdict.conflicts.isEmpty {
            throw CommandError(.conflict,
                "\(verdict.conflicted) record(s) changed by another session since this unit read them; SAVE FORCE keeps yours, SAVE THEIRS keeps the database's, SAVE MERGE combines fields only one side changed",
                details: verdict.conflicts, jsonDetails: verdict.conflictJSON)
        }
        return verdict.resolution
    }

    /// What the policy decided so far: the resolution, and the conflicts as people read them
    /// and as programs do.
    private struct Verdict {
        let model: Model
        var resolution = Resolution()
        var conflicts: [String] = []
        var conflictJSON: [String] = []
        var conflicted = 0

        /// `column`: the field both sides changed; its three values are shown typed by its kind.
        mutating func conflict(_ text: String, _ key: RecordKey, _ reason: String, column: String? = nil, read: String?? = nil,
                               yours: FieldValue? = nil, now: String?? = nil) {
            conflicts.append(text)
            let entity = model.entity(exactly: key.entity)
            var pairs: [(String, JSON.Value)] = [("entity", .string(key.entity)), ("key", .string(entity?.show(key) ?? key.values.joined(separator: ","))),
                                                 ("reason", .string(reason))]
            if let column {
                let kind = model.kind(ofColumn: column, in: entity)
                pairs.append(("field", .string(entity?.label(column) ?? column)))
                if let read { pairs.append(("read", ValueJSON.value(read, kind: kind))) }
                if let yours { pairs.append(("yours", ValueJSON.value(yours, kind: kind))) }
                if let now { pairs.append(("now", ValueJSON.value(now, kind: kind))) }
            }
            conflictJSON.append(JSON.Value.object(pairs).text)
        }
    }

    /// The locked rows by key, with their versions and values; and the keys the plain reads of
    /// tables with row-level security found.
    private func lockedRows(_ locks: [Lock], _ results: [StatementResult]) -> ([RecordKey: Current], Set<RecordKey>) {
        var current: [RecordKey: Current] = [:]
        var readable: Set<RecordKey> = []
        for (lock, result) in zip(locks, results) {
            guard let entity = model.entity(exactly: lock.entity) else { continue }
            if lock.readOnly {
                for row in result.rows { readable.insert(entity.recordKey(row, from: 1)) }
                continue
            }
            let start = 1 + entity.key.count
            for row in result.rows {
                var values: [String: String?] = [:]
                for (i, column) in lock.columns.enumerated() { values[column] = row[start + i] }
                current[entity.recordKey(row, from: 1)] = Current(version: row[0] ?? "", values: values)
            }
        }
        return (current, readable)
    }

    /// Readable but not lockable: the policies let this user read the record, not change it.
    private func refuseUnchangeable(current: [RecordKey: Current], readable: Set<RecordKey>) throws(CommandError) {
        let refused = (changes.updateOrder + changes.deleteOrder).filter { current[$0] == nil && readable.contains($0) }
        guard !refused.isEmpty else { return }
        let labels = refused.map(label)
        throw CommandError(.forbidden, "the row-level security policies let this user read but not change \(labels.joined(separator: ", ")); nothing was saved",
                           details: labels.map { "\($0): not changeable by this user" })
    }

    private func label(_ key: RecordKey) -> String {
        (model.entity(exactly: key.entity).map { "\($0.name) \($0.show(key))" }) ?? key.entity
    }

    /// An update against the record as it is now (nil: deleted since it was read).
    private func judge(update: PendingUpdate, _ key: RecordKey, now: Current?, _ policy: MergePolicy, _ verdict: inout Verdict) {
        let label = label(key)
        guard let now else {
            switch policy {
            case .fail, .merge:
                verdict.conflicted += 1
                verdict.conflict("\(label): deleted by another session since it was read", key, "deleted")
            case .force, .theirs:
                verdict.resolution.droppedFields[key] = Set(update.order)
                verdict.resolution.notes.append("\(label) was deleted by another session: its update is dropped")
            }
            return
        }
        guard now.version != update.version else { return }
        // The fields both sides changed, to different values.
        let both = update.order.filter { column in
            let read = update.baseline[column] ?? nil
            let theirs = now.values[column] ?? nil
            guard read != theirs else { return false }
            if case .text(let mine) = update.fields[column], mine == theirs { return false }
            if update.fields[column] == .null, theirs == nil { return false }
            return true
        }
        func fieldConflicts() {
            for column in both {
                verdict.conflict("\(label) \(column): read \(show(update.baseline[column] ?? nil)), yours \(update.fields[column]!), now \(show(now.values[column] ?? nil))",
                                 key, "both changed", column: column,
                                 read: .some(update.baseline[column] ?? nil), yours: update.fields[column]!, now: .some(now.values[column] ?? nil))
            }
        }
        if update.changedSinceRead && policy != .force {
            // What changed between this unit's read and its UPDATE is not known field by field.
            verdict.conflicted += 1
            verdict.conflict("\(label): changed by another session after this unit read it and before its UPDATE", key, "changed before the update")
            return
        }
        switch policy {
        case .force:
            if !both.isEmpty { verdict.resolution.notes.append("\(label): yours kept for \(both.joined(separator: ", "))") }
        case .theirs:
            verdict.resolution.droppedFields[key] = Set(both)
            if !both.isEmpty { verdict.resolution.notes.append("\(label): the database's values kept for \(both.joined(separator: ", "))") }
        case .merge:
            if !both.isEmpty {
                verdict.conflicted += 1
                fieldConflicts()
            }
        case .fail:
            verdict.conflicted += 1
            if both.isEmpty {
                let others = changedColumns(read: update.baseline, now: now.values)
                verdict.conflict("\(label): changed by another session in fields this unit did not change (\(others.joined(separator: ", ")))", key, "other fields changed")
            } else {
                fieldConflicts()
            }
        }
    }

    /// A delete against the record as it is now (nil: deleted already).
    private func judge(delete: PendingDelete, _ key: RecordKey, now: Current?, _ policy: MergePolicy, _ verdict: inout Verdict) {
        let label = label(key)
        guard let now else {
            verdict.resolution.droppedDeletes.insert(key)
            verdict.resolution.notes.append("\(label) was already deleted by another session")
            return
        }
        guard now.version != delete.version else { return }
        switch policy {
        case .force: verdict.resolution.notes.append("\(label): deleted although another session changed it")
        case .theirs:
            verdict.resolution.droppedDeletes.insert(key)
            verdict.resolution.notes.append("\(label): changed by another session, so the database wins and it is kept")
        case .fail, .merge:
            verdict.conflicted += 1
            verdict.conflict("\(label): changed by another session since this unit chose to delete it", key, "changed before the delete")
        }
    }

    private func changedColumns(read: [String: String?], now: [String: String?]) -> [String] {
        now.keys.sorted().filter { (read[$0] ?? nil) != (now[$0] ?? nil) }
    }

    private func show(_ text: String?) -> String { text.map(JSON.quote) ?? "nil" }
}
