import Foundation
import Postgres
import Testing

/// The query language against the sample schema, over TCP.
@Suite struct QueryTests {
    /// A server with a small, known data set.
    private func seeded() throws -> (TestServer, LineClient) {
        let server = try TestServer()
        try server.database().execute("""
            INSERT INTO department (id, name, number, phone) VALUES (1, 'Sales', 10, '555-0100'), (2, 'Research', 20, NULL), (3, 'Café Crème', 30, NULL);
            INSERT INTO employee (id, first_name, last_name, gender, age, department_id) VALUES
              (1, 'John', 'Lim', 1, 31, 1), (2, 'Ann', 'Lee', 2, 64, 1), (3, 'Zoë', 'Ng', 2, 25, 2),
              (4, 'Bob', 'Lim', 1, NULL, 2), (5, 'Eve', 'Ray', 2, 45, NULL), (6, 'Al_x', 'O''Brien', 1, 31, 1);
            INSERT INTO color (id, number, key, r, g, b, alpha) VALUES (1, 3, 'red', 255, 0, 0, 0.5), (2, 7, 'blue', 0, 0, 255, 1);
            INSERT INTO memo (id, uid, body, lastmodified, color_id) VALUES
              (1, 'a', 'first', '2024-01-01T00:00:00Z', 1), (2, 'b', 'second', '2024-06-01T12:00:00Z', 2), (3, 'c', NULL, '2025-01-01T00:00:00Z', NULL);
            INSERT INTO project (id, name) VALUES (1, 'Apollo');
            INSERT INTO assignment (id, project_id, employee_id, role) VALUES (1, 1, 1, 'lead'), (2, 1, 3, 'dev');
            INSERT INTO friend (id, first_name, photo) VALUES (1, 'Pic', '\\x00ff10');
            SELECT setval('department_id_seq', 10), setval('employee_id_seq', 10);
            """)
        return (server, try server.client())
    }

