/// Compiles fetch requests against the model into SQL whose values are all libpq parameters
/// and whose identifiers all come from the model, quoted. No input can change its shape.
struct QueryBuilder {
    let model: Model
    private(set) var parameters: [String?] = []
    var joins: [String] = []
    private var joinAliases: [String: String] = [:]
    private var aliasCount = 0

    init(model: Model) { self.model = model }

    // MARK: - Statements

    /// A FIND (or GET) as SQL: the record's fields in its first columns (the encoder's), then
    /// the sort keys as text when the request pages by keyset (`cursorColumns` of them), then,
    /// when asked, the row's version and key (`versionColumns`; a key column the record's own
    /// columns already hold as the same text is not selected twice).
    struct Select {
        var sql: String
        var parameters: [String?]
        /// Turns the leading columns of each row into the record's JSON.
        var encoder: RowEncoder
        /// Sort-key columns after the record's, for the next page's cursor.
        var cursorColumns: Int
        /// Where each row's `xmin` (when selected) and key (as `keyText` shows it) are, for the
        /// unit's read versions (nil: not asked).
        var versionColumns: (xmin: Int?, key: [Int])?
        /// Identifies the query's shape, so a cursor cannot be used with another query.
        var fingerprint: String
        /// Everything from ` FROM` on: EXPORT puts its own column list in front.
        var body: String
        /// A projection's values (`SELECT` paths) and whether they are DISTINCT: EXPORT's columns.
        var projection: [(key: String, sql: String)] = []
        var distinct = false
        /// The table, quoted, when the statement reads every one of its rows in no order, with
        /// nothing joined, filtered or limited.
        var wholeTable: String?
        /// The columns the statement selects, when it selects nothing but stored columns as
        /// they are (`wholeTable` may then be read by `COPY table (columns)`).
        var storedColumns: [String]?
        /// Where the two `tid` parameters of a statement built `splittable` are: its rows are
        /// those of the table's blocks from the first up to (not including) the second.
        var blockBounds: (from: Int, to: Int)?

        /// The COPY that streams these rows, in text format: of the table itself when the
        /// statement reads it whole, as stored, and the catalog says COPY reads it as a query
        /// would (`readsWhole`, asked in the same transaction, not read with the model: a
        /// parent's children added since would be left out); else of the query.
        /// PostgreSQL's backend spends a fifteenth less on `COPY employee (...) TO STDOUT`
        /// than on `COPY (SELECT ... FROM employee) TO STDOUT`, and it sets the pace of a large FIND.
        func copyOut<E: Error>(readsWhole: Bool, literal: (String) throws(E) -> String) throws(E) -> String {
            if readsWhole, let wholeTable, let storedColumns { return SQL.copyOut(table: wholeTable, storedColumns) }
            return try SQL.copyOut(sql, parameters, literal: literal)
        }

        /// The COPY of the rows stored in `blocks` (block numbers) of a statement built
        /// `splittable`; the last block number, `Self.endBlock`, is past any table's end.
        func copyOut<E: Error>(blocks: Range<Int>, literal: (String) throws(E) -> String) throws(E) -> String {
            var parameters = self.parameters
            if let blockBounds {
                parameters[blockBounds.from] = "(\(blocks.lowerBound),0)"
                parameters[blockBounds.to] = "(\(blocks.upperBound),0)"
            }
            return try SQL.copyOut(sql, parameters, literal: literal)
        }

        /// A block number no table reaches (PostgreSQL's InvalidBlockNumber, 2³² − 1).
        static let endBlock = Int(UInt32.max)

        /// The question a whole read asks first (nil: none), one value, `t` when COPY may
        /// read the table itself: an ordinary table (COPY refuses a partitioned one) without
        /// inheritance children (COPY leaves them out; `relhassubclass` may stay true after
        /// the last goes, and a query reads it then) and without generated columns (COPY
        /// refuses to name one, and the model may predate it). Its one parameter is `wholeTable`.
        var readsWholeQuery: (sql: String, parameters: [String?])? {
            guard let wholeTable else { return nil }
            return ("""
                SELECT c.relkind = 'r' AND NOT c.relhassubclass
                       AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
                                       AND NOT a.attisdropped AND a.attgenerated <> '')
                FROM pg_class c WHERE c.oid = to_regclass($1)
                """, [wholeTable])
        }
    }

    /// What a read selects for the unit's read versions.
    enum Versions {
        case none
        /// Each row's `xmin` and key.
        case xmin
        /// Each row's key only.
        case keys
    }

