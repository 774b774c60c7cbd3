import Postgres

/// SAVE as a state machine: each step returns the statements to send next, as one round trip,
/// and is fed their results; it never touches a connection, so every decision is tested without
/// PostgreSQL. The rounds:
///
/// 1. BEGIN, the timeouts, a SAVE KEY's earlier outcome, deferred constraints, key allocation
///    for pending inserts, and `SELECT ... FOR UPDATE` of the records the unit updates or
///    deletes.
/// 2. The versions judged under the merge policy; then inserts, nil-then-set references,
///    updates, changes by predicate, sequence moves, and the keys a DELETE ... WHERE matches;
///    with nothing to delete, the commit mark and COMMIT too. When round 1 has nothing to
///    ask (every key known, from the client or `KeyReserve`, nothing to lock, no SAVE KEY),
///    it rides in this round: a unit of inserts is one round trip.
/// 3. With deletes: the delete rules' preview, a level a round; a denied delete fails here.
/// 4. Deletes and COMMIT.
///
/// Serialization failures and deadlocks start again from 1 (three attempts in all); a
/// multi-row statement that fails on a constraint is replayed a row a statement, in a
/// transaction rolled back, to name the record.
struct SavePlan: Sendable {
    struct Settings: Sendable {
        /// `statement_timeout` and `lock_timeout` of the save's transaction, in milliseconds (0: none).
        var statementTimeout = 0
        var lockTimeout = 0
        /// `SAVE ... KEY k`: the outcome is kept, so a retry answers what the first attempt did.
        var saveKey: SaveKey?
        var rowsPerStatement = WritePlan.defaultRowsPerStatement
        /// This save's commit mark (`records.save_marks`), random: with the transaction id, it
        /// tells whether a COMMIT that got no answer committed.
        var mark: Int64 = 0
        init() {}
    }

    struct SaveKey: Sendable, Equatable {
        var owner: String
        var key: String
    }

    struct Outcome: Sendable, Equatable {
        /// Each pending insert's ref, entity and key as shown.
        var assigned: [Assigned] = [] { didSet { assignedLines = nil } }
        /// `assigned` as the reply's lines, made ahead (`prepareLines`) while PostgreSQL runs
        /// the round that commits: 10,000 lines are half a millisecond the client need not wait.
        private var assignedLines: [String]?
        var inserted = 0
        var updated = 0
        var deleted = 0
        var cascaded = 0
        var nullified = 0
        var notes: [String] = []

        struct Assigned: Sendable, Equatable {
            var ref: String
            var entity: String
            var key: String
        }

        var summary: String {
            "saved: \(inserted) inserted, \(updated) updated, \(deleted) deleted, \(cascaded) cascaded, \(nullified) nullified"
        }

        var reply: Reply { .ok(summary, lines: (assignedLines ?? Self.lines(assigned)) + notes) }

        mutating func prepareLines() {
            if assignedLines == nil { assignedLines = Self.lines(assigned) }
        }

        private static func lines(_ assigned: [Assigned]) -> [String] {
            assigned.map { .concatenating("#", $0.ref, " ", $0.entity, " ", $0.key) }
        }

        static func == (a: Outcome, b: Outcome) -> Bool {
            a.assigned == b.assigned && a.notes == b.notes
                && (a.inserted, a.updated, a.deleted, a.cascaded, a.nullified) == (b.inserted, b.updated, b.deleted, b.cascaded, b.nullified)
        }
    }

    enum Action: Sendable {
        /// Send these as one round trip; feed the result to `received`.
        case run([Statement])
        /// Wait some milliseconds from this range, then run the statements as `run`: a retry
        /// after a deadlock or serialization failure, so the transaction it lost to can go on
        /// (retried at once, it can take the same locks first and collide again).
        case pause(milliseconds: ClosedRange<Int>, then: [Statement])
        /// COMMIT returned: the unit is saved.
        case committed(Reply)
        /// Nothing was written (the transaction is rolled back, or was never begun).
        case failed(Failure)
        /// The connection was lost while COMMIT was in flight: whether the transaction
        /// committed is for its commit mark to say (`HandOff.fence`).
        case uncertain(mark: Int64, ifCommitted: Reply)
    }

    struct Failure: Error, Sendable {
        /// A failure decided here (validation, conflict, denied).
        var command: CommandError?
        /// A failure PostgreSQL reported, and the records the failing statement wrote.
        var postgres: PostgresError?
        var records: [String] = []
        var entity = ""
        /// The changes the failing statement wrote.
        var changes: [ChangeID] = []
    }

