/// AGGREGATE as one SELECT: each group's object built by PostgreSQL (`json_build_object`, its
/// keys bound as parameters), so numbers stay numbers and any text is escaped by the database.
extension QueryBuilder {
    static func aggregate(_ request: AggregateRequest, model: Model) throws(CommandError) -> (sql: String, parameters: [String?]) {
        var builder = QueryBuilder(model: model)
        let entity = try builder.entity(request.entity)
        var condition = ""
        if let predicate = request.predicate { condition = " WHERE " + (try builder.compile(predicate, entity: entity, alias: "t0")) }
        // Groups: values of the record or through to-one relationships.
        // Each name once in a group's object, whatever its case (JSON keys must not repeat).
        var names: Set<String> = []
        for name in request.groups.map(\.path) + request.terms.map(\.name) where !names.insert(name.lowercased()).inserted {
            throw CommandError(.syntax, "'\(name)' would be a key twice in each group's object: group by it once, and name functions apart with AS")
        }
        var groups: [(name: String, sql: String, shown: String)] = []
        for group in request.groups {
            let (sql, kind) = try builder.scalar(group.path, entity: entity, offset: group.offset, what: "group by")
            // Grouped by the value; shown as FIND shows it (binary as base64).
            groups.append((group.path, sql, kind == .binary ? "translate(encode(\(sql), 'base64'), E'\\n', '')" : sql))
        }
        var terms: [(name: String, sql: String)] = []
        for term in request.terms { terms.append((term.name, try builder.expression(term, entity: entity).sql)) }
        var having: [String] = []
        for condition in request.having {
            let (sql, type) = try builder.expression(condition.term, entity: entity)
            having.append(try builder.comparison(sql, type: type, condition))
        }
        var order: [String] = []
        for key in request.order {
            guard let sql = groups.first(where: { $0.name.lowercased() == key.name.lowercased() })?.sql
                    ?? terms.first(where: { $0.name.lowercased() == key.name.lowercased() })?.sql else {
                throw CommandError(.unknown, "ORDER BY '\(key.name)': order by a GROUP BY key path or a function's name (\((groups.map(\.name) + terms.map(\.name)).joined(separator: ", ")))")
            }
            order.append(sql + (key.ascending ? " ASC" : " DESC"))
        }
        // Then by the groups, so the answer's order is stable.
        order += groups.map { $0.sql + " ASC" }
        var pairs: [String] = []
        for (name, sql) in groups.map({ ($0.name, $0.shown) }) + terms { pairs.append("\(builder.bind(name))::text, \(sql)") }
        var sql = "SELECT json_build_object(" + pairs.joined(separator: ", ") + ")::text"
        sql += " FROM \(model.table(entity)) AS t0" + builder.joins.map { " " + $0 }.joined() + condition
        if !groups.isEmpty { sql += " GROUP BY " + groups.map(\.sql).joined(separator: ", ") }
        if !having.isEmpty { sql += " HAVING " + having.joined(separator: " AND ") }
        if !order.isEmpty { sql += " ORDER BY " + order.joined(separator: ", ") }
        if let limit = request.limit { sql += " LIMIT " + builder.bind(String(limit)) + "::bigint" }
        return (sql, builder.parameters)
    }

    /// A key path to one value per record (no to-many on the way, but its @count, @avg ...).
    private mutating func scalar(_ path: String, entity: Entity, offset: Int, what: String) throws(CommandError) -> (sql: String, kind: ValueKind) {
        switch try resolve(path, entity: entity, alias: "t0", offset: offset) {
        case .value(let sql, let kind, _, _):
            guard kind != .json else { throw CommandError(.validation, "cannot \(what) '\(path)': json values do not compare") }
            return (sql, kind)
        case .count(let sql): return (sql, .integer(bits: 64))
        case .toMany: throw CommandError(.unknown, "cannot \(what) '\(path)': it leads through a to-many relationship (use @count, @sum, @avg, @min, @max)")
        }
    }

    /// `avg(t0.age)` and the SQL type of what it gives (a HAVING's value is cast to it); sum
    /// and avg only of numbers.
    private mutating func expression(_ term: AggregateRequest.Term, entity: Entity) throws(CommandError) -> (sql: String, type: String) {
        guard let path = term.path else { return ("count(*)", "bigint") }
        let sql: String, kind: ValueKind, type: String
        switch try resolve(path, entity: entity, alias: "t0", offset: term.offset) {
        case .value(let s, let k, _, let t): (sql, kind, type) = (s, k, t)
        case .count(let s): (sql, kind, type) = (s, .integer(bits: 64), "bigint")
        case .toMany: throw CommandError(.unknown, "\(term.function.rawValue)(\(path)): it leads through a to-many relationship (use @count, @sum, @avg, @min, @max)")
        }
        switch term.function {
        case .count: return ("count(\(sql))", "bigint")
        case .sum, .avg:
            switch kind {
            // avg of whole and floating numbers as float8, as NSExpression answers (numeric would
            // print 35.0000000000000000); of numeric, numeric: exact, every digit PostgreSQL gives.
            case .integer, .double: return term.function == .avg ? ("avg(\(sql))::float8", "float8") : ("sum(\(sql))", "numeric")
            case .decimal: return (term.function == .avg ? "avg(\(sql))" : "sum(\(sql))", "numeric")
            default: throw CommandError(.validation, "\(term.function.rawValue)(\(path)) takes a number, and \(path) is not one")
            }
        case .min, .max:
            switch kind {
            case .json, .boolean, .binary: throw CommandError(.validation, "\(term.function.rawValue)(\(path)): its values do not order")
            // PostgreSQL has no min(uuid): a uuid's text orders as the uuid does.
            case .uuid: return ("\(term.function.rawValue)(\(sql)::text)", "text")
            // The column's type from the catalog (format_type), as GET's key filters cast.
            default: return ("\(term.function.rawValue)(\(sql))", type)
            }
        }
    }

    /// `HAVING avg(age) > 30`: the value a parameter, compared as a number (count, sum, avg)
    /// or as the path's own type (min, max).
    private mutating func comparison(_ sql: String, type: String, _ condition: AggregateRequest.Condition) throws(CommandError) -> String {
        let op: String
        switch condition.op {
        case .equal: op = "="
        case .notEqual: op = "<>"
        case .less, .lessOrEqual, .greater, .greaterOrEqual: op = condition.op.rawValue
        default: throw CommandError(.syntax, "HAVING compares with == != < <= > >=")
        }
        let text: String
        switch condition.value {
        case .number(let n): text = n
        case .string(let s): text = s
        case .bool(let b): text = b ? "true" : "false"
        case .null, .ref, .array: throw CommandError(.validation, "HAVING compares with a value other than nil, an array or a #ref")
        }
        switch condition.term.function {
        case .count, .sum, .avg:
            guard case .number = condition.value else { throw CommandError(.validation, "HAVING \(condition.term.function.rawValue)(...) compares with a number") }
            return "\(sql) \(op) \(bind(text))::numeric"
        case .min, .max:
            // The same type as the values: compared as PostgreSQL compares the column.
            return "\(sql) \(op) \(bind(text))::text::\(type)"
        }
    }
}