    /// - Parameters:
    ///   - filter: columns that must equal values (GET by key or by a unique attribute); bound
    ///     first, so they are the first parameters (`Model.selects`).
    ///   - versions: also select each row's key, and its `xmin` unless `.keys` (the version is
    ///     then the statement's snapshot: `SnapshotVersion`).
    ///   - splittable: the rows of a range of the table's blocks only (`Select.copyOut(blocks:)`),
    ///     which a whole read splits between two connections (`SplitRead`).
    static func select(_ request: FetchRequest, model: Model, filter: [(column: String, value: String)] = [],
                       versions: Versions = .none, splittable: Bool = false) throws(CommandError) -> Select {
        var builder = QueryBuilder(model: model)
        let entity = try builder.entity(request.entity)
        var conditions: [String] = []
        for (column, value) in filter {
            let type = entity.columns.first { $0.column == column }?.sqlType ?? "text"
            conditions.append("t0.\(SQL.identifier(column)) = \(builder.bind(value))::\(type)")
        }
        if let predicate = request.predicate {
            conditions.append(try builder.compile(predicate, entity: entity, alias: "t0"))
        }
        var blockBounds: (from: Int, to: Int)?
        if splittable {
            // A TID range scan reads those blocks only.
            let from = builder.parameters.count
            conditions.append("t0.ctid >= \(builder.bind("(0,0)"))::tid AND t0.ctid < \(builder.bind("(\(Select.endBlock),0)"))::tid")
            blockBounds = (from, from + 1)
        }
        var projection: [(key: String, sql: String, format: RowEncoder.Format, column: String?)] = []
        for path in request.select { projection.append(try builder.projected(path, entity: entity, distinct: request.distinct)) }
        let keys = try builder.sortKeys(request, entity: entity, projection: projection.map(\.sql), selected: projection.map(\.key))
        let fingerprint = Self.fingerprint(request, entity: entity)
        if let token = request.after {
            let values = try Cursor.decode(token, fingerprint: fingerprint, count: keys.count)
            conditions.append(builder.after(keys, values))
        }
        let includes = try IncludeTree.parse(request.include, orders: request.includeOrder, entity: entity, model: model)
        try builder.checkOrders(of: includes, entity: entity)
        let fields = projection.isEmpty ? builder.fields(entity, alias: "t0", includes: includes) : projection
        let paged = request.limit != nil && !request.distinct
        // A projection is not a record: no versions are tracked from it.
        let versions = projection.isEmpty ? versions : .none
        var sql = (request.distinct ? "SELECT DISTINCT " : "SELECT ") + fields.map(\.sql).joined(separator: ", ")
        if paged { sql += keys.map { ", (\($0.sql))::text" }.joined() }
        let versionColumns = versions == .none ? nil
            : Self.selectVersions(entity, xmin: versions == .xmin, after: fields.count + (paged ? keys.count : 0), into: &sql)
        var body = " FROM \(model.table(entity)) AS t0"
        body += builder.joins.map { " " + $0 }.joined()
        if !conditions.isEmpty { body += " WHERE " + conditions.joined(separator: " AND ") }
        // Without ORDER BY or paging the order is PostgreSQL's (as in SQL and Core Data): sorting
        // a million rows by key costs a third of the time of streaming them.
        let ordered = !request.order.isEmpty || paged || request.offset != nil || request.after != nil || (request.distinct && request.limit != nil)
        if ordered { body += " ORDER BY " + keys.map { $0.sql + ($0.ascending ? " ASC" : " DESC") }.joined(separator: ", ") }
        // One row more than asked tells whether another page follows.
        if let limit = request.limit { body += " LIMIT " + builder.bind(String(limit < Int.max ? limit + 1 : limit)) + "::bigint" }
        if let offset = request.offset { body += " OFFSET " + builder.bind(String(offset)) + "::bigint" }
        let whole = projection.isEmpty && builder.joins.isEmpty && conditions.isEmpty && !ordered
            && request.limit == nil && request.offset == nil && !request.distinct
        let columns = fields.compactMap(\.column)
        // Sort keys, xmin or a key as text selected after the record's fields.
        let selectsMore = paged || versionColumns.map { $0.xmin != nil || $0.key.contains { $0 >= fields.count } } ?? false
        // Each field a column, once (COPY refuses a column twice), and nothing after them.
        let stored = columns.count == fields.count && !selectsMore && Set(columns).count == columns.count
        return Select(sql: sql + body, parameters: builder.parameters, encoder: RowEncoder(fields.map { ($0.key, $0.format) }),
                      cursorColumns: paged ? keys.count : 0, versionColumns: versionColumns,
                      fingerprint: fingerprint, body: body, projection: projection.map { ($0.key, $0.sql) }, distinct: request.distinct,
                      wholeTable: whole ? model.table(entity) : nil, storedColumns: stored ? columns : nil, blockBounds: blockBounds)
    }

    /// Sort keys, then the primary key, so ties come back in a stable order and pages never
    /// overlap. DISTINCT orders by the very expressions it selects (PostgreSQL requires it; a
    /// record's key would undo the DISTINCT), then by all of them: no cursor, OFFSET pages.
    private mutating func sortKeys(_ request: FetchRequest, entity: Entity, projection: [String],
                                   selected: [String]) throws(CommandError) -> [(sql: String, ascending: Bool)] {
        var keys: [(sql: String, ascending: Bool)] = []
        guard request.distinct else {
            for key in request.order {
                keys.append((try orderExpression(key, entity: entity), key.ascending))
            }
            for column in entity.keyColumns { keys.append(("t0.\(SQL.identifier(column))", true)) }
            return keys
        }
        guard request.after == nil else { throw CommandError(.syntax, "SELECT DISTINCT pages with OFFSET, not AFTER") }
        for key in request.order {
            guard let index = selected.firstIndex(where: { $0.lowercased() == key.path.lowercased() }), !key.caseInsensitive, key.collation == nil else {
                throw CommandError(.syntax, "with SELECT DISTINCT, ORDER BY takes the selected key paths as they are (no [c] or COLLATE), not '\(key.path)'")
            }
            keys.append((projection[index], key.ascending))
        }
        return keys + projection.map { ($0, true) }
    }

    /// The whole query, its predicate's values included: a cursor fits only the FIND that gave it.
    private static func fingerprint(_ request: FetchRequest, entity: Entity) -> String {
        fingerprint(entity.name + "|" + request.select.joined(separator: ",").lowercased() + "|"
                    + request.order.map { "\($0.path.lowercased()) \($0.ascending) \($0.caseInsensitive) \($0.collation ?? "")" }.joined(separator: ",")
                    + "|" + (request.predicate?.canonical ?? ""))
    }

    /// Selects what a record's version is read from, after column `next`: its xmin (unless
    /// the statement's snapshot is the version) and its key. xid's output is its text; so is
    /// an integer's or a uuid's, whose column the record already holds (text conversions are a
    /// third of PostgreSQL's work on a large FIND).
    private static func selectVersions(_ entity: Entity, xmin selectsXmin: Bool, after next: Int,
                                       into sql: inout String) -> (xmin: Int?, key: [Int]) {
        var next = next
        let xmin = selectsXmin ? next : nil
        if xmin != nil {
            sql += ", t0.xmin"
            next += 1
        }
        let key = entity.key.enumerated().map { index, attribute -> Int in
            if attribute.kind == .uuid || attribute.kind.isInteger,
               entity.attributes.indices.contains(index), entity.attributes[index].name == attribute.name { return index }
            sql += ", t0.\(SQL.identifier(attribute.name))::text"
            defer { next += 1 }
            return next
        }
        return (xmin, key)
    }

    static func count(_ entityName: String, predicate: Predicate?, model: Model) throws(CommandError) -> (sql: String, parameters: [String?]) {
        let matching = try rows(entityName, predicate: predicate, model: model)
        return ("SELECT count(*)" + matching.body, matching.parameters)
    }

    /// ` FROM table AS t0 ... WHERE predicate`: the rows a COUNT counts, for a statement to
    /// put its own select list in front (`COUNT ... ESTIMATE` asks the planner about `SELECT 1`).
    static func rows(_ entityName: String, predicate: Predicate?, model: Model) throws(CommandError) -> (body: String, parameters: [String?]) {
        var builder = QueryBuilder(model: model)
        let entity = try builder.entity(entityName)
        var condition = ""
        if let predicate { condition = " WHERE " + (try builder.compile(predicate, entity: entity, alias: "t0")) }
        return (" FROM \(model.table(entity)) AS t0" + builder.joins.map { " " + $0 }.joined() + condition, builder.parameters)
    }