    let model: Model
    let changes: ChangeSet
    let policy: MergePolicy
    /// Set when planned; only the mark changes after, for a save run again (`WorkContext`).
    var settings: Settings
    /// Keys assigned before this SAVE and the ones it allocates: the unit keeps them whatever
    /// the outcome, so a retry writes the same ids.
    private(set) var assigned: [String: AssignedKey]
    private(set) var attempts = 0
    /// What the committed SAVE wrote (nil for a replayed answer, which wrote nothing).
    private(set) var committedOutcome: Outcome?

    /// Where round 1's answers are.
    private struct FirstRound: Sendable {
        var savedReply: Int?
        var allocation: [KeyAllocation.Request] = []
        var allocationStart = 0
        var fills: [KeyAllocation.Request] = []
        var fillStart = 0
        var locks: [ConflictCheck.Lock] = []
        var lockStart = 0
    }

    /// What the writes round sent, carried to the end.
    private struct Written: Sendable {
        var writes: [WritePlan.Write]
        /// Statements in the round before the first write.
        var offset = 0
        var outcome: Outcome
        var insertResults: Range<Int>
        var updateResults: Range<Int>
        var bulkDeleteSelects: Range<Int>
        var deleteRoots: [RecordKey]
        var commitsHere: Bool
    }

    private enum State: Sendable {
        case idle
        case begun(FirstRound)
        case written(Written)
        case previewing(Written, DeletePreviewPlan)
        /// `writes` are the round's first statements (the deletes), whose rows are counted.
        case committing(outcome: Outcome, writes: [WritePlan.Write])
        case diagnosing(original: PostgresError, failed: WritePlan.Write, writes: [WritePlan.Write], offset: Int)
        /// The writes before a failed one, replayed (and rolled back) to read back the keys a
        /// trigger may have changed: that, not the failure it caused, is the reason to give.
        case rechecking(original: PostgresError, failed: WritePlan.Write, writes: [WritePlan.Write], offset: Int)
        case finished
    }

    private var state = State.idle
    /// Defaults evaluated for the columns some inserts leave out (not kept by the unit).
    private var fills: [String: AssignedKey] = [:]
    /// The inserts' statements, laid out once at the start (they do not depend on keys).
    private var layout: InsertLayout?

    static let maxAttempts = 3

    /// How long a retry waits after `failed` attempts lost to a deadlock or serialization
    /// failure: longer each time, and drawn from a range so two losers do not start again together.
    static func retryPause(after failed: Int) -> ClosedRange<Int> { 10 * failed...30 * failed }

    init(model: Model, changes: ChangeSet, policy: MergePolicy, assigned: [String: AssignedKey], settings: Settings = Settings()) {
        self.model = model
        self.changes = changes
        self.policy = policy
        self.settings = settings
        self.assigned = assigned
    }

    /// Entities whose rows may not go by COPY though the model says their table takes it:
    /// it gained row-level security or a rule on INSERT since the model was read.
    private(set) var copyRefused: Set<String> = []

    /// The tables, by entity, that this save would COPY into (`WritePlan.copiedAbove`): their
    /// catalog is asked whether they still take it, since COPY would pass by a rule the model
    /// does not know of yet.
    var copyCandidates: [(entity: String, table: String)] {
        var counts: [String: Int] = [:]
        // Counted by runs: a bulk's inserts come one entity after another, and hashing each
        // row's entity name was half a millisecond of a 10,000-row SAVE.
        var run: (entity: String, count: Int)?
        for insert in changes.inserts {
            if run?.entity == insert.entity { run!.count += 1; continue }
            if let run { counts[run.entity, default: 0] += run.count }
            run = (insert.entity, 1)
        }
        if let run { counts[run.entity, default: 0] += run.count }
        return counts.keys.sorted().compactMap { name in
            guard counts[name]! > WritePlan.copiedAbove, let entity = model.entity(exactly: name), entity.takesCopy else { return nil }
            return (name, model.table(entity))
        }
    }

    /// The entities of `copyCandidates` whose tables no longer take COPY.
    mutating func refuseCopy(_ entities: Set<String>) {
        copyRefused = entities
    }

    /// The key values the pending inserts still miss, as round 1 would allocate them; none
    /// when round 1 has something else to ask (a SAVE KEY, locks, defaults to evaluate), so
    /// that keys given ahead would save no round trip.
    var keyRequests: [KeyAllocation.Request] {
        keyRequests(known: KeyAllocation.known(changes, model: model, assigned: assigned))
    }

    private func keyRequests(known: PendingKeys) -> [KeyAllocation.Request] {
        guard settings.saveKey == nil, changes.updates.isEmpty, changes.deletes.isEmpty else { return [] }
        guard KeyAllocation.fills(changes, model: model, known: known).isEmpty,
              ConflictCheck(model: model, changes: changes).locks().isEmpty else { return [] }
        return KeyAllocation.requests(changes, model: model, known: known)
    }

