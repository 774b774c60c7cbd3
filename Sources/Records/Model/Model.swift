/// A column of a served table.
public struct Attribute: Sendable, Equatable {
    public var name: String
    /// The SQL type without its modifier (`format_type(type, -1)`: `character varying`,
    /// `bpchar`, `"bit"`), used for casts (`$1::bigint[]`): an explicit cast to `varchar(5)`
    /// would cut a longer value, where storing it or comparing with it must not.
    public var sqlType: String
    /// The type as declared (`character varying(5)`), what DESCRIBE shows.
    public var declaredType: String
    public var kind: ValueKind
    /// NOT NULL.
    public var isNotNull: Bool
    /// The default as DESCRIBE shows it: "identity" for identity columns, else the default
    /// expression; nil when none.
    public var defaultValue: String?
    /// `GENERATED ALWAYS AS IDENTITY` needs `OVERRIDING SYSTEM VALUE` to take a given value.
    public var identity: Identity?
    public var isUnique: Bool
    public var isPrimaryKey: Bool
    /// Generated (`GENERATED ALWAYS AS (...) STORED`): never written by clients.
    public var isGenerated: Bool
    public var comment: String?
    /// The sequence behind the column (serial or identity), as `pg_get_serial_sequence` names it.
    public var sequence: String?
    /// The sequence the column's default draws from: its own (above), or one it does not own
    /// (`DEFAULT nextval('other.seq')`, `nextval('s') * 10`), found through `pg_depend`.
    public var drawsFrom: String?

    public enum Identity: String, Sendable, Equatable {
        case always, byDefault = "by default"
    }

    /// Where a key value comes from when the client does not give it.
    public enum Allocation: Sendable, Equatable {
        /// `nextval` of the column's sequence (serial, identity).
        case sequence(String)
        /// The column's default expression, read from the catalog (`gen_random_uuid()`).
        case expression(String)
    }

    public init(name: String, sqlType: String, declaredType: String? = nil, kind: ValueKind, isNotNull: Bool, defaultValue: String?,
                identity: Identity? = nil, isUnique: Bool, isPrimaryKey: Bool, isGenerated: Bool,
                comment: String?, sequence: String? = nil, drawsFrom: String? = nil) {
        self.name = name
        self.sqlType = sqlType
        self.declaredType = declaredType ?? sqlType
        self.kind = kind
        self.isNotNull = isNotNull
        self.defaultValue = defaultValue
        self.identity = identity
        self.isUnique = isUnique
        self.isPrimaryKey = isPrimaryKey
        self.isGenerated = isGenerated
        self.comment = comment
        self.sequence = sequence
        self.drawsFrom = drawsFrom ?? sequence
    }

    /// A value must be given on insert: NOT NULL and PostgreSQL has no default for it.
    public var isRequired: Bool { isNotNull && defaultValue == nil && !isGenerated }

    /// How a pending insert gets this column's value before it is written, when the client
    /// gave none: from its sequence, or by evaluating its default; nil when it has neither.
    public var allocation: Allocation? {
        if let sequence { return .sequence(sequence) }
        if identity == nil, let defaultValue { return .expression(defaultValue) }
        return nil
    }
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
    /// The column the foreign key references (on the to-one side's target, on the to-many
    /// side's own entity): the key, or another unique column.
    public var referencedColumn: String
    /// The foreign-key column's SQL type, for casts.
    public var columnType: String
    public var deleteRule: DeleteRule
    public var constraint: String
    /// NOT NULL foreign key: the to-one side is required.
    public var isRequired: Bool
    /// `DEFERRABLE`: SAVE may defer its check to COMMIT to insert records that point at each other.
    public var isDeferrable: Bool
    /// The to-one side's column is generated (`GENERATED ALWAYS AS ... STORED`): PostgreSQL
    /// computes it, COPY may not name it.
    public var isGenerated: Bool

    public init(name: String, entity: String, target: String, isToMany: Bool, inverse: String, column: String,
                referencedColumn: String = "id", columnType: String, deleteRule: DeleteRule, constraint: String,
                isRequired: Bool, isDeferrable: Bool = false, isGenerated: Bool = false) {
        self.name = name
        self.entity = entity
        self.target = target
        self.isToMany = isToMany
        self.inverse = inverse
        self.column = column
        self.referencedColumn = referencedColumn
        self.columnType = columnType
        self.deleteRule = deleteRule
        self.constraint = constraint
        self.isRequired = isRequired
        self.isDeferrable = isDeferrable
        self.isGenerated = isGenerated
    }
}