    /// `SELECT t0.key FROM table AS t0 ... WHERE predicate`, its values bound after those
    /// `sql` holds: the records a change by predicate touches.
    /// With `locking`, the rows are locked in key order (`FOR UPDATE`), so concurrent saves
    /// that change overlapping records by predicate wait for each other instead of deadlocking.
    static func keys(of entity: Entity, matching predicate: Predicate, model: Model, into sql: inout SQLText,
                     locking: Bool = false) throws(CommandError) -> String {
        var builder = QueryBuilder(model: model)
        builder.parameters = sql.parameters
        let condition = try builder.compile(predicate, entity: entity, alias: "t0")
        sql.parameters = builder.parameters
        return "SELECT \(entity.keyList(alias: "t0")) FROM \(model.table(entity)) AS t0" + builder.joins.map { " " + $0 }.joined()
            + " WHERE " + condition + (locking ? " ORDER BY \(entity.keyList(alias: "t0")) FOR UPDATE OF t0" : "")
    }

    /// The records among `keys` that match `predicate` (their key columns as text): as
    /// stored, or, for `deleted`, as they were when deleted (the rows the delete trigger kept in
    /// `records.deleted_rows` under the change log's key text `logKeys`, the latest per key,
    /// rebuilt as the table's row type so the predicate reads them alike).
    static func matching(_ entityName: String, predicate: Predicate, keys: [RecordKey], logKeys: [String], deleted: Bool = false,
                         model: Model) throws(CommandError) -> (sql: String, parameters: [String?]) {
        var builder = QueryBuilder(model: model)
        let entity = try builder.entity(entityName)
        let condition = try builder.compile(predicate, entity: entity, alias: "t0")
        var text = SQLText(parameters: builder.parameters)
        let match = entity.keyMatch(keys, alias: "t0", into: &text)
        builder.parameters = text.parameters
        let table = model.table(entity)
        let source: String
        if deleted {
            let name = builder.bind(entity.name)
            let list = builder.bind(SQL.arrayLiteral(logKeys.map { Optional($0) }))
            source = "(SELECT (jsonb_populate_record(NULL::\(table), d.row)).* FROM (SELECT DISTINCT ON (key) row"
                + " FROM records.deleted_rows WHERE entity = \(name) AND key = ANY(\(list)::text[]) ORDER BY key, seq DESC) AS d)"
        } else {
            source = table
        }
        let sql = "SELECT \(entity.keyText(alias: "t0")) FROM \(source) AS t0" + builder.joins.map { " " + $0 }.joined()
            + " WHERE \(match) AND \(condition)"
        return (sql, builder.parameters)
    }

    /// Which of `keys` the asking identity may see (row-level security filters the scan).
    static func visible(_ entity: Entity, keys: [RecordKey], model: Model) -> (sql: String, parameters: [String?]) {
        var text = SQLText()
        let match = entity.keyMatch(keys, alias: "t0", into: &text)
        return ("SELECT \(entity.keyText(alias: "t0")) FROM \(model.table(entity)) AS t0 WHERE \(match)", text.parameters)
    }

    /// Whether the table's policies bind the asking identity: not for a superuser, a BYPASSRLS
    /// role, or the owner of a table without FORCE, who see every row.
    static func policiesBind(_ entity: Entity, model: Model) -> (sql: String, parameters: [String?]) {
        ("SELECT row_security_active($1::text::regclass)::text", [model.table(entity)])
    }

    /// The keys of the first `limit` records the asking identity may see.
    static func visible(_ entity: Entity, limit: Int, model: Model) -> (sql: String, parameters: [String?]) {
        ("SELECT \(entity.keyText(alias: "t0")) FROM \(model.table(entity)) AS t0 LIMIT $1", [String(limit)])
    }

    /// The keyset condition "comes after these sort-key values", with each key's direction
    /// and PostgreSQL's nil placement (last when ascending, first when descending).
    private mutating func after(_ keys: [(sql: String, ascending: Bool)], _ values: [String?]) -> String {
        var alternatives: [String] = []
        for index in keys.indices {
            var terms: [String] = []
            for earlier in 0..<index {
                terms.append(values[earlier].map { "\(keys[earlier].sql) = \(bind($0))" } ?? "\(keys[earlier].sql) IS NULL")
            }
            let key = keys[index]
            switch (values[index], key.ascending) {
            case (let value?, true): terms.append("(\(key.sql) > \(bind(value)) OR \(key.sql) IS NULL)")
            case (let value?, false): terms.append("\(key.sql) < \(bind(value))")
            case (nil, true): continue  // nothing sorts after nil ascending but other nils, decided by later keys
            case (nil, false): terms.append("\(key.sql) IS NOT NULL")
            }
            alternatives.append("(" + terms.joined(separator: " AND ") + ")")
        }
        return alternatives.isEmpty ? "FALSE" : "(" + alternatives.joined(separator: " OR ") + ")"
    }

    /// FNV-1a, 32 bits, as hex.
    static func fingerprint(_ text: String) -> String {
        var hash: UInt32 = 2_166_136_261
        for byte in text.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        return String(hash, radix: 16)
    }

    // MARK: - Pieces

    func entity(_ name: String) throws(CommandError) -> Entity {
        guard let entity = model.entity(named: name) else {
            throw CommandError(.unknown, "unknown entity '\(name)': type ENTITIES for the list")
        }
        return entity
    }

    /// The columns of a top-level record, each with its JSON key, how its text prints (the
    /// server builds the JSON, see `RowEncoder`), and its column when it is the stored column
    /// as it is and COPY may name it (it refuses a generated column).
    mutating func fields(_ entity: Entity, alias: String, includes: IncludeTree) -> [(key: String, sql: String, format: RowEncoder.Format, column: String?)] {
        var result: [(key: String, sql: String, format: RowEncoder.Format, column: String?)] = []
        for attribute in entity.attributes {
            let column = "\(alias).\(SQL.identifier(attribute.name))"
            if attribute.kind == .binary {
                result.append((attribute.name, "translate(encode(\(column), 'base64'), E'\\n', '')", .string, nil))
            } else if attribute.sqlType.hasSuffix("]") {
                result.append((attribute.name, "to_json(\(column))", .raw, nil))  // an array prints as a JSON array
            } else {
                result.append((attribute.name, column, RowEncoder.Format(attribute.kind), attribute.isGenerated ? nil : attribute.name))
            }
        }
        for relationship in entity.relationships {
            if let sub = includes.children[relationship.name] {
                result.append((relationship.name, included(relationship, from: entity, alias: alias, sub), .raw, nil))
            } else if !relationship.isToMany {
                result.append((relationship.name, "\(alias).\(SQL.identifier(relationship.column))", RowEncoder.Format(model.referencedKind(relationship)),
                               relationship.isGenerated ? nil : relationship.column))
            }
        }
        return result
    }

