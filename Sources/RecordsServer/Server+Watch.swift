#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records

/// WATCH: committed changes fanned out to the sessions that watch them.
extension Server {
    /// On the loop: committed changes for the sessions that WATCH them. A WHERE needs
    /// PostgreSQL: its query runs on the pool (the sessions' own commands are not held up),
    /// once per distinct query however many sessions watch with the same predicate.
    func deliver(_ events: [ChangeFeed.Event]) {
        var filters: [String: (sql: String, parameters: [String?], event: ChangeFeed.Event, connections: [ClientConnection])] = [:]
        var order: [String] = []
        for connection in connections.values where !connection.session.watches.isEmpty {
            for event in events {
                switch connection.session.delivery(of: event) {
                case .none: continue
                case .lines(let lines): connection.queue(events: lines)
                case .filter(let sql, let parameters):
                    let key = ([sql] + parameters.map { $0.map { "=" + $0 } ?? "nil" }).joined(separator: "\u{0}")
                    if filters[key] == nil {
                        filters[key] = (sql, parameters, event, [])
                        order.append(key)
                    }
                    filters[key]!.connections.append(connection)
                }
            }
            if !connection.events.isEmpty && !connection.busy { service(connection) }
        }
        for key in order {
            let filter = filters[key]!
            guard let entity = context.model.entity(named: filter.event.entity) else { continue }
            pool.submit { [loop] result in
                let keys: [RecordKey]
                do {
                    let rows = try result.get().connection.query(filter.sql, filter.parameters)
                    keys = (0..<rows.rowCount).map { row in RecordKey(entity: entity.name, values: (0..<entity.key.count).map { rows.string(row, $0) ?? "" }) }
                } catch {
                    return Log.warning("WATCH \(filter.event.entity) WHERE: \(filter.event.ids.count) \(filter.event.operation) event(s) not checked for \(filter.connections.count) session(s): \(error)")
                }
                guard !keys.isEmpty else { return }
                let lines = Session.lines(entity, filter.event.operation, keys)
                loop.post { [self] in
                    for connection in filter.connections where !connection.closed {
                        connection.queue(events: lines)
                        if !connection.busy { service(connection) }
                    }
                }
            }
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