/// A foreign key of a served table to another, of one column or several: what orders inserts
/// and deletes and what the delete rules follow. The single-column ones are also
/// relationships, navigable by name.
public struct ForeignKey: Sendable, Equatable {
    public var constraint: String
    /// The referencing entity.
    public var entity: String
    public var columns: [String]
    public var target: String
    public var referencedColumns: [String]
    public var deleteRule: DeleteRule
    /// What the referencing records do when the referenced key changes (ON UPDATE): follow it
    /// (cascade), lose it (nullify, set default), or keep the change from happening (deny).
    public var updateRule: DeleteRule = .deny
    public var isDeferrable: Bool
    /// How a delete preview names the records it reaches: `memo.color`, or the columns.
    public var label: String
    /// The same key declared on each partition of a partitioned table (the parent's
    /// relationship): the partitions' constraints, which PostgreSQL's errors name.
    public var partitionConstraints: [String] = []

    /// Whether an error's constraint is this key's.
    public func names(_ constraint: String?) -> Bool {
        guard let constraint else { return false }
        return constraint == self.constraint || partitionConstraints.contains(constraint)
    }
}

/// A served table: one with a primary key, of one column or several.
///
/// A value with its fields in one shared box (copied on write): plans look entities up for
/// every row, and a copy that retained each of a dozen arrays and strings cost more than the
/// row's own work. The facts derived from the columns are worked out once, when they are set.
public struct Entity: Sendable {
    /// Mutated only while uniquely referenced (`mutate`), hence unchecked.
    private final class Storage: @unchecked Sendable {
        var name: String
        var key: [Attribute]
        var attributes: [Attribute]
        var relationships: [Relationship]
        var uniqueKeys: [[String]]
        var hasRowSecurity: Bool
        var comment: String?
        var foreignKeys: [ForeignKey]
        var keyConstraint: String?
        var uniqueConstraints: [String: [String]] = [:]
        var triggersMayRewriteInserts = false
        var triggersMayRewriteUpdates = false
        var hasInsertRules = false
        // Derived from key, attributes and relationships (`derive`).
        var names = NameIndex([], [])
        var keyColumns: [String] = []
        var allocatedColumns: [Attribute] = []
        var toOneRelationships: [Relationship] = []
        var columns: [(column: String, sqlType: String)] = []
        var columnNames: [String] = []
        var columnTypes: [String: String] = [:]
        var allocatedNames: Set<String> = []
        var defaultedNames: Set<String> = []
        var toOneByColumn: [String: Relationship] = [:]
        var immediateToOneByColumn: [String: Relationship] = [:]
        var knownKeyColumns: [String] = []
        var knownKeyRelationships: [String: Relationship] = [:]
        var requiredAttributes: [Attribute] = []
        var keyReferences: [String] = []
        var requiredToOne: [Relationship] = []
        var columnSet: Set<String> = []

        init(name: String, key: [Attribute], attributes: [Attribute], relationships: [Relationship], uniqueKeys: [[String]],
             hasRowSecurity: Bool, comment: String?, foreignKeys: [ForeignKey], keyConstraint: String?) {
            self.name = name
            self.key = key
            self.attributes = attributes
            self.relationships = relationships
            self.uniqueKeys = uniqueKeys
            self.hasRowSecurity = hasRowSecurity
            self.comment = comment
            self.foreignKeys = foreignKeys
            self.keyConstraint = keyConstraint
            derive()
        }

        func copy() -> Storage {
            let copy = Storage(name: name, key: key, attributes: attributes, relationships: relationships, uniqueKeys: uniqueKeys,
                               hasRowSecurity: hasRowSecurity, comment: comment, foreignKeys: foreignKeys, keyConstraint: keyConstraint)
            copy.uniqueConstraints = uniqueConstraints
            copy.triggersMayRewriteInserts = triggersMayRewriteInserts
            copy.triggersMayRewriteUpdates = triggersMayRewriteUpdates
            copy.hasInsertRules = hasInsertRules
            return copy
        }

