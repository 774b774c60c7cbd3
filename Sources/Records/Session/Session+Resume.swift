import Dispatch
import Postgres

// MARK: - Hand-off at shutdown, RESUME on any server

extension Session {
    /// What this session hands to the next server when this one stops; nil when a client
    /// would miss nothing (no pending change, no open scratchpad, no watch, no unsettled SAVE).
    public func handOffState() -> SessionState? {
        guard unit.heldCount > 0 || unit.depth > 0 || !watches.isEmpty || uncertainSave != nil else { return nil }
        return state()
    }

    /// The session's state whatever it holds (--durable-units writes it after every change,
    /// an emptied unit too: a crash must not bring back a unit that was saved).
    public func state() -> SessionState {
        let now = DispatchTime.now().uptimeNanoseconds
        return SessionState(
            unit: unit,
            watches: watches.keys.sorted().map { SessionState.Watched(entity: $0, predicate: watches[$0]!) },
            jsonReplies: jsonReplies,
            uncertain: uncertainSave.map {
                SessionState.Uncertain(mark: $0.mark, ifCommitted: $0.ifCommitted, ageSeconds: Double(now &- $0.at) / 1e9)
            },
            nextSaveMark: nextSaveMark)
    }

    /// Whose a handed-off state is: the signed-in user as added (name and when: a user removed
    /// and added again is another user), nil without one.
    public var handOffOwner: String? { user.map { $0.name + "\u{1F}" + (signedInSince ?? "") } }

    /// `RESUME token`: takes over the session a stopped server handed off. Its owner only,
    /// into a session without pending changes; the token is spent.
    func resume(_ token: String) throws(CommandError) -> Step {
        guard HandOff.isToken(token) else {
            throw CommandError(.syntax, "not a resume token: expected rt and 32 hex digits, as the handoff notice gave it")
        }
        guard unit.heldCount == 0, unit.depth == 0, uncertainSave == nil else {
            let what = unit.depth > 0 ? "a nested scratchpad open" : uncertainSave != nil ? "an unsettled SAVE" : "\(unit.current.count) pending change(s)"
            throw CommandError(.denied, "this session has \(what): SAVE or ROLLBACK before RESUME (a resumed session replaces the unit)")
        }
        let owner = handOffOwner, userIdentity = identity, shared = context
        // Runs as the server: no served role may read records.handoff.
        return .database(DatabaseWork(identity: .server, counted: counter()) { context in
            do {
                let model = shared.model
                // --durable-units: the session goes on here under a new token, written in the
                // same transaction (a crash right after the RESUME must not lose it).
                let durable = shared.work.durableTTL.map { (ttl: $0, token: HandOff.newToken()) }
                let redeemed = try context.retryingOnce {
                    try Self.redeem(token, owner: owner, model: model, durable: durable, server: shared.serverID, context.connection)
                }
                let state = redeemed.state, watches = state.watches
                var lines: [String] = []
                var seeds: [String: WatchSeed] = [:]
                if !watches.isEmpty {
                    seeds = try Self.watchAgain(watches, shared: shared, identity: userIdentity, context)
                    lines = watches.map { "watching \($0.entity) again: changes committed while the session moved (\(redeemed.secondsAgo) s) were not delivered" }
                }
                if redeemed.dropped > 0 { lines.append("\(redeemed.dropped) watch(es) dropped: their entities, or columns their WHERE names, are no longer served") }
                let depth = state.unit.depth
                let reply = Reply.ok("resumed: \(state.pendingCount) pending change(s)" + (depth > 0 ? ", \(depth) nested scratchpad(s) open" : "")
                                     + (state.uncertain != nil ? "; the last SAVE's COMMIT is still unsettled: SAVE settles it" : "")
                                     + (redeemed.savedUnanswered ? "; its last SAVE committed (its reply may have been lost): the unit is saved, and nothing sent after that SAVE was kept" : ""),
                                     lines: lines)
                let taken = seeds
                return WorkResult(reply: reply) { session in
                    session.restore(state, watches: watches, seeds: taken)
                    session.resumedDurably = durable.map { ($0.token, state.pendingCount) }
                }
            } catch let error as CommandError {
                return WorkResult(reply: error.reply)
            } catch {
                return WorkResult(reply: ErrorMapping.map(error, model: shared.model, connection: context.connection).reply)
            }
        })
    }

    /// A handed-off state as RESUME takes it.
    struct Redeemed {
        var state: SessionState
        var secondsAgo: Int
        /// Its last SAVE committed, its reply perhaps lost.
        var savedUnanswered: Bool
        /// Watches dropped: their entities, or columns their WHERE names, are no longer served.
        var dropped: Int
    }

