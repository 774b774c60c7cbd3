import Postgres

/// A read's view of the unit of work: the pending changes applied inside a transaction that
/// the read then rolls back, so PostgreSQL evaluates predicates, cascades and defaults exactly
/// as SAVE would (Core Data's includesPendingChanges). A state machine like `SavePlan`.
///
/// A change that cannot be applied yet is left out of the view, with its reason, instead of
/// failing the read: one with a problem the model sees (a required value missing), and one
/// PostgreSQL refuses (found by applying the changes one by one under savepoints, which costs
/// round trips only when the whole unit does not apply). What points at a left-out insert is
/// left out too. Pending inserts get their keys here if they have none yet: the unit keeps them.
struct ViewPlan: Sendable {
    struct View: Sendable {
        /// Whether a transaction was begun (the caller rolls it back after its read).
        var began = false
        /// Keys allocated by this view: the unit keeps them.
        var allocated: [String: AssignedKey] = [:]
        /// Every applied pending insert's key, by `#ref`.
        var keys: [String: AssignedKey] = [:]
        /// The changes left out, in the unit's order, with the reason.
        var excluded: [(change: ChangeID, reason: String)] = []
        /// The id (as `xmin` prints it) of the view's transaction, when it wrote anything: rows
        /// with this `xmin` show this unit's changes, not a stored version.
        var transactionID: String?
        /// False when the view's rows cannot be told from stored ones by `xmin` (it had to
        /// apply changes under savepoints): a read then records no versions.
        var tracksVersions = true

        /// `; 1 pending change not applied: #c1 contact: name is required`, for a read's status.
        var note: String {
            guard let first = excluded.first else { return "" }
            let count = excluded.count
            return "; \(count) pending change\(count == 1 ? "" : "s") not applied: " + first.reason
                + (count > 1 ? " (and \(count - 1) more: CHANGES lists them)" : "")
        }
    }

    enum Action: Sendable {
        case run([Statement])
        case ready(View)
    }

    /// One change applied alone, under a savepoint, when the whole unit did not apply.
    private struct Unit: Sendable {
        var statement: Statement
        /// A delete: its deferred checks are made at once, so a delete the rules deny through a
        /// DEFERRABLE INITIALLY DEFERRED key is left out like one denied at once.
        var checksNow = false
        var changes: [ChangeID]
    }

    private enum State: Sendable {
        case idle
        case begun([KeyAllocation.Request])
        case applying
        /// Changes one at a time under savepoints, to find those that fail; `prefix` statements
        /// come before the first unit in the round.
        case oneByOne(remaining: [Unit], prefix: Int, replayAfter: Bool)
        /// What applies, again in one transaction without savepoints, so every row the view
        /// writes has the transaction's own id as `xmin` (a savepoint's rows have their own).
        case replaying
        case done
    }

    let model: Model
    let changes: ChangeSet
    private(set) var view = View()
    private var assigned: [String: AssignedKey]
    private var skip: [ChangeID: String] = [:]
    private var state = State.idle

    /// `statement_timeout`s in milliseconds: applying a large unit may take as long as SAVE
    /// may; the read that follows gets the read's own again.
    private let timeouts: (apply: Int, read: Int)?

    init(model: Model, changes: ChangeSet, assigned: [String: AssignedKey], timeouts: (apply: Int, read: Int)? = nil) {
        self.model = model
        self.changes = changes
        self.assigned = assigned
        self.timeouts = timeouts
    }

    /// The statements that end a round that may finish the view: the read's timeout back, and
    /// the transaction's id (last: `finish` reads it).
    private var tail: [Statement] {
        // Deferred checks made now: a change a DEFERRABLE INITIALLY DEFERRED key would refuse
        // at COMMIT is found before the read, like any other.
        [Self.checkNow] + (timeouts.map { [Statement("SELECT set_config('statement_timeout', $1, true)", [String($0.read)])] } ?? [])
            + [Self.transactionID]
    }

    mutating func start() -> Action {
        guard !changes.isEmpty else {
            state = .done
            return .ready(view)
        }
        let known = KeyAllocation.known(changes, model: model, assigned: assigned)
        var problems = Validation.problems(changes, model: model, keys: known)
        problems += InsertLayout(model: model, rows: changes.inserts, rowsPerStatement: WritePlan.defaultRowsPerStatement).problems
        skip = Validation.excluded(changes, problems: problems)
        let requests = KeyAllocation.requests(changes, model: model, known: known, skip: Set(skip.keys))
        let statements = Array(restart().dropFirst())  // no ROLLBACK: nothing was begun
        view.began = true
        state = .begun(requests)
        return .run(statements + requests.map(\.statement))
    }