        func derive() {
            names = NameIndex(attributes, relationships)
            keyColumns = key.map(\.name)
            allocatedColumns = key.filter { $0.allocation != nil }
                + attributes.filter { !$0.isPrimaryKey && !$0.isGenerated && $0.drawsFrom != nil && $0.allocation != nil }
            toOneRelationships = relationships.filter { !$0.isToMany }
            columns = attributes.map { ($0.name, $0.sqlType) } + toOneRelationships.map { ($0.column, $0.columnType) }
            columnNames = columns.map(\.column)
            columnTypes = Dictionary(columns.map { ($0.column, $0.sqlType) }, uniquingKeysWith: { first, _ in first })
            allocatedNames = Set(allocatedColumns.map(\.name))
            defaultedNames = Set(attributes.filter { attribute in
                !allocatedNames.contains(attribute.name) && attribute.defaultValue != nil && attribute.identity == nil && !attribute.isGenerated
            }.map(\.name))
            toOneByColumn = Dictionary(toOneRelationships.map { ($0.column, $0) }, uniquingKeysWith: { first, _ in first })
            immediateToOneByColumn = toOneByColumn.filter { !$0.value.isDeferrable }
            knownKeyColumns = keyColumns + allocatedColumns.map(\.name).filter { !keyColumns.contains($0) }
            knownKeyRelationships = toOneByColumn.filter { knownKeyColumns.contains($0.key) }
            requiredAttributes = attributes.filter(\.isRequired)
            keyReferences = keyColumns.filter { name in !attributes.contains { $0.name == name } }
            requiredToOne = toOneRelationships.filter { $0.isRequired && !keyColumns.contains($0.column) }
            columnSet = Set(columnNames + keyColumns)
        }
    }

    private var storage: Storage

    private mutating func mutate(_ change: (Storage) -> Void, derive: Bool = false) {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        change(storage)
        if derive { storage.derive() }
    }

    public var name: String {
        get { storage.name }
        set { mutate { $0.name = newValue } }
    }
    /// The primary key's columns, in key order. Foreign-key columns may be among them (a join
    /// table's `(project_id, employee_id)`).
    public var key: [Attribute] {
        get { storage.key }
        set { mutate({ $0.key = newValue }, derive: true) }
    }
    /// Every column but foreign keys, key columns first, in table order.
    public var attributes: [Attribute] {
        get { storage.attributes }
        set { mutate({ $0.attributes = newValue }, derive: true) }
    }
    public var relationships: [Relationship] {
        get { storage.relationships }
        set { mutate({ $0.relationships = newValue }, derive: true) }
    }
    /// Column sets with a unique constraint (the primary key first), by which a record can be
    /// addressed (`GET memo uid="m1"`).
    public var uniqueKeys: [[String]] {
        get { storage.uniqueKeys }
        set { mutate { $0.uniqueKeys = newValue } }
    }
    /// Row-level security is enabled on the table (without policies it shows nothing to
    /// roles that do not bypass it).
    public var hasRowSecurity: Bool {
        get { storage.hasRowSecurity }
        set { mutate { $0.hasRowSecurity = newValue } }
    }
    public var comment: String? {
        get { storage.comment }
        set { mutate { $0.comment = newValue } }
    }
    /// Every foreign key of this table to a served one, composite ones included.
    public var foreignKeys: [ForeignKey] {
        get { storage.foreignKeys }
        set { mutate { $0.foreignKeys = newValue } }
    }
    /// The primary key's index, as a unique violation names it.
    public var keyConstraint: String? {
        get { storage.keyConstraint }
        set { mutate { $0.keyConstraint = newValue } }
    }
    /// Unique indexes (the primary key's included) by name, with their columns.
    public var uniqueConstraints: [String: [String]] {
        get { storage.uniqueConstraints }
        set { mutate { $0.uniqueConstraints = newValue } }
    }
    /// A BEFORE UPDATE row trigger may fill a NOT NULL column an update sets to nil: PostgreSQL
    /// judges it, not the model.
    public var triggersMayRewriteUpdates: Bool {
        get { storage.triggersMayRewriteUpdates }
        set { mutate { $0.triggersMayRewriteUpdates = newValue } }
    }

