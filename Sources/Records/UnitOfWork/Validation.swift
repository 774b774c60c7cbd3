/// One pending change of a unit, as plans and problems name it.
public enum ChangeID: Hashable, Sendable {
    case insert(String)
    case update(RecordKey)
    case delete(RecordKey)
    case bulk(Int)
}

/// Something that keeps a pending change from being written, in words for the client.
public struct Problem: Sendable, Equatable {
    public var change: ChangeID
    public var message: String
}

/// The problems the model can see without PostgreSQL: required values missing, `#ref`s to
/// records no longer pending, entities gone after a reload. Pure.
enum Validation {
    static func problems(_ changes: ChangeSet, model: Model, keys: PendingKeys) -> [Problem] {
        insertProblems(changes, model: model, keys: keys) + updateProblems(changes, model: model) + otherProblems(changes, model: model)
    }

    /// Each insert's: its entity gone, required values and relationships missing, columns
    /// gone, `#ref`s no longer pending.
    private static func insertProblems(_ changes: ChangeSet, model: Model, keys: PendingKeys) -> [Problem] {
        var problems: [Problem] = []
        // Per entity, once (what every insert of it must have is the entity's, worked out
        // when the model was read).
        var entityOf = RunMemo<Entity?>()
        var checkedColumns: (entity: String, columns: [String])?
        var pendingEntity = RunMemo<String?>(keeps: false)
        for (place, insert) in changes.inserts.enumerated() {
            let id = ChangeID.insert(insert.ref)
            var label: String { "#\(insert.ref) \(insert.entity)" }
            guard let entity = entityOf.value(insert.entity, { model.entity(exactly: $0) }) else {
                problems.append(Problem(change: id, message: "\(label): the entity no longer exists"))
                continue
            }
            // Looked up only for a value the insert leaves out (most rows leave none).
            func given(_ column: String) -> String? { keys[place]?.values[column] }
            for attribute in entity.requiredAttributes {
                let value = insert.value(of: attribute.name)
                guard value == nil || value == .null, given(attribute.name) == nil else { continue }
                let why = attribute.isPrimaryKey ? " (the key has no default: give it)" : ""
                problems.append(Problem(change: id, message: "\(label): \(attribute.name) is required\(why)"))
            }
            for column in entity.keyReferences {
                // A key column that is a foreign key (a join table's): the relationship must be set.
                let value = insert.value(of: column)
                if (value == nil || value == .null) && given(column) == nil {
                    problems.append(Problem(change: id, message: "\(label): \(entity.label(column)) is required (it is part of the key)"))
                }
            }
            for relationship in entity.requiredToOne {
                let value = insert.value(of: relationship.column)
                if value == nil || value == .null {
                    problems.append(Problem(change: id, message: "\(label): \(relationship.name) is required"))
                }
            }
            // A run of rows names the same columns: compared (cheap for short names) rather
            // than looked up again.
            if checkedColumns?.entity != entity.name || !insert.sets(exactly: checkedColumns?.columns ?? []) {
                let columns = insert.fields.map(\.column)
                let missing = columns.filter { !entity.hasColumn($0) }
                for column in missing {
                    problems.append(Problem(change: id, message: "\(label): \(column) no longer exists (the model changed since it was set): ROLLBACK, or set the unit again"))
                }
                checkedColumns = missing.isEmpty ? (entity.name, columns) : nil
            }
            for (column, value) in insert.fields {
                guard case .ref(let ref) = value else { continue }
                if pendingEntity.value(ref, { changes.insertEntity($0) }) == nil {
                    problems.append(Problem(change: id, message: "\(label): \(entity.label(column)) points at #\(ref), which is no longer pending"))
                }
            }
        }
        return problems
    }

