import Foundation
import RecordsProtocol

/// What SAVE did: the ids pending inserts got, by `#ref`, and the server's summary.
public struct SaveResult: Sendable, Equatable {
    /// `#e1` → `"42"` (a composite key as the server prints it: `project=3 employee=7`).
    public var ids: [RecordRef: String]
    public var summary: String

    public init(ids: [RecordRef: String], summary: String) {
        self.ids = ids
        self.summary = summary
    }

    /// From SAVE's data lines: `{"ref":"#e1","entity":"employee","key":"42"}` under FORMAT
    /// JSON, `#e1 employee 42` in text; an ALREADY_SAVED error's `{"saved":"saved: ..."}`
    /// line gives the summary of the save that used the key.
    init(lines: [String], summary: String?) {
        var ids: [RecordRef: String] = [:]
        var summary = summary ?? ""
        for line in lines {
            if line.hasPrefix("{") {
                guard let saved = try? JSONDecoder().decode(SavedLine.self, from: Data(line.utf8)) else { continue }
                if let ref = saved.ref, let key = saved.key { ids[RecordRef(ref)] = key }
                if let text = saved.saved { summary = text }
                continue
            }
            let parts = line.split(separator: " ", maxSplits: 2)
            if parts.count == 3, parts[0].hasPrefix("#") { ids[RecordRef(String(parts[0]))] = String(parts[2]) }
        }
        self.init(ids: ids, summary: summary)
    }

    private struct SavedLine: Decodable { var ref: String?; var key: String?; var saved: String? }
}

/// How SAVE settles fields someone else changed since this session read them.
public enum MergePolicy: String, Sendable {
    case force = "FORCE", theirs = "THEIRS", merge = "MERGE"
}

extension RecordsClient {
    /// A pending insert; returns its `#ref`, by which later edits and relationships name it.
    @discardableResult
    public func insert(_ entity: String, _ values: KeyValuePairs<String, any RecordsLiteral>, as ref: RecordRef? = nil) async throws -> RecordRef {
        var line = "INSERT \(try Self.name(entity))"
        if let ref { line += " AS \(try ref.recordsLiteral())" }
        line += try Self.assignments(values)
        let reply = try await request(line)
        guard let first = reply.message.split(separator: " ").first, first.hasPrefix("#") else {
            throw RecordsError.protocolViolation("INSERT answered \(reply.status)")
        }
        return RecordRef(String(first))
    }

    /// A pending update of the record with `key` (a value, or a `RecordRef`).
    public func update(_ entity: String, _ key: some RecordsLiteral, _ values: KeyValuePairs<String, any RecordsLiteral>) async throws {
        try await request("UPDATE \(try Self.name(entity)) \(try key.recordsLiteral())" + (try Self.assignments(values)))
    }

    /// A pending delete; its rules (cascade, nullify, deny) apply at SAVE.
    public func delete(_ entity: String, _ key: some RecordsLiteral) async throws {
        try await request("DELETE \(try Self.name(entity)) \(try key.recordsLiteral())")
    }

    /// Inserts, or updates the record with the same unique key (`on`: its attributes). Returns
    /// the record's `#ref`, for later inserts to relate to: with `as`, that name, whether the
    /// record was inserted or found stored; without, the pending insert's (nil when a stored
    /// record was found).
    @discardableResult
    public func upsert(_ entity: String, on key: [String], _ values: KeyValuePairs<String, any RecordsLiteral>,
                       as ref: RecordRef? = nil) async throws -> RecordRef? {
        try await upsertLine(entity, on: key, ref: ref, try Self.assignments(values))
    }

    func upsertLine(_ entity: String, on key: [String], ref: RecordRef?, _ assignments: String) async throws -> RecordRef? {
        guard !key.isEmpty else { throw RecordsError.invalidRequest("UPSERT needs the attributes of a unique key") }
        let on = try key.map { (name: String) throws(RecordsError) -> String in try Self.name(name) }.joined(separator: ", ")
        let reply = try await request("UPSERT \(try Self.name(entity))" + (try ref.map { " AS \(try $0.recordsLiteral())" } ?? "")
                                      + " ON \(on)" + assignments)
        if let ref { return ref }
        // A reply that names a pending insert starts with its #ref, as INSERT's does.
        guard let first = reply.message.split(separator: " ").first, first.hasPrefix("#") else { return nil }
        return RecordRef(String(first))
    }