    /// A selected key path's value, keyed by the path as typed: binary as base64, arrays as
    /// JSON arrays, as a record's fields print.
    mutating func projected(_ path: String, entity: Entity, distinct: Bool = false) throws(CommandError) -> (key: String, sql: String, format: RowEncoder.Format, column: String?) {
        switch try resolve(path, entity: entity, alias: "t0", offset: 0) {
        case .value(let sql, let kind, _, let type):
            if distinct && type == "json" { throw CommandError(.validation, "SELECT DISTINCT cannot compare '\(path)': json values have no equality (jsonb has)") }
            if kind == .binary { return (path, "translate(encode(\(sql), 'base64'), E'\\n', '')", .string, nil) }
            if type.hasSuffix("]") { return (path, "to_json(\(sql))", .raw, nil) }
            return (path, sql, RowEncoder.Format(kind), nil)
        case .count(let sql): return (path, sql, .number, nil)
        case .toMany: throw CommandError(.unknown, "cannot select '\(path)': it leads through a to-many relationship (INCLUDE it, or select its @count)")
        }
    }

    /// An included relationship as a JSON subquery: an array for to-many, an object (or null)
    /// for to-one, inside the one statement whatever the row count (no N+1).
    private mutating func included(_ relationship: Relationship, from entity: Entity, alias: String, _ sub: IncludeTree) -> String {
        guard let target = model.entity(named: relationship.target) else { return "NULL" }
        let inner = nextAlias()
        let fields = projection(target, alias: inner, includes: sub)
        if relationship.isToMany {
            let match = "\(inner).\(SQL.identifier(relationship.column)) = \(alias).\(SQL.identifier(relationship.referencedColumn))"
            if let order = sub.order {
                // Ordered by the asked key (then the record's key), at most `limit`: numbered in
                // that order, aggregated by the numbers. The key is resolved as FIND's are, its
                // joins (a key path through to-one relationships) inside the subquery; it was
                // checked before the query was built (`checkOrders`).
                var inside: [String] = []
                var keys: [String] = []
                if let key = order.key, let sql = try? orderExpression(key, entity: target, alias: inner, joinInto: &inside) {
                    keys.append(sql + (key.ascending ? " ASC" : " DESC"))
                }
                keys += target.keyColumns.map { "\(inner).\(SQL.identifier($0)) ASC" }
                let joined = inside.map { " " + $0 }.joined()
                let by = keys.joined(separator: ", ")
                let limit = order.limit.map { " LIMIT " + bind(String($0)) + "::bigint" } ?? ""
                // Each record's JSON made inside a lateral of its own alias, named through it: a
                // column of the target called like an alias cannot be taken for the record.
                let lateral = nextAlias()
                return "(SELECT coalesce(json_agg(r.j ORDER BY r.n), '[]'::json) FROM "
                    + "(SELECT \(lateral).j AS j, row_number() OVER (ORDER BY \(by)) AS n FROM \(model.table(target)) AS \(inner)\(joined) "
                    + "CROSS JOIN LATERAL (SELECT row_to_json(x.*) AS j FROM (SELECT \(fields)) AS x) AS \(lateral) "
                    + "WHERE \(match) ORDER BY \(by)\(limit)) AS r)"
            }
            if let key = target.singleKey, target.attribute(named: key.name) != nil {
                // Ordered by the related records' key, which the projection holds.
                return "(SELECT coalesce(json_agg(row_to_json(r.*) ORDER BY r.\(SQL.identifier(key.name))), '[]'::json) FROM "
                    + "(SELECT \(fields) FROM \(model.table(target)) AS \(inner) WHERE \(match)) AS r)"
            }
            // A key the projection shows under other names (a join table's): the record is one
            // composite column, its key columns ride beside it for the order.
            let lateral = nextAlias()
            let keys = target.keyColumns.enumerated().map { ", \(inner).\(SQL.identifier($0.element)) AS k\($0.offset)" }.joined()
            let order = target.keyColumns.indices.map { "r.k\($0)" }.joined(separator: ", ")
            return "(SELECT coalesce(json_agg(r.j ORDER BY \(order)), '[]'::json) FROM "
                + "(SELECT \(lateral).j AS j\(keys) FROM \(model.table(target)) AS \(inner) "
                + "CROSS JOIN LATERAL (SELECT row_to_json(x.*) AS j FROM (SELECT \(fields)) AS x) AS \(lateral) WHERE \(match)) AS r)"
        }
        return "(SELECT row_to_json(r.*) FROM (SELECT \(fields) FROM \(model.table(target)) AS \(inner) "
            + "WHERE \(inner).\(SQL.identifier(relationship.referencedColumn)) = \(alias).\(SQL.identifier(relationship.column))) AS r)"
    }

    /// A nested record's columns for `row_to_json`: the same keys as `fields`.
    mutating func projection(_ entity: Entity, alias: String, includes: IncludeTree = IncludeTree()) -> String {
        var items: [String] = []
        for attribute in entity.attributes {
            let column = "\(alias).\(SQL.identifier(attribute.name))"
            if attribute.kind == .binary {
                items.append("translate(encode(\(column), 'base64'), E'\\n', '') AS \(SQL.identifier(attribute.name))")
            } else {
                items.append(column)
            }
        }
        for relationship in entity.relationships {
            if let sub = includes.children[relationship.name] {
                items.append(included(relationship, from: entity, alias: alias, sub) + " AS \(SQL.identifier(relationship.name))")
            } else if !relationship.isToMany {
                items.append("\(alias).\(SQL.identifier(relationship.column)) AS \(SQL.identifier(relationship.name))")
            }
        }
        return items.joined(separator: ", ")
    }

    mutating func bind(_ value: String?) -> String {
        parameters.append(value)
        return "$\(parameters.count)"
    }

    private mutating func nextAlias() -> String {
        aliasCount += 1
        return "t\(aliasCount)"
    }

    // MARK: - Key paths

    /// Where a key path leads: a value expression, or a to-many relationship with the rest of the path.
    enum Resolved {
        /// `type`: the column's SQL type, for casts of lists (an enum's `IN` compares with `mood[]`).
        case value(sql: String, kind: ValueKind, name: String, type: String)
        case toMany(Relationship, ownerAlias: String, rest: [String])
        case count(sql: String)
    }

    /// A key path as typed, from `entity` at `alias`: its joins join the statement's.
    mutating func resolve(_ path: String, entity: Entity, alias: String, offset: Int) throws(CommandError) -> Resolved {
        var outer = joins
        let resolved = try resolve(path.split(separator: ".", omittingEmptySubsequences: false).map(String.init), entity: entity, alias: alias,
                                   path: path, offset: offset, joinInto: &outer)
        joins = outer
        return resolved
    }

