import Dispatch
import Postgres

/// The thin side of "decide, then do": runs the plans' rounds on the leased connection.
extension WorkContext {
    /// Runs `body` where the unit's pending changes are applied (a transaction rolled back
    /// afterwards); an empty unit needs none. The keys the view gave pending inserts are kept
    /// for the works after this one in the job (and returned for the session to keep).
    func withView<T>(_ snapshot: UnitSnapshot, model: Model, _ body: (ViewPlan.View) throws -> T) throws -> (T, ViewPlan.View) {
        var assigned = snapshot.assigned
        for (ref, key) in self.assigned where assigned[ref] == nil { assigned[ref] = key }
        var plan = ViewPlan(model: model, changes: snapshot.changes, assigned: assigned,
                            timeouts: (apply: settings.saveTimeout, read: settings.readTimeout, lock: settings.lockTimeout))
        var action = plan.start()
        var first = true
        while case .run(let statements) = action {
            var round = RoundResult.run(statements, on: connection)
            if first, case .failure(_, let error) = round, error.isUnavailable {
                // A connection that died since its last use: once more on a fresh one.
                try reconnect()
                round = RoundResult.run(statements, on: connection)
            }
            first = false
            action = plan.received(round)
        }
        guard case .ready(let view) = action else { throw CommandError(.internal, "the view did not finish") }
        if let failure = plan.failure { throw failure }
        for (ref, key) in view.allocated { self.assigned[ref] = key }
        defer { if view.began, connection.isHealthy { _ = try? connection.execute("ROLLBACK") } }
        return (try body(view), view)
    }

