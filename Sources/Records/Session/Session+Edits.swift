import Postgres

// MARK: - INSERT, UPDATE, DELETE, UPSERT, CHANGES

extension Session {
    /// Checks `attr=value` pairs against the entity: names, types, and that each #ref is a
    /// pending record of the relationship's target. `setting`: the pairs are values to store,
    /// so a column PostgreSQL computes is refused; else they name a record.
    func fields(_ values: [Assignment], of entity: Entity, model: Model, setting: Bool = true) throws(CommandError) -> [(column: String, value: FieldValue)] {
        let (_, plan) = try fieldPlans.plan(entity.name, values, model: model) { () throws(CommandError) in entity }
        return try fields(values, plan: plan, entity: entity, setting: setting)
    }

    /// The pairs' values checked against what their names name (`plan`).
    func fields(_ values: [Assignment], plan: FieldPlan, entity: Entity, setting: Bool = true) throws(CommandError) -> [(column: String, value: FieldValue)] {
        var result: [(column: String, value: FieldValue)] = []
        result.reserveCapacity(values.count)
        for (assignment, target) in zip(values, plan.targets) {
            if setting, let refusal = target.unsettable { throw refusal }
            switch target.role {
            case .refused(let error):
                throw error
            case .attribute(let acceptsRef):
                if case .ref = assignment.value, !acceptsRef {
                    throw CommandError(.validation, "\(target.label) is an attribute: #refs go in to-one relationships")
                }
                result.append((target.column, try ValueCoercion.coerce(assignment.value, to: target.kind, name: target.label)))
            case .relationship(let targetName):
                guard case .ref(let ref) = assignment.value else {
                    result.append((target.column, try ValueCoercion.coerce(assignment.value, to: target.kind, name: target.label)))
                    continue
                }
                guard let pending = unit.current.insertEntity(ref) else {
                    if let found = unit.found[ref] {
                        result.append((target.column, try Self.value(of: found, named: ref, for: target, in: entity, to: targetName)))
                        continue
                    }
                    throw CommandError(.notFound, "\(target.label): no pending record #\(ref) in this unit of work (a #ref names an INSERT or an UPSERT ... AS #name made before)")
                }
                guard pending == targetName else {
                    throw CommandError(.validation, "\(target.label) points at \(targetName), but #\(ref) is a pending \(pending)")
                }
                result.append((target.column, .ref(ref)))
            }
        }
        if let twice = plan.twice { throw CommandError(.syntax, "'\(entity.label(twice))' is given twice") }
        return result
    }

    /// The value a relationship takes from a stored record an UPSERT named: the column the
    /// relationship references (the key, or another unique column).
    private static func value(of found: FoundRecord, named ref: String, for target: FieldPlan.Target, in entity: Entity,
                              to targetEntity: String) throws(CommandError) -> FieldValue {
        guard found.key.entity == targetEntity else {
            throw CommandError(.validation, "\(target.label) points at \(targetEntity), but #\(ref) names \(found.key.entity) \(found.key.values.joined(separator: " "))")
        }
        guard let relationship = entity.relationships.first(where: { !$0.isToMany && $0.column == target.column }),
              let value = found.values[relationship.referencedColumn] else {
            throw CommandError(.validation, "\(target.label): #\(ref) names a stored \(targetEntity) without a value for the column \(target.label) references")
        }
        return .text(value)
    }

    /// A name already standing for a stored record an UPSERT found, given now to another (`key`;
    /// nil: a record to insert): one name, one record, in a unit of work.
    static func nameTaken(_ ref: String, _ named: FoundRecord?, by key: RecordKey?) -> CommandError? {
        guard let named, named.key != key else { return nil }
        return CommandError(.validation, "#\(ref) already names \(named.key.entity) \(named.key.values.joined(separator: " ")), found by an UPSERT in this unit of work")
    }

    /// Room for one more pending change, counting every nested scratchpad's copy.
    private func checkRoom() throws(CommandError) {
        guard unit.heldCount < context.limits.maxPendingChanges else {
            throw CommandError(.limit, "the unit of work holds \(context.limits.maxPendingChanges) pending changes (nested scratchpads count in full), the limit: SAVE or ROLLBACK first")
        }
        // The line's length bounds what the change adds (an update adds the record as read).
        guard unit.heldBytes + lineBytes <= context.limits.maxPendingBytes else {
            throw CommandError(.limit, "the unit of work holds \(unit.heldBytes) bytes of values; this change would pass the limit of \(context.limits.maxPendingBytes) (nested scratchpads count in full): SAVE or ROLLBACK first")
        }
    }

