import Postgres

/// Reads the model from PostgreSQL's catalog: the migrations are the single source of truth.
///
/// Entities are the tables of `schema` with a single-column primary key; each single-column
/// foreign key to an entity becomes a to-one relationship and its to-many inverse.
/// See https://www.postgresql.org/docs/15/catalogs.html
public enum ModelReflector {
    public static func reflect(_ connection: Connection, schema: String = "public") throws -> Model {
        let tables = try connection.query("""
            SELECT c.relname, obj_description(c.oid, 'pg_class')
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
            ORDER BY c.relname
            """, [schema])
        let columns = try connection.query("""
            SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                   CASE WHEN t.typtype = 'd' THEN bt.typname ELSE t.typname END,
                   a.attnotnull,
                   CASE WHEN a.attidentity <> '' THEN 'identity' ELSE pg_get_expr(d.adbin, d.adrelid) END,
                   a.attgenerated <> '', col_description(c.oid, a.attnum)
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_type t ON t.oid = a.atttypid
            LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY c.relname, a.attnum
            """, [schema])
        let indexes = try connection.query("""
            SELECT c.relname, i.indisprimary, i.indnkeyatts, a.attname
            FROM pg_index i
            JOIN pg_class c ON c.oid = i.indrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]
            WHERE n.nspname = $1 AND (i.indisprimary OR i.indisunique) AND i.indpred IS NULL
              AND i.indexprs IS NULL
            """, [schema])
        let keys = try connection.query("""
            SELECT con.conname, src.relname, sa.attname, tgt.relname, tn.nspname, con.confdeltype,
                   obj_description(con.oid, 'pg_constraint'), cardinality(con.conkey), sa.attnotnull
            FROM pg_constraint con
            JOIN pg_class src ON src.oid = con.conrelid
            JOIN pg_namespace n ON n.oid = src.relnamespace
            JOIN pg_class tgt ON tgt.oid = con.confrelid
            JOIN pg_namespace tn ON tn.oid = tgt.relnamespace
            JOIN pg_attribute sa ON sa.attrelid = con.conrelid AND sa.attnum = con.conkey[1]
            WHERE con.contype = 'f' AND n.nspname = $1
            ORDER BY src.relname, sa.attnum, con.conname
            """, [schema])

        // Primary and unique keys per table.
        var primary: [String: (count: Int, column: String?)] = [:]
        var unique: Set<String> = []
        for row in 0..<indexes.rowCount {
            let table = indexes.string(row, 0)!
            let count = indexes.int(row, 2) ?? 0
            let column = indexes.string(row, 3)
            if indexes.bool(row, 1) == true { primary[table] = (count, column) }
            if count == 1, let column { unique.insert(table + "." + column) }
        }

        var attributesByTable: [String: [Attribute]] = [:]
        for row in 0..<columns.rowCount {
            let table = columns.string(row, 0)!
            let name = columns.string(row, 1)!
            let isPrimary = primary[table]?.column == name && primary[table]?.count == 1
            attributesByTable[table, default: []].append(Attribute(
                name: name,
                sqlType: columns.string(row, 2)!,
                kind: ValueKind(typeName: columns.string(row, 3) ?? ""),
                isNotNull: columns.bool(row, 4) ?? false,
                defaultValue: columns.string(row, 5),
                isUnique: unique.contains(table + "." + name),
                isPrimaryKey: isPrimary,
                isGenerated: columns.bool(row, 6) ?? false,
                comment: columns.string(row, 7)))
        }

        var entities: [String: Entity] = [:]
        var unserved: [UnservedTable] = []
        for row in 0..<tables.rowCount {
            let name = tables.string(row, 0)!
            let attributes = attributesByTable[name] ?? []
            guard let key = primary[name] else {
                unserved.append(UnservedTable(name: name, reason: "no primary key"))
                continue
            }
            guard key.count == 1, let pk = attributes.first(where: { $0.isPrimaryKey }) else {
                unserved.append(UnservedTable(name: name, reason: "composite primary key"))
                continue
            }
            let sequence = try connection.query(
                "SELECT pg_get_serial_sequence($1, $2)",
                [SQL.identifier(schema) + "." + SQL.identifier(name), pk.name]).string(0, 0)
            entities[name] = Entity(
                name: name, primaryKey: pk,
                attributes: [pk] + attributes.filter { !$0.isPrimaryKey },
                relationships: [], keySequence: sequence, comment: tables.string(row, 1))
        }

        // Relationships: a to-one on the referencing entity, its to-many inverse on the target.
        struct Key { var constraint, source, column, target, rule: String; var comment: String?; var required: Bool }
        var foreignKeys: [Key] = []
        for row in 0..<keys.rowCount {
            guard keys.int(row, 7) == 1, keys.string(row, 4) == schema else { continue }
            let key = Key(constraint: keys.string(row, 0)!, source: keys.string(row, 1)!,
                          column: keys.string(row, 2)!, target: keys.string(row, 3)!,
                          rule: keys.string(row, 5)!, comment: keys.string(row, 6),
                          required: keys.bool(row, 8) ?? false)
            guard entities[key.source] != nil, entities[key.target] != nil else { continue }
            foreignKeys.append(key)
        }
        for key in foreignKeys {
            let toOne = toOneName(column: key.column)
            var inverse = inverseName(comment: key.comment) ?? Inflection.plural(key.source)
            let sameName = foreignKeys.filter { $0.source == key.source && $0.target == key.target }
            if sameName.count > 1 && inverseName(comment: key.comment) == nil { inverse += "_by_" + toOne }
            let rule = DeleteRule(code: key.rule)
            let columnType = attributesByTable[key.source]?.first { $0.name == key.column }?.sqlType ?? "bigint"
            entities[key.source]!.relationships.append(Relationship(
                name: toOne, entity: key.source, target: key.target, isToMany: false, inverse: inverse,
                column: key.column, columnType: columnType, deleteRule: rule, constraint: key.constraint, isRequired: key.required))
            entities[key.target]!.relationships.append(Relationship(
                name: inverse, entity: key.target, target: key.source, isToMany: true, inverse: toOne,
                column: key.column, columnType: columnType, deleteRule: rule, constraint: key.constraint, isRequired: false))
            // The foreign-key column is shown as the relationship, not as an attribute.
            entities[key.source]!.attributes.removeAll { $0.name == key.column && !$0.isPrimaryKey }
        }
        return Model(schema: schema, entities: Array(entities.values), unserved: unserved)
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
