import Foundation

/// A GET's SELECT built once per shape (`Model.selects`): by entity, includes and the filter's columns. Building
/// the SQL took 28% of the server's CPU under pipelined GETs (`perf`, 8 clients), more than
/// PostgreSQL's round trip. The filter's values are the statement's first parameters
/// (`QueryBuilder.select` binds the filter first): `Select.binding` puts a GET's in. Held by
/// the model, so a reload starts empty.
extension ShapeCache where Key == String, Value == QueryBuilder.Select {
    /// Its parameters for the filter hold the columns' names until bound.
    func get(_ request: FetchRequest, model: Model, columns: [String]) throws(CommandError) -> QueryBuilder.Select {
        var key = request.entity
        for column in columns { key += "\u{1F}" + column }
        key += "\u{1E}" + request.include.joined(separator: "\u{1F}")
        if !request.includeOrder.isEmpty {
            // Not the keys' offsets in the line: the same shape typed elsewhere is the same.
            key += "\u{1E}" + request.includeOrder.sorted { $0.key < $1.key }.map { path, order in
                let sort = order.key.map { "\($0.path.lowercased()) \($0.ascending) \($0.caseInsensitive) \($0.collation ?? "")" } ?? ""
                return "\(path)=\(sort) \(order.limit ?? -1)"
            }.joined(separator: "\u{1F}")
        }
        return try value(key) { () throws(CommandError) in
            try QueryBuilder.select(request, model: model, filter: columns.map { ($0, $0) }, versions: .xmin)
        }
    }
}

extension QueryBuilder.Select {
    /// The statement with the filter's values as its first parameters.
    func binding(_ values: [String]) -> Self {
        var bound = self
        bound.parameters.replaceSubrange(0..<values.count, with: values.map(Optional.init))
        return bound
    }
}