    /// Runs `body`, and once more on a fresh connection when the connection turns out dead
    /// (PostgreSQL restarted since it was last used); only for work that changes nothing and
    /// has sent nothing to the client yet.
    func retryingOnce<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PostgresError where error.isUnavailable {
            // Its backend ended (a restart, a failover's demotion): a fresh connection, which
            // waits for a primary while `failoverWait` lasts.
            try reconnect()
            return try body()
        }
    }

    /// A SAVE from start to end. Whatever the outcome, the keys it gave pending inserts come
    /// back: a retry writes the same ids.
    func runSave(_ plan: SavePlan, model: Model) -> SaveResult {
        againWhileFailingOver(runSaveOnce(plan, model: model), plan: plan, model: model)
    }

    /// A SAVE that failed only because PostgreSQL could not be reached, with nothing committed
    /// and no COMMIT in doubt, runs again on a new connection while `failoverWait` lasts: a
    /// formation promoting a new primary is a pause, not an error. (Not when the server is
    /// stopping: that cancellation is the answer.) A COMMIT cut off by the old primary's
    /// shutdown and found not done spent its mark (the fence wrote it): the save runs again
    /// under a new one, unless the session is durable, whose stored state names the spent mark
    /// and must be written again first (it is, after the reply, and its next SAVE goes on).
    private func againWhileFailingOver(_ first: SaveResult, plan: SavePlan, model: Model) -> SaveResult {
        guard settings.failoverWait > 0 else { return first }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(settings.failoverWait) * 1_000_000_000
        var result = first, plan = plan, spent = first.markSpent
        while !result.saved, result.uncertain == nil, !(result.markSpent && settings.durableTTL != nil), !lease.wasCancelled,
              case .error(.unavailable, _) = result.reply.status, DispatchTime.now().uptimeNanoseconds < deadline {
            guard (try? reconnect()) != nil else { break }
            if result.markSpent { plan.settings.mark = Int64.random(in: 1...Int64.max) }
            settings.metrics?.add(.saveRetries, 1)
            result = runSaveOnce(plan, model: model)
            spent = spent || result.markSpent
        }
        // The session draws a new mark for its next SAVE when any attempt spent one.
        result.markSpent = spent
        return result
    }

    private func runSaveOnce(_ plan: SavePlan, model: Model) -> SaveResult {
        var plan = plan
        confirmCopy(&plan)
        reserveKeys(&plan)
        let action = plan.start()
        return drive(consume plan, from: action, model: model)
    }

    /// Saves of several sessions, all of this identity and model: those that commit in one
    /// round trip share a transaction (`SaveGroup`), the others run one after another. The
    /// results come in the order of `plans`.
    func runSaves(_ plans: [SavePlan], model: Model, skipping: (Int) -> Bool = { _ in false }) -> [SaveResult] {
        var group = SaveGroup(plans.map { plan in
            var plan = plan
            confirmCopy(&plan)
            reserveKeys(&plan)
            return plan
        })
        var results = [SaveResult?](repeating: nil, count: plans.count)
        // PostgreSQL unreachable for one save's mark is unreachable for the rest: they do not
        // each wait for it.
        var fenceSeconds = 10
        /// `starting`: the SAVE has sent nothing yet (run alone), so a cancelled one is not begun;
        /// a group member's SAVE goes on as the group's round left it, cancelled or not.
        func finish(_ index: Int, _ plan: SavePlan, _ action: SavePlan.Action, starting: Bool = true) {
            if starting && skipping(index) {
                results[index] = SaveResult(reply: .cancelled, saved: false, assigned: [:], attempts: 0)
                return
            }
            let result = drive(plan, from: action, model: model, fenceSeconds: fenceSeconds)
            if result.uncertain != nil { fenceSeconds = 0 }
            results[index] = result
        }
        Log.debug("\(plans.count) SAVEs waited together: \(group.members.count) in one transaction, \(group.alone.count) alone")
        if !group.members.isEmpty {
            settings.metrics?.add(.savesGrouped, group.members.count)
            switch group.received(RoundResult.run(group.statements, on: connection)) {
            case .each(let actions):
                settings.metrics?.add(.saveGroups, 1)
                // By position: a member copied out is two plans' worth of references.
                for (position, action) in actions.enumerated() {
                    finish(group.members[position].index, group.members[position].plan, action, starting: false)
                }
            case .runAlone:
                if connection.isHealthy, connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
                // A connection that ended with the failure (its backend terminated): the members
                // start again on a new one, not the first of them on the dead one.
                if !connection.isHealthy { try? reconnect() }
                settings.metrics?.add(.saveGroupsRunAlone, 1)
                for member in group.members {
                    var plan = member.unstarted
                    let action = plan.start()
                    finish(member.index, plan, action)
                }
            }
        }
        for item in group.alone { finish(item.index, item.plan, item.action) }
        return zip(plans, results).map { plan, result in againWhileFailingOver(result!, plan: plan, model: model) }
    }

    /// Plans of at least this many changes are freed off the worker once the save ends: for
    /// 10,000 inserts, its keys, layout and writes are most of a millisecond of frees that
    /// would come before the reply.
    static let freedAside = 1_000

    /// A save's rounds from `action` on, to its result.
    private func drive(_ plan: consuming SavePlan, from first: SavePlan.Action, model: Model, fenceSeconds: Int = 10) -> SaveResult {
        var plan = plan
        let result = rounds(&plan, from: first, model: model, fenceSeconds: fenceSeconds)
        if plan.changes.count >= Self.freedAside {
            let aside = plan
            DispatchQueue.global(qos: .utility).async { withExtendedLifetime(aside) {} }
        }
        return result
    }

    private func rounds(_ plan: inout SavePlan, from first: SavePlan.Action, model: Model, fenceSeconds: Int) -> SaveResult {
        var action = first
        defer { for sequence in plan.movedSequences { settings.keys?.drop(sequence) } }
        /// A round, unless the shutdown's deadline cancelled this job between two rounds (in a
        /// retry's pause, say), when no statement ran to be cancelled: the round then fails as
        /// its statement would have, and is not sent.
        func round(_ statements: [Statement]) -> RoundResult {
            if lease.wasCancelled {
                return .failure(index: 0, error: PostgresError(kind: .server, sqlState: .queryCanceled, message: "cancelled: the server is stopping"))
            }
            return RoundResult.run(statements, on: connection) { plan.prepareReply() }
        }
        while true {
            switch action {
            case .run(let statements):
                action = plan.received(round(statements))
            case .pause(let milliseconds, let statements):
                usleep(UInt32(Int.random(in: milliseconds) * 1_000))
                action = plan.received(round(statements))
            case .committed(let reply):
                if let written = plan.committedOutcome {
                    settings.metrics?.add(.rowsInserted, written.inserted)
                    settings.metrics?.add(.rowsUpdated, written.updated)
                    settings.metrics?.add(.rowsDeleted, written.deleted + written.cascaded)
                    settings.metrics?.add(.rowsNullified, written.nullified)
                }
                settings.metrics?.add(.saveRetries, max(0, plan.attempts - 1))
                return SaveResult(reply: reply, saved: true, assigned: plan.assigned, attempts: plan.attempts)
            case .failed(let failure):
                if connection.isHealthy, connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
                if let error = failure.postgres, HandOff.isFenced(error) {
                    return SaveResult(reply: .error(.conflict, Self.movedMessage), saved: false, assigned: plan.assigned,
                                      attempts: plan.attempts, movedAway: true)
                }
                if let stale = staleKey(failure, plan: plan, model: model) {
                    // An id its sequence gave is taken: the sequence is behind the table's data.
                    // It moves on, and the insert lets go of that id, so SAVE again gives a new one.
                    // (`assigned` only adds to what the unit holds: the id is let go of by name.)
                    var assigned = plan.assigned
                    assigned[stale.ref] = nil
                    if let sequence = stale.sequence {
                        _ = try? connection.query("""
                            SELECT setval($1::regclass, m) FROM (SELECT max(\(SQL.identifier(stale.column)))::bigint AS m FROM \(model.table(stale.entity))) AS s
                            WHERE m > coalesce(pg_sequence_last_value($1::regclass), 0)
                            """, [sequence])
                        settings.keys?.drop(sequence)
                    }
                    let message = "#\(stale.ref): \(stale.entity.label(stale.column)) \(stale.value) is already taken: it came from the key's sequence, which was behind the table's data; nothing was saved: SAVE again to give it a new one"
                    return SaveResult(reply: .error(.validation, message), saved: false, assigned: assigned, attempts: plan.attempts,
                                      released: [stale.ref])
                }
                return SaveResult(reply: reply(for: failure, changes: plan.changes, model: model), saved: false, assigned: plan.assigned, attempts: plan.attempts)
            case .uncertain(let mark, let ifCommitted):
                let commit = UncertainCommit(mark: mark, ifCommitted: ifCommitted)
                let status = transactionStatus(commit, seconds: fenceSeconds)
                Log.warning("a SAVE's COMMIT got no answer; its mark says \(status.map { "\($0)" } ?? "nothing yet")")
                switch status {
                case .committed?:
                    return SaveResult(reply: ifCommitted, saved: true, assigned: plan.assigned, attempts: plan.attempts)
                case .aborted?:
                    // The fence wrote the mark: the next SAVE needs another.
                    return SaveResult(reply: .error(.unavailable, "PostgreSQL went away during COMMIT, which did not complete: nothing was saved; pending changes are kept: try again"),
                                      saved: false, assigned: plan.assigned, attempts: plan.attempts, markSpent: true)
                case nil:
                    return SaveResult(reply: Self.uncertainReply, saved: false, assigned: plan.assigned, attempts: plan.attempts,
                                      uncertain: commit)
                }
            }
        }
    }

    /// A failed SAVE's insert whose key, which this server allocated (the client gave none),
    /// collided with a stored record's.
    private func staleKey(_ failure: SavePlan.Failure, plan: SavePlan, model: Model)
        -> (ref: String, entity: Entity, column: String, value: String, sequence: String?)? {
        guard let error = failure.postgres, error.sqlState == .uniqueViolation, failure.records.count == 1,
              failure.records[0].hasPrefix("#"), let entity = model.entity(exactly: failure.entity),
              error.constraint != nil, error.constraint == entity.keyConstraint else { return nil }
        let ref = String(failure.records[0].dropFirst())
        guard let insert = plan.changes.insert(ref), let assigned = plan.assigned[ref],
              let column = entity.keyColumns.first(where: { insert.value(of: $0) == nil && assigned.values[$0] != nil }),
              let value = assigned.values[column] else { return nil }
        return (ref, entity, column, value, entity.key.first { $0.name == column }?.drawsFrom)
    }

    /// A SAVE of a session that was resumed on another connection meanwhile.
    static let movedMessage = "this session was resumed elsewhere (RESUME with its token) and its unit lives on there: nothing was saved here, and this connection closes"

    static let uncertainReply = Reply.error(.unavailable,
        "PostgreSQL went away during COMMIT and cannot say yet whether it completed; pending changes are kept: SAVE again once it is back (it will not be written twice)")

    /// Takes the keys the plan's inserts draw from sequences out of the server's reserve, so
    /// that its first round has nothing to ask. Without a reserve, or when a key comes from
    /// another default or the reserve cannot be filled, round 1 allocates them as before.
    private func reserveKeys(_ plan: inout SavePlan) {
        guard let reserve = settings.keys, !connection.inTransaction else { return }
        let role = identity.databaseRole ?? ""
        plan.reserveKeys(overlapping: { needs, meanwhile in try? reserve.take(needs, role: role, on: connection, meanwhile: meanwhile) })
    }

    /// Asks the catalog whether the tables a bulk would COPY into still take it (one query,
    /// only for saves of more than `WritePlan.copiedAbove` rows of a table): a rule on INSERT
    /// or row-level security added since the model was read would be passed by or refuse
    /// the COPY. Unanswered, none is copied into.
    private func confirmCopy(_ plan: inout SavePlan) {
        let candidates = plan.copyCandidates
        guard !candidates.isEmpty else { return }
        let refused = try? connection.queryPrepared("""
            SELECT t.entity FROM unnest($1::text[], $2::text[]) AS t(entity, name)
            JOIN pg_class c ON c.oid = to_regclass(t.name)
            WHERE c.relrowsecurity OR \(ModelReflector.hasInsertRules)
            """, [SQL.arrayLiteral(candidates.map(\.entity)), SQL.arrayLiteral(candidates.map(\.table))])
        guard let refused else { return plan.refuseCopy(Set(candidates.map(\.entity))) }
        plan.refuseCopy(Set((0..<refused.rowCount).compactMap { refused.string($0, 0) }))
    }

    enum TransactionStatus { case committed, aborted }

    /// Whether the SAVE of a COMMIT that got no answer committed, asked on a fresh connection
    /// for up to `seconds`; nil when PostgreSQL cannot be asked in that time. Its commit mark
    /// decides, written here as a fence (`HandOff.fence`): found written by the SAVE, it
    /// committed; written here first, the SAVE can no longer commit, whatever it still does.
    /// A transaction id would not do: the reply carrying it may be lost with the rest, and
    /// after a crash PostgreSQL may give the same id to another transaction.
    func transactionStatus(_ commit: UncertainCommit, seconds: Int = 10) -> TransactionStatus? {
        // Bounded by time, not attempts: each reconnect may itself wait for a new primary
        // (`failoverWait`), and forty of those waits would hold the client for many minutes.
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds + settings.failoverWait) * 1_000_000_000
        var first = true
        while first || DispatchTime.now().uptimeNanoseconds < deadline {
            defer { first = false }
            if !first { usleep(250_000) }
            if !connection.isHealthy || !first {
                guard (try? reconnect()) != nil else { continue }
            }
            // A SAVE still running holds its mark: waited for a while, then asked again.
            let fence = try? connection.transaction {
                try connection.query("SELECT set_config('lock_timeout', '1000', true)")
                return try HandOff.fence(commit.mark, connection)
            }
            guard let fence else { continue }
            return fence == .committed ? .committed : .aborted
        }
        return nil
    }

    private func reply(for failure: SavePlan.Failure, changes: ChangeSet, model: Model) -> Reply {
        if let command = failure.command { return command.reply }
        guard let error = failure.postgres else { return .error(.internal, "SAVE failed") }
        if error.sqlState == .queryCanceled && lease.wasCancelled {
            return .error(.unavailable, "the server is stopping: this SAVE was cancelled before it committed; nothing was saved")
        }
        if error.sqlState == .queryCanceled {
            return .error(.limit, "the SAVE ran past its time limit (\(settings.saveTimeout / 1000) s) and was cancelled; nothing was saved; pending changes are kept")
        }
        if error.sqlState == .lockNotAvailable {
            return .error(.conflict, "a record this unit writes stayed locked by another transaction past \(settings.lockTimeout / 1000) s; nothing was saved; pending changes are kept: try again")
        }
        if error.isUnavailable {
            return .error(.unavailable, "PostgreSQL is unavailable (\(error.message)); nothing was saved; pending changes are kept: try again when it is back")
        }
        let record = failure.records.count == 1 ? failure.records[0]
            : failure.records.isEmpty ? nil : "\(failure.entity) (one of \(failure.records.count) records)"
        let failed = failure.changes.count == 1
            ? ErrorMapping.Failed(failure.changes[0], in: changes, record: record)
            : ErrorMapping.Failed(operation: failure.changes.first.map { ErrorMapping.Failed($0, in: changes, record: nil).operation } ?? nil, record: record)
        return ErrorMapping.map(error, failed: failed, model: model, connection: connection).reply
    }
}