    private func ids(_ client: LineClient, _ query: String) throws -> [Int] {
        let reply = try client.send(query)
        guard reply.ok else { throw TestFailure("\(query) -> \(reply)") }
        let ids = try reply.lines.map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            return object["id"] as! Int
        }
        // Without ORDER BY, records come in no particular order.
        return query.contains("ORDER BY") ? ids : ids.sorted()
    }

    @Test func comparisonsOnEveryType() throws {
        let (_, c) = try seeded()
        #expect(try ids(c, "FIND employee WHERE age == 31") == [1, 6])
        #expect(try ids(c, "FIND employee WHERE age = 31") == [1, 6])
        #expect(try ids(c, "FIND employee WHERE age != 31") == [2, 3, 4, 5])
        #expect(try ids(c, "FIND employee WHERE age <> 31 AND age != nil") == [2, 3, 5])
        #expect(try ids(c, "FIND employee WHERE age < 31") == [3])
        #expect(try ids(c, "FIND employee WHERE age <= 31") == [1, 3, 6])
        #expect(try ids(c, "FIND employee WHERE age > 45") == [2])
        #expect(try ids(c, "FIND employee WHERE age >= 45") == [2, 5])
        #expect(try ids(c, "FIND employee WHERE last_name == \"Lim\"") == [1, 4])
        #expect(try ids(c, "FIND color WHERE alpha < 0.75") == [1])
        #expect(try ids(c, "FIND memo WHERE lastmodified > \"2024-03-01\"") == [2, 3])
        #expect(try ids(c, "FIND memo WHERE lastmodified == \"2024-06-01T12:00:00Z\"") == [2])
        #expect(try ids(c, "FIND memo WHERE lastmodified BETWEEN {\"2024-01-01\", \"2024-12-31\"}") == [1, 2])
        #expect(try ids(c, "FIND friend WHERE photo == \"AP8Q\"") == [1])
        #expect(try ids(c, "FIND employee WHERE gender IN {2}") == [2, 3, 5])
        #expect(try ids(c, "FIND employee WHERE age IN {31, 25, nil}") == [1, 3, 4, 6])
        #expect(try ids(c, "FIND employee WHERE age BETWEEN {25, 45}") == [1, 3, 5, 6])
        #expect(try ids(c, "FIND employee WHERE age == nil") == [4])
        #expect(try ids(c, "FIND employee WHERE department == nil") == [5])
        #expect(try ids(c, "FIND employee WHERE department == 2") == [3, 4])
    }

    @Test func stringOperatorsAndModifiers() throws {
        let (_, c) = try seeded()
        #expect(try ids(c, "FIND employee WHERE first_name BEGINSWITH \"A\"") == [2, 6])
        #expect(try ids(c, "FIND employee WHERE first_name BEGINSWITH \"a\"") == [])
        #expect(try ids(c, "FIND employee WHERE first_name BEGINSWITH[c] \"a\"") == [2, 6])
        #expect(try ids(c, "FIND employee WHERE last_name ENDSWITH \"m\"") == [1, 4])
        #expect(try ids(c, "FIND employee WHERE first_name CONTAINS \"_\"") == [6])
        #expect(try ids(c, "FIND employee WHERE last_name CONTAINS \"'\"") == [6])
        #expect(try ids(c, "FIND employee WHERE first_name LIKE \"?o*\"") == [1, 3, 4])
        #expect(try ids(c, "FIND employee WHERE first_name MATCHES \"[AE].*\"") == [2, 5, 6])
        #expect(try ids(c, "FIND employee WHERE first_name MATCHES[c] \"e.e\"") == [5])
        #expect(try ids(c, "FIND employee WHERE first_name ==[c] \"JOHN\"") == [1])
        #expect(try ids(c, "FIND employee WHERE first_name ==[d] \"Zoe\"") == [3])
        #expect(try ids(c, "FIND department WHERE name CONTAINS[cd] \"CAFE CREME\"") == [3])
        #expect(try ids(c, "FIND employee WHERE last_name IN[c] {\"lim\", \"RAY\"}") == [1, 4, 5])
    }

    @Test func logicAndPrecedence() throws {
        let (_, c) = try seeded()
        #expect(try ids(c, "FIND employee WHERE gender == 1 OR gender == 2 AND age > 40") == [1, 2, 4, 5, 6])
        #expect(try ids(c, "FIND employee WHERE (gender == 1 OR gender == 2) AND age > 40") == [2, 5])
        #expect(try ids(c, "FIND employee WHERE NOT gender == 1 AND age > 40") == [2, 5])
        #expect(try ids(c, "FIND employee WHERE !(gender == 1 || age > 40)") == [3])
        #expect(try ids(c, "FIND employee WHERE gender == 1 && last_name == \"Lim\"") == [1, 4])
        #expect(try ids(c, "FIND employee WHERE TRUEPREDICATE") == [1, 2, 3, 4, 5, 6])
    }

    @Test func keyPathsAcrossRelationships() throws {
        let (_, c) = try seeded()
        #expect(try ids(c, "FIND employee WHERE department.name == \"Sales\"") == [1, 2, 6])
        #expect(try ids(c, "FIND memo WHERE color.number == 3") == [1])
        #expect(try ids(c, "FIND assignment WHERE employee.department.name == \"Research\"") == [2])
        #expect(try ids(c, "FIND assignment WHERE employee.department.number > 15 OR project.name == \"x\"") == [2])
        #expect(try ids(c, "FIND department WHERE ANY employees.age > 60") == [1])
        #expect(try ids(c, "FIND department WHERE SOME employees.last_name == \"Lim\"") == [1, 2])
        #expect(try ids(c, "FIND department WHERE ALL employees.age > 30") == [1, 3])
        #expect(try ids(c, "FIND department WHERE NONE employees.age > 60") == [2, 3])
        #expect(try ids(c, "FIND department WHERE employees.@count > 2") == [1])
        #expect(try ids(c, "FIND department WHERE employees.@count == 0") == [3])
        #expect(try ids(c, "FIND employee WHERE ANY assignments.project.name == \"Apollo\"") == [1, 3])
        #expect(try c.send("COUNT department WHERE employees.@count >= 2").status == "+OK 2")
    }

    @Test func recordsPrintEveryTypeAsJSON() throws {
        let (server, c) = try seeded()
        try server.database().execute(#"INSERT INTO contact (id, name, address) VALUES (9, E'Tab\there "quoted" \\ back\nline', NULL)"#)
        #expect(try c.send("GET memo 2").lines == [#"{"id":2,"uid":"b","body":"second","lastmodified":"2024-06-01T12:00:00+00:00","owner":null,"color":2}"#])
        #expect(try c.send("GET friend 1").lines == [#"{"id":1,"first_name":"Pic","last_name":null,"status":null,"photo":"AP8Q","owner":null}"#])
        #expect(try c.send("GET color 1").lines == [#"{"id":1,"number":3,"key":"red","r":255,"g":0,"b":0,"alpha":0.5}"#])
        #expect(try c.send("GET contact 9").lines == [#"{"id":9,"name":"Tab\there \"quoted\" \\ back\nline","address":null,"phone":null,"owner":null}"#])
        // Nested records are PostgreSQL's JSON, with the same keys and formats.
        let nested = try c.send("GET color 2 INCLUDE memos").lines.first
        #expect(nested == #"{"id":2,"number":7,"key":"blue","r":0,"g":0,"b":255,"alpha":1,"memos":[{"id":2,"uid":"b","body":"second","lastmodified":"2024-06-01T12:00:00+00:00","owner":null,"color":2}]}"#)
    }

    @Test func orderingWithTiesAndNils() throws {
        let (_, c) = try seeded()
        #expect(try ids(c, "FIND employee ORDER BY last_name") == [2, 1, 4, 3, 6, 5])
        #expect(try ids(c, "FIND employee ORDER BY age DESC") == [4, 2, 5, 1, 6, 3])
        #expect(try ids(c, "FIND employee ORDER BY age") == [3, 1, 6, 5, 2, 4])
        #expect(try ids(c, "FIND employee ORDER BY department.name DESC, first_name") == [5, 6, 2, 1, 4, 3])
        #expect(try ids(c, "FIND department ORDER BY employees.@count DESC") == [1, 2, 3])
        #expect(try ids(c, "FIND employee ORDER BY age LIMIT 2 OFFSET 2") == [6, 5])
        #expect(try ids(c, "FIND employee LIMIT 0") == [])
    }

    @Test func keysetPagingContinuesExactlyUnderConcurrentInserts() throws {
        let (server, c) = try seeded()
        let first = try c.send("FIND employee ORDER BY age DESC, last_name LIMIT 2")
        #expect(first.lines.count == 2)
        let cursor = try #require(first.status.components(separatedBy: "AFTER ").last)
        #expect(first.status == "+OK 2 records; next page: AFTER \(cursor)")
        // Another session inserts records that sort before and after the cursor.
        let other = try server.client()
        try other.ok("INSERT employee first_name=\"Old\" last_name=\"Zed\" gender=1 age=99")
        try other.ok("INSERT employee first_name=\"Kid\" last_name=\"Kay\" gender=1 age=1")
        try other.ok("SAVE")
        let second = try c.send("FIND employee ORDER BY age DESC, last_name LIMIT 2 AFTER \(cursor)")
        let ages = second.lines.map { $0.contains("\"age\":45") ? 45 : ($0.contains("\"age\":31") ? 31 : -1) }
        #expect(ages == [45, 31])
        var seen = first.lines + second.lines
        var next = second.status.components(separatedBy: "AFTER ").last!
        while true {
            let page = try c.send("FIND employee ORDER BY age DESC, last_name LIMIT 2 AFTER \(next)")
            seen += page.lines
            guard page.status.contains("AFTER ") else { break }
            next = page.status.components(separatedBy: "AFTER ").last!
        }
        #expect(seen.count == 7, "\(seen)")  // 6 seeded (one before the cursor was new) + the age-1 insert
        #expect(Set(seen).count == seen.count)
        #expect(try c.send("FIND employee ORDER BY age LIMIT 2 AFTER \(cursor)").status.hasPrefix("-ERR VALIDATION AFTER: this cursor does not belong"))
        #expect(try c.send("FIND employee LIMIT 2 AFTER cZZ").status.hasPrefix("-ERR VALIDATION"))
    }

    @Test func includeShapesWithoutNPlusOne() throws {
        let (_, c) = try seeded()
        let reply = try c.send("GET department 1 INCLUDE employees")
        let department = try JSONSerialization.jsonObject(with: Data(reply.lines[0].utf8)) as! [String: Any]
        let employees = department["employees"] as! [[String: Any]]
        #expect(employees.map { $0["id"] as! Int } == [1, 2, 6])
        let nested = try c.send("FIND department WHERE id == 2 INCLUDE employees.department, employees.assignments.project")
        let object = try JSONSerialization.jsonObject(with: Data(nested.lines[0].utf8)) as! [String: Any]
        let zoe = (object["employees"] as! [[String: Any]])[0]
        #expect((zoe["department"] as! [String: Any])["name"] as? String == "Research")
        let assignments = zoe["assignments"] as! [[String: Any]]
        #expect((assignments[0]["project"] as! [String: Any])["name"] as? String == "Apollo")
        let toOne = try c.send("FIND employee WHERE id == 5 INCLUDE department")
        #expect(toOne.lines == [#"{"id":5,"first_name":"Eve","last_name":"Ray","gender":2,"age":45,"department":null}"#])
        #expect(try c.send("FIND department INCLUDE staff").status == "-ERR UNKNOWN cannot include 'staff': department has no relationship 'staff'")
        let plan = try c.send("EXPLAIN FIND department INCLUDE employees")
        #expect(plan.lines[0].hasPrefix("sql: SELECT t0.\"id\", "))
        #expect(plan.lines.filter { $0.hasPrefix("sql:") }.count == 1)
    }

    @Test func countEstimateAndExplain() throws {
        let (server, c) = try seeded()
        try server.database().execute("ANALYZE employee")
        #expect(try c.send("COUNT employee").status == "+OK 6")
        #expect(try c.send("COUNT employee WHERE age > 30").status == "+OK 4")
        #expect(try c.send("COUNT employee ESTIMATE").status == "+OK 6 estimated")
        let explain = try c.send("EXPLAIN COUNT employee WHERE last_name == \"Lim\"")
        #expect(explain.status == "+OK plan")
        #expect(explain.lines[0] == #"sql: SELECT count(*) FROM "public"."employee" AS t0 WHERE t0."last_name" = $1"#)
        #expect(explain.lines[1] == #"parameters: ["Lim"]"#)
        #expect(explain.lines.contains { $0.contains("Aggregate") })
    }

    @Test func errorsNameWhatWentWrong() throws {
        let (_, c) = try seeded()
        #expect(try c.send("FIND employee WHERE age >> 3").status == "-ERR SYNTAX at 26: expected a value after '>', found '>'")
        #expect(try c.send("FIND employee WHERE salary > 3").status == "-ERR UNKNOWN unknown key path 'salary': employee has no attribute or relationship 'salary'")
        #expect(try c.send("FIND employee WHERE department.budget > 3").status == "-ERR UNKNOWN unknown key path 'department.budget': department has no attribute or relationship 'budget'")
        #expect(try c.send("FIND employee WHERE age > \"old\"").status == "-ERR VALIDATION age expects an integer, not a string, got \"old\"")
        #expect(try c.send("FIND employee ORDER BY employees").status.hasPrefix("-ERR UNKNOWN"))
        #expect(try c.send("FIND department ORDER BY employees.age").status.hasPrefix("-ERR UNKNOWN cannot order by 'employees.age'"))
        #expect(try c.send("FIND memo WHERE lastmodified > \"tomorrow\"").status.hasPrefix("-ERR VALIDATION"))
        #expect(try c.send("FIND employee WHERE age MATCHES 3").status == "-ERR VALIDATION MATCHES compares with a string in double quotes")
        #expect(try c.send("FIND employee WHERE first_name MATCHES \"(\"").status.hasPrefix("-ERR VALIDATION"))
        #expect(try c.send("PING").ok)
    }

    @Test func injectionAttemptsInEveryPositionFailCleanly() throws {
        let (server, c) = try seeded()
        let hostile = [
            "FIND employee WHERE last_name == \"x\\\" OR 1=1 --\"",
            "FIND employee WHERE last_name == \"'; DROP TABLE employee; --\"",
            "FIND employee WHERE last_name == \"$1\"",
            "FIND employee; DROP TABLE employee",
            "FIND employee WHERE \"1\" == \"1\"",
            "FIND employee\" WHERE 1=1",
            "FIND employee ORDER BY \"last_name; DROP TABLE employee\"",
            "FIND employee ORDER BY last_name; DROP TABLE employee",
            "FIND employee ORDER BY (SELECT 1)",
            "FIND pg_catalog.pg_authid",
            "FIND records.schema_migrations",
            "FIND employee WHERE last_name.x == 1",
            "FIND employee WHERE age == 1 UNION SELECT 1",
            "COUNT employee WHERE age == \"1) OR (1=1\"",
            "GET employee \"1 OR 1=1\"",
            "GET employee 1; DELETE FROM employee",
            "INSERT employee first_name=\"x'); DROP TABLE employee; --\" last_name=\"y\" gender=1",
            "UPDATE employee 1 \"age\"=3",
            "DESCRIBE employee; DROP TABLE employee",
            "FIND employee WHERE last_name == \"\\u0000\"",
            "FIND employee WHERE age == 99999999999999999999999999",
            "FIND employee WHERE last_name ==[c] \"\\\\\" OR 1=1\"",
            "FIND employee WHERE last_name == first_name; DROP TABLE employee",
            "FIND employee SELECT \"last_name\" AS x FROM employee",
            "AGGREGATE employee count() AS \"x; DROP TABLE employee\"",
            "AGGREGATE employee count() GROUP BY (SELECT 1)",
            "AGGREGATE employee sum(age) HAVING sum(age) > \"1 OR 1=1\"",
            "FIND department WHERE SUBQUERY(employees, $e, $e.age > 1) OR 1=1).@count > 0",
        ]
        for line in hostile {
            let reply = try c.send(line)
            #expect(reply.lines.count <= 1, "\(line) -> \(reply)")
            if reply.ok && !line.hasPrefix("INSERT") { #expect(reply.lines.isEmpty || line.hasPrefix("GET"), "\(line) -> \(reply)") }
        }
        try c.ok("ROLLBACK")
        let db = try server.database()
        #expect(try db.query("SELECT count(*) FROM employee").string(0, 0) == "6")
        #expect(try db.query("SELECT string_agg(last_name, ',' ORDER BY id) FROM employee").string(0, 0) == "Lim,Lee,Ng,Lim,Ray,O'Brien")
        #expect(try db.query("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").string(0, 0) == "11")
    }

    @Test func largeResultsStreamWithBoundedServerMemory() throws {
        let server = try TestServer()
        try server.database().execute("""
            INSERT INTO employee (first_name, last_name, gender, age)
            SELECT 'First' || i, repeat('x', 200) || i, 1 + i % 2, i % 90 FROM generate_series(1, 200000) i
            """)
        let client = try server.client()
        let pid = server.process.processIdentifier
        let before = residentKiB(pid)
        try client.write("FIND employee\n")
        // Read one line, then stop reading: the server must not buffer the ~45 MB result.
        #expect(try client.readLine()?.hasPrefix("{\"id\":1,") == true)
        usleep(1_500_000)
        let during = residentKiB(pid)
        #expect(during - before < 24_000, "server grew by \(during - before) KiB while the client did not read")
        var count = 1
        var status = ""
        while let line = try client.readLine() {
            if line.hasPrefix("+OK") { status = line; break }
            count += 1
        }
        #expect(count == 200_000)
        #expect(status == "+OK 200000 records")
        #expect(try client.send("PING").ok)
    }

    /// AGGREGATE and the collection operators give what hand-written SQL gives on the same
    /// rows, pending changes included as by every read.
    @Test func aggregatesAsTheSQLSays() throws {
        let (server, c) = try seeded()
        let db = try server.database()
        func objects(_ line: String) throws -> [[String: Any]] {
            let reply = try c.send(line)
            guard reply.ok else { throw TestFailure("\(line) -> \(reply)") }
            return try reply.lines.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        }
        func rows(_ sql: String) throws -> [[String?]] {
            let result = try db.query(sql)
            return (0..<result.rowCount).map { row in (0..<result.columnCount).map { result.string(row, $0) } }
        }
        func text(_ value: Any?) -> String? {
            switch value {
            case let number as NSNumber: return number.doubleValue == number.doubleValue.rounded() ? String(number.intValue) : String(number.doubleValue)
            case let string as String: return string
            default: return nil
            }
        }
        let grouped = try objects("AGGREGATE employee count() avg(age) AS mean max(age) GROUP BY department.name ORDER BY department.name")
        let expected = try rows("""
            SELECT d.name, count(*)::text, avg(e.age)::float8::text, max(e.age)::text FROM employee e LEFT JOIN department d ON d.id = e.department_id
            GROUP BY d.name ORDER BY d.name
            """)
        #expect(grouped.map { [text($0["department.name"]), text($0["count"]), text($0["mean"]), text($0["max_age"])] } == expected, "\(grouped)")
        // HAVING, ORDER BY a function's name, LIMIT.
        let having = try objects("AGGREGATE employee count() GROUP BY department.name HAVING count() > 1 ORDER BY count DESC LIMIT 1")
        #expect(having.map { text($0["department.name"]) } == (try rows("SELECT d.name FROM employee e JOIN department d ON d.id = e.department_id GROUP BY d.name HAVING count(*) > 1 ORDER BY count(*) DESC, d.name LIMIT 1")).map { $0[0] })
        // Pending changes count: one more employee in Research, age 99, before SAVE.
        try c.ok(#"INSERT employee first_name="New" last_name="Hire" gender=1 age=99 department=2"#)
        let pending = try objects("AGGREGATE employee count() max(age) WHERE department.name == \"Research\"")
        #expect(text(pending.first?["count"]) == "3" && text(pending.first?["max_age"]) == "99", "\(pending)")
        try c.ok("ROLLBACK")
        // @avg, @max over a to-many relationship, in a predicate and in a group.
        #expect(try ids(c, "FIND department WHERE employees.@avg.age > 40")
                == (try rows("SELECT d.id FROM department d WHERE (SELECT avg(age) FROM employee WHERE department_id = d.id) > 40 ORDER BY d.id")).map { Int($0[0]!)! })
        let oldest = try objects("AGGREGATE department max(employees.@max.age)")
        #expect(text(oldest.first?["max_employees_max_age"]) == "64", "\(oldest)")
        // Refused clearly: sums of text, groups through to-many, unknown names.
        #expect(try c.send("AGGREGATE employee sum(first_name)").status.hasPrefix("-ERR VALIDATION"))
        #expect(try c.send("AGGREGATE department count() GROUP BY employees.age").status.hasPrefix("-ERR UNKNOWN"))
        #expect(try c.send("AGGREGATE employee count() ORDER BY nothing").status.hasPrefix("-ERR UNKNOWN"))
        #expect(try c.send("AGGREGATE employee avg()").status.hasPrefix("-ERR SYNTAX"))
        // SUBQUERY: departments with at least two employees over 30.
        #expect(try ids(c, "FIND department WHERE SUBQUERY(employees, $e, $e.age > 30 AND $e.gender == 1).@count >= 1 ORDER BY id")
                == (try rows("SELECT d.id FROM department d WHERE (SELECT count(*) FROM employee e WHERE e.department_id = d.id AND e.age > 30 AND e.gender = 1) >= 1 ORDER BY d.id")).map { Int($0[0]!)! })
        #expect(try ids(c, "FIND department WHERE SUBQUERY(employees, $e, $e.age > $e.department.number).@count == 2 ORDER BY id")
                == (try rows("SELECT d.id FROM department d WHERE (SELECT count(*) FROM employee e WHERE e.department_id = d.id AND e.age > d.number) = 2 ORDER BY d.id")).map { Int($0[0]!)! })
        #expect(try c.send("FIND department WHERE SUBQUERY(employees, $e, age > 30).@count > 0").status.hasPrefix("-ERR SYNTAX"))
        let plan = try c.send("EXPLAIN AGGREGATE employee count() GROUP BY gender")
        #expect(plan.ok && plan.lines.first?.hasPrefix("sql: SELECT json_build_object(") == true, "\(plan)")
    }

    /// SELECT and DISTINCT give the values hand-written SQL gives (EXPORT too); a to-many
    /// INCLUDE takes its own ORDER BY and LIMIT.
    @Test func projectionsAndOrderedIncludesAsTheSQLSays() throws {
        let (server, c) = try seeded()
        let db = try server.database()
        func rows(_ sql: String) throws -> [String] {
            let result = try db.query(sql)
            return (0..<result.rowCount).map { row in (0..<result.columnCount).map { result.string(row, $0) ?? "nil" }.joined(separator: "|") }
        }
        func values(_ line: String, _ keys: [String]) throws -> [String] {
            let reply = try c.send(line)
            guard reply.ok else { throw TestFailure("\(line) -> \(reply)") }
            return try reply.lines.map { text in
                let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
                #expect(Set(object.keys) == Set(keys), "\(text)")
                return keys.map { key in object[key].map { $0 is NSNull ? "nil" : "\($0)" } ?? "missing" }.joined(separator: "|")
            }
        }
        #expect(try values("FIND employee SELECT last_name, department.name WHERE age > 30 ORDER BY last_name, id", ["last_name", "department.name"])
                == (try rows("SELECT e.last_name, coalesce(d.name, 'nil') FROM employee e LEFT JOIN department d ON d.id = e.department_id WHERE e.age > 30 ORDER BY e.last_name, e.id")))
        #expect(try values("FIND employee SELECT DISTINCT last_name ORDER BY last_name", ["last_name"])
                == (try rows("SELECT DISTINCT last_name FROM employee ORDER BY last_name")))
        #expect(try values("FIND employee SELECT DISTINCT gender, department.number ORDER BY gender LIMIT 3", ["gender", "department.number"])
                == (try rows("SELECT DISTINCT e.gender, coalesce(d.number::text, 'nil') FROM employee e LEFT JOIN department d ON d.id = e.department_id ORDER BY 1, 2 NULLS LAST LIMIT 3")))
        // Paging a projection by cursor: the same values, page after page.
        let first = try c.send("FIND employee SELECT first_name ORDER BY first_name LIMIT 4")
        let cursor = try #require(first.status.range(of: "AFTER ").map { String(first.status[$0.upperBound...]) })
        #expect(try values("FIND employee SELECT first_name ORDER BY first_name LIMIT 4 AFTER \(cursor)", ["first_name"])
                == (try rows("SELECT first_name FROM employee ORDER BY first_name, id OFFSET 4")))
        let export = try c.send("EXPORT employee SELECT DISTINCT last_name ORDER BY last_name")
        #expect(export.lines == ["last_name"] + (try rows("SELECT DISTINCT last_name FROM employee ORDER BY 1")), "\(export)")
        #expect(try c.send("FIND employee SELECT assignments").status.hasPrefix("-ERR UNKNOWN"))
        #expect(try c.send("FIND employee SELECT DISTINCT last_name ORDER BY age").status.hasPrefix("-ERR SYNTAX"))
        // INCLUDE employees ORDER BY age DESC LIMIT 1: each department's oldest.
        let oldest = try c.send("FIND department ORDER BY id INCLUDE employees ORDER BY age DESC LIMIT 1")
        let included = try oldest.lines.map { line -> [Int] in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            return (object["employees"] as! [[String: Any]]).map { $0["id"] as! Int }
        }
        #expect(included == (try rows("""
            SELECT coalesce((SELECT id::text FROM employee e WHERE e.department_id = d.id ORDER BY age DESC NULLS FIRST, id LIMIT 1), '') FROM department d ORDER BY d.id
            """)).map { $0.isEmpty ? [] : [Int($0)!] }, "\(oldest)")
        #expect(try c.send("FIND employee INCLUDE department ORDER BY name").status.hasPrefix("-ERR SYNTAX"))
    }

    /// What a user trying the new query forms on a schema of their own found (each failed
    /// before), checked against hand-written SQL.
    @Test func queriesAsAUserFoundThem() throws {
        let schema = try Schema("""
            CREATE TABLE parent (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, t text, photo bytea, u uuid, j json);
            CREATE TABLE kid (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, parent_id bigint REFERENCES parent(id), f int, n int, x text);
            CREATE TABLE grand (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, kid_id bigint REFERENCES kid(id), age int);
            """)
        let server = try TestServer(schema: schema)
        try server.database().execute("""
            INSERT INTO parent (id, t, photo, u, j) VALUES (1, 'ΟΔΟΣ', '\\x00ff', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{}'),
              (2, 'Ștefan', '\\x00ff', 'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '[]'), (3, 'Tiếng Việt', NULL, NULL, NULL);
            INSERT INTO kid (id, parent_id, f, n, x) VALUES (1, 1, 7, 1, 'a'), (2, 1, 8, 2, 'b'), (3, 2, 9, 3, 'c');
            INSERT INTO grand (kid_id, age) VALUES (1, 5), (1, 50), (3, 60);
            """)
        let c = try server.client()
        // [c] folds both sides in PostgreSQL alike: a final sigma matches.
        #expect(try ids(c, "FIND parent WHERE t CONTAINS[c] \"ΟΔΟΣ\"") == [1])
        #expect(try ids(c, "FIND parent WHERE t ENDSWITH[c] \"σ\"") == [1])
        // [d] beyond Latin-1: Romanian and Vietnamese letters.
        #expect(try ids(c, "FIND parent WHERE t ==[d] \"Stefan\"") == [2])
        #expect(try ids(c, "FIND parent WHERE t BEGINSWITH[cd] \"tieng\"") == [3])
        // An ordered include of records with a column named like the query's aliases.
        let included = try c.send("FIND parent WHERE id == 1 INCLUDE kids ORDER BY n DESC LIMIT 1")
        #expect(included.ok && included.lines.first?.contains(#""kids":[{"id":2,"f":8,"n":2,"x":"b","parent":1}]"#) == true, "\(included)")
        // DISTINCT orders by what it selects, refuses [c] and COLLATE clearly, pages by OFFSET.
        #expect(try c.send("FIND parent SELECT DISTINCT t ORDER BY t[c]").status.hasPrefix("-ERR SYNTAX"))
        #expect(try c.send("FIND parent SELECT DISTINCT photo ORDER BY photo").ok)
        let page = try c.send("FIND kid SELECT DISTINCT parent LIMIT 1")
        #expect(page.status == "+OK 1 record; next page: OFFSET 1" && page.lines == [#"{"parent":1}"#], "\(page)")
        #expect(try c.send("FIND parent SELECT DISTINCT j").status.hasPrefix("-ERR VALIDATION"))
        // Keys appear once in an object; min/max of uuid works, of bytea is refused clearly.
        #expect(try c.send("AGGREGATE kid count() AS n GROUP BY n").status.hasPrefix("-ERR SYNTAX"))
        #expect(try c.send("FIND kid SELECT n, N").status.hasPrefix("-ERR SYNTAX"))
        #expect(try c.send("AGGREGATE parent min(u)").lines == [#"{"min_u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}"#])
        #expect(try c.send("AGGREGATE parent max(photo)").status.hasPrefix("-ERR VALIDATION"))
        // Groups of bytea show as FIND shows them (base64).
        #expect(try c.send("AGGREGATE parent count() GROUP BY photo").lines.first == #"{"photo":"AP8=","count":2}"#)
        #expect(try c.send("AGGREGATE kid count() ORDER BY COUNT").ok)
        // Nested SUBQUERY through the outer variable; SELECT after WHERE with more clauses.
        #expect(try ids(c, "FIND parent WHERE SUBQUERY(kids, $k, SUBQUERY($k.grands, $g, $g.age > 40).@count > 0).@count > 0 ORDER BY id") == [1, 2])
        #expect(try c.send("FIND kid WHERE n > 1 SELECT x ORDER BY x LIMIT 1").lines == [#"{"x":"b"}"#])
        // @sum of nothing is 0.
        #expect(try c.send("FIND parent WHERE id == 3 SELECT kids.@sum.n").lines == [#"{"kids.@sum.n":0}"#])
    }

    /// What FIND could not answer before (issue #21), checked against hand-written SQL on the
    /// same data: fields compared with fields, one normal form for [c] and [d], ORDER BY [c],
    /// cursors that fit only their own query, LIMIT 0 without a cursor.
    @Test func fieldComparisonsFoldingAndCursorsAsTheSQLSays() throws {
        let (server, c) = try seeded()
        let db = try server.database()
        try db.execute("""
            INSERT INTO employee (id, first_name, last_name, gender, age, department_id) VALUES
              (7, 'Lim', 'Lim', 1, 10, 1), (8, 'rene' || chr(769) || 'e', 'Dupont', 2, 20, 2), (9, 'amy', 'Zed', 2, 30, 2)
            """)
        func sql(_ query: String) throws -> [Int] {
            let result = try db.query(query)
            return (0..<result.rowCount).map { Int(result.string($0, 0)!)! }
        }
        #expect(try ids(c, "FIND employee WHERE first_name == last_name") == (try sql("SELECT id FROM employee WHERE first_name = last_name ORDER BY id")))
        #expect(try ids(c, "FIND employee WHERE age > department.number")
                == (try sql("SELECT e.id FROM employee e JOIN department d ON d.id = e.department_id WHERE e.age > d.number ORDER BY e.id")))
        #expect(try ids(c, "FIND employee WHERE age < department.number OR department == nil ORDER BY id")
                == (try sql("SELECT e.id FROM employee e LEFT JOIN department d ON d.id = e.department_id WHERE e.age < d.number OR e.department_id IS NULL ORDER BY e.id")))
        #expect(try c.send("FIND employee WHERE age == first_name").status.hasPrefix("-ERR VALIDATION"))
        #expect(try c.send("FIND employee WHERE age == nobody").status.hasPrefix("-ERR UNKNOWN"))
        // A decomposed é (e + U+0301) matches the precomposed one under [c] and [d].
        #expect(try ids(c, "FIND employee WHERE first_name ==[c] \"RENÉE\"") == [8])
        #expect(try ids(c, "FIND employee WHERE first_name BEGINSWITH[cd] \"rene\"") == [8])
        #expect(try ids(c, "FIND department WHERE name CONTAINS[d] \"Cafe\u{301}\"") == [3])
        // ORDER BY [c]: amy among the capitals, not after them.
        let byCase = try ids(c, "FIND employee WHERE gender == 2 ORDER BY first_name[c]")
        #expect(byCase == (try sql("SELECT id FROM employee WHERE gender = 2 ORDER BY lower(first_name), id")), "\(byCase)")
        // A collation of the database's, by name (ICU's here).
        #expect(try ids(c, #"FIND employee ORDER BY first_name COLLATE "sv-x-icu" DESC"#)
                == (try sql(#"SELECT id FROM employee ORDER BY first_name COLLATE "sv-x-icu" DESC, id"#)))
        #expect(try c.send(#"FIND employee ORDER BY first_name COLLATE "no-such""#).status.hasPrefix("-ERR UNKNOWN unknown collation 'no-such'"))
        #expect(try c.send(#"FIND employee ORDER BY age COLLATE "sv-x-icu""#).status.hasPrefix("-ERR VALIDATION"))
        // A cursor fits only the query that gave it, values included.
        let page = try c.send("FIND memo WHERE color.number >= 3 ORDER BY lastmodified DESC LIMIT 1")
        let cursor = try #require(page.status.range(of: "AFTER ").map { String(page.status[$0.upperBound...]) })
        #expect(try c.send("FIND memo ORDER BY lastmodified DESC LIMIT 1 AFTER \(cursor)").status.hasPrefix("-ERR VALIDATION AFTER: this cursor does not belong"))
        #expect(try c.send("FIND memo WHERE color.number == 7 ORDER BY lastmodified DESC LIMIT 1 AFTER \(cursor)").status.hasPrefix("-ERR VALIDATION"))
        #expect(try ids(c, "FIND memo WHERE  color.number  >=  3 ORDER BY lastmodified DESC LIMIT 1 AFTER \(cursor)") == [1])
        // LIMIT 0: no records and no cursor.
        #expect(try c.send("FIND memo LIMIT 0").status == "+OK 0 records")
    }
}

/// VmRSS of a process, in KiB.
func residentKiB(_ pid: Int32) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0

}