    /// Keys given before the first round: `take` returns the values of the sequences the
    /// inserts miss (nil: none, round 1 allocates them). The keys found on the way are kept
    /// for `start`, with the taken ones merged in, unless a row's key comes from another's.
    mutating func reserveKeys(_ take: ([(sequence: String, count: Int)]) -> [String: [String]]?) {
        reserveKeys(overlapping: { needs, meanwhile in meanwhile(); return take(needs) })
    }

    /// The same, where `take` calls `meanwhile` while PostgreSQL works out the values: the
    /// checks of `start` that need no key from a sequence are made then (a unit of 10,000
    /// inserts waits some 5 ms for its values, and its checks take half that).
    mutating func reserveKeys(overlapping take: ([(sequence: String, count: Int)], _ meanwhile: () -> Void) -> [String: [String]]?) {
        var throughRefs = false
        let known = KeyAllocation.known(changes, model: model, assigned: assigned, throughRefs: &throughRefs)
        let requests = keyRequests(known: known)
        guard !requests.isEmpty, let needs = KeyAllocation.sequenceNeeds(requests) else { return }
        let model = self.model, changes = self.changes, rows = settings.rowsPerStatement
        var checked: Prechecked?
        let values = take(needs) {
            let layout = InsertLayout(model: model, changes: changes, rowsPerStatement: rows)
            checked = Prechecked(layout: layout, valid: Validation.problems(changes, model: model, keys: known).isEmpty)
        }
        prechecked = checked
        guard let values else { return }
        let drawn = KeyAllocation.drawnByPlace(requests, values: values)
        assign(Dictionary(drawn.lazy.map { ($0.ref, $0.key) }, uniquingKeysWith: { _, latest in latest }))
        guard !throughRefs else { return }
        var merged = known
        merged.add(drawn)
        // Every missing key drawn: round 1 has nothing left to ask (no fills, no locks either,
        // or no key would have been reserved), and `start` need not look again.
        var complete = true
        var next = drawn.makeIterator()
        for request in requests {
            for _ in request.refs where next.next()?.key.values.count != request.columns.count { complete = false }
        }
        knownAfterReserve = (merged, complete)
    }

    /// What `reserveKeys` checked while its values were worked out: the layout of the inserts
    /// (it depends on the changes alone), and whether they were valid with the keys known
    /// before any was drawn. Keys only add up, and a key given only takes a problem away, so
    /// a unit valid then is valid with more.
    private struct Prechecked: Sendable {
        var layout: InsertLayout
        var valid: Bool
    }
    private var prechecked: Prechecked?

    /// The keys `reserveKeys` found, and whether they were all round 1 would have asked
    /// (valid until `assigned` changes again).
    private var knownAfterReserve: (keys: PendingKeys, complete: Bool)?

    /// The sequences the writes move past keys the client gave (`KeyReserve` forgets what it
    /// holds of them: the next key follows the given one).
    private(set) var movedSequences: [String] = []

    /// After `start`: where the writes begin when this save commits in its first round trip
    /// (what comes before them opens the transaction); nil when it needs more rounds.
    /// `SaveGroup` runs such saves of several sessions in one transaction.
    var writesInFirstRound: Int? {
        guard attempts == 1, case .written(let written) = state, written.commitsHere else { return nil }
        return written.offset
    }

    /// With `writesInFirstRound`: the rows of each of its writes when they are all joinable
    /// inserts (`WritePlan.Write.joinable`) followed by the commit mark alone; nil otherwise.
    var joinableInsertRows: [Int]? {
        guard case .written(let written) = state, written.commitsHere, movedSequences.isEmpty,
              written.insertResults.count == written.writes.count, written.writes.allSatisfy({ $0.joinable }) else { return nil }
        return written.writes.map { $0.changes.count }
    }

    /// Keys allocated before the first round (`KeyReserve`): the unit keeps them like any other.
    mutating func assign(_ keys: [String: AssignedKey]) {
        knownAfterReserve = nil
        Self.add(keys, to: &assigned)
    }

    /// `keys` into `held`, ref by ref, a new value over an old one of the same column (one
    /// hashing a ref; nothing a ref when `held` is empty, as before a fresh unit's first SAVE).
    private static func add(_ keys: [String: AssignedKey], to held: inout [String: AssignedKey]) {
        guard held.count >= keys.count else {
            // The smaller into the larger: a unit's keys drawn at once into the few known.
            var all = keys
            all.merge(held) { new, old in old.updated(with: new) }
            return held = all
        }
        held.merge(keys) { old, new in old.updated(with: new) }
    }

    // MARK: - Rounds

    /// Work for while PostgreSQL runs a round (`RoundResult.run`'s `meanwhile`): the reply of
    /// a round that commits, made ahead.
    mutating func prepareReply() {
        guard case .written(var written) = state, written.commitsHere else { return }
        written.outcome.prepareLines()
        state = .written(written)
    }

