import Foundation

// MARK: - CHANGES for programs: counts and changes as JSON

extension Session {
    /// `CHANGES COUNT`: one JSON line in either format, so a prompt or a program reads the
    /// pending count without parsing English.
    func changeCount() -> Reply {
        let set = unit.current
        let object = JSON.Value.object([
            ("pending", .int(set.count)), ("inserts", .int(set.inserts.count)), ("updates", .int(set.updates.count)),
            ("deletes", .int(set.deletes.count)), ("byPredicate", .int(set.bulk.count)), ("depth", .int(unit.depth)),
        ])
        return .ok(jsonStatus, lines: [object.text])
    }

    /// CHANGES under FORMAT JSON: one object a change, values typed as a FIND writes them
    /// (`ValueJSON`; null for NULL, a pending record as {"ref":"#e1"}).
    func changesJSON() -> Reply {
        let set = unit.current
        var lines: [String] = []
        for insert in set.inserts {
            let entity = context.model.entity(named: insert.entity)
            let model = context.model
            let values = insert.fields.map { field in
                (label(field.column, entity), ValueJSON.value(field.value, kind: model.kind(ofColumn: field.column, in: entity)))
            }
            lines.append(JSON.Value.object([("op", .string("insert")), ("ref", .string("#" + insert.ref)), ("entity", .string(insert.entity)),
                                            ("values", .object(values))]).text)
        }
        for key in set.updateOrder {
            guard let update = set.updates[key] else { continue }
            let entity = context.model.entity(named: update.entity)
            let model = context.model
            let changed = update.order.map { column in
                let kind = model.kind(ofColumn: column, in: entity)
                return (label(column, entity), JSON.Value.object([("old", ValueJSON.value(update.baseline[column] ?? nil, kind: kind)),
                                                                  ("new", ValueJSON.value(update.fields[column]!, kind: kind))]))
            }
            lines.append(JSON.Value.object([("op", .string("update")), ("entity", .string(update.entity)), ("key", Self.json(key, entity)),
                                            ("changes", .object(changed))]).text)
        }
        for change in set.bulk {
            lines.append(JSON.Value.object([("op", .string(change.isDelete ? "deleteWhere" : "updateWhere")), ("entity", .string(change.entity)),
                                            ("text", .string(change.text))]).text)
        }
        for key in set.deleteOrder {
            lines.append(JSON.Value.object([("op", .string("delete")), ("entity", .string(key.entity)),
                                            ("key", Self.json(key, context.model.entity(named: key.entity)))]).text)
        }
        return .ok(jsonStatus, lines: lines)
    }

    /// The status of CHANGES COUNT and of CHANGES as JSON.
    private var jsonStatus: String {
        unit.current.count > 0 ? changeSummary(unit.current) : "no pending changes; depth \(unit.depth)"
    }

    /// A key as the server prints it elsewhere (SAVE's ids, conflicts, WATCH).
    private static func json(_ key: RecordKey, _ entity: Entity?) -> JSON.Value {
        .string(entity?.show(key) ?? key.values.joined(separator: ","))
    }
}
