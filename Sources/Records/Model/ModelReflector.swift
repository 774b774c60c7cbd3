import Foundation
import Postgres

/// Reads the model from PostgreSQL's catalog: the migrations are the single source of truth.
///
/// Entities are the tables of `schema` with a primary key (of one column or several); each
/// single-column foreign key to a served table becomes a to-one relationship and its to-many
/// inverse, whether it references the target's key or another unique column.
/// See https://www.postgresql.org/docs/15/catalogs.html
public enum ModelReflector {
    /// Whether the table `c` (a `pg_class` row) has a rule on INSERT (event type 3), which
    /// COPY would pass by: read with the model, and asked again before a bulk copies.
    static let hasInsertRules = "EXISTS (SELECT 1 FROM pg_rewrite r WHERE r.ev_class = c.oid AND r.ev_type = '3')"

    public static func reflect(_ connection: Connection, schema: String = "public") throws -> Model {
        let keys = UniqueKeys(try connection.query(Catalog.indexes, [schema]))
        let attributes = readAttributes(try connection.query(Catalog.columns, [schema]), keys)
        var (entities, unserved) = readEntities(try connection.query(Catalog.tables, [schema]), attributes, keys)
        let toOne = readForeignKeys(try connection.query(Catalog.foreignKeys, [schema]), schema: schema, &entities)
        addRelationships(toOne, attributes, &entities)
        labelForeignKeys(&entities)
        // Collations usable with the database's encoding (ICU's where PostgreSQL has ICU).
        let collationRows = try connection.query(Catalog.collations)
        let collations = Set((0..<collationRows.rowCount).compactMap { collationRows.string($0, 0) })
        unserved += otherRelations(try connection.query(Catalog.otherRelations, [schema]))
        unserved.sort { $0.name < $1.name }
        return Model(schema: schema, entities: Array(entities.values), unserved: unserved,
                     unicodeCaseFolding: collations.contains("und-x-icu"), collations: collations)
    }

    /// What the catalog is asked, one statement a step of `reflect`.
    enum Catalog {
        static let tables = """
            SELECT c.relname, obj_description(c.oid, 'pg_class'),
                   c.relrowsecurity,
                   -- A BEFORE INSERT row trigger (bits ROW 1, BEFORE 2, INSERT 4) may change the key.
                   EXISTS (SELECT 1 FROM pg_trigger tg WHERE tg.tgrelid = c.oid AND NOT tg.tgisinternal
                           AND tg.tgenabled <> 'D' AND tg.tgtype::int & 7 = 7),
                   \(hasInsertRules),
                   -- A BEFORE UPDATE row trigger (ROW 1, BEFORE 2, UPDATE 16) may fill what an update empties.
                   EXISTS (SELECT 1 FROM pg_trigger tg WHERE tg.tgrelid = c.oid AND NOT tg.tgisinternal
                           AND tg.tgenabled <> 'D' AND tg.tgtype::int & 19 = 19)
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
            ORDER BY c.relname
            """
        static let columns = """
            SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                   CASE WHEN t.typtype = 'd' THEN bt.typname ELSE t.typname END,
                   a.attnotnull, a.attidentity::text,
                   -- The column's default, else its domain's (an INSERT that leaves it out gets that one).
                   coalesce(pg_get_expr(d.adbin, d.adrelid), CASE WHEN t.typtype = 'd' THEN t.typdefault END),
                   a.attgenerated <> '', col_description(c.oid, a.attnum),
                   pg_get_serial_sequence(format('%I.%I', n.nspname, c.relname), a.attname),
                   (SELECT dep.refobjid::regclass::text FROM pg_depend dep JOIN pg_class s ON s.oid = dep.refobjid AND s.relkind = 'S'
                    WHERE dep.classid = 'pg_attrdef'::regclass AND dep.objid = d.oid AND dep.refclassid = 'pg_class'::regclass
                    ORDER BY dep.refobjid LIMIT 1),
                   format_type(a.atttypid, -1)
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_type t ON t.oid = a.atttypid
            LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY c.relname, a.attnum
            """
        /// Primary and unique keys without predicate or expression, with their columns in order.
        static let indexes = """
            SELECT c.relname, i.indisprimary, (SELECT ic.relname FROM pg_class ic WHERE ic.oid = i.indexrelid),
                   (SELECT json_agg(a.attname ORDER BY k.n)
                    FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
                    WHERE k.n <= i.indnkeyatts)::text
            FROM pg_index i
            JOIN pg_class c ON c.oid = i.indrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND (i.indisprimary OR i.indisunique) AND i.indpred IS NULL
              AND i.indexprs IS NULL
            ORDER BY c.relname, NOT i.indisprimary, i.indexrelid
            """
        static let foreignKeys = """
            SELECT con.conname, coalesce(root.relname, src.relname), sa.attname, tgt.relname, tn.nspname, con.confdeltype,
                   obj_description(con.oid, 'pg_constraint'), cardinality(con.conkey), sa.attnotnull,
                   ta.attname, con.condeferrable,
                   (SELECT json_agg(a.attname ORDER BY k.n) FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum)::text,
                   (SELECT json_agg(a.attname ORDER BY k.n) FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum)::text,
                   con.confupdtype
            FROM pg_constraint con
            JOIN pg_class src ON src.oid = con.conrelid
            JOIN pg_namespace n ON n.oid = src.relnamespace
            -- A key declared on a partition is its partitioned table's (the table served).
            LEFT JOIN pg_class root ON src.relispartition AND root.oid = pg_partition_root(src.oid)
            JOIN pg_class tgt ON tgt.oid = con.confrelid
            JOIN pg_namespace tn ON tn.oid = tgt.relnamespace
            JOIN pg_attribute sa ON sa.attrelid = con.conrelid AND sa.attnum = con.conkey[1]
            JOIN pg_attribute ta ON ta.attrelid = con.confrelid AND ta.attnum = con.confkey[1]
            -- Not the copies PostgreSQL makes on each partition of a key declared on their parent.
            WHERE con.contype = 'f' AND n.nspname = $1 AND con.conparentid = 0
            ORDER BY coalesce(root.relname, src.relname), sa.attnum, con.conname
            """
        static let collations =
            "SELECT collname FROM pg_collation WHERE collencoding IN (-1, (SELECT encoding FROM pg_database WHERE datname = current_database()))"
        /// The schema's other relations: views, materialized views, foreign tables, partitions.
        static let otherRelations = """
            SELECT c.relname, c.relkind::text, c.relispartition, (SELECT r.relname FROM pg_class r WHERE r.oid = pg_partition_root(c.oid))
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND (c.relkind IN ('v', 'm', 'f') OR (c.relkind IN ('r', 'p') AND c.relispartition))
            ORDER BY c.relname
            """
    }