    /// Writes every pending change in one transaction. A conflict with another session's
    /// changes throws `RecordsError.conflict` with each record's read, yours and now values.
    /// With a `key` (`SAVE KEY`), a key a save of other changes used throws
    /// `RecordsError.alreadySaved` with what that save did.
    @discardableResult
    public func save(policy: MergePolicy? = nil, key: String? = nil) async throws -> SaveResult {
        var line = "SAVE" + (policy.map { " " + $0.rawValue } ?? "")
        if let key { line += " KEY \(KeyToken.literal(key))" }
        let reply = try await request(line)
        return SaveResult(lines: reply.lines, summary: reply.message)
    }

    /// SAVE exactly once under `key`, whatever happens on the way: an UNAVAILABLE answer
    /// (PostgreSQL away, a failover), a connection lost with the SAVE in flight (the session is
    /// resumed on another server, or was moved there when its server stopped) are met by
    /// sending the same `SAVE KEY` again, for up to `patience` seconds. The server answers a
    /// key it saved under with that save's reply, so the work is written once: an
    /// `alreadySaved` answer after a SAVE whose answer was lost is that save, returned as
    /// done. Anything else (CONFLICT, VALIDATION ...) is thrown as `save` throws it: fix the
    /// unit and call again with the same key.
    @discardableResult
    public func save(key: String, policy: MergePolicy? = nil, patience: Double = 30) async throws -> SaveResult {
        let deadline = Date().addingTimeInterval(patience)
        var inFlightLost = false
        var lostInARow = 0
        while true {
            do {
                return try await save(policy: policy, key: key)
            } catch RecordsError.alreadySaved(let message, let saved) {
                // Our own earlier attempt committed (its unit, resumed, shows as saved): done.
                guard inFlightLost else { throw RecordsError.alreadySaved(message: message, saved: saved) }
                return saved
            } catch let error as RecordsError {
                switch error {
                case .server(code: .unavailable, _, _):
                    lostInARow = 0
                case .connection:
                    // Once: the session followed its server's handoff (or was resumed after a
                    // crash) and the SAVE goes again there. Twice in a row: the session is
                    // gone; its unit with it (the caller applies its changes on a new
                    // connection and saves them under the same key). A session still waiting
                    // for a server to take it back (a deploy, the balancer's DNS away) is
                    // not gone: it is tried again until `patience` runs out.
                    inFlightLost = true
                    lostInARow = await isWaitingForServer ? 0 : lostInARow + 1
                    if lostInARow > 1 { throw error }
                default:
                    throw error
                }
                guard Date() < deadline else { throw error }
                try await Task.sleep(nanoseconds: UInt64.random(in: 100_000_000...300_000_000))
            }
        }
    }

    /// Drops every pending change.
    public func rollback() async throws {
        try await request("ROLLBACK")
    }

    /// A child scratchpad on top of the unit of work: edits go there until `merge` folds them
    /// into the parent or `discard` drops them.
    public func nest() async throws { try await request("NEST") }
    public func merge() async throws { try await request("MERGE") }
    public func discard() async throws { try await request("DISCARD") }

    /// The pending changes, one a change (CHANGES under FORMAT JSON).
    public func changes() async throws -> [PendingChange] {
        try await request("CHANGES").lines.map { try RecordDecoding.decode(PendingChange.self, $0) }
    }

    /// How many changes are pending, and how deep the scratchpads are.
    public func pendingCount() async throws -> (pending: Int, depth: Int) {
        let reply = try await request("CHANGES COUNT")
        guard let line = reply.lines.first else { throw RecordsError.protocolViolation("CHANGES COUNT answered \(reply.status)") }
        let count = try RecordDecoding.decode(PendingCount.self, line)
        return (count.pending, count.depth)
    }

    private struct PendingCount: Decodable { var pending: Int; var depth: Int }

    static func assignments(_ values: KeyValuePairs<String, any RecordsLiteral>) throws(RecordsError) -> String {
        // An array is an array attribute's value here (`["a", "b"]`), not an IN list.
        try assignments(values.map { (name, value) throws(RecordsError) in (name, try ModelEncoding.assignment(value)) })
    }

    /// ` name=literal` for each field, every name checked to be one attribute's.
    static func assignments(_ fields: [(name: String, literal: String)]) throws(RecordsError) -> String {
        var text = ""
        for (name, literal) in fields {
            guard RequestFormat.isKeyPath(name), !name.contains(".") else { throw .invalidRequest("'\(name)' is not an attribute name") }
            text += " \(name)=\(literal)"
        }
        return text
    }
}

