import Postgres

/// A record a command names, resolved as far as the loop can without PostgreSQL.
enum Target: Sendable {
    /// A pending insert of this unit.
    case pending(String)
    /// A stored record by its full key (as typed, in the key's canonical form where the
    /// server knows it: `007` is `7`).
    case stored(RecordKey)
    /// A record by a unique key other than its primary key: looked up where the unit's
    /// changes are applied.
    case unique(entity: String, filter: [Filter])

    struct Filter: Sendable, Equatable {
        var column: String
        var value: String
    }
}

extension Session {
    /// The record `address` names in `entity`.
    func target(_ address: RecordAddress, in entity: Entity, model: Model) throws(CommandError) -> Target {
        switch address {
        case .pending(let ref):
            // A stored record an UPSERT named is named by its key.
            if unit.current.insertEntity(ref) == nil, let found = unit.found[ref], found.key.entity == entity.name { return .stored(found.key) }
            guard let pending = unit.current.insert(ref), pending.entity == entity.name else {
                throw CommandError(.notFound, "no pending \(entity.name) #\(ref) in this unit of work")
            }
            return .pending(ref)
        case .key(let text):
            guard let key = entity.singleKey else {
                throw CommandError(.validation, "\(entity.name) has a key of \(entity.key.count) columns: name it as "
                    + entity.keyColumns.map { "\(entity.label($0))=..." }.joined(separator: " "))
            }
            let numeric: Bool = switch key.kind {
            case .integer, .decimal, .double: true
            default: false
            }
            let value: Value = numeric ? .number(text) : .string(text)
            let given = try canonical(value, kind: key.kind, name: "\(entity.name) \(key.name)")
            // A pending insert the client gave this key is the one named, as `id=5000` finds it
            // (`UPDATE game 05000` answered NOT_FOUND for `INSERT game id=+5000`). Looked for only
            // in a unit that holds inserts: a GET outside one costs nothing more.
            if let pending = pendingInsert(of: entity, with: [(key.name, .text(given))]) { return .pending(pending) }
            return .stored(RecordKey(entity: entity.name, values: [given]))
        case .fields(let pairs):
            let values = try fields(pairs, of: entity, model: model, setting: false)
            let columns = values.map(\.column)
            guard let unique = entity.uniqueKeys.first(where: { Set($0) == Set(columns) && $0.count == columns.count }) else {
                let keys = entity.uniqueKeys.map { $0.map(entity.label).joined(separator: " ") }
                throw CommandError(.validation, "\(entity.name) records are named by " + keys.map { "(\($0))" }.joined(separator: " or ")
                    + ", not by " + columns.map(entity.label).joined(separator: " "))
            }
            // A pending insert with these values is the one named (its key may be #refs).
            if let pending = pendingInsert(of: entity, with: values) { return .pending(pending) }
            var filter: [Target.Filter] = []
            for (column, value) in values {
                switch value {
                case .text(let text): filter.append(Target.Filter(column: column, value: text))
                case .null: throw CommandError(.validation, "\(entity.label(column))=nil names no record")
                case .ref(let ref): throw CommandError(.notFound, "no pending \(entity.name) with \(entity.label(column))=#\(ref) in this unit of work")
                }
            }
            if unique == entity.keyColumns {
                return .stored(RecordKey(entity: entity.name, values: unique.map { column in filter.first { $0.column == column }!.value }))
            }
            return .unique(entity: entity.name, filter: unique.map { column in filter.first { $0.column == column }! })
        }
    }

    /// The pending insert of `entity` given these values (a scan of the unit's inserts).
    private func pendingInsert(of entity: Entity, with values: [(column: String, value: FieldValue)]) -> String? {
        unit.current.inserts.first { insert in
            insert.entity == entity.name && values.allSatisfy { insert.value(of: $0.column) == $0.value }
        }?.ref
    }

    /// A typed value as the text PostgreSQL prints for it, where the server can tell
    /// (integers without leading zeros, uuids in lower case); other kinds as given.
    func canonical(_ value: Value, kind: ValueKind, name: String) throws(CommandError) -> String {
        switch try ValueCoercion.coerce(value, to: kind, name: name) {
        case .text(let text): return text
        default: throw CommandError(.validation, "\(name) cannot be nil")
        }
    }
}

extension WorkContext {
    /// The key of the record a unique key names, where the unit's changes are applied, and
    /// the pending insert it is, if it is one.
    func lookUp(_ entity: Entity, _ filter: [Target.Filter], view: ViewPlan.View, model: Model) throws -> (key: RecordKey, pending: String?) {
        var sql = SQLText()
        let conditions = filter.map { item in
            let type = entity.columns.first { $0.column == item.column }?.sqlType ?? "text"
            return "\(SQL.identifier(item.column)) = \(sql.bind(item.value))::\(type)"
        }
        sql.text = "SELECT \(entity.keyText(alias: nil)) FROM \(model.table(entity)) WHERE " + conditions.joined(separator: " AND ")
        let result = try connection.query(sql.text, sql.parameters)
        guard result.rowCount == 1 else {
            throw CommandError(.notFound, "no \(entity.name) with " + filter.map { "\(entity.label($0.column))=\(Entity.word($0.value, kind: entity.attribute(named: $0.column)?.kind ?? .other))" }.joined(separator: " "))
        }
        let key = entity.recordKey((0..<entity.key.count).map { result.string(0, $0) })
        let pending = view.keys.first { ref, assigned in
            assigned.entity == entity.name && entity.keyColumns.map { assigned.values[$0] ?? "" } == key.values
        }?.key
        return (key, pending)
    }

    /// A stored record's version (`xmin`), key as PostgreSQL prints it, and every column as
    /// text: read outside any view, as the database has it. `horizon`: the xmax of the
    /// snapshot that read it, which dates the version for `ReadVersions.resolve`.
    func readStored(_ entity: Entity, _ key: RecordKey, model: Model) throws -> (key: RecordKey, version: String, values: [String: String?], horizon: String?) {
        let columns = entity.columns.map(\.column)
        var sql = SQLText()
        let condition = entity.keyEquals(key, alias: nil, into: &sql)
        sql.text = "SELECT xmin::text, \(entity.keyText(alias: nil)), " + columns.map { SQL.identifier($0) + "::text" }.joined(separator: ", ")
            + ", pg_snapshot_xmax(pg_current_snapshot())::text FROM \(model.table(entity)) WHERE \(condition)"
        let result = try retryingOnce { try connection.query(sql.text, sql.parameters) }
        guard result.rowCount == 1 else { throw CommandError(.notFound, entity.missing(key)) }
        var values: [String: String?] = [:]
        let start = 1 + entity.key.count
        for (i, column) in columns.enumerated() { values[column] = result.string(0, start + i) }
        let canonical = entity.recordKey((0..<entity.key.count).map { result.string(0, 1 + $0) })
        return (canonical, result.string(0, 0)!, values, result.string(0, start + columns.count))
    }
}
