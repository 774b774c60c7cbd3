#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records

/// WATCH: committed changes fanned out to the sessions that watch them.
extension Server {
    /// On the loop: committed changes for the sessions that WATCH them.
    func deliver(_ events: [ChangeFeed.Event]) {
        for connection in connections.values where !connection.session.watches.isEmpty {
            for event in events {
                switch connection.session.delivery(of: event) {
                case .none: continue
                case .lines(let lines): connection.queue(events: lines)
                case .filter(let sql, let parameters):
                    // The predicate needs PostgreSQL; the session's own commands are not held up.
                    pool.submit { [loop] result in
                        let ids: [String]
                        do {
                            ids = try result.get().query(sql, parameters).column(0).compactMap { $0 }
                        } catch {
                            return Log.warning("WATCH \(event.entity) WHERE: \(event.ids.count) \(event.operation) event(s) not checked: \(error)",
                                               session: connection.session.id)
                        }
                        let lines = Session.lines(event.entity, event.operation, ids)
                        loop.post { [self] in
                            guard !connection.closed else { return }
                            connection.queue(events: lines)
                            if !connection.busy { service(connection) }
                        }
                    }
                }
            }
            if !connection.events.isEmpty && !connection.busy { service(connection) }
        }
    }

    /// Pushes queued events while the output has room; a session that falls behind has its
    /// oldest events dropped and is told how many.
    func pushEvents(_ connection: ClientConnection) {
        if connection.eventsDropped > 0 {
            connection.push("overflow \(connection.eventsDropped) events dropped")
            connection.eventsDropped = 0
        }
        var pushed = 0
        for event in connection.events {
            if connection.pendingOutput >= configuration.outputHighWater { break }
            connection.push(event)
            pushed += 1
        }
        connection.events.removeFirst(pushed)
    }
}