    mutating func received(_ round: RoundResult) -> Action {
        switch (state, round) {
        case (.begun(let requests), .success(let results)):
            let allocated = KeyAllocation.allocated(requests, results: Array(results.suffix(requests.count)))
            view.allocated = allocated
            for (ref, key) in allocated { assigned[ref] = key }
            view.keys = KeyAllocation.known(changes, model: model, assigned: assigned)
            let units = self.units(rowsPerStatement: WritePlan.defaultRowsPerStatement)
            state = .applying
            return .run(units.map(\.statement) + tail)
        case (.applying, .success(let results)), (.replaying, .success(let results)):
            return finish(results.last)
        case (.applying, .failure(_, let error)) where error.kind != .connection:
            // Not all of it applies: again, a change at a time, leaving out what fails.
            return oneByOne(replayAfter: true)
        case (.replaying, .failure(_, let error)) where error.kind != .connection:
            // What applied one by one did not apply together: keep the savepoints' view, whose
            // rows tell nothing of versions.
            return oneByOne(replayAfter: false)
        case (.oneByOne(_, _, let replay), .success(let results)):
            guard replay else {
                view.tracksVersions = false
                return finish(nil)
            }
            _ = results
            state = .replaying
            return .run(restart() + units(rowsPerStatement: WritePlan.defaultRowsPerStatement).map(\.statement) + tail)
        case (.oneByOne(let remaining, let prefix, let replay), .failure(let index, let error)) where error.kind != .connection:
            guard let failed = Self.unit(at: index, prefix: prefix, in: remaining) else { return giveUp(error) }
            exclude(remaining[failed], because: error)
            let rest = Array(remaining[(failed + 1)...])
            state = .oneByOne(remaining: rest, prefix: 1, replayAfter: replay)
            return .run([Statement("ROLLBACK TO SAVEPOINT records_change")] + Self.guarded(rest) + tail)
        case (_, .failure(_, let error)):
            return giveUp(error)
        default:
            return giveUp(PostgresError(kind: .unexpected, message: "the view received a result it did not ask for"))
        }
    }

    private mutating func oneByOne(replayAfter: Bool) -> Action {
        let units = self.units(rowsPerStatement: 1)
        let prefix = restart()
        state = .oneByOne(remaining: units, prefix: prefix.count, replayAfter: replayAfter)
        return .run(prefix + Self.guarded(units) + tail)
    }

    /// A new transaction for the view, with the deferred checks its inserts need.
    private func restart() -> [Statement] {
        var statements: [Statement] = [.rollback, .begin]
        if let timeouts { statements.append(Statement("SELECT set_config('statement_timeout', $1, true)", [String(timeouts.apply)])) }
        let layout = InsertLayout(model: model, rows: changes.inserts.filter { skip[.insert($0.ref)] == nil },
                                  rowsPerStatement: WritePlan.defaultRowsPerStatement)
        if !layout.deferredConstraints.isEmpty {
            statements.append(Statement("SET CONSTRAINTS " + layout.deferredConstraints.map { SQL.identifier(model.schema) + "." + SQL.identifier($0) }
                .joined(separator: ", ") + " DEFERRED"))
        }
        return statements
    }

    /// The connection failed, or something unexpected: the read fails with this error.
    private(set) var failure: PostgresError?

    private mutating func giveUp(_ error: PostgresError) -> Action {
        failure = error
        state = .done
        return .ready(view)
    }

    private mutating func finish(_ last: StatementResult?) -> Action {
        view.transactionID = view.tracksVersions ? (last?.rows.first?[0] ?? nil) : nil
        let order = changes.inserts.map { ChangeID.insert($0.ref) } + changes.updateOrder.map { .update($0) }
            + changes.bulk.indices.map { .bulk($0) } + changes.deleteOrder.map { .delete($0) }
        view.excluded = order.compactMap { id in skip[id].map { (id, $0) } }
        for (change, _) in view.excluded { if case .insert(let ref) = change { view.keys[ref] = nil } }
        state = .done
        return .ready(view)
    }

