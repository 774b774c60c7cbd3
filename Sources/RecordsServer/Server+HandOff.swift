import Postgres
import Records

// MARK: - Shutdown: sessions handed off for RESUME on any server

extension Server {
    /// Shutting down, the connections are idle: a session with something to keep (pending
    /// changes, scratchpads, watches, an unsettled SAVE) is written to `records.handoff`, all in
    /// one pool job, and its client is given the token; the others are told goodbye. Each
    /// closes once told. A handing-off connection counts as busy: it reads nothing more.
    func farewell(_ idle: [ClientConnection]) {
        var entries: [HandOff.Entry] = []
        var handing: [ClientConnection] = []
        for connection in idle {
            guard let state = connection.session.handOffState(), let text = try? HandOff.encode(state) else {
                connection.push("shutdown recordsd is stopping")
                connection.machine.closeWhenIdle()
                service(connection)
                continue
            }
            entries.append(HandOff.Entry(token: HandOff.newToken(), owner: connection.session.handOffOwner, state: text, pending: state.pendingCount))
            handing.append(connection)
            connection.machine.startedDatabase()
        }
        guard !entries.isEmpty else { return }
        let ids = handing.map(\.id), ttl = configuration.resumeTTL
        let notices = entries.map { (token: $0.token, pending: $0.pending) }
        pool.submit(.proven) { [inbox, entries] database in
            var failure: String?
            do {
                let lease = try database.get()
                func store() throws {
                    try lease.connection.assume(.server)  // records.handoff is no served role's
                    try HandOff.store(entries, ttl: ttl, lease.connection)
                }
                do { try store() } catch let error as PostgresError where error.kind == .connection {
                    _ = try lease.reconnect()
                    try store()
                }
            } catch {
                failure = (error as? PostgresError)?.message ?? "\(error)"
            }
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
            connection.machine.databaseFinished(stopping: true)
            if let failure {
                connection.push("shutdown recordsd is stopping; this session could not be handed off (\(failure)): its \(notice.pending) pending change(s) are lost")
            } else {
                connection.push("handoff \(notice.token) (\(notice.pending) pending change(s)): RESUME \(notice.token) on any server within \(configuration.resumeTTL) s restores this session")
                connection.push("shutdown recordsd is stopping")
            }
            service(connection)
        }
    }
}