    /// A BEFORE INSERT row trigger may write another key than the one SAVE gives (or skip the
    /// row): inserts read their keys back and SAVE refuses before COMMIT when one changed. It
    /// may also fill NOT NULL columns the insert leaves out: none is required up front.
    public var triggersMayRewriteInserts: Bool {
        get { storage.triggersMayRewriteInserts }
        set { mutate { $0.triggersMayRewriteInserts = newValue } }
    }

    /// A rule on INSERT (`CREATE RULE ... ON INSERT`) rewrites what an INSERT does; COPY
    /// would pass it by.
    public var hasInsertRules: Bool {
        get { storage.hasInsertRules }
        set { mutate { $0.hasInsertRules = newValue } }
    }

    /// Many rows may go in by `COPY ... FROM STDIN`, which does what an INSERT of them does
    /// (defaults, constraints, triggers), but PostgreSQL refuses it under row-level security
    /// and it ignores rules.
    public var takesCopy: Bool { !hasRowSecurity && !hasInsertRules }

    public init(name: String, key: [Attribute], attributes: [Attribute], relationships: [Relationship],
                uniqueKeys: [[String]] = [], hasRowSecurity: Bool = false, comment: String? = nil,
                foreignKeys: [ForeignKey]? = nil, keyConstraint: String? = nil) {
        // Without a list of their own, the foreign keys are the to-one relationships'.
        let foreignKeys = foreignKeys ?? relationships.filter { !$0.isToMany }.map {
            ForeignKey(constraint: $0.constraint, entity: name, columns: [$0.column], target: $0.target,
                       referencedColumns: [$0.referencedColumn], deleteRule: $0.deleteRule,
                       isDeferrable: $0.isDeferrable, label: name + "." + $0.name)
        }
        storage = Storage(name: name, key: key, attributes: attributes, relationships: relationships,
                          uniqueKeys: uniqueKeys.isEmpty ? [key.map(\.name)] : uniqueKeys, hasRowSecurity: hasRowSecurity,
                          comment: comment, foreignKeys: foreignKeys, keyConstraint: keyConstraint)
    }

    public var keyColumns: [String] { storage.keyColumns }

    /// Columns a pending insert is given a value for before it is written, when the client set
    /// none, so that every read shows the value SAVE writes: the key's columns that have a
    /// sequence or a default, and the other columns whose default draws from a sequence
    /// (`number DEFAULT nextval('ticket_seq')`).
    public var allocatedColumns: [Attribute] { storage.allocatedColumns }
    /// The one key column of a single-column key, nil for a composite key.
    public var singleKey: Attribute? { key.count == 1 ? key[0] : nil }

    /// By exact name, else case-insensitively when that names one attribute only (`Name` and
    /// `name` are two columns: each is reached by its own spelling).
    public func attribute(named name: String) -> Attribute? {
        storage.names.attribute(name).map { storage.attributes[$0] }
    }

    public func relationship(named name: String) -> Relationship? {
        storage.names.relationship(name).map { storage.relationships[$0] }
    }

    /// What a name on an INSERT or UPDATE line names: an attribute or relationship of that
    /// exact name, else one whose name differs only in case (attributes first each time),
    /// found with one lookup, as positions in `attributes` and `relationships` (read in
    /// place: a copy of each cost more than the field's check).
    public func fieldIndex(named name: String) -> (attribute: Int?, relationship: Int?) {
        storage.names.field(name)
    }

    public var toOneRelationships: [Relationship] { storage.toOneRelationships }

    /// The to-one relationship whose foreign-key column is `column`.
    public func relationship(column: String) -> Relationship? {
        storage.toOneRelationships.first { $0.column == column }
    }

    /// Whether PostgreSQL computes the column: an attribute's or a to-one relationship's.
    public func isGenerated(column: String) -> Bool {
        attribute(named: column)?.isGenerated ?? relationship(column: column)?.isGenerated ?? false
    }

    /// A column by the name clients use: an attribute's, a to-one relationship's, or a
    /// foreign-key column's; the column's real name.
    public func column(named name: String) -> String? {
        if let exact = columns.first(where: { $0.column == name }) { return exact.column }
        if let attribute = attribute(named: name) { return attribute.name }
        if let relationship = relationship(named: name), !relationship.isToMany { return relationship.column }
        let folded = toOneRelationships.filter { $0.column.lowercased() == name.lowercased() }
        return folded.count == 1 ? folded[0].column : nil
    }