    /// Walks to-one relationships with LEFT JOINs (shared per path prefix) until an attribute,
    /// a to-one key, `@count`, or a to-many relationship.
    mutating func resolve(_ components: [String], entity start: Entity, alias startAlias: String,
                                  path: String, offset: Int, joinInto: inout [String]) throws(CommandError) -> Resolved {
        var entity = start
        var alias = startAlias
        var prefix = startAlias
        for (index, component) in components.enumerated() {
            let isLast = index == components.count - 1
            if let attribute = entity.attribute(named: component) {
                // `tags.@count`: an array's number of elements (0 for nil, as @count of nothing).
                if index == components.count - 2, components[index + 1].lowercased() == "@count", attribute.kind.element != nil {
                    return .count(sql: "coalesce(cardinality(\(alias).\(SQL.identifier(attribute.name))), 0)")
                }
                guard isLast else { throw unknown(path, "\(component) is an attribute, not a relationship", offset) }
                return .value(sql: "\(alias).\(SQL.identifier(attribute.name))", kind: attribute.kind, name: attribute.name, type: attribute.sqlType)
            }
            if component.lowercased() == "@count" {
                throw unknown(path, "@count follows a to-many relationship", offset)
            }
            guard let relationship = entity.relationship(named: component) ?? entity.toOneRelationships.first(where: { $0.column.lowercased() == component.lowercased() }) else {
                throw unknown(path, "\(entity.name) has no attribute or relationship '\(component)'", offset)
            }
            guard let target = model.entity(named: relationship.target) else { throw unknown(path, "missing entity", offset) }
            if relationship.isToMany {
                let rest = Array(components[(index + 1)...])
                let related = "FROM \(model.table(target)) AS c WHERE c.\(SQL.identifier(relationship.column)) = \(alias).\(SQL.identifier(relationship.referencedColumn))"
                if rest.count == 1, rest[0].lowercased() == "@count" {
                    return .count(sql: "(SELECT count(*) \(related))")
                }
                // `employees.@avg.age`: NSExpression's collection operators, one subquery each.
                if rest.count == 2, let function = ["@sum": "sum", "@avg": "avg", "@min": "min", "@max": "max"][rest[0].lowercased()] {
                    guard let attribute = target.attribute(named: rest[1]) else {
                        throw unknown(path, "\(target.name) has no attribute '\(rest[1])'", offset)
                    }
                    let numeric = [.decimal, .double].contains(attribute.kind) || attribute.kind.isInteger
                    if (function == "sum" || function == "avg") && !numeric {
                        throw CommandError(.validation, "\(rest[0]) takes a number, and \(target.name).\(attribute.name) is not one")
                    }
                    // @avg as float8, as NSExpression answers (numeric would print 35.0000000000000000).
                    let cast = function == "avg" ? "::float8" : ""
                    // @sum of no records is 0, as NSExpression has it (SQL's sum is NULL).
                    let sql = function == "sum" ? "(SELECT coalesce(sum(c.\(SQL.identifier(attribute.name))), 0) \(related))"
                        : "(SELECT \(function)(c.\(SQL.identifier(attribute.name)))\(cast) \(related))"
                    let kind: ValueKind = function == "avg" ? .double : function == "sum" ? (attribute.kind == .double ? .double : .decimal) : attribute.kind
                    let type = function == "avg" ? "double precision" : function == "sum" ? "numeric" : attribute.sqlType
                    return .value(sql: sql, kind: kind, name: path, type: type)
                }
                return .toMany(relationship, ownerAlias: alias, rest: rest)
            }
            if isLast {
                return .value(sql: "\(alias).\(SQL.identifier(relationship.column))", kind: model.referencedKind(relationship), name: relationship.name,
                              type: relationship.columnType)
            }
            prefix += "." + relationship.name
            if let existing = joinAliases[prefix] {
                alias = existing
            } else {
                let next = nextAlias()
                joinInto.append("LEFT JOIN \(model.table(target)) AS \(next) ON \(next).\(SQL.identifier(relationship.referencedColumn)) = \(alias).\(SQL.identifier(relationship.column))")
                joinAliases[prefix] = next
                alias = next
            }
            entity = target
        }
        throw unknown(path, "the key path is empty", offset)
    }

    private func unknown(_ path: String, _ reason: String, _ offset: Int) -> CommandError {
        CommandError(.unknown, "unknown key path '\(path)': \(reason)")
    }

    private mutating func orderExpression(_ key: OrderKey, entity: Entity) throws(CommandError) -> String {
        var outer = joins
        let expression = try orderExpression(key, entity: entity, alias: "t0", joinInto: &outer)
        joins = outer
        return expression
    }

    /// Every included relationship's sort key resolves (before any SQL is built: `included`
    /// cannot throw), as FIND's own keys must.
    mutating func checkOrders(of includes: IncludeTree, entity: Entity) throws(CommandError) {
        for (name, child) in includes.children {
            guard let relationship = entity.relationship(named: name), let target = model.entity(named: relationship.target) else { continue }
            if let key = child.order?.key {
                var scratch = self
                var ignored: [String] = []
                do throws(CommandError) {
                    _ = try scratch.orderExpression(key, entity: target, alias: "i0", joinInto: &ignored)
                } catch {
                    throw CommandError(error.code, "INCLUDE \(name) ORDER BY \(key.path): \(error.message)")
                }
            }
            try checkOrders(of: child, entity: target)
        }
    }

    private mutating func orderExpression(_ key: OrderKey, entity: Entity, alias: String, joinInto: inout [String]) throws(CommandError) -> String {
        let resolved = try resolve(key.path.split(separator: ".").map(String.init), entity: entity, alias: alias,
                                   path: key.path, offset: key.offset, joinInto: &joinInto)
        switch resolved {
        case .value(let sql, let kind, _, _):
            var expression = key.caseInsensitive && kind == .string ? lower(sql) : sql
            if let collation = key.collation {
                guard kind == .string else { throw CommandError(.validation, "COLLATE orders text, and '\(key.path)' is not text") }
                guard model.collations.contains(collation) else {
                    let icu = model.collations.contains("und-x-icu") ? " (ICU's are named like \"de-x-icu\", \"sv-x-icu\")" : " (this PostgreSQL has no ICU collations)"
                    throw CommandError(.unknown, "unknown collation '\(collation)'\(icu)")
                }
                expression = "(\(expression)) COLLATE \(SQL.identifier(collation))"
            }
            return expression
        case .count(let sql): return sql
        case .toMany: throw CommandError(.unknown, "cannot order by '\(key.path)': it leads through a to-many relationship (use @count)")
        }
    }

