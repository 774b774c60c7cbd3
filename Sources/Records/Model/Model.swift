/// A column of a served table.
public struct Attribute: Sendable, Equatable {
    public var name: String
    /// The SQL type as `format_type` prints it, used for casts (`$1::bigint[]`).
    public var sqlType: String
    public var kind: ValueKind
    /// NOT NULL.
    public var isNotNull: Bool
    /// The default expression, "identity" for identity columns, nil when none.
    public var defaultValue: String?
    public var isUnique: Bool
    public var isPrimaryKey: Bool
    /// Generated (`GENERATED ALWAYS AS (...) STORED`): never written by clients.
    public var isGenerated: Bool
    public var comment: String?

    /// A value must be given on insert: NOT NULL and PostgreSQL has no default for it.
    public var isRequired: Bool { isNotNull && defaultValue == nil && !isGenerated }
}

/// What happens to the records that point at a deleted record (the foreign key's ON DELETE).
public enum DeleteRule: String, Sendable {
    case cascade, nullify, deny, setDefault = "set default"

    /// Maps `pg_constraint.confdeltype`.
    public init(code: String) {
        switch code {
        case "c": self = .cascade
        case "n": self = .nullify
        case "d": self = .setDefault
        default: self = .deny  // 'r' RESTRICT and 'a' NO ACTION
        }
    }
}

/// One side of a foreign key: the to-one side lives on the referencing entity, the to-many
/// side (its inverse) on the referenced one.
public struct Relationship: Sendable, Equatable {
    public var name: String
    /// The entity this relationship belongs to.
    public var entity: String
    public var target: String
    public var isToMany: Bool
    public var inverse: String
    /// The foreign-key column, on the to-one side's table.
    public var column: String
    /// The foreign-key column's SQL type, for casts.
    public var columnType: String
    public var deleteRule: DeleteRule
    public var constraint: String
    /// NOT NULL foreign key: the to-one side is required.
    public var isRequired: Bool
}

/// A served table: one with a single-column primary key.
public struct Entity: Sendable {
    public var name: String
    public var primaryKey: Attribute
    /// Every column but foreign keys, primary key first, in table order.
    public var attributes: [Attribute]
    public var relationships: [Relationship]
    /// The sequence behind the primary key (serial or identity), used to allocate ids
    /// before inserting so that pending references resolve without a round trip per row.
    public var keySequence: String?
    public var comment: String?

    public func attribute(named name: String) -> Attribute? {
        attributes.first { $0.name == name } ?? attributes.first { $0.name.lowercased() == name.lowercased() }
    }

    public func relationship(named name: String) -> Relationship? {
        relationships.first { $0.name == name } ?? relationships.first { $0.name.lowercased() == name.lowercased() }
    }

    public var toOneRelationships: [Relationship] { relationships.filter { !$0.isToMany } }

    /// Every column the server reads, primary key first: attributes then foreign keys.
    public var columns: [(column: String, sqlType: String)] {
        attributes.map { ($0.name, $0.sqlType) } + toOneRelationships.map { ($0.column, $0.columnType) }
    }
}

/// A table of the served schema that is not an entity, and why.
public struct UnservedTable: Sendable, Equatable {
    public var name: String
    public var reason: String
}

/// The reflected model: immutable, swapped whole when the schema changes, so a command in
/// flight keeps the model it started with.
public final class Model: Sendable {
    public let schema: String
    public let entities: [Entity]
    public let unserved: [UnservedTable]
    private let index: [String: Int]

    public init(schema: String, entities: [Entity], unserved: [UnservedTable]) {
        self.schema = schema
        self.entities = entities.sorted { $0.name < $1.name }
        self.unserved = unserved
        var index: [String: Int] = [:]
        for (position, entity) in self.entities.enumerated() { index[entity.name.lowercased()] = position }
        self.index = index
    }

    /// Case-insensitive lookup.
    public func entity(named name: String) -> Entity? {
        index[name.lowercased()].map { entities[$0] }
    }

    /// The to-one relationships, in any entity, that point at `entity`.
    public func references(to entity: String) -> [Relationship] {
        entities.flatMap { $0.toOneRelationships.filter { $0.target == entity } }
    }

    /// The qualified, quoted table name for SQL.
    public func table(_ entity: Entity) -> String {
        "\(SQL.identifier(schema)).\(SQL.identifier(entity.name))"
    }
}
