#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records

/// WATCH: committed changes fanned out to the sessions that watch them.
extension Server {
    /// A batch of committed changes, each event's lines rendered once (off the loop, by the
    /// thread that read them), for every session that watches without a WHERE.
    struct Delivery: Sendable {
        var events: [ChangeFeed.Event]
        var lines: [PushLines]
    }

    /// Off the loop: renders the lines of `events` once, then hands them to the loop.
    static func render(_ events: [ChangeFeed.Event], model: Model) -> Delivery {
        Delivery(events: events, lines: events.map { event in
            guard let entity = model.entity(named: event.entity) else { return PushLines([]) }
            return PushLines(Session.lines(entity, event.operation, event.ids.compactMap { ChangeFeed.recordKey($0, of: entity) }))
        })
    }

    /// Sessions a turn of the loop hands events to: a fan-out to thousands of sessions is
    /// spread over turns, so the sessions' own commands are served between them.
    static let deliveriesPerTurn = 512

    /// Queries one delivery runs for WATCH ... WHERE (events times distinct predicates): a
    /// change of 200,000 rows watched through 200 predicates asked 40,000 of them.
    static let maxFilterChecks = 1_000

    /// On the loop: committed changes for the sessions that WATCH them, `deliveriesPerTurn`
    /// sessions a turn. A WHERE needs PostgreSQL: its query runs on the pool, once per distinct
    /// query however many sessions watch with the same predicate.
    func deliver(_ delivery: Delivery, from start: Int = 0, watching: [ClientConnection]? = nil) {
        let sessions = watching ?? connections.values.filter { !$0.session.watches.isEmpty }
        let end = min(sessions.count, start + Self.deliveriesPerTurn)
        var filters: [String: (sql: String, parameters: [String?], event: ChangeFeed.Event, connections: [Int])] = [:]
        var order: [String] = []
        let model = context.model
        for connection in sessions[start..<end] where !connection.closed {
            for (index, event) in delivery.events.enumerated() {
                guard let watch = connection.session.watches[event.entity] else { continue }
                guard let predicate = watch else {
                    connection.events.append(delivery.lines[index])  // shared, rendered once
                    continue
                }
                // One query per event and distinct predicate, whatever the number of sessions;
                // past `maxFilterChecks` a delivery, the session is told what it missed.
                let key = "\(index)\u{0}\(predicate)"
                if filters[key] == nil {
                    guard order.count < Self.maxFilterChecks else {
                        connection.events.dropped += 1
                        continue
                    }
                    guard let query = Session.matching(event, predicate, model: model) else { continue }
                    filters[key] = (query.sql, query.parameters, event, [])
                    order.append(key)
                }
                filters[key]!.connections.append(connection.id)
            }
            if (!connection.events.isEmpty || connection.events.dropped > 0) && !connection.busy { service(connection) }
        }
        if end < sessions.count {
            loop.nextTurn { [self] in deliver(delivery, from: end, watching: sessions) }
        }
        for key in order {
            let filter = filters[key]!
            guard let entity = context.model.entity(named: filter.event.entity) else { continue }
            pool.submit { [inbox] result in
                let keys: [RecordKey]
                do {
                    let rows = try result.get().connection.query(filter.sql, filter.parameters)
                    keys = (0..<rows.rowCount).map { row in RecordKey(entity: entity.name, values: (0..<entity.key.count).map { rows.string(row, $0) ?? "" }) }
                } catch {
                    return Log.warning("WATCH \(filter.event.entity) WHERE: \(filter.event.ids.count) \(filter.event.operation) event(s) not checked for \(filter.connections.count) session(s): \(error)")
                }
                guard !keys.isEmpty else { return }
                inbox.post(.filtered(connections: filter.connections, lines: PushLines(Session.lines(entity, filter.event.operation, keys))))
            }
        }
    }

    /// Pushes queued events while the output has room; a session that falls behind has its
    /// oldest events dropped and is told how many.
    func pushEvents(_ connection: ClientConnection) {
        if connection.events.dropped > 0 {
            connection.push("overflow \(connection.events.dropped) events dropped")
            connection.events.dropped = 0
        }
        while connection.pendingOutput < configuration.outputHighWater, let line = connection.events.pop() {
            connection.push(bytes: line)
        }
    }
}