    /// Each table's primary key and unique keys, by their columns and index names.
    struct UniqueKeys {
        var primary: [String: [String]] = [:]
        var keyIndex: [String: String] = [:]
        var uniqueNames: [String: [String: [String]]] = [:]
        var uniqueSets: [String: [[String]]] = [:]

        init(_ indexes: QueryResult) {
            for row in 0..<indexes.rowCount {
                let table = indexes.string(row, 0)!
                guard let json = indexes.string(row, 3), let data = json.data(using: .utf8),
                      let names = try? JSONSerialization.jsonObject(with: data) as? [String], !names.isEmpty else { continue }
                if let index = indexes.string(row, 2) { uniqueNames[table, default: [:]][index] = names }
                if indexes.bool(row, 1) == true {
                    primary[table] = names
                    keyIndex[table] = indexes.string(row, 2)  // as a unique violation names it
                }
                if !(uniqueSets[table] ?? []).contains(names) { uniqueSets[table, default: []].append(names) }
            }
        }

        func isUnique(_ table: String, _ column: String) -> Bool {
            uniqueSets[table]?.contains([column]) ?? false
        }
    }

    /// Every table's columns as attributes, in their order.
    static func readAttributes(_ columns: QueryResult, _ keys: UniqueKeys) -> [String: [Attribute]] {
        var attributesByTable: [String: [Attribute]] = [:]
        for row in 0..<columns.rowCount {
            let table = columns.string(row, 0)!
            let name = columns.string(row, 1)!
            let identity: Attribute.Identity? = switch columns.string(row, 5) {
            case "a": .always
            case "d": .byDefault
            default: nil
            }
            let generated = columns.bool(row, 7) ?? false
            attributesByTable[table, default: []].append(Attribute(
                name: name,
                sqlType: columns.string(row, 11)!,
                declaredType: columns.string(row, 2)!,
                kind: ValueKind(typeName: columns.string(row, 3) ?? ""),
                isNotNull: columns.bool(row, 4) ?? false,
                defaultValue: identity != nil ? "identity" : (generated ? nil : columns.string(row, 6)),
                identity: identity,
                isUnique: keys.isUnique(table, name),
                isPrimaryKey: keys.primary[table]?.contains(name) ?? false,
                isGenerated: generated,
                comment: columns.string(row, 8),
                sequence: columns.string(row, 9),
                drawsFrom: columns.string(row, 10)))
        }
        return attributesByTable
    }