    /// In one transaction: the token is spent, the session's SAVE marks fenced and, when
    /// durable, its state written again under a new token (a rollback leaves all of it for the
    /// next RESUME).
    static func redeem(_ token: String, owner: String?, model: Model, durable: (ttl: Int, token: String)?, server: String,
                       _ connection: Connection) throws -> Redeemed {
        try connection.transaction { () throws -> Redeemed in
            let (text, secondsAgo) = try HandOff.redeem(token, owner: owner, connection)
            let handed: SessionState
            do {
                handed = try HandOff.decode(text)
            } catch {
                throw CommandError(.internal, "the handed-off session cannot be read by this server (\(error)): was it written by another version?")
            }
            var (state, saved) = try Self.fenced(handed, connection)
            // A watch whose entity, or a column its WHERE names, is no longer served would
            // never fire: dropped, and the reply says so.
            state.watches = state.watches.filter { watched in
                guard model.entity(named: watched.entity) != nil else { return false }
                guard let predicate = watched.predicate else { return true }
                return (try? QueryBuilder.count(watched.entity, predicate: predicate, model: model)) != nil
            }
            if let durable {
                let entry = HandOff.Entry(token: durable.token, owner: owner, state: try HandOff.encode(state),
                                          pending: state.pendingCount, mark: state.nextSaveMark)
                try HandOff.write([entry], ttl: durable.ttl, server: server, open: true, synchronous: true, connection)
            }
            return Redeemed(state: state, secondsAgo: secondsAgo, savedUnanswered: saved, dropped: handed.watches.count - state.watches.count)
        }
    }

    /// The resumed session's watches registered on this server, and the seeds of those on
    /// entities with row-level security (read as the session's user).
    static func watchAgain(_ watches: [SessionState.Watched], shared: ServerContext, identity: Identity,
                           _ context: WorkContext) throws -> [String: WatchSeed] {
        try context.retryingOnce {
            try ChangeFeed.register(server: shared.serverID, context.connection) {
                var all = shared.watchedEntities
                for watched in watches {
                    let filtered = watched.predicate != nil
                    if let i = all.firstIndex(where: { $0.entity == watched.entity }) { all[i].filtered = all[i].filtered || filtered }
                    else { all.append(ChangeFeed.Watch(entity: watched.entity, filtered: filtered)) }
                }
                return all
            }
        }
        let model = shared.model
        let secured = watches.compactMap { model.entity(named: $0.entity) }.filter(\.hasRowSecurity)
        guard !secured.isEmpty else { return [:] }
        context.identity = identity
        try context.assumeIdentity()
        var seeds: [String: WatchSeed] = [:]
        for entity in secured { seeds[entity.name] = try WatchEvents.seed(entity, model: model, context.connection) }
        return seeds
    }

    /// How long RESUME waits for a SAVE the old copy has in flight (its transaction holds the
    /// mark RESUME writes): past it, RESUME is refused and the token kept.
    static let fenceWaitMilliseconds = 10_000

    /// The state with its SAVE marks fenced (`HandOff.fence`), in the RESUME's transaction: a
    /// mark a SAVE committed means the unit is saved (its reply was lost with the old copy);
    /// otherwise no SAVE of the old copy can commit it any more. Either way nothing is
    /// unsettled, and the next SAVE here writes a fresh mark.
    static func fenced(_ state: SessionState, _ connection: Connection) throws -> (SessionState, saved: Bool) {
        var state = state
        let marks = Set([state.nextSaveMark, state.uncertain?.mark].compactMap { $0 })
        guard !marks.isEmpty else {
            state.nextSaveMark = Int64.random(in: 1...Int64.max)
            return (state, false)
        }
        try connection.query("SELECT set_config('lock_timeout', $1, true)", [String(fenceWaitMilliseconds)])
        var committed = false
        do {
            for mark in marks.sorted() where try HandOff.fence(mark, connection) == .committed { committed = true }
        } catch let error as PostgresError where error.sqlState == .lockNotAvailable {
            throw CommandError(.unavailable, "a SAVE of this session is still running in PostgreSQL on behalf of its old server: RESUME again once it ends (the token is kept)")
        } catch let error as PostgresError where error.sqlState == .invalidColumnReference {
            // Served with --no-migrate by a newer server than the last `recordsd migrate`.
            throw CommandError(.unavailable, "records.save_marks has no single-use index yet (run `recordsd migrate` with this version): without it a unit could be saved twice, so RESUME is refused (the token is kept)")
        }
        let saved = committed && (state.unit.heldCount > 0 || state.uncertain != nil)
        if committed { state.unit = UnitOfWork() }
        state.uncertain = nil
        // Chosen here: a durable state written with the RESUME names the mark its SAVE writes.
        state.nextSaveMark = Int64.random(in: 1...Int64.max)
        return (state, saved)
    }

    /// On the loop: the session becomes the one handed off.
    func restore(_ state: SessionState, watches restored: [SessionState.Watched], seeds: [String: WatchSeed]) {
        unit = state.unit
        jsonReplies = state.jsonReplies
        for watched in restored {
            if let previous = watches[watched.entity] { context.watching(watched.entity, -1, filtered: previous != nil) }
            context.watching(watched.entity, +1, filtered: watched.predicate != nil)
            watches[watched.entity] = .some(watched.predicate)
        }
        watchSeeds.merge(seeds) { _, new in new }
        if let mark = state.nextSaveMark { nextSaveMark = mark } else { nextSaveMark = Int64.random(in: 1...Int64.max) }
        let now = DispatchTime.now().uptimeNanoseconds
        uncertainSave = state.uncertain.map {
            let age = UInt64(max(0, $0.ageSeconds) * 1e9)
            return UncertainCommit(mark: $0.mark, ifCommitted: $0.ifCommitted, at: now > age ? now - age : 0)
        }
    }
}
