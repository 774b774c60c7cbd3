import Postgres

/// The check of one change event for the sessions that watch its entity with one predicate as
/// one identity: which of its records match, asked of PostgreSQL as that identity (a key path
/// may reach a table with policies). Made on the loop, run on a pool worker: the server only
/// hands it a connection.
public struct WatchFilter: Sendable {
    public let event: ChangeFeed.Event
    public let identity: Identity
    let sql: String
    let parameters: [String?]

    /// Nil when the predicate no longer compiles (the model changed).
    public init?(_ event: ChangeFeed.Event, predicate: Predicate, identity: Identity, model: Model) {
        guard let query = WatchEvents.matching(event, predicate, model: model) else { return nil }
        (self.event, self.identity, sql, parameters) = (event, identity, query.sql, query.parameters)
    }

    /// The lines to push: one per matching record, as an unfiltered WATCH writes them.
    public func matchingLines(on connection: Connection, model: Model) throws -> [String] {
        guard let entity = model.entity(named: event.entity) else { return [] }
        try connection.assume(identity)
        let rows = try connection.query(sql, parameters)
        let keys = (0..<rows.rowCount).map { row in
            RecordKey(entity: entity.name, values: (0..<entity.key.count).map { rows.string(row, $0) ?? "" })
        }
        return keys.isEmpty ? [] : WatchEvents.lines(entity, event.operation, keys)
    }
}

extension VisibilityLedger {
    /// `drain` with its checks run on `connection`, which already runs as the ledger's identity.
    public func drain(on connection: Connection, model: Model, emit: (Output) -> Void) {
        drain(model: model, query: { sql, parameters in
            // Prepared: a drain runs every delivery, and planning under the table's policies
            // took about 130 µs (EXPLAIN), beside the check's own ~190.
            let rows = try connection.queryPrepared(sql, parameters)
            return (0..<rows.rowCount).map { row in (0..<rows.columnCount).map { rows.string(row, $0) ?? "" } }
        }, emit: emit)
    }
}