    /// The name clients see for a column: the relationship's for a foreign key.
    public func label(_ column: String) -> String {
        relationship(column: column)?.name ?? column
    }

    /// Every column the server reads: attributes then foreign keys.
    public var columns: [(column: String, sqlType: String)] { storage.columns }

    // Facts every SAVE asks of each entity it writes, worked out once.
    /// `columns`' names, in order.
    var columnNames: [String] { storage.columnNames }
    /// `columns`' SQL types, by name.
    var columnTypes: [String: String] { storage.columnTypes }
    /// `allocatedColumns`' names.
    var allocatedNames: Set<String> { storage.allocatedNames }
    /// The attributes a row may leave to their default, evaluated before the write
    /// (`KeyAllocation.fills`): those with one that is neither allocated, nor identity, nor
    /// generated.
    var defaultedNames: Set<String> { storage.defaultedNames }
    /// The to-one relationships, by foreign-key column.
    var toOneByColumn: [String: Relationship] { storage.toOneByColumn }
    /// Those checked at once (not DEFERRABLE): a record must be written after those it points at.
    var immediateToOneByColumn: [String: Relationship] { storage.immediateToOneByColumn }
    /// The columns of a pending insert's key known before it is written (`KeyAllocation.known`):
    /// the key's, then the other allocated ones; and the to-one relationships among them.
    var knownKeyColumns: [String] { storage.knownKeyColumns }
    var knownKeyRelationships: [String: Relationship] { storage.knownKeyRelationships }
    /// What every insert must have (`Validation`): the required attributes, the key columns
    /// that are foreign keys (a join table's), the required to-one relationships outside the
    /// key.
    /// None where a BEFORE INSERT trigger may fill them (`film.fulltext` from a tsvector
    /// trigger): PostgreSQL's NOT NULL, after the trigger, is the judge.
    var requiredAttributes: [Attribute] { storage.triggersMayRewriteInserts ? storage.requiredAttributes.filter(\.isPrimaryKey) : storage.requiredAttributes }
    var keyReferences: [String] { storage.keyReferences }
    var requiredToOne: [Relationship] { storage.triggersMayRewriteInserts ? [] : storage.requiredToOne }
    /// Every column's name, key columns included (`hasColumn`, without a lookup each way).
    var columnSet: Set<String> { storage.columnSet }