    // MARK: - Predicates

    mutating func compile(_ predicate: Predicate, entity: Entity, alias: String) throws(CommandError) -> String {
        switch predicate {
        case .constant(let value): return value ? "TRUE" : "FALSE"
        // NSPredicate's two-valued logic: a comparison with nil is false, so NOT of it is true
        // (SQL's NOT NULL would be NULL, and the record would match neither).
        case .not(let inner): return "NOT coalesce(\(try compile(inner, entity: entity, alias: alias)), false)"
        case .and(let operands), .or(let operands):
            var parts: [String] = []
            parts.reserveCapacity(operands.count)
            for operand in operands { parts.append(try compile(operand, entity: entity, alias: alias)) }
            let joiner: String
            if case .and = predicate { joiner = " AND " } else { joiner = " OR " }
            return "(" + parts.joined(separator: joiner) + ")"
        case .comparison(let comparison): return try compile(comparison, entity: entity, alias: alias)
        case .subquery(let subquery): return try compile(subquery, entity: entity, alias: alias)
        }
    }

    /// `(SELECT count(*) FROM target WHERE <its key> AND <its predicate>) op n`, the inner
    /// predicate's key paths taken from the variable on, with joins of its own.
    private mutating func compile(_ s: Subquery, entity: Entity, alias: String) throws(CommandError) -> String {
        guard case .toMany(let relationship, let ownerAlias, let rest) = try resolve(s.collection, entity: entity, alias: alias, offset: s.offset), rest.isEmpty,
              let target = model.entity(named: relationship.target) else {
            throw CommandError(.unknown, "SUBQUERY(\(s.collection), ...): the collection must be a to-many relationship")
        }
        let inner = try Self.relative(s.predicate, to: s.variable)
        let saved = (joins, joinAliases)
        joins = []
        joinAliases = [:]
        let sub = nextAlias()
        let test: String
        do {
            test = try compile(inner, entity: target, alias: sub)
        } catch {
            (joins, joinAliases) = saved
            throw error
        }
        let innerJoins = joins
        (joins, joinAliases) = saved
        let op = s.op == .equal ? "=" : s.op == .notEqual ? "<>" : s.op.rawValue
        return "(SELECT count(*) FROM \(model.table(target)) AS \(sub)" + innerJoins.map { " " + $0 }.joined()
            + " WHERE \(sub).\(SQL.identifier(relationship.column)) = \(ownerAlias).\(SQL.identifier(relationship.referencedColumn)) AND (\(test))) \(op) \(bind(String(s.count)))::bigint"
    }

    /// A SUBQUERY's predicate with its variable taken off every key path (`$e.age` -> `age`).
    static func relative(_ predicate: Predicate, to variable: String) throws(CommandError) -> Predicate {
        func strip(_ path: String) throws(CommandError) -> String {
            guard path.hasPrefix(variable + "."), path.count > variable.count + 1 else {
                throw CommandError(.syntax, "inside SUBQUERY, key paths start with \(variable). (\(variable).age), not '\(path)'")
            }
            return String(path.dropFirst(variable.count + 1))
        }
        switch predicate {
        case .constant: return predicate
        case .not(let inner): return .not(try relative(inner, to: variable))
        case .and(let operands): return .and(try operands.map { (p: Predicate) throws(CommandError) -> Predicate in try relative(p, to: variable) })
        case .or(let operands): return .or(try operands.map { (p: Predicate) throws(CommandError) -> Predicate in try relative(p, to: variable) })
        case .comparison(var c):
            c.keyPath = try strip(c.keyPath)
            if let right = c.rightKeyPath { c.rightKeyPath = try strip(right) }
            return .comparison(c)
        case .subquery(var s):
            s.collection = try strip(s.collection)
            return .subquery(s)
        }
    }

    private mutating func compile(_ c: Comparison, entity: Entity, alias: String) throws(CommandError) -> String {
        switch try resolve(c.keyPath, entity: entity, alias: alias, offset: c.keyPathOffset) {
        case .value(let sql, let kind, let name, let type):
            if case .array(let element) = kind { return try arrayCondition(sql, element: element, name: name, type: type, c, entity: entity, alias: alias) }
            if c.quantifier != nil {
                throw CommandError(.syntax, "\(c.quantifier!.rawValue) needs a key path through a to-many relationship or to an array, not '\(c.keyPath)'")
            }
            if c.comparesFields { return try fieldCondition(sql, kind: kind, c, entity: entity, alias: alias) }
            return try condition(sql, kind: kind, name: name, type: type, c)
        case .count(let sql):
            if c.comparesFields { return try fieldCondition(sql, kind: .integer(bits: 64), c, entity: entity, alias: alias) }
            return try condition(sql, kind: .integer(bits: 64), name: c.keyPath, type: "bigint", c)
        case .toMany(let relationship, let ownerAlias, let rest):
            guard !rest.isEmpty, let target = model.entity(named: relationship.target) else {
                throw CommandError(.unknown, "'\(c.keyPath)' is a to-many relationship: compare one of its attributes (ANY \(c.keyPath).name == ...) or its @count")
            }
            // The related records are a subquery with joins of their own.
            let saved = (joins, joinAliases)
            joins = []
            joinAliases = [:]
            let sub = nextAlias()
            var inner: [String] = []
            let innerResolved = try resolve(rest, entity: target, alias: sub, path: c.keyPath, offset: c.keyPathOffset, joinInto: &inner)
            let innerJoins = inner
            (joins, joinAliases) = saved
            guard case .value(let sql, let kind, let name, let type) = innerResolved else {
                throw CommandError(.unknown, "'\(c.keyPath)': only one to-many relationship per key path")
            }
            let test = c.comparesFields ? try fieldCondition(sql, kind: kind, c, entity: entity, alias: alias)
                : try condition(sql, kind: kind, name: name, type: type, c)
            let from = "SELECT 1 FROM \(model.table(target)) AS \(sub)" + innerJoins.map { " " + $0 }.joined()
                + " WHERE \(sub).\(SQL.identifier(relationship.column)) = \(ownerAlias).\(SQL.identifier(relationship.referencedColumn))"
            switch c.quantifier ?? .any {
            case .any: return "EXISTS (\(from) AND (\(test)))"
            case .none: return "NOT EXISTS (\(from) AND (\(test)))"
            case .all: return "NOT EXISTS (\(from) AND (\(test)) IS NOT TRUE)"
            }
        }
    }