    /// The tables with a primary key as entities (no relationships yet); the others, with why.
    static func readEntities(_ tables: QueryResult, _ attributesByTable: [String: [Attribute]],
                             _ keys: UniqueKeys) -> ([String: Entity], [UnservedTable]) {
        var entities: [String: Entity] = [:]
        var unserved: [UnservedTable] = []
        for row in 0..<tables.rowCount {
            let name = tables.string(row, 0)!
            let attributes = attributesByTable[name] ?? []
            guard let keyNames = keys.primary[name] else {
                unserved.append(UnservedTable(name: name, reason: "no primary key"))
                continue
            }
            let key = keyNames.compactMap { column in attributes.first { $0.name == column } }
            guard key.count == keyNames.count else {
                unserved.append(UnservedTable(name: name, reason: "its primary key could not be read"))
                continue
            }
            entities[name] = Entity(
                name: name, key: key,
                attributes: key + attributes.filter { !$0.isPrimaryKey },
                relationships: [], uniqueKeys: keys.uniqueSets[name] ?? [keyNames],
                hasRowSecurity: tables.bool(row, 2) ?? false, comment: tables.string(row, 1),
                foreignKeys: [], keyConstraint: keys.keyIndex[name])
            entities[name]!.uniqueConstraints = keys.uniqueNames[name] ?? [:]
            entities[name]!.triggersMayRewriteInserts = tables.bool(row, 3) ?? false
            entities[name]!.hasInsertRules = tables.bool(row, 4) ?? false
            entities[name]!.triggersMayRewriteUpdates = tables.bool(row, 5) ?? false
        }
        return (entities, unserved)
    }

    /// A single-column foreign key between served tables: a relationship to be named.
    struct ToOneKey {
        var constraint, source, column, target, referenced, rule: String
        var comment: String?
        var required, deferrable: Bool
    }

    /// Every foreign key between served tables onto its entity (composite ones included: each
    /// orders writes and carries delete rules); returns the single-column ones, one a column,
    /// which become relationships.
    static func readForeignKeys(_ keys: QueryResult, schema: String, _ entities: inout [String: Entity]) -> [ToOneKey] {
        var foreignKeys: [ToOneKey] = []
        func names(_ json: String?) -> [String] {
            guard let data = json?.data(using: .utf8) else { return [] }
            return (try? JSONSerialization.jsonObject(with: data) as? [String]) ?? []
        }
        for row in 0..<keys.rowCount {
            guard keys.string(row, 4) == schema, let source = keys.string(row, 1), let target = keys.string(row, 3),
                  entities[source] != nil, entities[target] != nil else { continue }
            let columns = names(keys.string(row, 11))
            let referenced = names(keys.string(row, 12))
            let rule = DeleteRule(code: keys.string(row, 5)!)
            // The same key on another partition of the table: one key, known by each name.
            if let same = entities[source]!.foreignKeys.firstIndex(where: {
                $0.columns == columns && $0.target == target && $0.referencedColumns == referenced && $0.deleteRule == rule
            }) {
                entities[source]!.foreignKeys[same].partitionConstraints.append(keys.string(row, 0)!)
                continue
            }
            entities[source]!.foreignKeys.append(ForeignKey(
                constraint: keys.string(row, 0)!, entity: source, columns: columns, target: target,
                referencedColumns: names(keys.string(row, 12)), deleteRule: DeleteRule(code: keys.string(row, 5)!),
                updateRule: DeleteRule(code: keys.string(row, 13) ?? "a"),
                isDeferrable: keys.bool(row, 10) ?? false,
                label: source + "." + (columns.count == 1 ? toOneName(column: columns[0]) : "(" + columns.joined(separator: ", ") + ")")))
            guard keys.int(row, 7) == 1 else { continue }
            let key = ToOneKey(constraint: keys.string(row, 0)!, source: keys.string(row, 1)!,
                               column: keys.string(row, 2)!, target: keys.string(row, 3)!,
                               referenced: keys.string(row, 9)!, rule: keys.string(row, 5)!,
                               comment: keys.string(row, 6), required: keys.bool(row, 8) ?? false,
                               deferrable: keys.bool(row, 10) ?? false)
            // One relationship per column: a second key on the same column adds nothing to navigate.
            guard !foreignKeys.contains(where: { $0.source == key.source && $0.column == key.column }) else { continue }
            foreignKeys.append(key)
        }
        return foreignKeys
    }

