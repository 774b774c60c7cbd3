import Foundation
import RecordsProtocol

/// A read's options, as FIND takes them. `orderBy` keys are read by `SortKey(parsing:)`:
/// `name`, `name[c] DESC`, `name COLLATE "sv-x-icu"`.
public struct FindOptions: Sendable {
    public var orderBy: [String] = []
    public var limit: Int?
    public var offset: Int?
    public var include: [String] = []
    /// Only these key paths of each record (`SELECT`), each distinct once (`DISTINCT`).
    public var select: [String] = []
    public var distinct = false
    public init(orderBy: [String] = [], limit: Int? = nil, offset: Int? = nil, include: [String] = [],
                select: [String] = [], distinct: Bool = false) {
        self.orderBy = orderBy
        self.limit = limit
        self.offset = offset
        self.include = include
        self.select = select
        self.distinct = distinct
    }
}

extension RecordsClient {
    /// One record by key (nil when there is none, or the user may not see it).
    public func get<T: RecordsEntity>(_ type: T.Type, _ key: some RecordsLiteral, include: [String] = []) async throws -> T? {
        let reply = try await send("GET \(T.entityName) \(try key.recordsLiteral())" + (try Self.includeClause(include)))
        if reply.code == .notFound { return nil }
        guard let line = try reply.checked().lines.first else { return nil }
        return try RecordDecoding.decode(T.self, line)
    }

    /// One record by a unique key or its key columns (`["uid": "m1"]`, `["team": 1, "person": 7]`),
    /// its values quoted by the library; nil when there is none.
    public func get<T: RecordsEntity>(_ type: T.Type, by key: KeyValuePairs<String, any RecordsLiteral>,
                                      include: [String] = []) async throws -> T? {
        guard key.count > 0 else { throw RecordsError.invalidRequest("GET by a unique key needs its fields") }
        let reply = try await send("GET \(T.entityName)" + (try Self.assignments(key)) + (try Self.includeClause(include)))
        if reply.code == .notFound { return nil }
        guard let line = try reply.checked().lines.first else { return nil }
        return try RecordDecoding.decode(T.self, line)
    }

    /// Matching records. `predicate` is a format: `%@` takes the next argument, quoted by the
    /// library (`"age > %@ AND department.name == %@", 30, "Sales"`).
    public func find<T: RecordsEntity>(_ type: T.Type, where predicate: String? = nil, _ arguments: any RecordsLiteral...,
                                       orderBy: [String] = [], limit: Int? = nil, offset: Int? = nil, include: [String] = []) async throws -> [T] {
        try await page(type, T.entityName, where: predicate, arguments,
                       options: FindOptions(orderBy: orderBy, limit: limit, offset: offset, include: include), after: nil).records
    }

    /// Only `paths` of each matching record (`FIND entity SELECT ...`: key paths through to-one
    /// relationships, `employees.@count`, `@avg.age` ...), each decoded into `T` keyed by the
    /// paths (`department.name` through `CodingKeys`); `distinct`: each combination once.
    public func select<T: Decodable>(_ type: T.Type, from entity: String, _ paths: [String], distinct: Bool = false,
                                     where predicate: String? = nil, _ arguments: any RecordsLiteral...,
                                     orderBy: [String] = [], limit: Int? = nil, offset: Int? = nil) async throws -> [T] {
        guard !paths.isEmpty else { throw RecordsError.invalidRequest("SELECT needs at least one key path") }
        return try await page(type, entity, where: predicate, arguments,
                              options: FindOptions(orderBy: orderBy, limit: limit, offset: offset, select: paths, distinct: distinct),
                              after: nil).records
    }

    /// How many match.
    public func count(_ entity: String, where predicate: String? = nil, _ arguments: any RecordsLiteral...) async throws -> Int {
        let reply = try await request("COUNT \(try Self.name(entity))" + (try Self.whereClause(predicate, arguments)))
        guard let count = Int(reply.message.prefix { $0.isNumber }) else { throw RecordsError.protocolViolation("COUNT answered \(reply.status)") }
        return count
    }

