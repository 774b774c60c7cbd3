import Testing
@testable import Records

@Suite struct QueryBuilderTests {
    private func sql(_ line: String) throws -> (sql: String, parameters: [String?]) {
        guard case .find(let request) = try CommandParser.parse(line) else { throw CommandError(.internal, "not a find") }
        let select = try QueryBuilder.select(request, model: SampleModel.model)
        return (select.sql, select.parameters)
    }

    private func whereClause(_ line: String) throws -> (String, [String?]) {
        let q = try sql(line)
        let start = q.sql.range(of: " WHERE ")!.upperBound
        let end = q.sql.range(of: " ORDER BY ")?.lowerBound ?? q.sql.endIndex
        return (String(q.sql[start..<end]), q.parameters)
    }

    /// A GET's cached statement, bound, is the statement built for its values (an include's
    /// LIMIT is a parameter too, after the filter's).
    @Test func aCachedGetBoundIsTheStatementBuiltForItsValues() throws {
        var request = FetchRequest(entity: "department", include: ["employees"])
        request.includeOrder = ["employees": IncludeOrder(key: OrderKey(path: "age", ascending: false, offset: 0), limit: 3)]
        let cache = ShapeCache<String, QueryBuilder.Select>(capacity: 512)
        for id in ["7", "8"] {
            let bound = try cache.get(request, model: SampleModel.model, columns: ["id"]).binding([id])
            let built = try QueryBuilder.select(request, model: SampleModel.model, filter: [("id", id)], versions: .xmin)
            #expect(bound.sql == built.sql)
            #expect(bound.parameters == built.parameters && built.parameters.count == 2)
        }
    }