    func insert(_ entityName: String, ref: String?, _ values: [Assignment], model: Model) throws(CommandError) -> Reply {
        let (entity, plan) = try fieldPlans.plan(entityName, values, model: model) { () throws(CommandError) in try self.entity(entityName, model) }
        if let ref, unit.current.insertEntity(ref) != nil {
            throw CommandError(.validation, "#\(ref) already names a pending insert in this unit of work")
        }
        if let ref, let taken = Self.nameTaken(ref, unit.found[ref], by: nil) { throw taken }
        let fields = try fields(values, plan: plan, entity: entity)
        try checkRoom()
        let name: String
        if let ref {
            unit.current.add(PendingInsert(ref: ref, entity: entity.name, fields: fields))
            name = ref
        } else {
            name = unit.current.addGenerated(entity: entity.name, fields: fields)
        }
        return .ok(.concatenating("#", name, " pending insert ", entity.name, " (", String(unit.current.count), " pending)"))
    }

    func update(_ entityName: String, address: RecordAddress, _ values: [Assignment], model: Model) throws(CommandError) -> Step {
        let entity = try entity(entityName, model)
        let fields = try fields(values, of: entity, model: model)
        switch try target(address, in: entity, model: model) {
        case .pending(let ref):
            return .reply(updatePending(ref, fields))
        case .stored(let key):
            try checkKeyChange(fields, of: entity)
            if unit.current.deletes[key] != nil {
                throw CommandError(.validation, "\(entity.name) \(entity.show(key)) is pending deletion in this unit of work")
            }
            if var existing = unit.current.updates[key] {
                for f in fields { existing.set(f.column, f.value) }
                unit.current.setUpdate(existing)
                return .reply(.ok("pending update \(entity.name) \(entity.show(key)) (\(unit.current.count) pending)"))
            }
            try checkRoom()
            return updateStored(entity, .stored(key), fields, model: model)
        case .unique(let name, let filter):
            try checkKeyChange(fields, of: entity)
            try checkRoom()
            return updateStored(entity, .unique(entity: name, filter: filter), fields, model: model)
        }
    }

    /// A key may change where PostgreSQL lets it (its ON UPDATE rules decide what the records
    /// pointing at it do, as `keyChangePreview` tells), never to nil.
    private func checkKeyChange(_ fields: [(column: String, value: FieldValue)], of entity: Entity) throws(CommandError) {
        for field in fields where field.value == .null && entity.keyColumns.contains(field.column) {
            throw CommandError(.validation, "\(entity.label(field.column)) is part of the key: it cannot be nil")
        }
    }

    private func updatePending(_ ref: String, _ fields: [(column: String, value: FieldValue)]) -> Reply {
        unit.current.updateInsert(ref) { insert in for f in fields { insert.set(f.column, f.value) } }
        return .ok("#\(ref) pending insert updated (\(unit.current.count) pending)")
    }