    /// Every matching record, `pageSize` at a time, each page read with the server's cursor
    /// (keyset paging: stable while others insert).
    public func pages<T: RecordsEntity>(_ type: T.Type, where predicate: String? = nil, _ arguments: any RecordsLiteral...,
                                        orderBy: [String] = [], pageSize: Int = 500, include: [String] = []) -> AsyncThrowingStream<[T], Error> {
        // A page holds at least one record (LIMIT 0 has no next page to go on from).
        let options = FindOptions(orderBy: orderBy, limit: max(1, pageSize), include: include)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    var cursor: String?
                    repeat {
                        let page = try await self.page(type, T.entityName, where: predicate, arguments, options: options, after: cursor)
                        if !page.records.isEmpty { continuation.yield(page.records) }
                        cursor = page.next
                    } while cursor != nil && !Task.isCancelled
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    func page<T: Decodable>(_ type: T.Type, _ entity: String, where predicate: String?, _ arguments: [any RecordsLiteral], options: FindOptions,
                            after cursor: String?) async throws -> (records: [T], next: String?) {
        var line = "FIND \(try Self.name(entity))" + (try Self.selectClause(options.select, distinct: options.distinct))
        line += try Self.whereClause(predicate, arguments)
        line += try SortKey.orderBy(options.orderBy)
        if let limit = options.limit { line += " LIMIT \(limit)" }
        if let offset = options.offset {
            guard cursor == nil else { throw RecordsError.invalidRequest("a page is found by OFFSET or by its cursor, not both") }
            line += " OFFSET \(offset)"
        }
        if let cursor {
            guard cursor.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else { throw RecordsError.protocolViolation("a cursor '\(cursor)'") }
            line += " AFTER \(cursor)"
        }
        line += try Self.includeClause(options.include)
        let reply = try await request(line)
        let records = try reply.lines.map { try RecordDecoding.decode(T.self, $0) }
        return (records, Self.nextCursor(reply.message))
    }

    /// `2 records; next page: AFTER c626...` → `c626...`.
    static func nextCursor(_ message: String) -> String? {
        guard let range = message.range(of: "next page: AFTER ") else { return nil }
        let cursor = message[range.upperBound...].prefix { !$0.isWhitespace && $0 != ";" }
        return cursor.isEmpty ? nil : String(cursor)
    }

    static func name(_ entity: String) throws(RecordsError) -> String {
        guard RequestFormat.isKeyPath(entity), !entity.contains(".") else { throw .invalidRequest("'\(entity)' is not an entity name") }
        return entity
    }

    static func whereClause(_ predicate: String?, _ arguments: [any RecordsLiteral]) throws(RecordsError) -> String {
        guard let predicate else {
            guard arguments.isEmpty else { throw .invalidRequest("values without a predicate") }
            return ""
        }
        return " WHERE " + (try RequestFormat.format(predicate, arguments))
    }

    /// ` SELECT [DISTINCT] a, b`, or nothing.
    static func selectClause(_ paths: [String], distinct: Bool) throws(RecordsError) -> String {
        guard !paths.isEmpty else { return "" }
        for path in paths where !RequestFormat.isKeyPath(path) { throw .invalidRequest("SELECT takes key paths, not '\(path)'") }
        return " SELECT " + (distinct ? "DISTINCT " : "") + paths.joined(separator: ", ")
    }

    static func includeClause(_ include: [String]) throws(RecordsError) -> String {
        guard !include.isEmpty else { return "" }
        for path in include where !RequestFormat.isKeyPath(path) { throw .invalidRequest("INCLUDE takes relationship paths, not '\(path)'") }
        return " INCLUDE " + include.joined(separator: ", ")
    }
}

extension RecordsClient {
    /// AGGREGATE, each group decoded into `T` (snake_case names to camelCase properties; name
    /// a group's key path with a property by `AS` on functions, or read it as `department.name`
    /// through `CodingKeys`). `functions` are `count()`, `sum(path)`, `avg(path)`, `min(path)`,
    /// `max(path)`, each with an optional `AS name`.
    public func aggregate<T: Decodable>(_ type: T.Type, _ entity: String, _ functions: [String], groupBy: [String] = [],
                                        where predicate: String? = nil, _ arguments: any RecordsLiteral...) async throws -> [T] {
        guard !functions.isEmpty else { throw RecordsError.invalidRequest("AGGREGATE needs a function: count(), avg(age) ...") }
        for function in functions where function.range(of: #"^(count|sum|avg|min|max)\([A-Za-z0-9_.@]*\)( AS [A-Za-z_][A-Za-z0-9_]*)?$"#, options: .regularExpression) == nil {
            throw RecordsError.invalidRequest("'\(function)' is not an aggregate function such as count() or avg(age) AS mean")
        }
        for path in groupBy where !RequestFormat.isKeyPath(path) { throw RecordsError.invalidRequest("GROUP BY takes key paths, not '\(path)'") }
        var line = "AGGREGATE \(try Self.name(entity)) " + functions.joined(separator: ", ")
        line += try Self.whereClause(predicate, arguments)
        if !groupBy.isEmpty { line += " GROUP BY " + groupBy.joined(separator: ", ") }
        return try await request(line).lines.map { try RecordDecoding.decode(T.self, $0) }
    }
}