    /// A comparison with an array attribute: `ANY tags == "x"`, `ALL sizes > 3`, `NONE tags
    /// BEGINSWITH[c] "tr"` test its elements (one row each of `unnest`), `tags CONTAINS "x"`
    /// is `ANY tags == "x"`, and `tags == ["a", "b"]` (or nil) compares the whole array.
    private mutating func arrayCondition(_ sql: String, element: ValueKind, name: String, type: String, _ c: Comparison,
                                         entity: Entity, alias record: String) throws(CommandError) -> String {
        var each = c
        each.quantifier = nil
        let quantifier: Comparison.Quantifier
        switch (c.quantifier, c.op) {
        case (let q?, _): quantifier = q
        case (nil, .contains):
            quantifier = .any
            each.op = .equal
        case (nil, .equal), (nil, .notEqual):
            guard !c.comparesFields else { throw CommandError(.validation, "'\(c.keyPath)' is an array: compare it with an array value") }
            guard c.values.count == 1 else { throw CommandError(.syntax, "'\(c.keyPath)' is an array: compare it with one array") }
            let whole: String
            switch c.values[0] {
            case .null: whole = "\(sql) IS NULL"
            case .array(let elements):
                let literal = try ValueCoercion.arrayLiteral(elements, element: element, name: name)
                whole = "coalesce(\(sql) = \(bind(literal))::\(type), false)"
            default: throw CommandError(.validation, "'\(c.keyPath)' is an array: compare it with an array ([\"a\", \"b\"]) or nil, or its elements with ANY, ALL, NONE or CONTAINS")
            }
            return c.op == .equal ? whole : "NOT (\(whole))"
        default:
            throw CommandError(.validation, "'\(c.keyPath)' is an array: compare its elements (ANY, ALL or NONE \(c.keyPath) \(c.op.rawValue) ..., \(c.keyPath) CONTAINS value) or its @count")
        }
        let alias = nextAlias()
        let elementType = type.hasSuffix("[]") ? String(type.dropLast(2)) : "text"
        let test = c.comparesFields ? try fieldCondition("\(alias).v", kind: element, each, entity: entity, alias: record)
            : try condition("\(alias).v", kind: element, name: name, type: elementType, each)
        let from = "SELECT 1 FROM unnest(\(sql)) AS \(alias)(v)"
        switch quantifier {
        case .any: return "EXISTS (\(from) WHERE \(test))"
        case .none: return "NOT EXISTS (\(from) WHERE \(test))"
        case .all: return "NOT EXISTS (\(from) WHERE (\(test)) IS NOT TRUE)"
        }
    }

    /// A comparison of two fields of the record (`first_name == last_name`, `age >
    /// department.number`): the right key path resolved from the same record, both sides of
    /// kinds that compare. As with values, nil equals only nil, and orders with nothing.
    private mutating func fieldCondition(_ lhs: String, kind: ValueKind, _ c: Comparison, entity: Entity, alias: String) throws(CommandError) -> String {
        let path = c.rightKeyPath!
        let rhs: String, rightKind: ValueKind
        switch try resolve(path, entity: entity, alias: alias, offset: c.valueOffset) {
        case .value(let sql, let kind, _, _): (rhs, rightKind) = (sql, kind)
        case .count(let sql): (rhs, rightKind) = (sql, .integer(bits: 64))
        case .toMany: throw CommandError(.unknown, "'\(path)' leads through a to-many relationship: compare with one value of the record (or its @count)")
        }
        func family(_ kind: ValueKind) -> String {
            switch kind {
            case .integer, .decimal, .double: "number"
            case .date, .timestamp: "time"
            default: "\(kind)"
            }
        }
        guard family(kind) == family(rightKind), kind != .json, kind != .other else {
            throw CommandError(.validation, "'\(c.keyPath)' (\(family(kind))) and '\(path)' (\(family(rightKind))) cannot be compared")
        }
        var (left, right) = (lhs, rhs)
        if kind == .string {
            if c.diacriticInsensitive {
                let from = bind(Diacritics.map.from), to = bind(Diacritics.map.to)
                (left, right) = ("translate(normalize(\(left), NFC), \(from), \(to))", "translate(normalize(\(right), NFC), \(from), \(to))")
            }
            if c.caseInsensitive { (left, right) = (lower(left), lower(right)) }
        }
        switch c.op {
        case .equal: return "\(left) IS NOT DISTINCT FROM \(right)"
        case .notEqual: return "\(left) IS DISTINCT FROM \(right)"
        case .less, .lessOrEqual, .greater, .greaterOrEqual: return "\(left) \(c.op.rawValue) \(right)"
        default: throw CommandError(.syntax, "\(c.op.rawValue) compares with values; between fields use ==, !=, <, <=, > or >=")
        }
    }

    /// `lower()` of a text expression: under ICU's root collation where the database has it, so
    /// É lowers to é whatever the database's locale.
    func lower(_ sql: String) -> String { Self.lower(sql, unicode: model.unicodeCaseFolding) }

    /// The Greek final sigma folds to σ, as case folding has it (lower() keeps ς at a word's end).
    static func lower(_ sql: String, unicode: Bool) -> String {
        unicode ? "translate(lower((\(sql)) COLLATE \"und-x-icu\"), 'ς', 'σ')" : "lower(\(sql))"
    }

    /// BEGINSWITH, ENDSWITH, CONTAINS, LIKE and MATCHES: the string as typed, [c] and [d]
    /// folding both sides.
    private mutating func stringCondition(_ lhs: String, kind: ValueKind, _ c: Comparison) throws(CommandError) -> String {
        guard case .string(var pattern) = c.values[0] else {
            throw CommandError(.validation, "\(c.op.rawValue) compares with a string in double quotes")
        }
        var subject = kind == .string ? lhs : "\(lhs)::text"
        if c.caseInsensitive || c.diacriticInsensitive {
            // One form for both sides: a decomposed é (e + U+0301) matches the precomposed one.
            subject = "normalize(\(subject), NFC)"
            pattern = pattern.precomposedStringWithCanonicalMapping
        }
        if c.diacriticInsensitive {
            subject = "translate(\(subject), \(bind(Diacritics.map.from)), \(bind(Diacritics.map.to)))"
            pattern = Diacritics.fold(pattern)
        }
        // [c]: both sides lowered by PostgreSQL (Unicode-wide with ICU; one lowering for both,
        // so a final sigma folds alike), then LIKE; ILIKE folds only as the locale does.
        let folds = c.caseInsensitive && c.op != .matches
        if folds { subject = lower(subject) }
        let like = "LIKE"
        func folded(_ text: String) -> String { folds ? lower(bind(text)) : bind(text) }
        switch c.op {
        case .beginsWith: return "\(subject) \(like) \(folded(Self.escapeLike(pattern) + "%"))"
        case .endsWith: return "\(subject) \(like) \(folded("%" + Self.escapeLike(pattern)))"
        case .contains: return "\(subject) \(like) \(folded("%" + Self.escapeLike(pattern) + "%"))"
        case .like: return "\(subject) \(like) \(folded(Self.wildcards(pattern)))"
        default:
            // Anchored to the whole string; a pattern whose parentheses do not balance on their
            // own could close the group and escape the anchors, so it is refused.
            guard Self.balanced(pattern) else {
                throw CommandError(.validation, "MATCHES: the regular expression's parentheses or brackets do not balance")
            }
            // A regular expression is not lowered (`\\D` is not `\\d`): ~* folds case.
            return "\(subject) \(c.caseInsensitive ? "~*" : "~") \(bind("^(?:" + pattern + ")$"))"
        }
    }