    /// Each update's: its entity or columns gone, required values set to null, `#ref`s no
    /// longer pending.
    private static func updateProblems(_ changes: ChangeSet, model: Model) -> [Problem] {
        var problems: [Problem] = []
        for key in changes.updateOrder {
            guard let update = changes.updates[key] else { continue }
            let id = ChangeID.update(key)
            guard let entity = model.entity(exactly: update.entity) else {
                problems.append(Problem(change: id, message: "\(update.entity): the entity no longer exists"))
                continue
            }
            let label = "\(entity.name) \(entity.show(key))"
            for column in update.order where !entity.hasColumn(column) {
                problems.append(Problem(change: id, message: "\(label): \(column) no longer exists (the model changed since it was set): ROLLBACK, or set the unit again"))
            }
            for column in update.order {
                switch update.fields[column] {
                case .null? where entity.triggersMayRewriteUpdates:
                    break  // a BEFORE UPDATE trigger may fill it: PostgreSQL judges
                case .null?:
                    if let attribute = entity.attribute(named: column), attribute.isNotNull {
                        problems.append(Problem(change: id, message: "\(label): \(column) is required"))
                    }
                    if let relationship = entity.relationship(column: column), relationship.isRequired {
                        problems.append(Problem(change: id, message: "\(label): \(relationship.name) is required"))
                    }
                case .ref(let ref)?:
                    if changes.insertEntity(ref) == nil {
                        problems.append(Problem(change: id, message: "\(label): \(entity.label(column)) points at #\(ref), which is no longer pending"))
                    }
                default: break
                }
            }
        }
        return problems
    }

    /// Deletes and bulk changes of entities gone, and bulk changes' `#ref`s no longer pending.
    private static func otherProblems(_ changes: ChangeSet, model: Model) -> [Problem] {
        var problems: [Problem] = []
        for key in changes.deleteOrder where model.entity(exactly: key.entity) == nil {
            problems.append(Problem(change: .delete(key), message: "\(key.entity): the entity no longer exists"))
        }
        for (index, change) in changes.bulk.enumerated() {
            if model.entity(exactly: change.entity) == nil {
                problems.append(Problem(change: .bulk(index), message: "\(change.text): the entity no longer exists"))
            }
            for ref in change.refs where changes.insertEntity(ref) == nil {
                problems.append(Problem(change: .bulk(index), message: "\(change.text): points at #\(ref), which is no longer pending"))
            }
        }
        return problems
    }

    /// The changes left out of a read's view: those with problems, and those that point at a
    /// pending insert left out (they could not be applied without it), each with its reason.
    static func excluded(_ changes: ChangeSet, problems: [Problem]) -> [ChangeID: String] {
        var reasons: [ChangeID: String] = [:]
        for problem in problems where reasons[problem.change] == nil { reasons[problem.change] = problem.message }
        // Passed on to what points at a left-out insert, and on again, in one sweep from who
        // points at whom: a pass over the unit a link was quadratic in a chain of references
        // (minutes of a worker's time for a read in a unit of 50,000).
        var pointedAtBy: [String: [Int]] = [:]
        var sweep: [String] = []
        for (place, insert) in changes.inserts.enumerated() {
            for target in insert.refs { pointedAtBy[target, default: []].append(place) }
            if reasons[.insert(insert.ref)] != nil { sweep.append(insert.ref) }
        }
        var next = 0
        while next < sweep.count {
            let target = sweep[next]
            next += 1
            for place in pointedAtBy[target] ?? [] {
                let insert = changes.inserts[place]
                guard reasons[.insert(insert.ref)] == nil else { continue }
                let missing = insert.refs.first { reasons[.insert($0)] != nil } ?? target
                reasons[.insert(insert.ref)] = "#\(insert.ref) \(insert.entity): points at #\(missing), which cannot be applied yet"
                sweep.append(insert.ref)
            }
        }
        for key in changes.updateOrder where reasons[.update(key)] == nil {
            let refs = changes.updates[key]!.fields.values.compactMap { if case .ref(let r) = $0 { r } else { nil } }
            if let missing = refs.first(where: { reasons[.insert($0)] != nil }) {
                reasons[.update(key)] = "update \(key.entity): points at #\(missing), which cannot be applied yet"
            }
        }
        for (index, change) in changes.bulk.enumerated() where reasons[.bulk(index)] == nil {
            if let missing = change.refs.first(where: { reasons[.insert($0)] != nil }) {
                reasons[.bulk(index)] = "\(change.text): points at #\(missing), which cannot be applied yet"
            }
        }
        return reasons
    }
}

extension Entity {
    /// Whether `column` is one of the table's columns now (an attribute, a foreign key's column,
    /// or a key column): a pending value for a dropped column would be lost silently.
    func hasColumn(_ column: String) -> Bool {
        // `columnSet` holds them all as written (a pending change's columns are); an attribute
        // is also found in another case.
        columnSet.contains(column) || attribute(named: column) != nil
    }
}
