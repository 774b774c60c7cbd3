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

    /// Computes the effects of deleting `ids` of `entity` in the database's current state
    /// (run it inside the transaction where the unit's changes are applied).
    static func compute(model: Model, entity: Entity, ids: [String], connection: Connection,
                        excluding deletedAlready: Set<RecordKey> = []) throws -> DeletePreview {
        var preview = DeletePreview()
        var visited = Set(ids.map { RecordKey(entity: entity.name, id: $0) }).union(deletedAlready)
        var frontier: [(Entity, [String])] = [(entity, ids)]
        while let (target, targetIDs) = frontier.popLast() {
            guard !targetIDs.isEmpty else { continue }
            for relationship in model.references(to: target.name) {
                guard let source = model.entity(named: relationship.entity) else { continue }
                let rows = try connection.query("""
                    SELECT \(SQL.identifier(source.primaryKey.name))::text FROM \(model.table(source))
                    WHERE \(SQL.identifier(relationship.column)) = ANY($1::\(target.primaryKey.sqlType)[])
                    """, [SQL.arrayLiteral(targetIDs)])
                let found = rows.column(0).compactMap { $0 }.filter {
                    !visited.contains(RecordKey(entity: source.name, id: $0))
                }
                guard !found.isEmpty else { continue }
                switch relationship.deleteRule {
                case .cascade:
                    preview.cascaded[source.name, default: 0] += found.count
                    found.forEach { visited.insert(RecordKey(entity: source.name, id: $0)) }
                    frontier.append((source, found))
                case .nullify, .setDefault:
                    preview.nullified[source.name + "." + relationship.name, default: 0] += found.count
                case .deny:
                    preview.denied[source.name, default: 0] += found.count
                }
            }
        }
        return preview
    }
}