    /// The first round, or the validation failure that keeps the unit from being written.
    mutating func start() -> Action {
        attempts += 1
        let reserved = knownAfterReserve
        knownAfterReserve = nil
        let known = reserved?.keys ?? KeyAllocation.known(changes, model: model, assigned: assigned)
        let layout = prechecked?.layout ?? InsertLayout(model: model, changes: changes, rowsPerStatement: settings.rowsPerStatement)
        self.layout = layout
        let problems = (prechecked?.valid == true ? [] : Validation.problems(changes, model: model, keys: known)) + layout.problems
        if !problems.isEmpty {
            state = .finished
            return .failed(Failure(command: CommandError(.validation, "\(problems.count) problem(s); nothing was saved", details: problems.map(\.message))))
        }
        var round = FirstRound()
        var statements: [Statement] = attempts > 1 ? [.rollback, .begin] : [.begin]
        if settings.statementTimeout > 0 || settings.lockTimeout > 0 {
            statements.append(Statement("SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true)",
                                        ["\(settings.statementTimeout)", "\(settings.lockTimeout)"]))
        }
        if let saveKey = settings.saveKey {
            round.savedReply = statements.count
            statements.append(Statement("""
                SELECT message, lines::text, fingerprint, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                FROM records.save_keys WHERE owner = $1 AND key = $2
                """, [saveKey.owner, saveKey.key]))
        }
        if let deferral = deferral(layout) {
            statements.append(deferral)
        }
        // A complete reserve left nothing to allocate, fill or lock: not looked for again.
        let complete = reserved?.complete == true
        round.allocation = complete ? [] : KeyAllocation.requests(changes, model: model, known: known)
        round.allocationStart = statements.count
        statements += round.allocation.map(\.statement)
        round.fills = complete ? [] : KeyAllocation.fills(changes, model: model, known: known)
        round.fillStart = statements.count
        statements += round.fills.map(\.statement)
        round.locks = complete ? [] : ConflictCheck(model: model, changes: changes).locks()
        round.lockStart = statements.count
        statements += round.locks.map(\.statement)
        if round.savedReply == nil && round.allocation.isEmpty && round.fills.isEmpty && round.locks.isEmpty {
            // Nothing to ask first: the writes follow in the same round trip.
            do throws(CommandError) {
                let resolution = try ConflictCheck(model: model, changes: changes).resolve(policy: policy, locks: [], results: [])
                return try write(resolution: resolution, after: statements, known: known)
            } catch {
                state = .finished
                return .failed(Failure(command: error))
            }
        }
        state = .begun(round)
        return .run(statements)
    }

    mutating func received(_ round: RoundResult) -> Action {
        switch round {
        case .failure(let index, let error):
            return failed(at: index, error)
        case .success(let results):
            do {
                return try advance(results)
            } catch {
                state = .finished
                return .failed(Failure(command: error))
            }
        }
    }

