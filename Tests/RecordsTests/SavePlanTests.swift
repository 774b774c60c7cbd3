import Foundation
import Postgres
import Testing
@testable import Records

/// SAVE's planner, without a database: the statements of each round for every kind of key,
/// fed made-up results.
@Suite struct SavePlanTests {
    let model = SampleModel.model

    private func insert(_ ref: String, _ entity: String, _ fields: [(String, FieldValue)]) -> PendingInsert {
        PendingInsert(ref: ref, entity: entity, fields: fields.map { (column: $0.0, value: $0.1) })
    }

    private func unit(_ inserts: [PendingInsert]) -> ChangeSet {
        var changes = ChangeSet()
        inserts.forEach { changes.add($0) }
        return changes
    }

    private func statements(_ action: SavePlan.Action) -> [Statement] {
        guard case .run(let statements) = action else { Issue.record("expected statements, got \(action)"); return [] }
        return statements
    }

    /// Answers every statement with no rows, except allocations, which get `1`, `2`, ... (a
    /// uuid for uuid keys), as many as asked.
    private func answer(_ statements: [Statement]) -> RoundResult {
        var next = 100
        return .success(statements.map { statement in
            if statement.sql.hasPrefix("SELECT nextval") || statement.sql.contains("gen_random_uuid()") {
                let count = Int(statement.parameters[0]!)!
                return StatementResult(rows: (0..<count).map { _ in
                    next += 1
                    return [statement.sql.contains("gen_random_uuid") ? "00000000-0000-4000-8000-000000000\(next)" : String(next)]
                })
            }
            if statement.sql.hasPrefix("INSERT") {  // as many rows as its first array holds
                return StatementResult(affected: statement.sql.contains("unnest") ? SQL.parseArray(statement.parameters[0] ?? "{}").count : 1)
            }
            return StatementResult()
        })
    }

    /// Keys drawn from what `KeyReserve` gave: a row takes the next value of each of its
    /// sequences in turn, two columns from one sequence included, and a short pool leaves the
    /// last rows' columns unfilled; the next request goes on where this one stopped.
    @Test func drawnKeysTakeEachSequenceInTurn() {
        let shared = KeyAllocation.Request(entity: "pair", columns: ["a", "b", "c"], refs: ["p1", "p2", "p3"],
                                           allocations: [.sequence("s"), .sequence("s"), .sequence("t")])
        let after = KeyAllocation.Request(entity: "one", columns: ["id"], refs: ["o1", "o2"], allocations: [.sequence("t")])
        let keys = KeyAllocation.drawn([shared, after], values: ["s": ["1", "2", "3", "4", "5"], "t": ["10", "11", "12", "13"]])
        #expect(keys["p1"]?.values == ["a": "1", "b": "2", "c": "10"])
        #expect(keys["p2"]?.values == ["a": "3", "b": "4", "c": "11"])
        #expect(keys["p3"]?.values == ["a": "5", "c": "12"])
        #expect(keys["o1"]?.values == ["id": "13"])
        #expect(keys["o2"]?.values == [:])
    }

    /// A key taken from the record it points at, record after record (a table whose key points
    /// at its own): worked out without recursion, however long the client makes the chain.
    /// Recursion ended the server (a pool worker's stack) at a few thousand; a cycle of such
    /// keys is left unknown, as before.
    @Test func keysTakenFromRecordAfterRecordAreWorkedOutAtAnyDepth() {
        let id = SampleModel.attribute("id", "bigint", .integer(bits: 64), key: true)
        let (next, previous) = SampleModel.toOne("next", of: "link", to: "link", inverse: "previous", column: "id")
        let model = Model(schema: "public", entities: [Entity(name: "link", key: [id], attributes: [id], relationships: [next, previous])],
                          unserved: [])
        let count = 200_000
        var chain = ChangeSet()
        for i in 0..<count {
            chain.add(PendingInsert(ref: "l\(i)", entity: "link", fields: [("id", i == count - 1 ? .text("7") : .ref("l\(i + 1)"))]))
        }
        let keys = KeyAllocation.known(chain, model: model, assigned: [:])
        #expect(keys[0]?.values == ["id": "7"] && keys[count / 2]?.values == ["id": "7"] && keys[count - 1]?.values == ["id": "7"])
        var cycle = ChangeSet()
        cycle.add(PendingInsert(ref: "a", entity: "link", fields: [("id", .ref("b"))]))
        cycle.add(PendingInsert(ref: "b", entity: "link", fields: [("id", .ref("c"))]))
        cycle.add(PendingInsert(ref: "c", entity: "link", fields: [("id", .ref("a"))]))
        cycle.add(PendingInsert(ref: "d", entity: "link", fields: [("id", .ref("a"))]))
        let unknown = KeyAllocation.known(cycle, model: model, assigned: [:])
        #expect((0..<4).map { unknown[$0]?.values } == Array(repeating: [:], count: 4))
    }

