import Foundation

/// A GET's SELECT built once per shape: by entity, includes, the filter's columns and whether
/// versions are read; the filter's values are its parameters. Building the SQL took 28% of
/// the server's CPU under pipelined GETs (`perf`, 8 clients), more than PostgreSQL's round trip.
/// Held by the model, so a reload starts empty.
final class SelectCache: @unchecked Sendable {  // `entries` guarded by `lock`
    private let lock = NSLock()
    private var entries: [String: QueryBuilder.Select] = [:]
    /// Shapes kept (includes are the client's to choose): past it, the cache starts over.
    static let capacity = 512

    func select(_ request: FetchRequest, model: Model, filter: [(column: String, value: String)] = [],
                versions: Bool = false) throws(CommandError) -> QueryBuilder.Select {
        guard request.predicate == nil, request.order.isEmpty, request.limit == nil, request.offset == nil,
              request.after == nil, request.select.isEmpty, !request.distinct else {
            return try QueryBuilder.select(request, model: model, filter: filter, versions: versions)
        }
        var key = request.entity + (versions ? "\u{1F}v" : "\u{1F}-")
        for (column, _) in filter { key += "\u{1F}" + column }
        key += "\u{1E}" + request.include.joined(separator: "\u{1F}")
        if !request.includeOrder.isEmpty {
            key += "\u{1E}" + request.includeOrder.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "\u{1F}")
        }
        let values = filter.map { Optional($0.value) }
        if var hit = lock.withLock({ entries[key] }) {
            hit.parameters = values
            return hit
        }
        let select = try QueryBuilder.select(request, model: model, filter: filter, versions: versions)
        // A template only when its parameters are the filter's values, in order.
        if select.parameters == values {
            lock.withLock {
                if entries.count >= Self.capacity { entries.removeAll() }
                entries[key] = select
            }
        }
        return select
    }
}