    private mutating func advance(_ results: [StatementResult]) throws(CommandError) -> Action {
        switch state {
        case .begun(let round):
            if let index = round.savedReply, let row = results[index].rows.first {
                state = .finished
                guard row[2] == changes.fingerprint else {
                    // The key's save committed, with other changes (the client re-applied its
                    // change after a lost reply, or the unit was resumed as saved): that save is
                    // done. Not CONFLICT, which means "read again and retry": a retry under a
                    // new key would write it twice. Nothing is written, nothing dropped.
                    let stored = Self.storedReply(message: row[0], lines: row[1])
                    let at = (row.count > 3 ? row[3] : nil) ?? ""
                    throw CommandError(.alreadySaved, "SAVE KEY \(settings.saveKey!.key) was used by a save that committed at \(at) (\(stored.statusMessage)); it is done: nothing was saved now, the pending changes are kept (ROLLBACK them, or SAVE new work under a new key)",
                                       details: stored.lines,
                                       jsonDetails: stored.lines.map(Self.savedLineJSON)
                                           + [JSON.Value.object([("saved", .string(stored.statusMessage)), ("at", .string(at))]).text])
                }
                // This key's SAVE committed before: answer what it answered, write nothing.
                return .committed(Self.storedReply(message: row[0], lines: row[1]))
            }
            let allocated = KeyAllocation.allocated(round.allocation, results: Array(results[round.allocationStart..<(round.allocationStart + round.allocation.count)]))
            for (ref, key) in allocated { assigned[ref] = key }
            fills = KeyAllocation.allocated(round.fills, results: Array(results[round.fillStart..<(round.fillStart + round.fills.count)]))
            let resolution = try ConflictCheck(model: model, changes: changes)
                .resolve(policy: policy, locks: round.locks, results: Array(results[round.lockStart..<(round.lockStart + round.locks.count)]))
            return try write(resolution: resolution)
        case .written(var written):
            let skipped = try checkKeysReadBack(written.writes.prefix(written.insertResults.count), results[written.insertResults])
            if !skipped.isEmpty { written.outcome.assigned.removeAll { skipped.contains($0.ref) } }
            // The real counts: a BEFORE trigger may skip a row.
            written.outcome.inserted = results[written.insertResults].reduce(0) { $0 + $1.affected }
            written.outcome.updated = results[written.updateResults].reduce(0) { $0 + $1.affected }
            if written.commitsHere {
                state = .finished
                committedOutcome = written.outcome
                return .committed(written.outcome.reply)
            }
            let deleting = changes.bulk.indices.filter { changes.bulk[$0].isDelete }
            for (index, result) in zip(deleting, results[written.bulkDeleteSelects]) {
                guard let entity = model.entity(exactly: changes.bulk[index].entity) else { continue }
                written.deleteRoots += result.rows.map { entity.recordKey($0) }
            }
            written.deleteRoots = Self.unique(written.deleteRoots)
            if written.deleteRoots.isEmpty { return commit(written.outcome, before: [], writes: []) }
            var preview = DeletePreviewPlan(model: model, roots: written.deleteRoots)
            guard let queries = preview.next() else { return delete(written, preview: preview) }
            state = .previewing(written, preview)
            return .run(queries)
        case .previewing(let written, var preview):
            preview.received(results)
            if let queries = preview.next() {
                state = .previewing(written, preview)
                return .run(queries)
            }
            return delete(written, preview: preview)
        case .committing(var outcome, let writes):
            state = .finished
            if !writes.isEmpty {
                // What the statements took: fewer than the preview when another transaction
                // deleted or moved a cascaded record meanwhile, or a trigger kept a row.
                let counted = Self.deleteCounts(Array(results.prefix(writes.count)))
                outcome.deleted = counted.deleted
                outcome.cascaded = counted.cascaded
            }
            committedOutcome = outcome
            return .committed(outcome.reply)
        case .diagnosing(let original, let failed, _, _):
            // The replay wrote every row without failing: name what the original statement wrote.
            state = .finished
            return .failed(Failure(postgres: original, records: failed.records, entity: failed.entity, changes: failed.changes))
        case .rechecking(let original, let failed, let writes, let offset):
            state = .finished
            _ = try checkKeysReadBack(writes[...], results[offset..<(offset + writes.count)])
            // No key changed: the failure is the statement's own, found as without triggers.
            if failed.records.count > 1 { return diagnose(original, failed) }
            return .failed(Failure(postgres: original, records: failed.records, entity: failed.entity, changes: failed.changes))
        case .idle, .finished:
            throw CommandError(.internal, "SAVE received a result it did not ask for")
        }
    }

    /// Round 2: the writes, planned now that every key is known and the policy has spoken;
    /// `before` is round 1 when it had nothing to ask.
    /// `known`: the keys `start` found, when round 1 added none (finding them costs a lookup a
    /// reference: a few percent of a 10,000-insert SAVE each time).
    private mutating func write(resolution: ConflictCheck.Resolution, after before: [Statement] = [],
                                known: PendingKeys? = nil) throws(CommandError) -> Action {
        let keys = (known ?? KeyAllocation.known(changes, model: model, assigned: assigned)).filled(fills)
        let plan = WritePlan(model: model, changes: changes, keys: keys, droppedFields: resolution.droppedFields,
                             rowsPerStatement: settings.rowsPerStatement, locking: true, layout: layout, copyRefused: copyRefused)
        if !plan.problems.isEmpty {
            throw CommandError(.validation, "\(plan.problems.count) problem(s); nothing was saved", details: plan.problems.map(\.message))
        }
        var outcome = Outcome()
        outcome.notes = resolution.notes
        // What a COMMIT whose answer was lost answers if it committed (the writes' results never
        // came): every insert, and every record updated, each locked and found in round 1. A
        // round whose results come counts what PostgreSQL reports instead.
        outcome.inserted = changes.inserts.count
        outcome.updated = changes.updates.count
        let resolver = WritePlan.Resolver(model: model, changes: changes, keys: keys)
        var entities = RunMemo<Entity?>()
        outcome.assigned = changes.inserts.indices.map { place in
            let insert = changes.inserts[place]
            let entity = entities.value(insert.entity) { model.entity(exactly: $0) }
            let shown = entity.flatMap { entity in resolver.key(at: place, entity: entity).map { entity.show($0) } }
            return Outcome.Assigned(ref: insert.ref, entity: insert.entity, key: shown ?? "?")
        }
        let writes = plan.inserts + plan.fixups + plan.updates + plan.bulkUpdates
        let offset = before.count
        let updateStart = offset + plan.inserts.count + plan.fixups.count
        var statements = before + writes.map(\.statement) + plan.sequenceBumps
        movedSequences = plan.sequenceBumps.compactMap { $0.parameters.first ?? nil }
        let selectStart = statements.count
        for change in changes.bulk where change.isDelete {
            guard let entity = model.entity(exactly: change.entity) else { continue }
            var sql = SQLText()
            let matching = try QueryBuilder.keys(of: entity, matching: change.predicate, model: model, into: &sql)
            sql.text = "SELECT \(entity.keyText(alias: "d")) FROM \(model.table(entity)) AS d WHERE (\(entity.keyList(alias: "d"))) IN (\(matching)) FOR UPDATE OF d"
            statements.append(sql.statement)
        }
        let roots = changes.deleteOrder.filter { !resolution.droppedDeletes.contains($0) }
        // With nothing to delete, no key to record and no key to read back, COMMIT rides in the
        // same round trip.
        let commitsHere = roots.isEmpty && selectStart == statements.count && settings.saveKey == nil
            && !plan.inserts.contains(where: \.readsBackKeys)
        if commitsHere { statements += [markStatement, .commit] }
        state = .written(Written(writes: writes, offset: offset, outcome: outcome, insertResults: offset..<(offset + plan.inserts.count),
                                 updateResults: updateStart..<(offset + writes.count),
                                 bulkDeleteSelects: selectStart..<(statements.count - (commitsHere ? 2 : 0)),
                                 deleteRoots: roots, commitsHere: commitsHere))
        return .run(statements)
    }