    private mutating func exclude(_ unit: Unit, because error: PostgresError) {
        let reason: String
        let record = unit.changes.first.map(describe) ?? ""
        if let missing = unit.changes.lazy.compactMap(refs).joined().first(where: { skip[.insert($0)] != nil }) {
            reason = "\(record): points at #\(missing), which cannot be applied yet"
        } else {
            let failed = unit.changes.first.map { ErrorMapping.Failed($0, in: changes, record: record) } ?? ErrorMapping.Failed(record: record)
            reason = ErrorMapping.map(error, failed: failed, model: model, connection: nil).message
        }
        for change in unit.changes where skip[change] == nil { skip[change] = reason }
    }

    /// The writes and deletes of every change not skipped, in SAVE's order. A change whose
    /// values cannot be resolved yet is skipped, with what points at it.
    private mutating func units(rowsPerStatement: Int) -> [Unit] {
        var plan = WritePlan(model: model, changes: changes, keys: view.keys, skip: Set(skip.keys), rowsPerStatement: rowsPerStatement)
        for _ in 0..<8 where !plan.problems.isEmpty {
            let known = skip.map { Problem(change: $0.key, message: $0.value) }
            skip = Validation.excluded(changes, problems: known + plan.problems)
            plan = WritePlan(model: model, changes: changes, keys: view.keys, skip: Set(skip.keys), rowsPerStatement: rowsPerStatement)
        }
        let skipped = Set(skip.keys)
        var units = (plan.inserts + plan.fixups + plan.updates + plan.bulkUpdates).map { Unit(statement: $0.statement, changes: $0.changes) }
        // Deletes by key, children before parents; a record a statement when going one by one.
        let keys = changes.deleteOrder.filter { !skipped.contains(.delete($0)) }
        let groups = rowsPerStatement == 1 ? keys.map { [$0] } : [keys]
        for group in groups {
            units += SavePlan.deleteWrites(model: model, keys: group).map { Unit(statement: $0.statement, checksNow: true, changes: $0.changes) }
        }
        for (index, change) in changes.bulk.enumerated() where change.isDelete && !skipped.contains(.bulk(index)) {
            guard let entity = model.entity(named: change.entity) else { continue }
            var sql = SQLText()
            guard let matching = try? QueryBuilder.keys(of: entity, matching: change.predicate, model: model, into: &sql) else { continue }
            sql.text = "DELETE FROM \(model.table(entity)) WHERE (\(entity.keyList(alias: nil))) IN (\(matching))"
            units.append(Unit(statement: sql.statement, checksNow: true, changes: [.bulk(index)]))
        }
        return units
    }

    private static let transactionID = Statement("SELECT xid(pg_current_xact_id_if_assigned())::text")

    /// Each unit between `SAVEPOINT` and `RELEASE`, so one that fails can be undone alone.
    private static func guarded(_ units: [Unit]) -> [Statement] {
        units.flatMap { unit in
            // Deletes come last: their deferred checks made now leave every later change checked at once too.
            [Statement("SAVEPOINT records_change"), unit.statement] + (unit.checksNow ? [Self.checkNow] : [])
                + [Statement("RELEASE SAVEPOINT records_change")]
        }
    }

    /// Deferred checks made now: a violation fails this statement.
    private static let checkNow = Statement("SET CONSTRAINTS ALL IMMEDIATE")

    /// The unit statement `index` of a guarded round belongs to, the round's first `prefix`
    /// statements aside.
    private static func unit(at index: Int, prefix: Int, in units: [Unit]) -> Int? {
        var position = prefix
        for (number, unit) in units.enumerated() {
            position += unit.checksNow ? 4 : 3
            if index < position { return index >= prefix ? number : nil }
        }
        return nil
    }

    private func describe(_ change: ChangeID) -> String {
        switch change {
        case .insert(let ref): return "#\(ref) \(changes.insert(ref)?.entity ?? "")"
        case .update(let key), .delete(let key):
            return model.entity(named: key.entity).map { "\($0.name) \($0.show(key))" } ?? key.entity
        case .bulk(let index): return changes.bulk[index].text
        }
    }

    private func refs(_ change: ChangeID) -> [String] {
        switch change {
        case .insert(let ref): return changes.insert(ref)?.refs ?? []
        case .update(let key): return changes.updates[key]?.fields.values.compactMap { if case .ref(let r) = $0 { r } else { nil } } ?? []
        case .bulk(let index): return changes.bulk[index].refs
        case .delete: return []
        }
    }
}
