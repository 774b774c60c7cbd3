import Postgres
import Records
import RecordsProtocol

// MARK: - Sessions kept in PostgreSQL: handed off at shutdown, written as they change (durable)

extension Server {
    /// Shutting down, the connections are idle: a session with something to keep (pending
    /// changes, scratchpads, watches, an unsettled SAVE; with --durable-units, any session
    /// already written) is written to `records.handoff`, all in one pool job, and its client
    /// is given the token; the others are told goodbye. Each closes once told. A handing-off
    /// connection counts as busy: it reads nothing more.
    func farewell(_ idle: [ClientConnection]) {
        var entries: [HandOff.Entry] = []
        var handing: [ClientConnection] = []
        for connection in idle where connection.machine.farewell() {
            let session = connection.session
            guard let state = connection.durableToken != nil ? session.state() : session.handOffState(),
                  let text = try? HandOff.encode(state) else {
                connection.push(Notice.shutdown(lost: nil).text)
                connection.machine.closeWhenIdle()
                connection.service()
                continue
            }
            let (token, retired) = stateToken(connection)
            entries.append(HandOff.Entry(token: token, owner: session.handOffOwner, state: text, pending: state.pendingCount,
                                         mark: state.nextSaveMark, retired: retired))
            handing.append(connection)
            connection.durableToken = nil  // written closed here: nothing more to mark when it closes
            connection.handingOff = true
            connection.machine.startedDatabase()
        }
        guard !entries.isEmpty else { return }
        let ids = handing.map(\.id)
        let notices = entries.map { (token: $0.token, pending: $0.pending) }
        write(entries, open: false) { [inbox] failure in
            inbox.post(.handedOff(connections: ids, notices: notices, failure: failure))
        }
    }

    /// On the loop: each client learns its token (or that its session could not be kept),
    /// then its connection closes.
    func handedOff(_ ids: [Int], notices: [(token: String, pending: Int)], failure: String?) {
        context.metrics.add(failure == nil ? .sessionsHandedOff : .handOffsFailed, ids.count)
        if let failure {
            Log.warning("shutting down: \(ids.count) session(s) could not be handed off: \(failure)")
        } else {
            Log.info("shutting down: \(ids.count) session(s) handed off (\(notices.reduce(0) { $0 + $1.pending }) pending change(s))")
        }
        for (id, notice) in zip(ids, notices) {
            guard let connection = byID[id] else { continue }
            connection.handingOff = false
            connection.machine.databaseFinished(stopping: true)
            if failure != nil {
                // PostgreSQL's own message (hosts, database names) goes to the log only.
                connection.push(Notice.shutdown(lost: notice.pending).text)
            } else {
                connection.push(Notice.handOff(token: notice.token, pending: notice.pending, ttl: configuration.resumeTTL).text)
                connection.push(Notice.shutdown(lost: nil).text)
                connection.owesNotice = true
            }
            connection.service()
        }
    }

    /// --durable-units: the session changed since its state was last written (an edit, a
    /// SAVE, a WATCH ...): write it now; the replies that changed it wait for the write.
    func persistIfChanged(_ connection: ClientConnection) {
        let session = connection.session
        guard !stopping, !connection.busy, !connection.machine.isClosing, session.stateVersion != connection.writtenVersion else { return }
        // Only a SAVE committed since the last write: that state names the SAVE's mark, which
        // RESUME finds; writing the emptied unit would cost a write per SAVE for nothing.
        // Not after a failed write: the client was told its token is stale until it is told again.
        if connection.announced, let save = session.lastSave, save.before == connection.writtenVersion, save.after == session.stateVersion {
            connection.writtenVersion = save.after
            return
        }
        guard let (entry, version) = durableEntry(connection) else { return }
        let id = connection.id, pending = entry.pending
        connection.machine.startedPersisting()
        write([entry], open: true) { [inbox] failure in
            inbox.post(.persisted(connection: id, version: version, pending: pending, failure: failure))
        }
    }

    /// The session's state to write (--durable-units) and its version, when it changed since
    /// the last write and holds or held something (most sessions only read: nothing to write,
    /// nor to announce).
    func durableEntry(_ connection: ClientConnection) -> (HandOff.Entry, Int)? {
        let session = connection.session
        guard configuration.durableUnits, !stopping, !session.movedAway, session.stateVersion != connection.writtenVersion else { return nil }
        let state = session.state()
        guard connection.durableToken != nil || state.unit.heldCount > 0 || state.unit.depth > 0 || !state.watches.isEmpty,
              let text = try? HandOff.encode(state) else {
            connection.writtenVersion = session.stateVersion
            return nil
        }
        let (token, retired) = stateToken(connection)
        return (HandOff.Entry(token: token, owner: session.handOffOwner, state: text, pending: state.pendingCount,
                              mark: state.nextSaveMark, retired: retired), session.stateVersion)
    }