    /// A to-one relationship on the referencing entity and its to-many inverse on the target,
    /// for each key, named so that no name is taken twice.
    static func addRelationships(_ foreignKeys: [ToOneKey], _ attributesByTable: [String: [Attribute]],
                                 _ entities: inout [String: Entity]) {
        for key in foreignKeys {
            var toOne = toOneName(column: key.column)
            // A name an attribute or another relationship already has: the column's own.
            let source = entities[key.source]!
            if toOne != key.column && (source.attributes.contains { $0.name == toOne && $0.name != key.column }
                                        || foreignKeys.contains { $0.source == key.source && $0.column != key.column && toOneName(column: $0.column) == toOne }) {
                toOne = key.column
            }
            var inverse = inverseName(comment: key.comment) ?? Inflection.plural(key.source)
            let sameName = foreignKeys.filter { $0.source == key.source && $0.target == key.target }
            if sameName.count > 1 && inverseName(comment: key.comment) == nil { inverse += "_by_" + toOne }
            // A name the target has already (an attribute, or the inverse of another table's key:
            // `order` and `orders` both pointing at members): this key's relationship follows.
            let target = entities[key.target]!
            func taken(_ name: String) -> Bool {
                target.relationships.contains { $0.name == name } || target.attributes.contains { $0.name == name }
            }
            if taken(inverse) && inverseName(comment: key.comment) == nil {
                inverse = key.source + "_by_" + toOne
                if taken(inverse) { inverse = key.source + "_by_" + key.column }
            }
            let rule = DeleteRule(code: key.rule)
            let columnAttribute = attributesByTable[key.source]?.first { $0.name == key.column }
            let columnType = columnAttribute?.sqlType ?? "bigint"
            let generated = columnAttribute?.isGenerated ?? false
            entities[key.source]!.relationships.append(Relationship(
                name: toOne, entity: key.source, target: key.target, isToMany: false, inverse: inverse,
                column: key.column, referencedColumn: key.referenced, columnType: columnType, deleteRule: rule,
                // PostgreSQL sets a generated key, so no insert has to: never required.
                constraint: key.constraint, isRequired: key.required && !generated, isDeferrable: key.deferrable,
                isGenerated: generated))
            entities[key.target]!.relationships.append(Relationship(
                name: inverse, entity: key.target, target: key.source, isToMany: true, inverse: toOne,
                column: key.column, referencedColumn: key.referenced, columnType: columnType, deleteRule: rule,
                constraint: key.constraint, isRequired: false, isDeferrable: key.deferrable))
            // The foreign-key column is shown as the relationship, not as an attribute.
            entities[key.source]!.attributes.removeAll { $0.name == key.column }
        }
    }

    /// A single-column key's effects are named by its relationship, as DESCRIBE shows it.
    static func labelForeignKeys(_ entities: inout [String: Entity]) {
        for name in Array(entities.keys) {
            for index in entities[name]!.foreignKeys.indices where entities[name]!.foreignKeys[index].columns.count == 1 {
                let column = entities[name]!.foreignKeys[index].columns[0]
                if let relationship = entities[name]!.relationship(column: column) {
                    entities[name]!.foreignKeys[index].label = name + "." + relationship.name
                }
            }
        }
    }

    /// The schema's other relations, each with why it is not an entity of its own.
    static func otherRelations(_ others: QueryResult) -> [UnservedTable] {
        (0..<others.rowCount).map { row in
            let name = others.string(row, 0)!
            let reason: String
            switch (others.string(row, 1), others.bool(row, 2) == true) {
            case (_, true): reason = "a partition of \(others.string(row, 3) ?? "?"): its records are served as that table's"
            case ("v", _): reason = "a view (views have no key to address a record by)"
            case ("m", _): reason = "a materialized view (no key to address a record by)"
            default: reason = "a foreign table"
            }
            return UnservedTable(name: name, reason: reason)
        }
    }

    /// `department_id` -> `department`.
    static func toOneName(column: String) -> String {
        for suffix in ["_id", "_ID", "Id", "ID"] where column.hasSuffix(suffix) && column.count > suffix.count {
            return String(column.dropLast(suffix.count))
        }
        return column
    }

    /// `COMMENT ON CONSTRAINT ... IS 'inverse: staff'` names the to-many side.
    static func inverseName(comment: String?) -> String? {
        guard let comment, let range = comment.range(of: "inverse:") else { return nil }
        let name = comment[range.upperBound...].split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == ";" }).first
        return name.map(String.init)
    }
}