    /// Reads the stored record (its version and values, as the database has them) and keeps
    /// the update pending. A record this unit read earlier keeps the version it read.
    private func updateStored(_ entity: Entity, _ target: Target, _ fields: [(column: String, value: FieldValue)], model: Model) -> Step {
        let snapshot = self.snapshot
        let reads = unit.reads
        let count = unit.current.count
        let fieldList = fields.map { FieldAssignment(column: $0.column, value: $0.value) }
        return database(model) { context in
            var key: RecordKey
            var assigned: [String: AssignedKey] = [:]
            switch target {
            case .stored(let given): key = given
            case .unique(_, let filter):
                let ((found, pending), view) = try context.withView(snapshot, model: model) { view in
                    try context.lookUp(entity, filter, view: view, model: model)
                }
                assigned = view.allocated
                if let pending {
                    let allocated = assigned
                    return WorkResult(reply: .ok("#\(pending) pending insert updated (\(count) pending)")) { session in
                        session.unit.assign(allocated)
                        session.unit.current.updateInsert(pending) { insert in for f in fieldList { insert.set(f.column, f.value) } }
                    }
                }
                key = found
            case .pending:
                throw CommandError(.internal, "a pending record reached the stored path")
            }
            let stored = try context.readStored(entity, key, model: model)
            key = stored.key
            if snapshot.changes.deletes[key] != nil {
                throw CommandError(.validation, "\(entity.name) \(entity.show(key)) is pending deletion in this unit of work")
            }
            let read = reads.version(of: key, current: stored.version, horizon: stored.horizon)
            let isNew = snapshot.changes.updates[key] == nil
            let shown = entity.show(key)
            let (previewLines, effects) = try context.keyChangePreview(entity, key, fieldList, stored: stored.values, model: model)
            var message = "pending update \(entity.name) \(shown)\(effects) (\(count + (isNew ? 1 : 0)) pending)"
            if let read, read != stored.version {
                message += "; note: changed by another session since this unit read it, so SAVE will report a CONFLICT unless FORCE"
            }
            let version = stored.version
            let baseline = stored.values
            let allocated = assigned
            let stable = key
            return WorkResult(reply: .ok(message, lines: previewLines)) { session in
                let key = stable
                session.unit.assign(allocated)
                var update = session.unit.current.updates[key]
                    ?? PendingUpdate(key: key, version: read ?? version, changedSinceRead: read.map { $0 != version } ?? false, baseline: baseline)
                for f in fieldList { update.set(f.column, f.value) }
                session.unit.current.setUpdate(update)
            }
        }
    }

    func delete(_ entityName: String, address: RecordAddress, model: Model) throws(CommandError) -> Step {
        let entity = try entity(entityName, model)
        let target = try target(address, in: entity, model: model)
        if case .pending(let ref) = target {
            let dependents = unit.current.dependents(of: ref)
            guard dependents.names.isEmpty else {
                let more = dependents.more ? " and more" : ""
                throw CommandError(.denied, "#\(ref) is pointed at by pending \(dependents.names.joined(separator: ", "))\(more): delete or change those first")
            }
            unit.current.removeInsert(ref)
            return .reply(.ok("#\(ref) pending insert dropped (\(unit.current.count) pending)"))
        }
        if case .stored(let key) = target, unit.current.deletes[key] != nil {
            return .reply(.ok("\(entity.name) \(entity.show(key)) is already pending deletion (\(unit.current.count) pending)"))
        }
        try checkRoom()
        let snapshot = self.snapshot
        let reads = unit.reads
        let count = unit.current.count
        return database(model) { context in
            var key: RecordKey
            switch target {
            case .stored(let given): key = given
            case .unique(_, let filter):
                let ((found, pending), _) = try context.withView(snapshot, model: model) { view in
                    try context.lookUp(entity, filter, view: view, model: model)
                }
                if let pending {
                    throw CommandError(.validation, "\(entity.name) \(entity.show(found)) is the pending insert #\(pending): DELETE \(entity.name) #\(pending)")
                }
                key = found
            case .pending:
                throw CommandError(.internal, "a pending record reached the stored path")
            }
            let stored = try context.readStored(entity, key, model: model)
            key = stored.key
            let read = reads.version(of: key, current: stored.version, horizon: stored.horizon)
            let version = snapshot.changes.updates[key]?.version ?? read ?? stored.version
            let changedSinceRead = snapshot.changes.updates[key]?.changedSinceRead ?? (read.map { $0 != stored.version } ?? false)
            let (preview, view) = try context.withView(snapshot, model: model) { _ in
                try context.preview([key], model: model)
            }
            var message = "pending delete \(entity.name) \(entity.show(key))"
            message += Self.effects(preview)
            if changedSinceRead {
                message += "; note: changed by another session since this unit read it, so SAVE will report a CONFLICT unless FORCE"
            }
            let added = snapshot.changes.deletes[key] == nil ? 1 : 0
            let reply = Reply.ok(message + " (\(count + added - (snapshot.changes.updates[key] != nil ? 1 : 0)) pending)", lines: preview.lines)
            let allocated = view.allocated
            let stable = key
            return WorkResult(reply: reply) { session in
                let key = stable
                session.unit.assign(allocated)
                session.unit.current.removeUpdate(key)
                session.unit.current.addDelete(PendingDelete(key: key, version: version, changedSinceRead: changedSinceRead))
            }
        }
    }