    /// The token a session's state is written under: a new one when the signed-in user changed
    /// since the last write (re-AUTH, or the user removed and added again), since only its
    /// owner redeems a token; the old owner's row goes with the write (`retired`), and the
    /// client is told the new token.
    func stateToken(_ connection: ClientConnection) -> (token: String, retired: String?) {
        let owner = connection.session.handOffOwner
        let previous = connection.durableToken
        if let previous, connection.durableOwner == owner { return (previous, nil) }
        let token = HandOff.newToken()
        connection.durableToken = token
        connection.durableOwner = owner
        connection.announced = false
        return (token, previous)
    }

    /// On the loop: the state was written at the head of a step's job (the step's reply follows).
    func persistedAhead(_ connection: ClientConnection, version: Int, pending: Int, failure: String?) {
        connection.machine.wroteAhead()
        wrote(connection, version: version, pending: pending, failure: failure)
    }

    /// On the loop: the state is written; the replies it held go out (with the token, the
    /// first time).
    func persisted(_ connection: ClientConnection, version: Int, pending: Int, failure: String?) {
        connection.machine.databaseFinished(stopping: stopping)
        wrote(connection, version: version, pending: pending, failure: failure)
        // Stopping: the session is handed off now, as after a step (closing here dropped its
        // notices).
        if connection.machine.handsOffAfterStep(stopping: stopping) { return farewell([connection]) }
        connection.service()
    }

    /// A state write's outcome, told to the client. A failed one is answered all the same (the
    /// edit is in the session; only a crash would lose it), and its notice tells the client its
    /// token names an older copy until it is given again after a write that succeeds.
    private func wrote(_ connection: ClientConnection, version: Int, pending: Int, failure: String?) {
        connection.writtenVersion = version
        if let failure {
            Log.warning("durable units: a session's state could not be written: \(failure)", session: connection.id)
            connection.push(Notice.durableFailed.text)
            connection.announced = false
        } else if !connection.announced, let token = connection.durableToken {
            connection.announced = true
            connection.push(Notice.handOff(token: token, pending: pending, ttl: configuration.resumeTTL).text)
        }
    }

    /// A durable session closed: with QUIT its state goes; otherwise it stays to be resumed,
    /// marked closed (RESUME then need not wait for this server to be gone).
    func durableSessionEnded(_ token: String, quit: Bool) {
        pool.submit(.proven) { database in
            guard let lease = try? database.get() else { return }
            _ = try? lease.connection.assume(.server)
            _ = try? HandOff.sessionEnded(token, quit: quit, lease.connection)
        }
    }

    /// Writes session states on a pool worker, as the server's own login (records.handoff is
    /// no served role's), once more on a fresh connection when the first one is dead.
    func write(_ entries: [HandOff.Entry], open: Bool, then done: @escaping @Sendable (String?) -> Void) {
        let ttl = configuration.resumeTTL, server = context.serverID
        pool.submit(.proven) { [entries] database in
            done(Self.store(entries, ttl: ttl, server: server, open: open, database))
        }
    }

    /// On a pool worker: writes the states on the leased connection; the failure's text, nil
    /// when written.
    static func store(_ entries: [HandOff.Entry], ttl: Int, server: String, open: Bool,
                      _ database: Result<Lease, PostgresError>) -> String? {
        do {
            let lease = try database.get()
            func store() throws -> Int {
                try lease.connection.assume(.server)
                return try HandOff.store(entries, ttl: ttl, server: server, open: open, lease.connection)
            }
            var skipped: Int
            do { skipped = try store() } catch let error as PostgresError where error.kind == .connection {
                _ = try lease.reconnect()
                skipped = try store()
            } catch let error as PostgresError where error.sqlState == .queryCanceled && !open {
                skipped = try store()  // cancelled with the steps at the shutdown deadline: a hand-off goes on
            }
            let why = "\(skipped) of \(entries.count) state(s) not written: resumed elsewhere meanwhile, or another user's"
            // A hand-off of many: the others were written, and their clients get their tokens.
            if skipped > 0 && skipped < entries.count && !open { Log.warning("shutting down: \(why)") }
            return skipped == 0 || skipped < entries.count && !open ? nil : why
        } catch {
            return (error as? PostgresError)?.message ?? "\(error)"
        }
    }
}
