import Postgres

// MARK: - SAVE

extension Session {
    func save(_ policy: MergePolicy, key: String?, model: Model) throws(CommandError) -> Step {
        guard unit.depth == 0 else {
            throw CommandError(.denied, "\(unit.depth) nested scratchpad(s) open: MERGE or DISCARD before SAVE")
        }
        let changes = unit.current
        let uncertain = uncertainSave
        guard !changes.isEmpty || uncertain != nil || key != nil else { return .reply(.ok("nothing to save")) }
        var settings = SavePlan.Settings()
        settings.statementTimeout = context.work.saveTimeout
        settings.lockTimeout = context.work.lockTimeout
        settings.saveKey = key.map { SavePlan.SaveKey(owner: user?.name ?? "", key: $0) }
        settings.mark = nextSaveMark
        if let uncertain, !uncertain.isAnswerable {
            uncertainSave = nil
            throw CommandError(.unavailable, "the SAVE whose COMMIT got no answer more than \(UncertainCommit.answerableMinutes) minutes ago can no longer be told committed or not; pending changes are kept: check the data, then SAVE or ROLLBACK")
        }
        let plan = SavePlan(model: model, changes: changes, policy: policy, assigned: unit.assigned, settings: settings)
        let session = id
        let who = self.who
        let json = jsonReplies
        // What the result answers and does to the session, however the SAVE ran.
        let finish: @Sendable (SaveResult) -> WorkResult = { result in
            var reply = result.reply
            if result.saved {
                if result.attempts > 1, case .ok(let message) = reply.status { reply.status = .ok(message + " (\(result.attempts) attempts)") }
                Log.info("\(reply.statusMessage) (\(who))", session: session)
            } else {
                Log.info("save failed (\(who)): \(reply.statusLine)", session: session)
            }
            let assigned = result.assigned
            let saved = result.saved
            let pending = result.uncertain
            let markSpent = result.markSpent
            let released = result.released
            if json { reply = Self.savedJSON(reply) }
            if result.movedAway {
                Log.warning("SAVE refused: the session was resumed elsewhere (\(who))", session: session)
                // Its unit is the other copy's now: dropped here, and the connection ends.
                return WorkResult(reply: reply) { session in
                    session.unit = UnitOfWork()
                    session.uncertainSave = nil
                    session.movedAway = true
                }
            }
            return WorkResult(reply: reply) { session in
                let before = session.stateVersion
                // Saved, the unit starts afresh: the keys it was given go with it.
                if saved { session.unit.saved() } else { session.unit.assign(assigned) }
                session.unit.release(released)
                // A mark is written once: after a COMMIT that may have written it (saved, or no
                // answer) the next SAVE needs its own, or it fails on the mark's unique index.
                if saved || pending != nil || markSpent { session.nextSaveMark = Int64.random(in: 1...Int64.max) }
                session.uncertainSave = pending
                if saved && pending == nil { session.lastSave = (before, session.stateVersion) }
            }
        }
        // With no earlier COMMIT to ask about, it may run in a group with other sessions' SAVEs.
        let groupable = uncertain == nil && !changes.isEmpty ? GroupableSave(plan: plan, model: model, finish: finish) : nil
        return .database(DatabaseWork(identity: identity, counted: counter(), save: groupable) { context in
            if let uncertain {
                // The SAVE before this one got no answer to its COMMIT: ask first, so the unit is
                // never written twice.
                switch context.transactionStatus(uncertain, seconds: 2) {
                case .committed?:
                    Log.info("an earlier SAVE did commit: its unit is saved (\(who))", session: session)
                    return WorkResult(reply: uncertain.ifCommitted) { session in
                        session.unit.saved()
                        session.nextSaveMark = Int64.random(in: 1...Int64.max)
                        session.uncertainSave = nil
                    }
                case .aborted?: break
                case nil: return WorkResult(reply: WorkContext.uncertainReply)
                }
            }
            if changes.isEmpty && key == nil {
                return WorkResult(reply: .ok("nothing to save")) { $0.uncertainSave = nil }
            }
            return finish(context.runSave(plan, model: model))
        })
    }
}