    /// `, cascades to 3, nullifies 2`: what a delete's rules will do.
    static func effects(_ preview: DeletePreview) -> String {
        var text = ""
        if preview.cascadedCount > 0 { text += ", cascades to \(preview.cascadedCount)" }
        if preview.nullifiedCount > 0 { text += ", nullifies \(preview.nullifiedCount)" }
        if preview.deniedCount > 0 { text += ", DENIED by \(preview.deniedCount): SAVE will fail unless they go first" }
        return text
    }

    /// `UPDATE entity WHERE ... SET ...` and `DELETE entity WHERE ...`: pending changes to the
    /// records that match when SAVE applies them; the reply previews how many match now.
    func bulk(_ entityName: String, predicate: Predicate, values: [Assignment]?, text: String, model: Model) throws(CommandError) -> Step {
        let entity = try entity(entityName, model)
        var check = SQLText()
        _ = try QueryBuilder.keys(of: entity, matching: predicate, model: model, into: &check)  // names checked now
        var kind = BulkChange.Kind.delete
        if let values {
            let fields = try fields(values, of: entity, model: model)
            if fields.contains(where: { entity.keyColumns.contains($0.column) }) {
                throw CommandError(.validation, "\(entity.name): the key cannot change")
            }
            kind = .update(fields.map { FieldAssignment(column: $0.column, value: $0.value) })
        }
        try checkRoom()
        let change = BulkChange(entity: entity.name, predicate: predicate, kind: kind, text: text)
        let snapshot = self.snapshot
        let count = unit.current.count
        return database(model) { context in
            let ((keys, preview), view) = try context.withView(snapshot, model: model) { _ in
                var sql = SQLText()
                let matching = try QueryBuilder.keys(of: entity, matching: predicate, model: model, into: &sql)
                let rows = try context.connection.query(matching, sql.parameters)
                let keys = (0..<rows.rowCount).map { row in entity.recordKey((0..<entity.key.count).map { rows.string(row, $0) }) }
                return (keys, change.isDelete ? try context.preview(keys, model: model) : DeletePreview())
            }
            let noun = "\(keys.count) \(entity.name) record\(keys.count == 1 ? " that matches" : "s that match") now"
            let message = (change.isDelete ? "pending delete of \(noun)" + Self.effects(preview) : "pending update of \(noun)")
                + "; SAVE applies it to those that match then (\(count + 1) pending)"
            let allocated = view.allocated
            return WorkResult(reply: .ok(message, lines: preview.lines)) { session in
                session.unit.assign(allocated)
                session.unit.current.addBulk(change)
            }
        }
    }

    /// `ref`: the name the record goes by in later lines (`AS #name`), whether UPSERT inserts it
    /// (a pending insert's #ref) or finds it stored (`found`).
    func upsert(_ entityName: String, ref: String?, key keyNames: [String], _ values: [Assignment], model: Model) throws(CommandError) -> Step {
        let entity = try entity(entityName, model)
        let columns = try upsertColumns(keyNames, of: entity)
        let fields = try fields(values, of: entity, model: model)
        var keyValues: [(column: String, value: FieldValue)] = []
        for column in columns {
            guard let value = fields.first(where: { $0.column == column })?.value, value != .null else {
                throw CommandError(.validation, "UPSERT ON \(entity.label(column)) needs \(entity.label(column))=value among the values")
            }
            keyValues.append((column, value))
        }
        if let step = try upsertPending(entity, ref: ref, columns: columns, keyValues: keyValues, fields) { return step }
        try checkRoom()
        return try upsertStored(entity, ref: ref, columns: columns, keyValues: keyValues, fields, model: model)
    }

    /// The columns of `UPSERT ... ON names`: one of the entity's unique keys.
    private func upsertColumns(_ names: [String], of entity: Entity) throws(CommandError) -> [String] {
        var columns: [String] = []
        for name in names {
            guard let column = entity.column(named: name) else { throw CommandError(.unknown, "\(entity.name) has no attribute '\(name)'") }
            columns.append(column)
        }
        guard entity.uniqueKeys.contains(where: { Set($0) == Set(columns) }) else {
            let named = columns.count == 1 ? entity.label(columns[0]) : "(" + columns.map(entity.label).joined(separator: ", ") + ")"
            throw CommandError(.validation, "UPSERT needs a unique attribute: \(entity.name).\(named) is not unique")
        }
        return columns
    }