    /// A trigger that wrote another key than the one SAVE gave: the unit's references and the
    /// keys SAVE answers would name some other row (or none), so nothing is committed. Returns
    /// the inserts a trigger skipped (no row came back), whose keys SAVE must not answer.
    private func checkKeysReadBack(_ inserts: ArraySlice<WritePlan.Write>, _ results: ArraySlice<StatementResult>) throws(CommandError) -> Set<String> {
        var skipped: Set<String> = []
        for (write, result) in zip(inserts, results) where write.readsBackKeys {
            guard let row = result.rows.first else {
                for case .insert(let ref) in write.changes { skipped.insert(ref) }
                continue
            }
            guard row.first == "f", let entity = model.entity(exactly: write.entity) else { continue }
            let written = entity.show(entity.recordKey(row, from: 1))
            throw CommandError(.denied, "\(write.records.first ?? write.entity): a BEFORE INSERT trigger on \(write.entity) wrote key \(written), not the key SAVE gave it; references and keys in this unit would name another row: nothing was saved (give the key the trigger keeps, or make the trigger keep the key it is given)")
        }
        return skipped
    }

    /// The last round: the deletes (children before parents, so a RESTRICT between two deleted
    /// records does not fire; cascades are PostgreSQL's to do), then COMMIT.
    private mutating func delete(_ written: Written, preview plan: DeletePreviewPlan) -> Action {
        let preview = plan.preview
        if preview.deniedCount > 0 {
            state = .finished
            return .failed(Failure(command: CommandError(.denied,
                "the delete is denied: \(preview.deniedCount) record(s) still point at it with a RESTRICT rule; delete or move them first",
                details: preview.lines.filter { $0.hasPrefix("deny") })))
        }
        var outcome = written.outcome
        // Every root was locked (FOR UPDATE) and found: each is deleted.
        outcome.deleted = written.deleteRoots.count
        outcome.cascaded = preview.cascadedCount
        outcome.nullified = preview.nullifiedCount
        // The roots and every record they cascade to, children first (see `deleteOrder`).
        let doomed = plan.rootsAndCascades
        let deletes = Self.deleteWrites(model: model, roots: doomed.roots, cascades: doomed.cascades)
        return commit(outcome, before: deletes.map(\.statement), writes: deletes)
    }

    private mutating func commit(_ outcome: Outcome, before: [Statement], writes: [WritePlan.Write]) -> Action {
        var statements = before
        if let saveKey = settings.saveKey {
            let reply = outcome.reply
            statements.append(Statement("INSERT INTO records.save_keys (owner, key, message, lines, fingerprint) VALUES ($1, $2, $3, $4::text[], $5)",
                                        [saveKey.owner, saveKey.key, reply.statusMessage, SQL.arrayLiteral(reply.lines.map { Optional($0) }),
                                         changes.fingerprint]))
        }
        statements += [markStatement, .commit]
        state = .committing(outcome: outcome, writes: writes)
        return .run(statements)
    }

    /// The commit mark, written in the save's transaction just before COMMIT.
    private var markStatement: Statement {
        Statement("INSERT INTO records.save_marks (xid, nonce) VALUES (pg_current_xact_id(), $1)", [String(settings.mark)])
    }

    // MARK: - Failures

