import Postgres

/// What a WATCH sends and asks, whoever delivers it: the pushed lines of an event, the query
/// that keeps the records of an event a WATCH's predicate matches, and what a watcher of a
/// table with row-level security sees when it starts watching (its ledger's seed).
public enum WatchEvents {
    /// The keys of `entity` the connection's identity sees now (a WATCH's ledger starts from them).
    static func seed(_ entity: Entity, model: Model, _ connection: Connection) throws -> WatchSeed {
        let read = QueryBuilder.visible(entity, limit: VisibilityLedger.rememberedKeys + 1, model: model)
        let rows = try connection.query(read.sql, read.parameters)
        let keys = (0..<rows.rowCount).map { row in RecordKey(entity: entity.name, values: (0..<rows.columnCount).map { rows.string(row, $0) ?? "" }) }
        return WatchSeed(keys: Set(keys.prefix(VisibilityLedger.rememberedKeys)), complete: keys.count <= VisibilityLedger.rememberedKeys)
    }

    /// The query whose keys are the records of `event` that match a WATCH's predicate: as
    /// they are now for inserts and updates, as they were for deletes. Nil when the predicate
    /// no longer compiles (the model changed).
    public static func matching(_ event: ChangeFeed.Event, _ predicate: Predicate, model: Model) -> (sql: String, parameters: [String?])? {
        guard let entity = model.entity(named: event.entity) else { return nil }
        let keys = event.ids.compactMap { ChangeFeed.recordKey($0, of: entity) }
        return try? QueryBuilder.matching(event.entity, predicate: predicate, keys: keys, logKeys: event.ids,
                                          deleted: event.operation == .deleted, model: model)
    }

    /// `employee 42 updated`: each record's key as commands take it (a string quoted, a
    /// composite key as `project=3 employee=7`).
    public static func lines(_ entity: Entity, _ operation: ChangeOperation, _ keys: [RecordKey]) -> [String] {
        keys.map { "\(entity.name) \(entity.show($0)) \(operation.rawValue)" }
    }
}