/// How a SAVE ended.
struct SaveResult: Sendable {
    var reply: Reply
    var saved: Bool
    /// Every key assigned to pending inserts, to keep in the unit.
    var assigned: [String: AssignedKey]
    var attempts: Int
    /// Set when the outcome is not known yet.
    var uncertain: UncertainCommit?
    /// The session was resumed elsewhere (its mark was fenced): this copy must end.
    var movedAway = false
    /// The mark was written (by the SAVE or by a fence): the next SAVE needs its own.
    var markSpent = false
    /// Pending inserts whose keys the unit must let go of (an id taken since it was given).
    var released: [String] = []
}

/// A SAVE whose COMMIT got no answer and whose outcome PostgreSQL could not tell yet.
struct UncertainCommit: Sendable {
    var mark: Int64
    /// The reply, should it turn out committed.
    var ifCommitted: Reply
    /// When it happened (uptime, nanoseconds): past `answerableMinutes`, its mark may be gone.
    var at = DispatchTime.now().uptimeNanoseconds

    static let answerableMinutes = ChangeFeed.saveMarkMinutes - 10
    var isAnswerable: Bool { DispatchTime.now().uptimeNanoseconds - at < UInt64(Self.answerableMinutes) * 60_000_000_000 }
}

#if canImport(Glibc)
import Glibc
#endif