    private mutating func failed(at index: Int, _ error: PostgresError) -> Action {
        if error.kind == .connection {
            // Lost while COMMIT was in flight: PostgreSQL knows whether it committed.
            if let outcome = committingOutcome {
                state = .finished
                return .uncertain(mark: settings.mark, ifCommitted: outcome.reply)
            }
            state = .finished
            return .failed(Failure(postgres: error))
        }
        if case .rechecking(let original, let failed, _, _) = state {
            state = .finished
            return .failed(Failure(postgres: original, records: failed.records, entity: failed.entity, changes: failed.changes))
        }
        // A key a trigger changed makes the rows after it fail (a child pointing at a key that
        // is not there): the writes before the failure are replayed to read their keys back.
        if case .written(let written) = state, error.sqlState?.errorClass == "23", index >= written.offset {
            let before = Array(written.writes.prefix(index - written.offset))
            if before.contains(where: \.readsBackKeys), let failed = self.write(at: index) {
                var statements: [Statement] = [.rollback, .begin]
                if let layout, let deferral = deferral(layout) { statements.append(deferral) }
                state = .rechecking(original: error, failed: failed, writes: before, offset: statements.count)
                return .run(statements + before.map(\.statement) + [.rollback])
            }
        }
        if case .diagnosing(_, let original, let writes, let offset) = state {
            state = .finished
            let found = index >= offset && index - offset < writes.count ? writes[index - offset] : original
            return .failed(Failure(postgres: error, records: found.records, entity: found.entity, changes: found.changes))
        }
        if attempts < Self.maxAttempts, error.sqlState == .serializationFailure || error.sqlState == .deadlockDetected {
            let failed = attempts
            let next = start()
            guard case .run(let statements) = next else { return next }
            return .pause(milliseconds: Self.retryPause(after: failed), then: statements)
        }
        // Another SAVE with the same key committed while this one ran: start again, and find it.
        if attempts < Self.maxAttempts, error.sqlState == .uniqueViolation, error.schema == "records", error.table == "save_keys", settings.saveKey != nil {
            return start()
        }
        let write = self.write(at: index)
        if let write, write.records.count > 1, let state = error.sqlState, Self.oneRowMayCause(state) {
            return diagnose(error, write)
        }
        state = .finished
        return .failed(Failure(postgres: error, records: write?.records ?? [], entity: write?.entity ?? "", changes: write?.changes ?? []))
    }

    /// The outcome a COMMIT in flight would have answered.
    private var committingOutcome: Outcome? {
        switch state {
        case .committing(let outcome, _): return outcome
        case .written(let written) where written.commitsHere: return written.outcome
        default: return nil
        }
    }

    /// The write that statement `index` of the current round was, if it was one.
    private func write(at index: Int) -> WritePlan.Write? {
        switch state {
        case .written(let written):
            return index >= written.offset && index - written.offset < written.writes.count ? written.writes[index - written.offset] : nil
        case .committing(_, let writes):
            return index < writes.count ? writes[index] : nil
        default:
            return nil
        }
    }

    /// Failures one row of a multi-row statement may cause, whose record a replay can name: a
    /// bad value (22), a constraint (23), a trigger's exception, a policy's WITH CHECK.
    static func oneRowMayCause(_ state: SQLState) -> Bool {
        state.errorClass == "22" || state.errorClass == "23" || state == .raiseException || state == .insufficientPrivilege
    }

    /// Replays the writes a row a statement, in a transaction that is rolled back, to find the
    /// record a multi-row statement failed on.
    private mutating func diagnose(_ error: PostgresError, _ failed: WritePlan.Write) -> Action {
        let keys = KeyAllocation.known(changes, model: model, assigned: assigned).filled(fills)
        let plan = WritePlan(model: model, changes: changes, keys: keys, rowsPerStatement: 1)
        let writes = plan.inserts + plan.fixups + plan.updates + plan.bulkUpdates
        var statements: [Statement] = [.rollback, .begin]
        if let deferral = deferral(InsertLayout(model: model, changes: changes, rowsPerStatement: 1)) {
            statements.append(deferral)
        }
        state = .diagnosing(original: error, failed: failed, writes: writes, offset: statements.count)
        return .run(statements + writes.map(\.statement) + [.rollback])
    }

    // MARK: - Helpers

    private func deferral(_ layout: InsertLayout) -> Statement? {
        let names = layout.deferredConstraints
        guard !names.isEmpty else { return nil }
        return Statement("SET CONSTRAINTS " + names.map { SQL.identifier(model.schema) + "." + SQL.identifier($0) }.joined(separator: ", ") + " DEFERRED")
    }