    /// One comparison of an expression with the typed values, every value a parameter.
    private mutating func condition(_ lhs: String, kind: ValueKind, name: String, type: String, _ c: Comparison) throws(CommandError) -> String {
        func plainText(_ value: Value) throws(CommandError) -> String? {
            switch try ValueCoercion.coerce(value, to: kind == .other ? .other : kind, name: name) {
            case .null: return nil
            case .text(let t): return t
            case .ref: return nil
            }
        }
        if case .ref = c.values.first { throw CommandError(.validation, "#refs name pending records; queries compare stored ids") }
        if c.op.isStringOperator { return try stringCondition(lhs, kind: kind, c) }
        let caseFold = c.caseInsensitive && kind == .string
        let accentFold = c.diacriticInsensitive && kind == .string
        var subject = lhs
        if caseFold || accentFold { subject = "normalize(\(subject), NFC)" }
        if accentFold { subject = "translate(\(subject), \(bind(Diacritics.map.from)), \(bind(Diacritics.map.to)))" }
        if caseFold { subject = lower(subject) }
        let unicode = model.unicodeCaseFolding
        let fold = { (p: String) -> String in caseFold ? Self.lower(p, unicode: unicode) : p }
        func text(_ value: Value) throws(CommandError) -> String? {
            guard caseFold || accentFold, case .string(let s) = value else { return try plainText(value) }
            let composed = s.precomposedStringWithCanonicalMapping
            return accentFold ? Diacritics.fold(composed) : composed
        }
        switch c.op {
        case .in:
            let values = try c.values.map { (v: Value) throws(CommandError) -> String? in try text(v) }
            let typeCast = castType(kind, type: type)
            let nonNull = values.compactMap { $0 }
            let list = bind(SQL.arrayLiteral(nonNull.map { Optional($0) }))
            // lower() of the array's text form folds every element at once.
            var sql = caseFold ? "\(subject) = ANY(\(lower(list))::text[])" : "\(subject) = ANY(\(list)::\(typeCast)[])"
            if values.contains(where: { $0 == nil }) { sql = "(\(sql) OR \(lhs) IS NULL)" }
            return sql
        case .between:
            guard let low = try text(c.values[0]), let high = try text(c.values[1]) else {
                throw CommandError(.validation, "BETWEEN needs two values other than nil")
            }
            return "\(subject) BETWEEN \(fold(bind(low))) AND \(fold(bind(high)))"
        default:
            let value = try text(c.values[0])
            guard let value else {
                switch c.op {
                case .equal: return "\(lhs) IS NULL"
                case .notEqual: return "\(lhs) IS NOT NULL"
                default: throw CommandError(.validation, "nil can only be compared with == or !=")
                }
            }
            let op = c.op == .equal ? "=" : (c.op == .notEqual ? "IS DISTINCT FROM" : c.op.rawValue)
            return "\(subject) \(op) \(fold(bind(value)))"
        }
    }

    /// The element type of a list compared with `= ANY`: the kind's type, or the column's own
    /// for kinds passed as text (enums, inet, intervals, arrays' element... as the column has it).
    private func castType(_ kind: ValueKind, type: String) -> String {
        switch kind {
        case .integer: "bigint"
        case .decimal: "numeric"
        case .double: "float8"
        case .boolean: "boolean"
        case .date: "date"
        case .timestamp: "timestamptz"
        case .uuid: "uuid"
        case .binary: "bytea"
        // A string is compared as its column's type, as `==` is: char(n) ignores trailing
        // spaces where text would not.
        case .other, .string: type.hasSuffix("]") ? "text" : type
        default: "text"
        }
    }

    /// BEGINSWITH/ENDSWITH/CONTAINS take the string literally.
    static func escapeLike(_ text: String) -> String {
        var out = ""
        for ch in text {
            if ch == "%" || ch == "_" || ch == "\\" { out.append("\\") }
            out.append(ch)
        }
        return out
    }

    /// LIKE takes NSPredicate's wildcards: `*` any run, `?` one character.
    static func wildcards(_ pattern: String) -> String {
        var out = ""
        for ch in pattern {
            switch ch {
            case "*": out.append("%")
            case "?": out.append("_")
            case "%", "_", "\\": out.append("\\"); out.append(ch)
            default: out.append(ch)
            }
        }
        return out
    }

    /// Whether a regular expression's groups close within it: `\` escapes the next character,
    /// a bracket expression (`[...]`, `[]...]`, `[^]...]`, `[[:alpha:]]`) holds no group.
    static func balanced(_ pattern: String) -> Bool {
        let bytes = Array(pattern.utf8)
        var depth = 0
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\\"):
                index += 2
                continue
            case UInt8(ascii: "("):
                depth += 1
            case UInt8(ascii: ")"):
                depth -= 1
                if depth < 0 { return false }
            case UInt8(ascii: "["):
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "^") { index += 1 }
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1 }
                while index < bytes.count, bytes[index] != UInt8(ascii: "]") {
                    if bytes[index] == UInt8(ascii: "["), index + 1 < bytes.count,
                       [UInt8(ascii: ":"), UInt8(ascii: "."), UInt8(ascii: "=")].contains(bytes[index + 1]) {
                        // [:class:], [.symbol.], [=equivalence=]
                        let close = bytes[index + 1]
                        index += 2
                        while index + 1 < bytes.count, !(bytes[index] == close && bytes[index + 1] == UInt8(ascii: "]")) { index += 1 }
                        index += 2
                        continue
                    }
                    index += 1
                }
                if index >= bytes.count { return false }
            default:
                break
            }
            index += 1
        }
        return depth == 0
    }
}
