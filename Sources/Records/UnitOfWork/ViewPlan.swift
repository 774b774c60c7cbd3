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
        case begun(allocation: [KeyAllocation.Request], fills: [KeyAllocation.Request])
        /// All the changes together, without savepoints: the writes (and the keys deletes by
        /// predicate match), the delete rules' preview, then every record that goes, children
        /// first (a delete whose cascade frees another record of a RESTRICT then applies as at
        /// SAVE). `replay`: this is the replay after going one by one.
        case fast(FastPhase, replay: Bool)
        /// Changes one at a time under savepoints, to find those that fail; `prefix` statements
        /// come before the first unit in the round.
        case oneByOne(remaining: [Unit], prefix: Int, replayAfter: Bool)
        case done
    }

    private enum FastPhase: Sendable {
        /// The round holds the writes, then (from `selects`) the keys each DELETE ... WHERE matches.
        case writing(selects: Int, count: Int)
        case previewing(DeletePreviewPlan)
        case finishing
    }

    let model: Model
    let changes: ChangeSet
    private(set) var view = View()
    private var assigned: [String: AssignedKey]
    /// Defaults evaluated for the columns some inserts leave out (not kept by the unit).
    private var fills: [String: AssignedKey] = [:]
    /// `view.keys` by place, for the writes.
    private var keys: PendingKeys
    /// Changes that failed when applied alone, and how many may before the rest is left out.
    private var failedAlone = 0
    static let failuresAlone = 16
    private var skip: [ChangeID: String] = [:]
    private var state = State.idle
    /// A change met a row held past the lock timeout: the rest of the view waits for none
    /// (`heldLockMilliseconds`), so a read waits the lock timeout once, not once a held row.
    private var lockWaited = false
    static let heldLockMilliseconds = 1

    /// `statement_timeout`s in milliseconds: applying a large unit may take as long as SAVE
    /// may; the read that follows gets the read's own again. `lock`: how long applying waits
    /// for a row another transaction holds, as SAVE would (without it a GET or an edit whose
    /// view deletes a locked row waited for that transaction, up to the apply's minute).
    private let timeouts: (apply: Int, read: Int, lock: Int)?

    init(model: Model, changes: ChangeSet, assigned: [String: AssignedKey], timeouts: (apply: Int, read: Int, lock: Int)? = nil) {
        self.model = model
        self.changes = changes
        self.assigned = assigned
        self.timeouts = timeouts
        keys = PendingKeys(changes)
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
        problems += InsertLayout(model: model, changes: changes, rowsPerStatement: WritePlan.defaultRowsPerStatement).problems
        skip = Validation.excluded(changes, problems: problems)
        let requests = KeyAllocation.requests(changes, model: model, known: known, skip: Set(skip.keys))
        let fillRequests = KeyAllocation.fills(changes, model: model, known: known, skip: Set(skip.keys))
        let statements = Array(restart().dropFirst())  // no ROLLBACK: nothing was begun
        view.began = true
        state = .begun(allocation: requests, fills: fillRequests)
        return .run(statements + requests.map(\.statement) + fillRequests.map(\.statement))
    }

    mutating func received(_ round: RoundResult) -> Action {
        switch (state, round) {
        case (.begun(let requests, let fillRequests), .success(let results)):
            let answers = Array(results.suffix(requests.count + fillRequests.count))
            let allocated = KeyAllocation.allocated(requests, results: Array(answers.prefix(requests.count)))
            fills = KeyAllocation.allocated(fillRequests, results: Array(answers.suffix(fillRequests.count)))
            view.allocated = allocated
            for (ref, key) in allocated { assigned[ref] = key }
            keys = KeyAllocation.known(changes, model: model, assigned: assigned)
            view.keys = keys.byRef
            return fast(replay: false)
        case (.fast(.writing(let selects, let count), let replay), .success(let results)):
            // The records deleted by key and those each DELETE ... WHERE matches now.
            var roots = changes.deleteOrder.filter { skip[.delete($0)] == nil }
            for (index, result) in zip(bulkDeletes.map(\.index), results[selects..<(selects + count)]) {
                guard let entity = model.entity(exactly: changes.bulk[index].entity) else { continue }
                roots += result.rows.map { entity.recordKey($0) }
            }
            return preview(DeletePreviewPlan(model: model, roots: roots), replay: replay)
        case (.fast(.previewing(var plan), let replay), .success(let results)):
            plan.received(results)
            return preview(plan, replay: replay)
        case (.fast(.finishing, _), .success(let results)):
            return finish(results.last)
        case (.fast(_, let replay), .failure(_, let error)) where error.kind != .connection:
            // Not all of it applies: again, a change at a time, leaving out what fails. If what
            // applied one by one does not apply together, the savepoints' view is kept; its rows
            // tell nothing of versions.
            if error.sqlState == .lockNotAvailable { lockWaited = true }
            return oneByOne(replayAfter: !replay)
        case (.oneByOne(_, _, let replay), .success):
            guard replay else {
                view.tracksVersions = false
                return finish(nil)
            }
            return fast(replay: true)
        case (.oneByOne(let remaining, let prefix, let replay), .failure(let index, let error)) where error.kind != .connection:
            guard let failed = Self.unit(at: index, prefix: prefix, in: remaining) else { return giveUp(error) }
            exclude(remaining[failed], because: error)
            if error.sqlState == .lockNotAvailable { lockWaited = true }
            failedAlone += 1
            var rest = Array(remaining[(failed + 1)...])
            // A failure ends a round (PostgreSQL skips the rest of the pipeline), so each one
            // sends the rest again: a unit where every change fails (a chain of keys taken
            // from one record) held a worker for minutes. Past a few, the rest is left out.
            if failedAlone >= Self.failuresAlone {
                let reason = "not applied: more than \(Self.failuresAlone) of this unit's changes cannot be applied now (SAVE names each)"
                for unit in rest { for change in unit.changes where skip[change] == nil { skip[change] = reason } }
                rest = []
            }
            // (Rolling back to the savepoint undoes a lock timeout set after it: set again.)
            let again = [Statement("ROLLBACK TO SAVEPOINT records_change")] + (lockWaited ? [heldLockTimeout] : [])
            state = .oneByOne(remaining: rest, prefix: again.count, replayAfter: replay)
            return .run(again + Self.guarded(rest) + tail)
        case (_, .failure(_, let error)):
            return giveUp(error)
        default:
            return giveUp(PostgresError(kind: .unexpected, message: "the view received a result it did not ask for"))
        }
    }

    /// The first round of the fast path: the writes and, with deletes, the keys deletes by
    /// predicate match; without deletes, the round that ends the view.
    private mutating func fast(replay: Bool) -> Action {
        let prefix = replay ? restart() : []
        let writes = writeUnits(rowsPerStatement: WritePlan.defaultRowsPerStatement).map(\.statement)
        let deletes = bulkDeletes
        guard changes.deleteOrder.contains(where: { skip[.delete($0)] == nil }) || !deletes.isEmpty else {
            state = .fast(.finishing, replay: replay)
            return .run(prefix + writes + tail)
        }
        state = .fast(.writing(selects: prefix.count + writes.count, count: deletes.count), replay: replay)
        return .run(prefix + writes + deletes.map(\.select))
    }

    /// The preview's next level, or the deletes of every record it found, then the end.
    private mutating func preview(_ plan: DeletePreviewPlan, replay: Bool) -> Action {
        var plan = plan
        if let queries = plan.next() {
            state = .fast(.previewing(plan), replay: replay)
            return .run(queries)
        }
        state = .fast(.finishing, replay: replay)
        let doomed = plan.rootsAndCascades
        return .run(SavePlan.deleteWrites(model: model, roots: doomed.roots, cascades: doomed.cascades).map(\.statement) + tail)
    }

    private mutating func oneByOne(replayAfter: Bool) -> Action {
        let units = self.units()
        let prefix = restart()
        state = .oneByOne(remaining: units, prefix: prefix.count, replayAfter: replayAfter)
        return .run(prefix + Self.guarded(units) + tail)
    }

    private var heldLockTimeout: Statement {
        Statement("SELECT set_config('lock_timeout', $1, true)", [String(Self.heldLockMilliseconds)])
    }

    /// A new transaction for the view, with the deferred checks its inserts need.
    private func restart() -> [Statement] {
        var statements: [Statement] = [.rollback, .begin]
        if let timeouts {
            statements.append(Statement("SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true)",
                                        [String(timeouts.apply), String(lockWaited ? Self.heldLockMilliseconds : timeouts.lock)]))
        }
        let layout = InsertLayout(model: model, changes: changes, skip: Set(skip.keys), rowsPerStatement: WritePlan.defaultRowsPerStatement)
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

    /// The writes of every change not skipped, in SAVE's order. A change whose values cannot be
    /// resolved yet is skipped, with what points at it.
    private mutating func writeUnits(rowsPerStatement: Int) -> [Unit] {
        func plan() -> WritePlan {
            WritePlan(model: model, changes: changes, keys: keys.filled(fills), skip: Set(skip.keys),
                      rowsPerStatement: rowsPerStatement)
        }
        var writes = plan()
        for _ in 0..<8 where !writes.problems.isEmpty {
            let known = skip.map { Problem(change: $0.key, message: $0.value) }
            skip = Validation.excluded(changes, problems: known + writes.problems)
            writes = plan()
        }
        return (writes.inserts + writes.fixups + writes.updates + writes.bulkUpdates).map { Unit(statement: $0.statement, changes: $0.changes) }
    }

    /// The deletes by predicate not skipped: the query for the keys each matches, and the
    /// DELETE itself for going one by one.
    private var bulkDeletes: [(index: Int, select: Statement, delete: Statement)] {
        changes.bulk.enumerated().compactMap { index, change in
            guard change.isDelete, skip[.bulk(index)] == nil, let entity = model.entity(exactly: change.entity) else { return nil }
            var select = SQLText()
            guard let matching = try? QueryBuilder.keys(of: entity, matching: change.predicate, model: model, into: &select) else { return nil }
            let delete = Statement("DELETE FROM \(model.table(entity)) WHERE (\(entity.keyList(alias: nil))) IN (\(matching))", select.parameters)
            select.text = matching
            return (index, select.statement, delete)
        }
    }

    /// Every change a unit of its own, deletes a record at a time, for going one by one.
    private mutating func units() -> [Unit] {
        var units = writeUnits(rowsPerStatement: 1)
        let keys = changes.deleteOrder.filter { skip[.delete($0)] == nil }
        for name in SavePlan.deleteOrder(model: model, names: Array(Set(keys.map(\.entity))).sorted()) {
            for key in keys where key.entity == name {
                units += SavePlan.deleteWrites(model: model, roots: [key], cascades: []).map { Unit(statement: $0.statement, checksNow: true, changes: $0.changes) }
            }
        }
        units += bulkDeletes.map { Unit(statement: $0.delete, checksNow: true, changes: [.bulk($0.index)]) }
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
            return model.entity(exactly: key.entity).map { "\($0.name) \($0.show(key))" } ?? key.entity
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