    /// A key column's SQL type and kind (a key column may be a foreign key).
    public func keyType(_ column: String) -> String {
        key.first { $0.name == column }?.sqlType ?? "text"
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
    /// The database has ICU's root collation (`und-x-icu`): case folding ([c]) then lowers
    /// every script's letters, not only ASCII's as a C-locale database's lower() does.
    public let unicodeCaseFolding: Bool
    /// The database's collations, by name: what `ORDER BY key COLLATE "name"` may ask for.
    public let collations: Set<String>
    private let index: [String: Int]

    private let exact: [String: Int]
    private let referencing: [String: [ForeignKey]]
    /// GET's SQL by shape (includes are the client's to choose), for this model only.
    let selects = ShapeCache<String, QueryBuilder.Select>(capacity: 512)
    /// SAVE's unnest INSERT text by entity and columns (`WritePlan.unnestInsert`), for this model only.
    let inserts = ShapeCache<[String], String>(capacity: 512)

    public init(schema: String, entities: [Entity], unserved: [UnservedTable], unicodeCaseFolding: Bool = false, collations: Set<String> = []) {
        self.schema = schema
        self.unicodeCaseFolding = unicodeCaseFolding
        self.collations = collations
        self.entities = entities.sorted { $0.name < $1.name }
        self.unserved = unserved
        var index: [String: Int] = [:]
        var exact: [String: Int] = [:]
        var referencing: [String: [ForeignKey]] = [:]
        for (position, entity) in self.entities.enumerated() {
            exact[entity.name] = position
            // Names that differ only in case are reached by their exact spelling only.
            let folded = entity.name.lowercased()
            index[folded] = index[folded] == nil ? position : -1
            for key in entity.foreignKeys { referencing[key.target, default: []].append(key) }
        }
        self.index = index.filter { $0.value >= 0 }
        self.exact = exact
        self.referencing = referencing
    }

    /// By exact name only: what pending changes and plans hold (after a reload, `Foo` must not
    /// become `foo`).
    public func entity(exactly name: String) -> Entity? {
        exact[name].map { entities[$0] }
    }

    /// By exact name, else case-insensitively when that names one entity only: for names a
    /// client types.
    public func entity(named name: String) -> Entity? {
        if let position = exact[name] { return entities[position] }
        return index[name.lowercased()].map { entities[$0] }
    }

    /// The kind of the column a to-one relationship references: the kind its values take and
    /// print as.
    public func referencedKind(_ relationship: Relationship) -> ValueKind {
        guard let target = entity(named: relationship.target) else { return .other }
        return target.attribute(named: relationship.referencedColumn)?.kind ?? target.keyKind(relationship.referencedColumn)
    }

    /// The foreign keys, in any entity, that point at `entity`.
    public func foreignKeys(to entity: String) -> [ForeignKey] {
        referencing[entity] ?? []
    }

    /// The qualified, quoted table name for SQL.
    public func table(_ entity: Entity) -> String {
        "\(SQL.identifier(schema)).\(SQL.identifier(entity.name))"
    }
}

/// Where each attribute and relationship of an entity is, by exact name and by case-folded
/// name (nil where two fold alike: such a name must be written exactly). One table for all
/// four: a name written in lower case (the usual spelling) is found with one hash.
struct NameIndex: Sendable {
    private struct Entry: Sendable {
        var attribute: Int?
        var relationship: Int?
        /// By the lower case of a name; `.some(nil)` where two names fold alike.
        var foldedAttribute: Int??
        var foldedRelationship: Int??
    }
    private var entries: [String: Entry] = [:]

    init(_ attributeList: [Attribute], _ relationshipList: [Relationship]) {
        for (index, attribute) in attributeList.enumerated() {
            if entries[attribute.name]?.attribute == nil { entries[attribute.name, default: Entry()].attribute = index }
            let folded = attribute.name.lowercased()
            let seen = entries[folded]?.foldedAttribute
            entries[folded, default: Entry()].foldedAttribute = seen == nil ? .some(index) : .some(nil)
        }
        for (index, relationship) in relationshipList.enumerated() {
            if entries[relationship.name]?.relationship == nil { entries[relationship.name, default: Entry()].relationship = index }
            let folded = relationship.name.lowercased()
            let seen = entries[folded]?.foldedRelationship
            entries[folded, default: Entry()].foldedRelationship = seen == nil ? .some(index) : .some(nil)
        }
    }

    /// The entries of `name` as written and of its lower case (the same one when it is).
    private func entries(_ name: String) -> (exact: Entry?, folded: Entry?) {
        let exact = entries[name]
        guard let lower = Self.lowered(name) else { return (exact, exact) }
        return (exact, entries[lower])
    }

    func attribute(_ name: String) -> Int? {
        let (exact, folded) = entries(name)
        return exact?.attribute ?? (folded?.foldedAttribute ?? nil)
    }

    func relationship(_ name: String) -> Int? {
        let (exact, folded) = entries(name)
        return exact?.relationship ?? (folded?.foldedRelationship ?? nil)
    }

    /// A name as written names an attribute, else a relationship; only then is its case
    /// folded, again attribute first (so `dept` is the relationship `dept`, not the attribute
    /// `Dept`). From one lookup for a name in lower case.
    func field(_ name: String) -> (attribute: Int?, relationship: Int?) {
        let (exact, folded) = entries(name)
        if let index = exact?.attribute { return (index, nil) }
        if let index = exact?.relationship { return (nil, index) }
        if let index = folded?.foldedAttribute ?? nil { return (index, nil) }
        return (nil, folded?.foldedRelationship ?? nil)
    }

    /// `lowercased()`, nil for a name already in lower case (no copy, no second lookup).
    private static func lowered(_ name: String) -> String? {
        name.utf8.contains { $0 >= 65 && $0 <= 90 || $0 >= 0x80 } ? name.lowercased() : nil
    }
}
