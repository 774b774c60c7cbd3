import Foundation
import Postgres
import Testing
@testable import Records

/// Group commit's planner, without a database: which saves share a transaction, what the
/// transaction sends, and what each save is told of its outcome.
@Suite struct SaveGroupTests {
    let model = SampleModel.model

    /// A save of `fields` into `entity`, its key given ahead (as `KeyReserve` does), so that
    /// it commits in its first round trip; `mark` its commit mark.
    private func save(_ entity: String, _ fields: [(String, FieldValue)], key: Int, mark: Int64, saveKey: String? = nil) -> SavePlan {
        var changes = ChangeSet()
        changes.add(PendingInsert(ref: "p", entity: entity, fields: fields.map { (column: $0.0, value: $0.1) }))
        var settings = SavePlan.Settings()
        settings.mark = mark
        settings.statementTimeout = 1000
        settings.lockTimeout = 500
        settings.saveKey = saveKey.map { SavePlan.SaveKey(owner: "", key: $0) }
        var plan = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:], settings: settings)
        plan.reserveKeys { needs in Dictionary(uniqueKeysWithValues: needs.map { ($0.sequence, ["\(key)"]) }) }
        return plan
    }

    private func save(_ name: String, key: Int, mark: Int64, saveKey: String? = nil) -> SavePlan {
        save("project", [("name", .text(name))], key: key, mark: mark, saveKey: saveKey)
    }

    /// What a round answers: every INSERT its rows, the rest nothing.
    private func answer(_ statements: [Statement]) -> RoundResult {
        .success(statements.map { statement in
            statement.sql.hasPrefix("INSERT INTO \"public\"") ? StatementResult(affected: SQL.parseArray(statement.parameters[0] ?? "{}").count) : StatementResult()
        })
    }

    /// The first round of `plan` started alone.
    private func statements(_ plan: SavePlan) -> [Statement] {
        var plan = plan
        guard case .run(let statements) = plan.start() else { Issue.record("no statements"); return [] }
        return statements
    }

    private func mark(_ mark: Int64) -> Statement {
        Statement("INSERT INTO records.save_marks (xid, nonce) VALUES (pg_current_xact_id(), $1)", [String(mark)])
    }

    private let timeouts = Statement("SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true)", ["1000", "500"])

    @Test func savesOfTheSameInsertsGoAsOneStatementAndOneMarkInsert() {
        let group = SaveGroup([save("A", key: 10, mark: 1), save("B", key: 11, mark: 2), save("C", key: 12, mark: 3)])
        #expect(group.members.map(\.index) == [0, 1, 2])
        #expect(group.alone.isEmpty)
        let alone = statements(save("A", key: 10, mark: 1))
        #expect(group.statements == [Statement("BEGIN"), timeouts,
                                     Statement(alone[2].sql, [#"{"10","11","12"}"#, #"{"A","B","C"}"#]),
                                     SaveGroup.marks(["1", "2", "3"]), Statement("COMMIT")])
        #expect(group.members.map(\.statements) == [2..<4, 2..<4, 2..<4])
    }

    @Test func savesOfOtherShapesKeepTheirOwnStatementsInTheTransaction() {
        // Two projects join; an employee (another table) and a project whose sequence moved
        // past a key its client gave keep their own statements and marks.
        let employee = save("employee", [("first_name", .text("E")), ("gender", .text("1"))], key: 20, mark: 2)
        let given = save("project", [("id", .text("900")), ("name", .text("G"))], key: 0, mark: 4)
        let group = SaveGroup([save("A", key: 10, mark: 1), employee, save("B", key: 11, mark: 3), given])
        #expect(group.members.map(\.index) == [0, 1, 2, 3])
        let sent = group.statements
        #expect(sent.first == Statement("BEGIN") && sent[1] == timeouts && sent.last == Statement("COMMIT"))
        #expect(sent.filter { $0 == Statement("BEGIN") || $0 == Statement("COMMIT") }.count == 2)
        #expect(sent[2].parameters == [#"{"10","11"}"#, #"{"A","B"}"#] && sent[3] == SaveGroup.marks(["1", "3"]))
        for (member, own) in [(group.members[1], statements(employee)), (group.members[3], statements(given))] {
            #expect(Array(sent[member.statements]) == Array(own[2..<(own.count - 1)]))
            #expect(sent[member.statements].last == mark(Int64(member.index + 1)))
        }
    }

    @Test func joinedValuesArriveAsEachSaveSentThem() {
        // Quotes, backslashes, commas, braces, the word NULL, empty text and nil, side by side.
        let odd = [#"a "quoted" name"#, #"back\slash"#, "comma, and {braces}", "NULL", "", "ünïcode ✓"]
        var plans = odd.enumerated().map { save("employee", [("first_name", .text($1)), ("gender", .text("1")), ("age", .text("\($0)"))], key: 30 + $0, mark: Int64($0 + 1)) }
        plans.append(save("employee", [("first_name", .text("nil age")), ("gender", .text("2")), ("age", .null)], key: 99, mark: 99))
        let group = SaveGroup(plans)
        let joined = group.statements[2]
        let separate = plans.map { statements($0)[2] }
        #expect(joined.sql == separate[0].sql)
        for column in joined.parameters.indices {
            #expect(SQL.parseArray(joined.parameters[column]!) == separate.flatMap { SQL.parseArray($0.parameters[column]!) })
        }
        #expect(SQL.parseArray(joined.parameters[1]!).prefix(odd.count).map { $0 } == odd.map { Optional($0) })
        #expect(SQL.parseArray(joined.parameters[2]!).last == .some(nil))
    }

    @Test func eachMemberIsAnsweredItsOwnReplyWhenTheTransactionCommits() {
        let employee = save("employee", [("first_name", .text("E")), ("gender", .text("1"))], key: 20, mark: 3)
        var group = SaveGroup([save("A", key: 10, mark: 1), save("B", key: 11, mark: 2), employee])
        guard case .each(let actions) = group.received(answer(group.statements)) else { Issue.record("not answered"); return }
        let replies = actions.map { action -> [String] in
            guard case .committed(let reply) = action else { return ["\(action)"] }
            return [reply.statusLine] + reply.lines
        }
        #expect(replies == [["+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified", "#p project 10"],
                            ["+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified", "#p project 11"],
                            ["+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified", "#p employee 20"]])
    }

    @Test func aFailingStatementRunsEveryMemberAloneFromItsUnstartedPlan() {
        var group = SaveGroup([save("A", key: 10, mark: 1), save("B", key: 11, mark: 2)])
        let failure = PostgresError(kind: .server, sqlState: .uniqueViolation, message: "duplicate key")
        guard case .runAlone = group.received(.failure(index: group.members[1].statements.lowerBound, error: failure)) else {
            Issue.record("not run alone"); return
        }
        // Run alone, a member starts as if it had never been grouped: one attempt, its own BEGIN.
        var alone = group.members[1].unstarted
        guard case .run(let statements) = alone.start() else { Issue.record("no statements"); return }
        #expect(statements.first == Statement("BEGIN") && statements.suffix(2) == [mark(2), Statement("COMMIT")])
        #expect(alone.attempts == 1)
    }

    @Test func aLostConnectionLeavesEachMembersOutcomeToItsMark() {
        let group = SaveGroup([save("A", key: 10, mark: 1), save("B", key: 11, mark: 2), save("C", key: 12, mark: 3)])
        let gone = PostgresError(kind: .connection, message: "server closed the connection unexpectedly")
        // Lost at COMMIT, in a member's writes, or before any: each is uncertain, with its own mark.
        for failed in [group.statements.count - 1, group.members[1].statements.lowerBound, 0] {
            var copy = group
            guard case .each(let actions) = copy.received(.failure(index: failed, error: gone)) else { Issue.record("not answered"); return }
            let marks = actions.compactMap { action -> Int64? in
                guard case .uncertain(let mark, let reply) = action, reply.statusLine.hasPrefix("+OK saved: 1 inserted") else { return nil }
                return mark
            }
            #expect(marks == [1, 2, 3], "lost at \(failed)")
        }
    }

    @Test func savesThatNeedMoreRoundsGoAloneAndALoneMemberIsNoGroup() {
        // A SAVE KEY asks first; a project without a reserved key allocates it first.
        var unreserved = ChangeSet()
        unreserved.add(PendingInsert(ref: "q", entity: "project", fields: [(column: "name", value: .text("Q"))]))
        let plans = [save("A", key: 10, mark: 1), save("K", key: 11, mark: 2, saveKey: "k1"),
                     SavePlan(model: model, changes: unreserved, policy: .fail, assigned: [:]), save("B", key: 12, mark: 4)]
        let group = SaveGroup(plans)
        #expect(group.members.map(\.index) == [0, 3])
        #expect(group.alone.map(\.index) == [1, 2])
        let single = SaveGroup([save("A", key: 10, mark: 1), save("K", key: 11, mark: 2, saveKey: "k1")])
        #expect(single.members.isEmpty && single.statements.isEmpty)
        #expect(single.alone.map(\.index) == [0, 1])
        // The lone one keeps the round it was started with: its own BEGIN and COMMIT.
        guard case .run(let own) = single.alone[0].action else { Issue.record("no statements"); return }
        #expect(own.first == Statement("BEGIN") && own.last == Statement("COMMIT") && single.alone[0].plan.attempts == 1)
    }

    @Test func aSaveOfManyRowsKeepsItsOwnStatements() {
        var changes = ChangeSet()
        let rows = SaveGroup.joinedRowsLimit + 1
        for i in 0..<rows { changes.add(PendingInsert(ref: "b\(i)", entity: "project", fields: [(column: "name", value: .text("B\(i)"))])) }
        var settings = SavePlan.Settings()
        settings.mark = 9
        settings.statementTimeout = 1000
        settings.lockTimeout = 500
        var bulk = SavePlan(model: model, changes: changes, policy: .fail, assigned: [:], settings: settings)
        bulk.reserveKeys { needs in Dictionary(uniqueKeysWithValues: needs.map { need in (need.sequence, (0..<need.count).map { "\(5000 + $0)" }) }) }
        let group = SaveGroup([save("A", key: 10, mark: 1), bulk, save("B", key: 11, mark: 3)])
        #expect(group.members.count == 3)
        #expect(group.statements[2].parameters == [#"{"10","11"}"#, #"{"A","B"}"#] && group.statements[3] == SaveGroup.marks(["1", "3"]))
        let own = statements(bulk)
        #expect(Array(group.statements[group.members[1].statements]) == Array(own[2..<(own.count - 1)]))
        // Its rows go by COPY (`WritePlan.copiedAbove`), a line each.
        let copied = group.statements[group.members[1].statements.lowerBound]
        #expect(copied.sql.hasPrefix(#"COPY "public"."project""#) && copied.copyData?.filter { $0 == 10 }.count == rows)
    }

    @Test func noMoreThanTheLimitShareATransaction() {
        let plans = (0..<(SaveGroup.maxMembers + 3)).map { save("P\($0)", key: 100 + $0, mark: Int64($0 + 1)) }
        let group = SaveGroup(plans)
        #expect(group.members.count == SaveGroup.maxMembers)
        #expect(group.alone.map(\.index) == Array(SaveGroup.maxMembers..<plans.count))
    }
}

/// Every command's `Session.Step` is as large as its largest case, the pool's work: a SAVE's
/// plan carried in it inline made each INSERT line pay to copy it (20,000 lines: 407M
/// instructions instead of 386M). What the work carries beyond a few words goes in a box.
@Suite struct StepSizeTests {
    @Test func aStepStaysAFewWords() {
        #expect(MemoryLayout<DatabaseWork>.size <= 176, "DatabaseWork is \(MemoryLayout<DatabaseWork>.size) bytes")
        #expect(MemoryLayout<Session.Step>.size <= 184, "Step is \(MemoryLayout<Session.Step>.size) bytes")
    }
}