    @Test func everyValueIsAParameter() throws {
        let (condition, parameters) = try whereClause(#"FIND employee WHERE first_name == "x'; DROP TABLE employee; --" AND age > 3"#)
        #expect(condition == #"(t0."first_name" = $1 AND t0."age" > $2)"#)
        #expect(parameters == ["x'; DROP TABLE employee; --", "3"])
    }

    @Test func toOneKeyPathJoinsOnce() throws {
        let q = try sql(#"FIND employee WHERE department.name == "Sales" OR department.number == 2 ORDER BY department.name"#)
        #expect(q.sql.components(separatedBy: "LEFT JOIN").count == 2)
        #expect(q.sql.contains(#"LEFT JOIN "public"."department" AS t1 ON t1."id" = t0."department_id""#))
        #expect(q.sql.contains(#"ORDER BY t1."name" ASC, t0."id" ASC"#))
    }

    @Test func nilComparisons() throws {
        #expect(try whereClause("FIND employee WHERE department == nil").0 == #"t0."department_id" IS NULL"#)
        #expect(try whereClause("FIND employee WHERE age != nil").0 == #"t0."age" IS NOT NULL"#)
        #expect(try whereClause("FIND employee WHERE age != 3").0 == #"t0."age" IS DISTINCT FROM $1"#)
    }

    @Test func stringOperatorsEscapeTheirInput() throws {
        let (condition, parameters) = try whereClause(#"FIND employee WHERE first_name CONTAINS[c] "50%_off""#)
        #expect(condition == #"lower(normalize(t0."first_name", NFC)) LIKE lower($1)"#)
        #expect(parameters == [#"%50\%\_off%"#])
        let like = try whereClause(#"FIND employee WHERE first_name LIKE "J*n?""#)
        #expect(like.1 == ["J%n_"])
        let regex = try whereClause(#"FIND employee WHERE first_name MATCHES "J.*""#)
        #expect(regex.0 == #"t0."first_name" ~ $1"#)
        #expect(regex.1 == ["^(?:J.*)$"])
    }

    @Test func toManyQuantifiersAndCount() throws {
        #expect(try whereClause("FIND department WHERE ANY employees.age > 60").0
                == #"EXISTS (SELECT 1 FROM "public"."employee" AS t1 WHERE t1."department_id" = t0."id" AND (t1."age" > $1))"#)
        #expect(try whereClause("FIND department WHERE NONE employees.age > 60").0.hasPrefix("NOT EXISTS"))
        #expect(try whereClause("FIND department WHERE ALL employees.age > 60").0.hasSuffix("IS NOT TRUE)"))
        #expect(try whereClause("FIND department WHERE employees.@count > 3").0
                == #"(SELECT count(*) FROM "public"."employee" AS c WHERE c."department_id" = t0."id") > $1"#)
    }

    @Test func inAndBetween() throws {
        let (condition, parameters) = try whereClause("FIND employee WHERE age IN {30, 40} AND gender BETWEEN {1, 2}")
        #expect(condition == #"(t0."age" = ANY($1::bigint[]) AND t0."gender" BETWEEN $2 AND $3)"#)
        #expect(parameters == ["{\"30\",\"40\"}", "1", "2"])
    }

    @Test func namesAreCheckedAgainstTheModel() {
        #expect(throws: CommandError(.unknown, "unknown key path 'salary': employee has no attribute or relationship 'salary'")) {
            try sql("FIND employee WHERE salary > 3")
        }
        #expect(throws: CommandError(.unknown, "unknown entity 'employees': type ENTITIES for the list")) {
            try sql("FIND employees")
        }
        // A quoted name is a name (a table called "Tag Table"), checked like any other.
        #expect(throws: CommandError(.unknown, "unknown entity 'emp\"loyee': type ENTITIES for the list")) {
            try sql("FIND \"emp\\\"loyee\"")
        }
        #expect(throws: CommandError.self) { try sql("FIND employee ORDER BY \"id; DROP TABLE x\"") }
    }

    @Test func valuesAreTypeChecked() {
        #expect(throws: CommandError(.validation, "age expects an integer, not a string, got \"old\"")) {
            try sql(#"FIND employee WHERE age > "old""#)
        }
    }

    @Test func limitAndOffsetAreParameters() throws {
        let q = try sql("FIND employee LIMIT 5 OFFSET 10")
        // One row more than asked: it tells whether a next page exists.
        #expect(q.sql.hasSuffix("LIMIT $1::bigint OFFSET $2::bigint"))
        #expect(q.parameters == ["6", "10"])
    }

    /// Field to field: both sides from the record, nil equal to nil, kinds that compare.
    @Test func fieldsCompareWithFields() throws {
        #expect(try whereClause("FIND employee WHERE first_name == manager.first_name").0.hasSuffix(#"."first_name""#))
        #expect(try whereClause("FIND employee WHERE age == gender").0 == #"t0."age" IS NOT DISTINCT FROM t0."gender""#)
        let through = try whereClause("FIND employee WHERE age > department.number")
        #expect(through.0.hasPrefix(#"t0."age" > t"#) && through.0.hasSuffix(#"."number""#) && through.1.isEmpty, "\(through)")
        let folded = try whereClause("FIND project WHERE name ==[c] name").0
        #expect(folded == #"lower(t0."name") IS NOT DISTINCT FROM lower(t0."name")"#)
        #expect(throws: CommandError.self) { try whereClause("FIND employee WHERE age == first_name") }
        #expect(throws: CommandError.self) { try whereClause("FIND employee WHERE age == nope") }
        // Words that are values stay values.
        #expect(try whereClause("FIND employee WHERE age == nil").0 == #"t0."age" IS NULL"#)
        #expect(try whereClause(#"FIND employee WHERE first_name == "gender""#).1 == ["gender"])
    }

    /// [c] and [d] compare one normal form: the pattern is composed, the column normalized.
    @Test func foldingComposesBothSides() throws {
        let (condition, parameters) = try whereClause("FIND employee WHERE first_name ==[cd] \"Rene\u{301}e\"")
        #expect(condition.contains("normalize(t0.\"first_name\", NFC)") && condition.hasPrefix("lower(translate("), "\(condition)")
        #expect(parameters.last == "Renee")
    }

    @Test func subqueriesCountTheirOwnMatches() throws {
        let (condition, parameters) = try whereClause(#"FIND department WHERE SUBQUERY(employees, $e, $e.age > 30 AND $e.manager.first_name == "A").@count >= 2"#)
        #expect(condition.hasPrefix("(SELECT count(*) FROM ") && condition.contains("LEFT JOIN") && condition.hasSuffix(">= $3::bigint"), "\(condition)")
        #expect(parameters == ["30", "A", "2"])
        #expect(throws: CommandError.self) { try whereClause("FIND department WHERE SUBQUERY(employees, $e, age > 30).@count > 0") }
        #expect(throws: CommandError.self) { try whereClause("FIND department WHERE SUBQUERY(name, $e, $e.age > 30).@count > 0") }
    }
}

/// A FIND or EXPORT of a whole table is streamed by `COPY table (columns) TO STDOUT`, which
/// costs PostgreSQL's backend less than the same rows through a query; anything that a query
/// alone can do (a filter, an order, a limit, a join, a conversion) keeps the query, and so
/// does a table the catalog does not let COPY read as a query would (`readsWholeQuery`).
@Suite struct WholeTableCopyTests {
    private func select(_ line: String, versions: QueryBuilder.Versions = .none) throws -> QueryBuilder.Select {
        guard case .find(let request) = try CommandParser.parse(line) else { throw CommandError(.internal, "not a find") }
        return try QueryBuilder.select(request, model: SampleModel.model, versions: versions)
    }

    /// The COPY streamed when the catalog answers `whole`.
    private func copy(_ line: String, whole: Bool = true, versions: QueryBuilder.Versions = .none) throws -> String {
        try select(line, versions: versions).copyOut(readsWhole: whole) { "'" + $0 + "'" }
    }

    @Test func aWholeTableIsCopiedByItsColumns() throws {
        let table = #"COPY "public"."department" ("id", "name", "number") TO STDOUT"#
        #expect(try copy("FIND department") == table)
        // The keys as versions stand in the record's own columns: nothing is selected after them.
        #expect(try copy("FIND department", versions: .keys) == table)
        #expect(try copy("FIND employee") == #"COPY "public"."employee" ("id", "first_name", "age", "gender", "department_id", "manager_id") TO STDOUT"#)
        // A composite key of two to-one columns: the relationships' columns, each once.
        #expect(try copy("FIND project_member") == #"COPY "public"."project_member" ("role", "project_id", "employee_id") TO STDOUT"#)
        // The catalog is asked about the table by its quoted name.
        let asked = try #require(try select("FIND department").readsWholeQuery)
        #expect(asked.parameters == [#""public"."department""#])
        #expect(asked.sql.contains("to_regclass($1)"))
    }

    @Test func whatOnlyAQueryDoesKeepsTheQuery() throws {
        let query = { (line: String) throws -> Bool in try self.copy(line).hasPrefix("COPY (SELECT ") }
        #expect(try query("FIND department WHERE number > 2"))
        #expect(try query("FIND department ORDER BY name"))
        #expect(try query("FIND department LIMIT 5000"))
        #expect(try query("FIND department OFFSET 2"))
        #expect(try query("FIND department INCLUDE employees"))
        #expect(try query("FIND employee WHERE department.name == \"x\""))
        #expect(try query("FIND department SELECT name"))
        #expect(try query("FIND department SELECT DISTINCT name"))
        #expect(try query("FIND department") == false)
        // Nothing to ask the catalog when the statement does not read a table whole.
        #expect(try select("FIND department WHERE number > 2").readsWholeQuery == nil)
        // Each row's xmin, and a key that is not an integer or uuid converted to text.
        #expect(try copy("FIND department", versions: .xmin).hasPrefix("COPY (SELECT "))
        #expect(try copy("FIND tag", versions: .keys).hasPrefix("COPY (SELECT "))
        #expect(try copy("FIND tag") == #"COPY "public"."tag" ("label", "color") TO STDOUT"#)
        // A table the catalog does not call ordinary, childless and without generated columns.
        #expect(try copy("FIND department", whole: false).hasPrefix("COPY (SELECT "))
    }
}