    /// One DELETE per entity, entities children first (no RESTRICT fires between records
    /// deleted together, nor a cascade of PostgreSQL's between a record and its own table's
    /// parent). A cascaded record was read, not locked: it is deleted only if it still points,
    /// through a cascading foreign key, at a record deleted here (one another transaction
    /// moved elsewhere meanwhile stays; PostgreSQL checks the condition again on the row it
    /// waited for). Each statement answers how many roots and cascaded records it took.
    static func deleteWrites(model: Model, roots: [RecordKey], cascades: [RecordKey]) -> [WritePlan.Write] {
        let doomed = Dictionary(grouping: roots + cascades, by: \.entity)  // each table's roots first
        let rootCount = Dictionary(grouping: roots, by: \.entity).mapValues(\.count)
        var names: [String] = []
        for key in roots + cascades where !names.contains(key.entity) { names.append(key.entity) }
        return deleteOrder(model: model, names: names).compactMap { name in
            guard let entity = model.entity(exactly: name), let group = doomed[name] else { return nil }
            let (named, cascaded) = (group.prefix(rootCount[name] ?? 0), group.dropFirst(rootCount[name] ?? 0))
            var sql = SQLText()
            let root = named.isEmpty ? "false" : entity.keyMatch(Array(named), alias: "c", into: &sql)
            var taken = root
            if !cascaded.isEmpty {
                let parents = entity.foreignKeys.filter { $0.deleteRule == .cascade }.compactMap { foreignKey -> String? in
                    guard let target = model.entity(exactly: foreignKey.target), let gone = doomed[target.name] else { return nil }
                    return DeletePreviewPlan.pointsAt(foreignKey, table: model.table(target), match: target.keyMatch(gone, alias: "p", into: &sql))
                }
                let still = entity.keyMatch(Array(cascaded), alias: "c", into: &sql) + (parents.isEmpty ? "" : " AND (" + parents.joined(separator: " OR ") + ")")
                taken = named.isEmpty ? still : "\(root) OR (\(still))"
            }
            sql.text = "WITH gone AS (DELETE FROM \(model.table(entity)) AS c WHERE \(taken) RETURNING \(root) AS root)"
                + " SELECT count(*) FILTER (WHERE root)::text, count(*) FILTER (WHERE NOT root)::text FROM gone"
            return WritePlan.Write(statement: sql.statement, changes: group.map { .delete($0) },
                                   records: group.map { "\(entity.name) \(entity.show($0))" }, entity: entity.name)
        }
    }

    /// The roots and cascaded records the deletes of `deleteWrites` took, from their answers.
    static func deleteCounts(_ results: [StatementResult]) -> (deleted: Int, cascaded: Int) {
        results.reduce((deleted: 0, cascaded: 0)) { counted, result in
            let row = result.rows.first ?? []
            let roots = row.first.flatMap { $0 }.flatMap { Int($0) } ?? 0
            let cascades = row.dropFirst().first.flatMap { $0 }.flatMap { Int($0) } ?? 0
            return (counted.deleted + roots, counted.cascaded + cascades)
        }
    }

    /// Entities whose records are deleted together, children first: an entity goes before the
    /// entities it points at. With every record the delete rules take deleted explicitly (the
    /// roots and their cascades), no RESTRICT between them fires, whatever order PostgreSQL
    /// would run its cascades in. Entities in a cycle keep their order.
    static func deleteOrder(model: Model, names: [String]) -> [String] {
        let members = Set(names)
        var remaining = names
        var placed: Set<String> = []
        var order: [String] = []
        while !remaining.isEmpty {
            // The first entity that no other one left points at.
            let index = remaining.firstIndex { name in
                !remaining.contains { other in
                    other != name && !placed.contains(other) && members.contains(other)
                        && (model.entity(exactly: other)?.foreignKeys.contains { $0.target == name } ?? false)
                }
            } ?? 0
            let name = remaining.remove(at: index)
            placed.insert(name)
            order.append(name)
        }
        return order
    }

    /// A saved line `#e1 employee 42` as FORMAT JSON gives it,
    /// `{"ref":"#e1","entity":"employee","key":"42"}`; another line (a note) as `{"note":...}`.
    static func savedLineJSON(_ line: String) -> String {
        let parts = line.split(separator: " ", maxSplits: 2).map(String.init)
        guard parts.count == 3, parts[0].hasPrefix("#") else { return JSON.Value.object([("note", .string(line))]).text }
        return JSON.Value.object([("ref", .string(parts[0])), ("entity", .string(parts[1])), ("key", .string(parts[2]))]).text
    }

    static func storedReply(message: String?, lines: String?) -> Reply {
        .ok(message ?? "", lines: lines.map { SQL.parseArray($0).compactMap { $0 } } ?? [])
    }

    private static func unique(_ keys: [RecordKey]) -> [RecordKey] {
        var seen: Set<RecordKey> = []
        return keys.filter { seen.insert($0).inserted }
    }
}