    /// What points at a left-out insert is left out, and what points at that, in one sweep: a
    /// chain of references as long as the unit (each row pointing at the next) with a problem
    /// at its end. A pass over the unit a link made a read in such a unit take minutes.
    @Test func leftOutInsertsTakeWhatPointsAtThemInOneSweep() {
        let count = 50_000
        var chain = ChangeSet()
        for i in 0..<count {
            chain.add(PendingInsert(ref: "e\(i)", entity: "employee",
                                    fields: [("first_name", .text("A")), ("gender", .text("1"))] + (i < count - 1 ? [("manager_id", .ref("e\(i + 1)"))] : [])))
        }
        let reasons = Validation.excluded(chain, problems: [Problem(change: .insert("e\(count - 1)"), message: "#e\(count - 1) employee: no")])
        #expect(reasons.count == count)
        #expect(reasons[.insert("e0")] == "#e0 employee: points at #e1, which cannot be applied yet")
        #expect(reasons[.insert("e\(count - 1)")] == "#e\(count - 1) employee: no")
    }

    /// Validation skips what a run of rows repeats (the same columns, the same parent), never a
    /// problem: every row that names a column the model lost, or a parent no longer pending,
    /// is reported, and a run after a bad row is checked afresh.
    @Test func validationReportsEveryRowOfARunAlike() {
        let rows = [
            insert("e1", "employee", [("first_name", .text("A")), ("gender", .text("1")), ("shoe_size", .text("9"))]),
            insert("e2", "employee", [("first_name", .text("B")), ("gender", .text("1")), ("shoe_size", .text("9"))]),
            insert("e3", "employee", [("first_name", .text("C")), ("gender", .text("1")), ("department_id", .ref("gone"))]),
            insert("e4", "employee", [("first_name", .text("D")), ("gender", .text("1")), ("department_id", .ref("gone"))]),
            insert("d", "department", [("name", .text("Sales")), ("number", .text("1"))]),
            insert("e5", "employee", [("first_name", .text("E")), ("gender", .text("1")), ("department_id", .ref("d"))]),
            insert("e6", "employee", [("first_name", .text("F")), ("gender", .text("1")), ("department_id", .ref("d"))]),
            insert("e7", "employee", [("first_name", .text("G")), ("gender", .text("1")), ("shoe_size", .text("9"))]),
        ]
        let problems = Validation.problems(unit(rows), model: model, keys: PendingKeys(unit(rows))).map(\.message)
        #expect(problems == [
            "#e1 employee: shoe_size no longer exists (the model changed since it was set): ROLLBACK, or set the unit again",
            "#e2 employee: shoe_size no longer exists (the model changed since it was set): ROLLBACK, or set the unit again",
            "#e3 employee: department points at #gone, which is no longer pending",
            "#e4 employee: department points at #gone, which is no longer pending",
            "#e7 employee: shoe_size no longer exists (the model changed since it was set): ROLLBACK, or set the unit again",
        ], "\(problems)")
    }

    @Test func everyInsertIsWrittenExactlyOnceWhateverItsKey() {
        let changes = unit([
            insert("d", "department", [("name", .text("Sales")), ("number", .text("1"))]),
            insert("e1", "employee", [("first_name", .text("A")), ("gender", .text("1")), ("department_id", .ref("d"))]),
            insert("b1", "book", [("title", .text("One"))]),
            insert("b2", "book", [("title", .text("Two"))]),
            insert("t", "tag", [("label", .text("red"))]),
            insert("p", "project", [("name", .text("Apollo"))]),
            insert("m", "project_member", [("project_id", .ref("p")), ("employee_id", .ref("e1")), ("role", .text("lead"))]),
        ])
        var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
        let first = statements(plan.start())
        #expect(first.first == Statement("BEGIN"))
        // No transaction id: a COMMIT that gets no answer is settled by its mark.
        #expect(!first.contains { $0.sql.contains("pg_current_xact_id()::text") })
        // One allocation per entity whose keys come from a sequence or a default; none for the
        // text key the client gave, nor for the join table whose key is made of references.
        let allocations = first.filter { $0.sql.hasPrefix("SELECT nextval") || $0.sql.contains("generate_series") }
        #expect(allocations.count == 4)
        #expect(allocations.contains { $0.sql == "SELECT (gen_random_uuid())::text FROM generate_series(1, $1::int)" && $0.parameters == ["2"] })
        let second = statements(plan.received(answer(first)))
        let inserts = second.filter { $0.sql.hasPrefix("INSERT INTO \"public\"") }
        #expect(inserts.count == 6)
        #expect(second.last == Statement("COMMIT"))
        // Parents before children: the department's statement before the employee's, both
        // before the membership's.
        let order = inserts.map { $0.sql.components(separatedBy: "INSERT INTO \"public\".\"")[1].prefix { $0 != "\"" } }
        #expect(order.firstIndex(of: "department")! < order.firstIndex(of: "employee")!)
        #expect(order.firstIndex(of: "employee")! < order.firstIndex(of: "project_member")!)
        #expect(order.firstIndex(of: "project")! < order.firstIndex(of: "project_member")!)
        // Every key is bound: the books' two uuids in one statement, the membership's from its references.
        let books = inserts.first { $0.sql.contains("\"book\"") }!
        #expect(books.parameters[0] == #"{"00000000-0000-4000-8000-000000000101","00000000-0000-4000-8000-000000000102"}"#
                || books.parameters[0]!.hasPrefix(#"{"00000000-0000-4000-8000-0000000001"#))
        let member = inserts.first { $0.sql.contains("\"project_member\"") }!
        #expect(member.sql.hasPrefix(#"INSERT INTO "public"."project_member" ("project_id", "employee_id", "role")"#))
        guard case .committed(let reply) = plan.received(answer(second)) else { Issue.record("not committed"); return }
        #expect(reply.statusLine == "+OK saved: 7 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(reply.lines.contains(#"#t tag "red""#))
        #expect(reply.lines.contains { $0.hasPrefix("#m project_member project=") && $0.contains(" employee=") })
        // The keys allocated stay with the unit.
        #expect(plan.assigned["b1"]?.entity == "book")
    }

    /// Rows typed like the row before are read by its shape (where each column's field is,
    /// which columns lack a key): a seeded unit mixing runs of one shape, the same names in
    /// another order, subsets, given keys, nils and references must bind every value where
    /// the row's own fields say, checked column by column against the rows themselves.
    /// Under `WritePlan.copiedAbove` rows the employees go as one array a column; above it, as
    /// COPY's rows (read back with `CopyRow`, FIND's parser).
    @Test(arguments: [400, WritePlan.copiedAbove + 200])
    func everyValueIsBoundWhereItsRowSaysWhateverTheShapes(rows: Int) throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["RECORDS_SAVEPLAN_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970 * 1000) % 100_000
        print("everyValueIsBoundWhereItsRowSaysWhateverTheShapes(\(rows)) seed \(seed) (RECORDS_SAVEPLAN_SEED replays it)")
        var random = Generator(seed: seed)
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        let shapes: [[String]] = [
            ["first_name", "gender", "age", "department_id"], ["age", "department_id", "gender", "first_name"],
            ["first_name", "gender"], ["gender", "first_name", "manager_id"], ["id", "first_name", "gender", "department_id"],
            ["first_name", "id", "gender", "age", "manager_id", "department_id"],
        ]
        var inserts = [insert("d1", "department", [("name", .text("A")), ("number", .text("1"))]),
                       insert("d2", "department", [("name", .text("B")), ("number", .text("2"))])]
        var employees: [String] = []
        while employees.count < rows {
            let shape = pick(shapes)
            for _ in 0..<Int(1 + random.next() % 12) {
                let ref = "e\(employees.count)"
                let fields: [(String, FieldValue)] = shape.map { column in
                    switch column {
                    case "id": (column, .text(String(900_000 + employees.count)))
                    case "first_name": (column, .text("F\(employees.count)\(pick(["", "\"", "\\", ",", " x", "\t", "\n", "\r\n", "\\N"]))"))
                    case "gender": (column, .text(pick(["1", "2"])))
                    case "age": (column, pick([.null, .text("30"), .text(String(employees.count % 90))]))
                    case "department_id": (column, .ref(pick(["d1", "d2"])))
                    default: (column, employees.isEmpty ? .null : .ref(pick(employees)))
                    }
                }
                inserts.append(insert(ref, "employee", fields))
                employees.append(ref)
            }
        }
        let changes = unit(inserts)
        var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
        var next = 1000
        plan.reserveKeys { needs in
            Dictionary(uniqueKeysWithValues: needs.map { need in (need.sequence, (0..<need.count).map { _ in next += 1; return String(next) }) })
        }
        let round = statements(plan.start())
        let statement = try #require(round.first { $0.sql.contains(#" "public"."employee" "#) }, "seed \(seed)")
        let columnList = statement.sql.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" }
        let columns = columnList.components(separatedBy: ", ").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
        let arrays: [[String?]]
        if let data = statement.copyData {
            #expect(rows > WritePlan.copiedAbove && statement.sql.hasPrefix("COPY ") && statement.sql.hasSuffix(" FROM STDIN"))
            var columnsRead = [[String?]](repeating: [], count: columns.count)
            for line in data.split(separator: 10, omittingEmptySubsequences: false).dropLast() {
                Array(line).withUnsafeBytes { bytes in
                    CopyRow.reading(bytes) { row in
                        #expect(row.count == columns.count, "seed \(seed)")
                        for index in columns.indices { columnsRead[index].append(row.string(index)) }
                    }
                }
            }
            arrays = columnsRead
        } else {
            #expect(rows <= WritePlan.copiedAbove && statement.sql.hasPrefix("INSERT INTO "))
            arrays = statement.parameters.map { SQL.parseArray($0 ?? "{}") }
        }
        #expect(arrays.allSatisfy { $0.count == employees.count }, "seed \(seed)")
        // Each row found by its key: given, or drawn (the plan keeps what it drew).
        func key(_ ref: String) -> String? {
            if case .text(let given)? = changes.insert(ref)?.value(of: "id") { return given }
            return plan.assigned[ref]?.values["id"]
        }
        var byKey: [String: String] = [:]
        for ref in employees + ["d1", "d2"] { byKey[try #require(key(ref), "seed \(seed): no key for #\(ref)")] = ref }
        let idColumn = try #require(columns.firstIndex(of: "id"))
        for row in 0..<employees.count {
            let ref = try #require(arrays[idColumn][row].flatMap { byKey[$0] }, "seed \(seed): row \(row)")
            let pending = try #require(changes.insert(ref))
            for (index, column) in columns.enumerated() {
                let expected: String? = switch pending.value(of: column) {
                case .text(let text)?: text
                case .ref(let target)?: key(target)
                case .null?, nil: column == "id" ? key(ref) : nil
                }
                #expect(arrays[index][row] == expected, "seed \(seed): #\(ref) \(column)")
            }
        }
    }

    /// Many rows go by COPY only into a table that takes it: PostgreSQL refuses COPY under
    /// row-level security, and COPY would pass a rule on INSERT by. Those keep one INSERT.
    @Test func manyRowsGoByCopyOnlyWhereTheTableTakesIt() throws {
        func employees(_ count: Int, _ adjust: (inout Entity) -> Void = { _ in }) -> [Statement] {
            var employee = model.entity(exactly: "employee")!
            adjust(&employee)
            let changed = Model(schema: "public", entities: model.entities.map { $0.name == "employee" ? employee : $0 }, unserved: [])
            let inserts = (0..<count).map { insert("e\($0)", "employee", [("id", .text(String($0 + 1))), ("first_name", .text("F\t\($0)")), ("gender", .text("1"))]) }
            var plan = SavePlan(model: changed, changes: unit(inserts), policy: .fail, assigned: [:])
            return statements(plan.start()).filter { $0.sql.contains(#" "public"."employee" "#) }
        }
        let copied = try #require(employees(WritePlan.copiedAbove + 1).first)
        #expect(copied.sql == #"COPY "public"."employee" ("id", "first_name", "gender") FROM STDIN"#)
        #expect(copied.parameters.isEmpty)
        let lines = String(decoding: try #require(copied.copyData), as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == WritePlan.copiedAbove + 2 && lines.last == "")
        #expect(lines[0] == "1\tF\\t0\t1")
        #expect(employees(WritePlan.copiedAbove).first?.copyData == nil)
        for refusing in [{ (entity: inout Entity) in entity.hasRowSecurity = true }, { $0.hasInsertRules = true }] {
            let statement = try #require(employees(WritePlan.copiedAbove + 1, refusing).first)
            #expect(statement.copyData == nil && statement.sql.hasPrefix(#"INSERT INTO "public"."employee" ("id", "first_name", "gender") OVERRIDING SYSTEM VALUE SELECT * FROM unnest("#))
        }
    }

    /// The tables whose catalog a bulk asks before it copies: those of more than
    /// `WritePlan.copiedAbove` inserts, whatever their order in the unit.
    @Test func copyCandidatesAreTheTablesOfMoreThanACopysWorth() {
        var inserts: [PendingInsert] = []
        for i in 0...WritePlan.copiedAbove {
            inserts.append(insert("p\(i)", "project", [("name", .text("P"))]))
            inserts.append(insert("e\(i)", "employee", [("first_name", .text("F")), ("gender", .text("1"))]))
            if i % 200 == 0 { inserts.append(insert("d\(i)", "department", [("name", .text("D")), ("number", .text("1"))])) }
        }
        inserts += (0..<2).map { insert("t\($0)", "tag", [("label", .text("t\($0)"))]) }
        var plan = SavePlan(model: model, changes: unit(inserts), policy: .fail, assigned: [:])
        #expect(plan.copyCandidates.map(\.entity) == ["employee", "project"])
        #expect(plan.copyCandidates.map(\.table) == [#""public"."employee""#, #""public"."project""#])
        // A refused one keeps its INSERT.
        plan.refuseCopy(["employee"])
        var next = 1000
        plan.reserveKeys { needs in
            Dictionary(uniqueKeysWithValues: needs.map { need in (need.sequence, (0..<need.count).map { _ in next += 1; return String(next) }) })
        }
        let first = statements(plan.start())
        #expect(first.contains { $0.sql.hasPrefix(#"COPY "public"."project""#) })
        #expect(!first.contains { $0.sql.hasPrefix(#"COPY "public"."employee""#) })
    }

    @Test func keysAssignedBeforeAreKeptAndNotAllocatedAgain() {
        let changes = unit([insert("p", "project", [("name", .text("X"))])])
        var plan = SavePlan(model: model, changes: changes, policy: .fail,
                            assigned: ["p": AssignedKey(entity: "project", values: ["id": "41"])])
        // Nothing to allocate: the insert goes in the first round.
        let first = statements(plan.start())
        #expect(!first.contains { $0.sql.contains("nextval") })
        #expect(first.first { $0.sql.hasPrefix("INSERT INTO \"public\"") }?.parameters == [#"{"41"}"#, #"{"X"}"#])
    }

    @Test func aKeyWithoutDefaultMustBeGiven() {
        var plan = SavePlan(model: model, changes: unit([insert("t", "tag", [("color", .text("red"))])]), policy: .fail, assigned: [:])
        guard case .failed(let failure) = plan.start() else { Issue.record("not refused"); return }
        #expect(failure.command?.details == ["#t tag: label is required (the key has no default: give it)"])
    }

    /// The checks made while the keys are worked out decide as `start` would alone, whether
    /// the take runs them or not (it failed before sending).
    @Test func checksMadeWhileKeysAreDrawnDecideAsStartAlone() {
        let invalid = unit([insert("p", "project", [("name", .text("X"))]), insert("t", "tag", [("color", .text("red"))])])
        let valid = unit([insert("p", "project", [("name", .text("X"))]), insert("q", "project", [("name", .text("Y"))])])
        func drawn(_ needs: [(sequence: String, count: Int)]) -> [String: [String]] {
            Dictionary(uniqueKeysWithValues: needs.map { need in (need.sequence, (0..<need.count).map { String(7 + $0) }) })
        }
        for changes in [invalid, valid] {
            var alone = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
            var asked = 0
            alone.reserveKeys(overlapping: { needs, _ in asked += 1; return drawn(needs) })
            var overlapped = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
            overlapped.reserveKeys(overlapping: { needs, meanwhile in meanwhile(); asked += 1; return drawn(needs) })
            var failed = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
            failed.reserveKeys(overlapping: { _, meanwhile in meanwhile(); asked += 1; return nil })
            #expect(asked == 3)
            let (first, second) = (alone.start(), overlapped.start())
            switch (first, second) {
            case (.failed(let a), .failed(let b)):
                #expect(changes.inserts.count == 2 && a.command?.details == ["#t tag: label is required (the key has no default: give it)"])
                #expect(a.command?.details == b.command?.details)
                guard case .failed(let c) = failed.start() else { Issue.record("the failed take's plan was not refused"); return }
                #expect(c.command?.details == a.command?.details)
            case (.run(let a), .run(let b)):
                #expect(a == b && a.contains { $0.sql.hasPrefix("INSERT INTO \"public\".\"project\"") })
                // Without values, the keys are allocated in the first round.
                #expect(statements(failed.start()).contains { $0.sql.contains("nextval") })
            default:
                Issue.record("alone \(first), overlapped \(second)")
            }
        }
    }

    /// The reply made while PostgreSQL runs the committing round is the reply made after it,
    /// with the counts PostgreSQL reported (a BEFORE trigger skipped a row) either way.
    @Test func aReplyMadeAheadIsTheReplyMadeAfter() {
        let changes = unit((0..<3).map { insert("p\($0)", "project", [("name", .text("P\($0)"))]) })
        func saved(ahead: Bool, skipSecond: Bool) -> Reply? {
            var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
            plan.reserveKeys { needs in Dictionary(uniqueKeysWithValues: needs.map { need in (need.sequence, (0..<need.count).map { String(41 + $0) }) }) }
            let round = statements(plan.start())
            if ahead { plan.prepareReply() }
            guard case .success(var results) = answer(round) else { return nil }
            if skipSecond, let index = round.firstIndex(where: { $0.sql.hasPrefix("INSERT") }) {
                results[index] = StatementResult(affected: 2)  // a BEFORE trigger skipped a row
            }
            guard case .committed(let reply) = plan.received(.success(results)) else { return nil }
            return reply
        }
        #expect(saved(ahead: false, skipSecond: false)?.lines == ["#p0 project 41", "#p1 project 42", "#p2 project 43"])
        #expect(saved(ahead: true, skipSecond: false) == saved(ahead: false, skipSecond: false))
        #expect(saved(ahead: true, skipSecond: true) == saved(ahead: false, skipSecond: true))
        #expect(saved(ahead: true, skipSecond: true)?.status == .ok("saved: 2 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified"))
    }

    @Test func recordsThatPointAtEachOtherAreInsertedThenPointed() {
        // A self-reference both ways, through a key that may be nil.
        let changes = unit([
            insert("a", "employee", [("first_name", .text("A")), ("gender", .text("1"))]),
            insert("b", "employee", [("first_name", .text("B")), ("gender", .text("1")), ("manager_id", .ref("a"))]),
        ])
        var withCycle = changes
        withCycle.updateInsert("a") { $0.set("manager_id", .ref("b")) }
        var plan = SavePlan(model: model, changes: withCycle, policy: .fail, assigned: [:])
        let first = statements(plan.start())
        let second = statements(plan.received(answer(first)))
        let inserts = second.filter { $0.sql.hasPrefix("INSERT INTO \"public\"") }
        let fixups = second.filter { $0.sql.hasPrefix("UPDATE") }
        #expect(inserts.count == 1)  // one statement: a row may point at another of the same statement
        #expect(fixups.isEmpty)
        // Rows that set other columns still share the entity's statement (a column one leaves
        // out is its default, or nil).
        var split = changes
        split.add(insert("c", "employee", [("first_name", .text("C")), ("gender", .text("1")), ("age", .text("3"))]))
        split.updateInsert("a") { $0.set("manager_id", .ref("c")) }
        var plan2 = SavePlan(model: model, changes: split, policy: .fail, assigned: [:])
        let first2 = statements(plan2.start())
        let second2 = statements(plan2.received(answer(first2)))
        #expect(second2.filter { $0.sql.hasPrefix("INSERT INTO \"public\"") }.count == 1)
        #expect(second2.filter { $0.sql.hasPrefix("UPDATE") }.isEmpty)
        // Across tables, a record pointed at by an earlier statement is pointed afterwards.
        var across = unit([insert("d", "department", [("name", .text("D")), ("number", .text("1"))])])
        across.add(insert("e", "employee", [("first_name", .text("E")), ("gender", .text("1")), ("department_id", .ref("d")), ("manager_id", .ref("f"))]))
        across.add(insert("f", "employee", [("first_name", .text("F")), ("gender", .text("1"))]))
        var plan3 = SavePlan(model: model, changes: across, policy: .fail, assigned: [:])
        let first3 = statements(plan3.start())
        let second3 = statements(plan3.received(answer(first3)))
        #expect(second3.filter { $0.sql.hasPrefix("INSERT INTO \"public\"") }.count == 2)
    }

    @Test func aDeferrableKeyIsDeferredAndARequiredImmediateCycleIsRefused() {
        // pb.partner is required and DEFERRABLE; pa.partner may be nil.
        var changes = unit([insert("a", "pa", []), insert("b", "pb", [("partner_id", .ref("a"))])])
        changes.updateInsert("a") { $0.set("partner_id", .ref("b")) }
        var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
        let first = statements(plan.start())
        let deferred = first.contains { $0.sql.hasPrefix("SET CONSTRAINTS") } 
        let second = statements(plan.received(answer(first)))
        let nilThenSet = second.contains { $0.sql.hasPrefix("UPDATE") }
        // Either way round is right: pb first with its check deferred, or pa first, pointed later.
        #expect(deferred || nilThenSet)
    }

    @Test func lostDuringCommitIsUncertainWithTheMark() {
        var settings = SavePlan.Settings()
        settings.mark = 42
        var plan = SavePlan(model: model, changes: unit([insert("p", "project", [("name", .text("X"))])]), policy: .fail, assigned: [:],
                            settings: settings)
        let first = statements(plan.start())
        let second = statements(plan.received(answer(first)))
        // The commit mark goes in the transaction, just before COMMIT.
        #expect(second.suffix(2) == [Statement("INSERT INTO records.save_marks (xid, nonce) VALUES (pg_current_xact_id(), $1)", ["42"]),
                                     Statement("COMMIT")])
        guard case .uncertain(let mark, let reply) = plan.received(.failure(index: 1, error: PostgresError(kind: .connection, message: "gone"))) else {
            Issue.record("not uncertain"); return
        }
        #expect(mark == 42)
        #expect(reply.statusLine == "+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
    }

    /// A COMMIT whose answer was lost, and which committed, answers what the save wrote: the
    /// records it updated (each locked and found) are counted, not left at 0.
    @Test func aLostCommitsReplyCountsTheRecordsUpdated() {
        var changes = ChangeSet()
        var update = PendingUpdate(key: RecordKey(entity: "project", id: "5"), version: "100", baseline: ["id": "5", "name": "Old"])
        update.set("name", .text("New"))
        changes.setUpdate(update)
        changes.add(insert("p", "project", [("name", .text("X"))]))
        var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
        let first = statements(plan.start())
        guard case .success(var results) = answer(first), let lock = first.firstIndex(where: { $0.sql.hasSuffix(" FOR UPDATE") }) else {
            Issue.record("no lock in \(first)"); return
        }
        results[lock] = StatementResult(rows: [["100", "5", "5", "Old"]])
        let second = statements(plan.received(.success(results)))
        #expect(second.last == Statement("COMMIT"))
        guard case .uncertain(_, let reply) = plan.received(.failure(index: 0, error: PostgresError(kind: .connection, message: "gone"))) else {
            Issue.record("not uncertain"); return
        }
        #expect(reply.statusLine == "+OK saved: 1 inserted, 1 updated, 0 deleted, 0 cascaded, 0 nullified")
    }

    @Test func insertsWithEveryKeyKnownAreOneRoundTrip() {
        // Keys from the reserve (assigned before the first round), a text key the client gave,
        // a join row keyed by its references: nothing to ask first.
        var settings = SavePlan.Settings()
        settings.mark = 7
        settings.statementTimeout = 1000
        let changes = unit([
            insert("p", "project", [("name", .text("Apollo"))]),
            insert("e", "employee", [("first_name", .text("A")), ("gender", .text("1"))]),
            insert("m", "project_member", [("project_id", .ref("p")), ("employee_id", .ref("e")), ("role", .text("lead"))]),
        ])
        var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:], settings: settings)
        var asked: [(sequence: String, count: Int)] = []
        plan.reserveKeys { needs in
            asked = needs
            return Dictionary(uniqueKeysWithValues: needs.enumerated().map { ($1.sequence, ["\(50 + $0)"]) })
        }
        #expect(asked.map(\.count) == [1, 1])
        #expect(plan.keyRequests.isEmpty)
        let only = statements(plan.start())
        #expect(only.first == Statement("BEGIN"))
        #expect(only.suffix(2) == [Statement("INSERT INTO records.save_marks (xid, nonce) VALUES (pg_current_xact_id(), $1)", ["7"]),
                                   Statement("COMMIT")])
        #expect(only.filter { $0.sql.hasPrefix("INSERT INTO \"public\"") }.count == 3)
        guard case .committed(let reply) = plan.received(answer(only)) else { Issue.record("not committed"); return }
        #expect(reply.statusLine == "+OK saved: 3 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(reply.lines == ["#p project 50", "#e employee 51", "#m project_member project=50 employee=51"])
    }

    @Test func reservedKeysMergedIntoWhatWasFoundPlanTheSameWrites() {
        // Without a join row, the keys `reserveKeys` found are reused with the reserved ones
        // merged in: the writes must be those of a plan that works them all out again.
        let changes = unit([
            insert("d", "department", [("name", .text("Sales")), ("number", .text("1"))]),
            insert("e1", "employee", [("first_name", .text("A")), ("gender", .text("1")), ("department_id", .ref("d"))]),
            insert("e2", "employee", [("first_name", .text("B")), ("gender", .text("2")), ("department_id", .ref("d"))]),
        ])
        var reused = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
        var asked: [(sequence: String, count: Int)] = []
        func values(_ needs: [(sequence: String, count: Int)]) -> [String: [String]] {
            Dictionary(uniqueKeysWithValues: needs.enumerated().map { index, need in
                (need.sequence, (0..<need.count).map { "\(100 * (index + 1) + $0)" })
            })
        }
        reused.reserveKeys { needs in asked = needs; return values(needs) }
        #expect(asked.map(\.count).sorted() == [1, 2])
        var again = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
        let requests = again.keyRequests
        again.assign(KeyAllocation.drawn(requests, values: values(KeyAllocation.sequenceNeeds(requests) ?? [])))
        let first = statements(reused.start())
        #expect(first == statements(again.start()))
        #expect(first.filter { $0.sql.hasPrefix("INSERT INTO \"public\"") }.count == 2)
        guard case .committed(let reply) = reused.received(answer(first)) else { Issue.record("not committed"); return }
        #expect(reply.lines.count == 3)
    }

    @Test func aFailedWriteInTheOneRoundNamesItsRecord() {
        var plan = SavePlan(model: model, changes: unit([insert("t", "tag", [("label", .text("red"))])]), policy: .fail, assigned: [:])
        let only = statements(plan.start())
        let index = only.firstIndex { $0.sql.hasPrefix("INSERT INTO \"public\"") }!
        var error = PostgresError(kind: .server, message: "duplicate key")
        error.sqlState = .uniqueViolation
        guard case .failed(let failure) = plan.received(.failure(index: index, error: error)) else { Issue.record("not failed"); return }
        #expect(failure.records == ["#t"])
    }

    /// A table with a BEFORE INSERT trigger: its inserts read their keys back and COMMIT waits
    /// for them; a key that came back changed fails the SAVE before COMMIT.
    @Test func keysATriggerMayRewriteAreCheckedBeforeCommit() {
        var tag = SampleModel.tag
        tag.triggersMayRewriteInserts = true
        let model = Model(schema: "public", entities: self.model.entities.map { $0.name == "tag" ? tag : $0 }, unserved: [])
        let changes = unit([insert("t", "tag", [("label", .text("red"))])])
        for (returned, committed) in [(["t", "red"], true), (["f", "RED"], false)] {
            var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
            let round = statements(plan.start())
            #expect(!round.contains(Statement("COMMIT")))
            let insert = round.firstIndex { $0.sql.hasPrefix("INSERT INTO \"public\".\"tag\"") }!
            #expect(round[insert].sql.hasSuffix(#" VALUES ($1::text) RETURNING ("label") IS NOT DISTINCT FROM ($1::text), "label"::text"#))
            var results = round.map { _ in StatementResult() }
            results[insert] = StatementResult(rows: [returned], affected: 1)
            switch plan.received(.success(results)) {
            case .run(let last) where committed:
                #expect(last.last == Statement("COMMIT"))
            case .failed(let failure) where !committed:
                #expect(failure.command?.code == .denied)
                #expect(failure.command?.message.hasPrefix(#"#t: a BEFORE INSERT trigger on tag wrote key "RED", not the key SAVE gave it"#) == true)
            case let other:
                Issue.record("unexpected \(other)")
            }
        }
    }

    @Test func lostBeforeCommitIsAFailure() {
        var plan = SavePlan(model: model, changes: unit([insert("p", "project", [("name", .text("X"))])]), policy: .fail, assigned: [:])
        _ = plan.start()
        guard case .failed(let failure) = plan.received(.failure(index: 0, error: PostgresError(kind: .connection, message: "gone"))) else {
            Issue.record("not failed"); return
        }
        #expect(failure.postgres?.kind == .connection)
    }

    @Test func deadlocksStartAgainAndAreBoundedToThreeAttempts() {
        var plan = SavePlan(model: model, changes: unit([insert("p", "project", [("name", .text("X"))])]), policy: .fail, assigned: [:])
        _ = plan.start()
        let deadlock = PostgresError(kind: .server, sqlState: .deadlockDetected, message: "deadlock")
        // Each retry waits first, longer each time, so the transaction it lost to can go on.
        guard case .pause(let first, let again) = plan.received(.failure(index: 2, error: deadlock)) else { Issue.record("no pause"); return }
        #expect(Array(again.prefix(2)) == [Statement("ROLLBACK"), Statement("BEGIN")])
        #expect(first == 10...30)
        guard case .pause(let second, _) = plan.received(.failure(index: 2, error: deadlock)) else { Issue.record("no pause"); return }
        #expect(second == 20...60)
        guard case .failed(let failure) = plan.received(.failure(index: 2, error: deadlock)) else { Issue.record("not failed"); return }
        #expect(failure.postgres?.sqlState == .deadlockDetected)
        #expect(plan.attempts == 3)
    }

    @Test func aMultiRowFailureIsReplayedARowAStatementToNameTheRecord() {
        let changes = unit((1...3).map { insert("g\($0)", "project", [("name", .text("n\($0)"))]) })
        var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:])
        let first = statements(plan.start())
        _ = plan.received(answer(first))
        let unique = PostgresError(kind: .server, sqlState: .uniqueViolation, message: "duplicate key")
        let replay = statements(plan.received(.failure(index: 0, error: unique)))
        #expect(Array(replay.prefix(2)) == [Statement("ROLLBACK"), Statement("BEGIN")])
        #expect(replay.filter { $0.sql.hasPrefix("INSERT INTO \"public\"") }.count == 3)
        // The second row fails alone: it is the one named.
        guard case .failed(let failure) = plan.received(.failure(index: 3, error: unique)) else { Issue.record("not failed"); return }
        #expect(failure.records == ["#g2"])
    }

    @Test func aSaveKeyThatCommittedBeforeAnswersWhatItDidForTheSameChangesOnly() {
        var settings = SavePlan.Settings()
        settings.saveKey = SavePlan.SaveKey(owner: "alice", key: "k1")
        let changes = unit([insert("p", "project", [("name", .text("X"))])])
        func replay(fingerprint: String) -> SavePlan.Action {
            var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:], settings: settings)
            let first = statements(plan.start())
            let lookup = first.firstIndex { $0.sql.contains("records.save_keys") }!
            var results = first.map { _ in StatementResult() }
            results[lookup] = StatementResult(rows: [["saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified", "{\"#p project 9\"}", fingerprint, "2026-12-04T10:00:00Z"]])
            return plan.received(.success(results))
        }
        guard case .committed(let reply) = replay(fingerprint: changes.fingerprint) else { Issue.record("not answered"); return }
        #expect(reply.lines == ["#p project 9"])
        #expect(reply.statusLine == "+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified")
        // The key saved other changes: that save is done, what it did is told, this unit is kept.
        guard case .failed(let failure) = replay(fingerprint: "other") else { Issue.record("not refused"); return }
        #expect(failure.command?.code == .alreadySaved)
        #expect(failure.command?.message == "SAVE KEY k1 was used by a save that committed at 2026-12-04T10:00:00Z (saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified); it is done: nothing was saved now, the pending changes are kept (ROLLBACK them, or SAVE new work under a new key)")
        #expect(failure.command?.details == ["#p project 9"])
        #expect(unit([insert("p", "project", [("name", .text("Y"))])]).fingerprint != changes.fingerprint)
    }

    @Test func deletesGoChildrenFirst() {
        // Every record the rules take is deleted explicitly, children first: a RESTRICT between
        // deleted records never fires, whatever order PostgreSQL would cascade in.
        #expect(SavePlan.deleteOrder(model: SampleModel.model, names: ["project", "employee", "project_member"]) == ["project_member", "project", "employee"])
        #expect(Set(SavePlan.deleteOrder(model: SampleModel.model, names: ["pa", "pb"])) == ["pa", "pb"])  // a cycle: as given
        #expect(SavePlan.deleteOrder(model: SampleModel.model, names: ["department", "employee"]) == ["employee", "department"])
    }


    /// The deletes' counts are what each statement answers it took (roots, cascaded records),
    /// children's entity first; a cascaded record is taken only if it still points at a parent
    /// deleted here.
    @Test func deletesCountWhatEachStatementTook() {
        let model = SampleModel.model
        let writes = SavePlan.deleteWrites(model: model, roots: [RecordKey(entity: "department", values: ["1"])],
                                           cascades: [RecordKey(entity: "employee", values: ["7"]), RecordKey(entity: "employee", values: ["8"])])
        #expect(writes.map(\.entity) == ["employee", "department"])
        #expect(writes[0].statement.sql.contains(#"(c."department_id") IN (SELECT p."id" FROM"#))
        #expect(!writes[1].statement.sql.contains("IN (SELECT p."))
        // One employee moved to another department meanwhile; the department was deleted.
        #expect(SavePlan.deleteCounts([StatementResult(rows: [["0", "1"]]), StatementResult(rows: [["1", "0"]])]) == (1, 1))
        #expect(SavePlan.deleteCounts([]) == (0, 0))
    }
}
