import Postgres

/// What deleting some records will do under the foreign keys' delete rules, found by walking
/// the model's relationships with one query per relationship and level.
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

    /// Computes the effects of deleting `roots` together in the database's current state (run
    /// it inside the transaction where the unit's changes are applied). Cascades are followed
    /// first, so a record that one delete cascades away does not deny another.
    static func compute(model: Model, roots: [(Entity, [String])], connection: Connection) throws -> DeletePreview {
        var deleted: Set<RecordKey> = []
        for (entity, ids) in roots { ids.forEach { deleted.insert(RecordKey(entity: entity.name, id: $0)) } }
        var cascaded: [RecordKey] = []
        var nullified: [(RecordKey, String)] = []
        var denying: [RecordKey] = []
        var frontier = roots
        while let (target, targetIDs) = frontier.popLast() {
            guard !targetIDs.isEmpty else { continue }
            for relationship in model.references(to: target.name) {
                guard let source = model.entity(named: relationship.entity) else { continue }
                let rows = try connection.query("""
                    SELECT \(SQL.identifier(source.primaryKey.name))::text FROM \(model.table(source))
                    WHERE \(SQL.identifier(relationship.column)) = ANY($1::\(target.primaryKey.sqlType)[])
                    """, [SQL.arrayLiteral(targetIDs)])
                let keys = rows.column(0).compactMap { $0 }.map { RecordKey(entity: source.name, id: $0) }
                switch relationship.deleteRule {
                case .cascade:
                    let fresh = keys.filter { deleted.insert($0).inserted }
                    cascaded += fresh
                    if !fresh.isEmpty { frontier.append((source, fresh.map(\.id))) }
                case .nullify, .setDefault:
                    nullified += keys.map { ($0, source.name + "." + relationship.name) }
                case .deny:
                    denying += keys
                }
            }
        }
        var preview = DeletePreview()
        for key in cascaded { preview.cascaded[key.entity, default: 0] += 1 }
        for (key, label) in nullified where !deleted.contains(key) { preview.nullified[label, default: 0] += 1 }
        for key in Set(denying) where !deleted.contains(key) { preview.denied[key.entity, default: 0] += 1 }
        return preview
    }
}
