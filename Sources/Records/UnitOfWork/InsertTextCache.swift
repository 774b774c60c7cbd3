import Foundation

/// The text of the unnest INSERT by entity and columns, made once per model: a one-insert SAVE
/// otherwise quotes, joins and numbers the same text again (a few µs of each such SAVE).
final class InsertTextCache: @unchecked Sendable {  // `entries` guarded by `lock`
    private let lock = NSLock()
    private var entries: [[String]: String] = [:]
    /// Shapes kept (the columns a client sets are its to choose): past it, the cache starts over.
    static let capacity = 512

    /// `INSERT INTO t (c1, c2) OVERRIDING SYSTEM VALUE SELECT * FROM unnest($1::type1[], $2::type2[])`:
    /// one array parameter a column, in order.
    func unnest(_ entity: Entity, columns: [String], model: Model) -> String {
        let key = [entity.name] + columns
        if let hit = lock.withLock({ entries[key] }) { return hit }
        let types = entity.columnTypes
        let arrays = columns.enumerated().map { index, column in "$\(index + 1)::\(types[column] ?? "text")[]" }
        let text = "INSERT INTO \(model.table(entity)) (\(columns.map(SQL.identifier).joined(separator: ", "))) OVERRIDING SYSTEM VALUE SELECT * FROM unnest(\(arrays.joined(separator: ", ")))"
        lock.withLock {
            if entries.count >= Self.capacity { entries.removeAll() }
            entries[key] = text
        }
        return text
    }
}
