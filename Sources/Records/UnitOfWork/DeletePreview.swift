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
                let children = "SELECT \(source.keyText(alias: "c")) FROM \(model.table(source)) AS c WHERE "
                    + Self.pointsAt(foreignKey, table: model.table(target), match: match)
                if foreignKey.entity == target.name && foreignKey.deleteRule == .cascade {
                    // A tree or chain in one table cascades all the way down: one recursive
                    // query, not one round trip a level (a 30,000-deep chain took minutes).
                    sql.text = Self.descendants(of: target, through: foreignKey, match: match, table: model.table(target))
                } else {
                    sql.text = children
                }
                statements.append(sql.statement)
                asked.append(foreignKey)
            }
        }
        frontier = []
        return statements.isEmpty ? nil : statements
    }

    /// "Row `c` points through `foreignKey` at a row `p` of `table` that `match` selects": the
    /// children the preview reads, and the condition a cascaded record is deleted under.
    static func pointsAt(_ foreignKey: ForeignKey, table: String, match: String) -> String {
        let columns = foreignKey.columns.map { "c." + SQL.identifier($0) }.joined(separator: ", ")
        let referenced = foreignKey.referencedColumns.map { "p." + SQL.identifier($0) }.joined(separator: ", ")
        return "(\(columns)) IN (SELECT \(referenced) FROM \(table) AS p WHERE \(match))"
    }

    /// Every record of `table` below the matched ones through the self-referencing
    /// `foreignKey`, at any depth (cycles end: UNION keeps each row once), keys first.
    /// Each step looks up the children of one row (a LATERAL subquery fenced by OFFSET 0), so
    /// the foreign key's index serves it even before the table has statistics; joined whole,
    /// the planner hashed the table once a level (quadratic in the depth).
    static func descendants(of table: Entity, through foreignKey: ForeignKey, match: String, table name: String) -> String {
        let aliases = (table.keyColumns.indices.map { "k\($0)" }, foreignKey.referencedColumns.indices.map { "r\($0)" })
        let all = aliases.0 + aliases.1
        let carried = { (alias: String) in
            zip(table.keyColumns + foreignKey.referencedColumns, all).map { "\(alias).\(SQL.identifier($0)) AS \($1)" }.joined(separator: ", ")
        }
        let columns = foreignKey.columns.map { "c." + SQL.identifier($0) }.joined(separator: ", ")
        let start = foreignKey.referencedColumns.map { "p." + SQL.identifier($0) }.joined(separator: ", ")
        let step = zip(foreignKey.columns, aliases.1).map { "x.\(SQL.identifier($0)) = d.\($1)" }.joined(separator: " AND ")
        return "WITH RECURSIVE d(\(all.joined(separator: ", "))) AS ("
            + "SELECT \(carried("c")) FROM \(name) AS c WHERE (\(columns)) IN (SELECT \(start) FROM \(name) AS p WHERE \(match))"
            + " UNION SELECT \(all.map { "s." + $0 }.joined(separator: ", ")) FROM d CROSS JOIN LATERAL"
            + " (SELECT \(carried("x")) FROM \(name) AS x WHERE \(step) OFFSET 0) AS s"
            + ") SELECT \(aliases.0.joined(separator: ", ")) FROM d"
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

    /// The records deleted by name, and those their delete rules cascade to, each sorted.
    var rootsAndCascades: (roots: [RecordKey], cascades: [RecordKey]) {
        (deleted.subtracting(cascaded).sorted(), cascaded.sorted())
    }

    var preview: DeletePreview {
        var preview = DeletePreview()
        for key in cascaded { preview.cascaded[key.entity, default: 0] += 1 }
        for (key, label) in nullified where !deleted.contains(key) { preview.nullified[label, default: 0] += 1 }
        for key in Set(denying) where !deleted.contains(key) { preview.denied[key.entity, default: 0] += 1 }
        return preview
    }
}