/// One pending change, as CHANGES lists it under FORMAT JSON.
public struct PendingChange: Sendable, Equatable, Decodable {
    /// `insert`, `update`, `delete`, `updateWhere`, `deleteWhere`.
    public var op: String
    public var entity: String
    /// A pending insert's `#ref`.
    public var ref: String?
    /// The record's key (a stored record's; a composite key's columns joined by commas).
    public var key: String?
    /// An insert's values.
    public var values: [String: RecordsValue]?
    /// An update's fields: the value read, and the new one.
    public var changes: [String: FieldChange]?
    /// A change by predicate, as typed.
    public var text: String?

    public struct FieldChange: Sendable, Equatable, Decodable {
        /// The value read (`.null` for NULL).
        public var old: RecordsValue
        public var new: RecordsValue
    }
}

/// A change another session committed, as WATCH pushes it.
public struct ChangeEvent: Sendable, Equatable {
    public var entity: String
    /// The record's key as the server prints it (`42`, `"a-uuid"`, `project=3 employee=7`).
    public var key: String
    public var operation: ChangeOperation

    public init(entity: String, key: String, operation: ChangeOperation) {
        self.entity = entity
        self.key = key
        self.operation = operation
    }

    /// The key typed as its columns are: `.integer(42)`, `.text("a-uuid")`, and for a
    /// composite key an object of its columns (`project=3 employee=7` as
    /// `.object(["project": .integer(3), "employee": .integer(7)])`).
    public var keyValue: RecordsValue { Self.typed(key) }

    /// A key as the server prints it: numbers bare, other values quoted as JSON strings, a
    /// composite key's columns as `name=value` separated by spaces.
    static func typed(_ key: String) -> RecordsValue {
        var parts: [String] = []
        var current = "", inQuote = false, escaped = false
        for character in key {
            if inQuote {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == "\"" { inQuote = false }
            } else if character == "\"" {
                inQuote = true
            } else if character == " " {
                parts.append(current)
                current = ""
                continue
            }
            current.append(character)
        }
        parts.append(current)
        func word(_ text: String) -> RecordsValue {
            if text.hasPrefix("\""), let value = try? JSONDecoder().decode(String.self, from: Data(text.utf8)) { return .text(value) }
            if let integer = Int(text) { return .integer(integer) }
            if let number = Decimal(string: text), text.first.map({ $0 == "-" || $0.isNumber }) == true { return .decimal(number) }
            return .text(text)
        }
        guard parts.count > 1 || key.first != "\"" && key.contains("=") else { return word(key) }
        var fields: [String: RecordsValue] = [:]
        for part in parts {
            guard let equals = part.firstIndex(of: "=") else { return .text(key) }
            fields[String(part[..<equals])] = word(String(part[part.index(after: equals)...]))
        }
        return .object(fields)
    }

    /// `memo 14 inserted`; nil for other pushed lines (`overflow ...`, `shutdown ...`).
    public init?(line: String) {
        guard let firstSpace = line.firstIndex(of: " "), let lastSpace = line.lastIndex(of: " "), firstSpace < lastSpace else { return nil }
        guard let operation = ChangeOperation(rawValue: String(line[line.index(after: lastSpace)...])) else { return nil }
        entity = String(line[..<firstSpace])
        key = String(line[line.index(after: firstSpace)..<lastSpace])
        self.operation = operation
    }
}

extension RecordsClient {
    /// Committed changes to `entity` (matching `predicate`, when given), on a connection of
    /// their own opened with the same address and user; ends when the task is cancelled.
    public static func watch(_ url: String, _ entity: String, where predicate: String? = nil, _ arguments: any RecordsLiteral...) async throws -> AsyncThrowingStream<ChangeEvent, Error> {
        let client = try await connect(url)
        try await client.request("WATCH \(try name(entity))" + (try whereClause(predicate, arguments)))
        return client.pushedEvents()
    }

    /// The events pushed on this connection from now on, read on its queue until the stream ends.
    func pushedEvents() -> AsyncThrowingStream<ChangeEvent, Error> {
        AsyncThrowingStream { continuation in
            queue.async { [self] in
                guard let connection else { return continuation.finish() }
                do throws(RecordsError) {
                    while let line = try connection.readPushed() {
                        if let event = ChangeEvent(line: line) {
                            continuation.yield(event)
                        } else if Notice.kind(of: line) == .sessionEnds {
                            // The feed ends here: said, not a quiet end.
                            throw .connection("the server ended the watch: \(line)")
                        }
                    }
                    throw .connection("the server closed the connection")
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { [self] _ in queueFreeShutdown() }
        }
    }
}