    /// A pending insert or update with the same unique values takes the fields; nil when none.
    private func upsertPending(_ entity: Entity, ref: String?, columns: [String], keyValues: [(column: String, value: FieldValue)],
                               _ fields: [(column: String, value: FieldValue)]) throws(CommandError) -> Step? {
        if let pending = unit.current.inserts.first(where: { insert in insert.entity == entity.name && keyValues.allSatisfy { insert.value(of: $0.column) == $0.value } }) {
            if let ref, ref != pending.ref {
                throw CommandError(.validation, "\(entity.name) with these values is the pending insert #\(pending.ref): name it #\(pending.ref)")
            }
            return .reply(updatePending(pending.ref, fields))
        }
        if let ref, unit.current.insertEntity(ref) != nil {
            throw CommandError(.validation, "#\(ref) already names a pending insert in this unit of work")
        }
        if let existing = unit.current.updates.values.first(where: { update in
            update.entity == entity.name && keyValues.allSatisfy { pair in
                update.fields[pair.column] == pair.value || (update.fields[pair.column] == nil && pair.value == (update.baseline[pair.column] ?? nil).map(FieldValue.text))
            }
        }) {
            if let ref, let taken = Self.nameTaken(ref, unit.found[ref], by: existing.key) { throw taken }
            var update = existing
            for f in fields where !columns.contains(f.column) || update.fields[f.column] != nil { update.set(f.column, f.value) }
            unit.current.setUpdate(update)
            if let ref { unit.name(ref, FoundRecord(key: update.key, values: ColumnValues(update.baseline))) }
            return .reply(.ok("pending update \(entity.name) \(entity.show(update.key))\(ref.map { " as #" + $0 } ?? "") (\(unit.current.count) pending)"))
        }
        return nil
    }

    /// No pending record has the values: PostgreSQL is asked for a stored one, which becomes
    /// a pending update; else the record is a pending insert.
    private func upsertStored(_ entity: Entity, ref: String?, columns: [String], keyValues: [(column: String, value: FieldValue)],
                              _ fields: [(column: String, value: FieldValue)], model: Model) throws(CommandError) -> Step {
        var filtered: [Target.Filter] = []
        for pair in keyValues {
            guard case .text(let text) = pair.value else {
                throw CommandError(.validation, "UPSERT ON \(entity.label(pair.column)): a #ref names a pending record, which no stored record matches")
            }
            filtered.append(Target.Filter(column: pair.column, value: text))
        }
        let filter = filtered
        let keyColumns = columns
        let named = ref.flatMap { unit.found[$0] }
        let snapshot = self.snapshot
        let reads = unit.reads
        let count = unit.current.count
        let described = filter.map { "\(entity.label($0.column)) \(JSON.quote($0.value))" }.joined(separator: ", ")
        let fieldList = fields.map { FieldAssignment(column: $0.column, value: $0.value) }
        let generatedName = unit.current.nextGeneratedName(entity.name)
        return database(model) { context in
            var sql = SQLText()
            let conditions = filter.map { item in
                "\(SQL.identifier(item.column)) = \(sql.bind(item.value))::\(entity.columns.first { $0.column == item.column }?.sqlType ?? "text")"
            }
            sql.text = "SELECT \(entity.keyText(alias: nil)) FROM \(model.table(entity)) WHERE " + conditions.joined(separator: " AND ")
            let found = try context.retryingOnce { try context.connection.query(sql.text, sql.parameters) }
            guard found.rowCount == 1 else {
                if let ref, let taken = Self.nameTaken(ref, named, by: nil) { throw taken }
                // Named as INSERT names it: the #ref first, the one given or the next free.
                let name = ref ?? generatedName
                return WorkResult(reply: .ok("#\(name) pending insert \(entity.name), no \(described) yet (\(count + 1) pending)")) { session in
                    let fields = fieldList.map { ($0.column, $0.value) }
                    if let ref {
                        session.unit.current.add(PendingInsert(ref: ref, entity: entity.name, fields: fields))
                    } else {
                        _ = session.unit.current.addGenerated(entity: entity.name, fields: fields)
                    }
                }
            }
            let stored = try context.readStored(entity, entity.recordKey((0..<entity.key.count).map { found.string(0, $0) }), model: model)
            let key = stored.key
            if let ref, let taken = Self.nameTaken(ref, named, by: key) { throw taken }
            if snapshot.changes.deletes[key] != nil {
                throw CommandError(.validation, "\(entity.name) \(entity.show(key)) with \(described) is pending deletion")
            }
            let read = reads.version(of: key, current: stored.version, horizon: stored.horizon)
            let version = stored.version
            let baseline = stored.values
            let named = ref.map { " as #" + $0 } ?? ""
            return WorkResult(reply: .ok("pending update \(entity.name) \(entity.show(key))\(named), found by \(filter.map { entity.label($0.column) }.joined(separator: ", ")) (\(count + 1) pending)")) { session in
                var update = PendingUpdate(key: key, version: read ?? version, changedSinceRead: read.map { $0 != version } ?? false, baseline: baseline)
                for f in fieldList where !keyColumns.contains(f.column) { update.set(f.column, f.value) }
                session.unit.current.setUpdate(update)
                if let ref { session.unit.name(ref, FoundRecord(key: key, values: ColumnValues(baseline))) }
            }
        }
    }

    func changes() -> Reply {
        let set = unit.current
        var lines: [String] = []
        for insert in set.inserts {
            let entity = context.model.entity(named: insert.entity)
            var shown = insert.fields.map { field in "\(label(field.column, entity))=\(show(field.value, field.column, entity))" }
            if let entity, let assigned = unit.assigned[insert.ref], insert.entity == assigned.entity {
                // The key it was shown with, kept until SAVE.
                let keys = entity.allocatedColumns.map(\.name).filter { insert.value(of: $0) == nil }.compactMap { column in
                    assigned.values[column].map { "\(entity.label(column)): \(Entity.word($0, kind: entity.attribute(named: column)?.kind ?? entity.keyKind(column)))" }
                }
                if !keys.isEmpty { shown.append("(" + keys.joined(separator: ", ") + ")") }
            }
            lines.append((["insert #\(insert.ref) \(insert.entity)"] + shown).joined(separator: " "))
        }
        for key in set.updateOrder {
            guard let update = set.updates[key] else { continue }
            let entity = context.model.entity(named: update.entity)
            let shown = update.order.map { column in
                let old = show((update.baseline[column] ?? nil).map(FieldValue.text) ?? .null, column, entity)
                return "\(label(column, entity)): \(old) -> \(show(update.fields[column]!, column, entity))"
            }
            lines.append("update \(update.entity) \(entity?.show(key) ?? key.values.joined(separator: ",")) " + shown.joined(separator: ", "))
        }
        for change in set.bulk { lines.append(change.text) }
        for key in set.deleteOrder {
            lines.append("delete \(key.entity) \(context.model.entity(named: key.entity)?.show(key) ?? key.values.joined(separator: ","))")
        }
        guard set.count > 0 else { return .ok("no pending changes" + (unit.depth > 0 ? " (depth \(unit.depth))" : "")) }
        return .ok(changeSummary(set), lines: lines)
    }

    /// `3 pending change(s): 1 insert, 1 update, 1 delete; depth 0`.
    func changeSummary(_ set: ChangeSet) -> String {
        var summary = "\(set.count) pending change(s): \(set.inserts.count) insert, \(set.updates.count) update, \(set.deletes.count) delete"
        if !set.bulk.isEmpty { summary += ", \(set.bulk.count) by predicate" }
        return summary + "; depth \(unit.depth)"
    }

    /// A value as the client would type it: numbers and booleans bare, text quoted.
    func show(_ value: FieldValue, _ column: String, _ entity: Entity?) -> String {
        guard case .text(let text) = value else { return value.description }
        switch context.model.kind(ofColumn: column, in: entity) {
        case .integer?, .decimal?, .double?, .boolean?: return text
        case .timestamp?: return JSON.quote(TimestampText.iso(text))
        case .array(let element)?: return ArrayText.json(text, element: element) ?? JSON.quote(text)
        default: return JSON.quote(text)
        }
    }

    /// A column shown by the name the client uses: the relationship's for foreign keys.
    func label(_ column: String, _ entity: Entity?) -> String {
        entity?.label(column) ?? column
    }
}

extension WorkContext {
    /// What deleting `keys` would do under the delete rules, where it runs (inside a view).
    func preview(_ keys: [RecordKey], model: Model) throws -> DeletePreview {
        var plan = DeletePreviewPlan(model: model, roots: keys)
        while let statements = plan.next() {
            switch RoundResult.run(statements, on: connection) {
            case .success(let results): plan.received(results)
            case .failure(_, let error): throw error
            }
        }
        return plan.preview
    }
}
