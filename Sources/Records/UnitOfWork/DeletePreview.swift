/// What deleting some records will do under the foreign keys' delete rules.
public struct DeletePreview: Sendable, Equatable {
    /// Entity -> records that cascade.
    public var cascaded: [String: Int] = [:]
    /// "entity.relationship" -> records whose key is set to nil.
    public var nullified: [String: Int] = [:]
    /// Entity -> records that deny the delete (RESTRICT / NO ACTION).
    public var denied: [String: Int] = [:]

    public var cascadedCount: Int { cascaded.values.reduce(0, +) }
    public var nullifiedCount: Int { nullified.values.reduce(0, +) }
    public var deniedCount: Int { denied.values.reduce(0, +) }

    /// One line per effect, for DELETE's reply and SAVE's DENIED error.
    public var lines: [String] {
        cascaded.sorted { $0.key < $1.key }.map { "cascade \($0.key) \($0.value)" }
            + nullified.sorted { $0.key < $1.key }.map { "nullify \($0.key) \($0.value)" }
            + denied.sorted { $0.key < $1.key }.map { "deny \($0.key) \($0.value)" }
    }
}

/// Computes a `DeletePreview` by walking the model's relationships level by level, one query
/// per relationship and level (sent together), following every cascade first so that a record
/// one delete cascades away does not count as denying another. Pure: it writes the queries and
/// folds their results; run it where the unit's changes are applied.
struct DeletePreviewPlan: Sendable {
    let model: Model
    private var deleted: Set<RecordKey> = []
    private var cascaded: [RecordKey] = []
    private var nullified: [(RecordKey, String)] = []
    private var denying: [RecordKey] = []
    private var frontier: [(entity: String, keys: [RecordKey])]
    private var asked: [ForeignKey] = []

    init(model: Model, roots: [RecordKey]) {
        self.model = model
        var byEntity: [String: [RecordKey]] = [:]
        var order: [String] = []
        for key in roots where deleted.insert(key).inserted {
            if byEntity[key.entity] == nil { order.append(key.entity) }
            byEntity[key.entity, default: []].append(key)
        }
        frontier = order.map { ($0, byEntity[$0]!) }
    }

    /// The queries of the next level; nil once there is none.
    mutating func next() -> [Statement]? {
        var statements: [Statement] = []
        asked = []
        for (targetName, keys) in frontier {
            guard let target = model.entity(exactly: targetName), !keys.isEmpty else { continue }
            for foreignKey in model.foreignKeys(to: target.name) {
                guard let source = model.entity(exactly: foreignKey.entity) else { continue }
                var sql = SQLText()
                let match = target.keyMatch(keys, alias: "p", into: &sql)
                let columns = foreignKey.columns.map { "c." + SQL.identifier($0) }.joined(separator: ", ")
                let referenced = foreignKey.referencedColumns.map { "p." + SQL.identifier($0) }.joined(separator: ", ")
                sql.text = "SELECT \(source.keyText(alias: "c")) FROM \(model.table(source)) AS c WHERE (\(columns)) IN ("
                    + "SELECT \(referenced) FROM \(model.table(target)) AS p WHERE \(match))"
                statements.append(sql.statement)
                asked.append(foreignKey)
            }
        }
        frontier = []
        return statements.isEmpty ? nil : statements
    }

    /// The results of the queries `next` gave, in order.
    mutating func received(_ results: [StatementResult]) {
        var fresh: [String: [RecordKey]] = [:]
        var order: [String] = []
        for (foreignKey, result) in zip(asked, results) {
            guard let source = model.entity(exactly: foreignKey.entity) else { continue }
            let keys = result.rows.map { source.recordKey($0) }
            switch foreignKey.deleteRule {
            case .cascade:
                for key in keys where deleted.insert(key).inserted {
                    cascaded.append(key)
                    if fresh[source.name] == nil { order.append(source.name) }
                    fresh[source.name, default: []].append(key)
                }
            case .nullify, .setDefault:
                nullified += keys.map { ($0, foreignKey.label) }
            case .deny:
                denying += keys
            }
        }
        frontier = order.map { ($0, fresh[$0]!) }
    }

    /// Every record the deletes take with them (the roots and their cascades).
    var allDeleted: Set<RecordKey> { deleted }

    var preview: DeletePreview {
        var preview = DeletePreview()
        for key in cascaded { preview.cascaded[key.entity, default: 0] += 1 }
        for (key, label) in nullified where !deleted.contains(key) { preview.nullified[label, default: 0] += 1 }
        for key in Set(denying) where !deleted.contains(key) { preview.denied[key.entity, default: 0] += 1 }
        return preview
    }
}
