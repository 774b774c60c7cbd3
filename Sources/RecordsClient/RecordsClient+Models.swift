import Foundation
import RecordsProtocol

extension RecordsClient {
    /// A pending insert of `model`, its stored properties as the attributes reads decode them
    /// from (`firstName` → `first_name`). A nil optional is left out, so the column's default
    /// or a generated key applies; `omitting` leaves out more (a key of 0 the database should
    /// generate: `omitting: ["id"]`). Returns its `#ref`; SAVE gives its key (`saved.ids[ref]`).
    @discardableResult
    public func insert<T: RecordsEntity & Encodable>(_ model: T, as ref: RecordRef? = nil, omitting: Set<String> = []) async throws -> RecordRef {
        var line = "INSERT \(try Self.name(T.entityName))"
        if let ref { line += " AS \(try ref.recordsLiteral())" }
        line += try Self.assignments(Self.fields(model, omitting: omitting))
        let reply = try await request(line)
        guard let first = reply.message.split(separator: " ").first, first.hasPrefix("#") else {
            throw RecordsError.protocolViolation("INSERT answered \(reply.status)")
        }
        return RecordRef(String(first))
    }

    /// A pending update of the stored record `model` names by its key (`T.keyAttributes`):
    /// given `original` (the value as read), only the fields that differ from it are sent (one
    /// now nil is set to nil), so a SAVE's conflict check looks at what this session changed;
    /// without it, every field but the key. Returns how many fields were sent; none, nothing.
    @discardableResult
    public func update<T: RecordsEntity & Encodable>(_ model: T, from original: T? = nil) async throws -> Int {
        let now = try Self.fields(model, omitting: [])
        let (keyNames, key) = try Self.key(of: T.self, in: now)
        var changed = now.filter { !keyNames.contains($0.name) }
        if let original {
            let before = Dictionary(try Self.fields(original, omitting: []).map { ($0.name, $0.literal) }, uniquingKeysWith: { first, _ in first })
            let after = Set(changed.map(\.name))
            changed = changed.filter { before[$0.name] != $0.literal }
                + before.keys.sorted().filter { !keyNames.contains($0) && !after.contains($0) }.map { (name: $0, literal: "nil") }
        }
        guard !changed.isEmpty else { return 0 }
        // After key columns, SET says where the new values begin.
        let set = keyNames.count > 1 ? " SET" : ""
        try await request("UPDATE \(try Self.name(T.entityName)) \(key)\(set)" + (try Self.assignments(changed)))
        return changed.count
    }

    /// A pending delete of the stored record `model` names by its key; its rules (cascade,
    /// nullify, deny) apply at SAVE.
    public func delete<T: RecordsEntity & Encodable>(_ model: T) async throws {
        let (_, key) = try Self.key(of: T.self, in: Self.fields(model, omitting: []))
        try await request("DELETE \(try Self.name(T.entityName)) \(key)")
    }

    /// Inserts `model`, or updates the record with the same values of `on` (the attributes of
    /// a unique key, as properties or attributes); nil optionals and `omitting` are left out.
    /// Returns the record's `#ref` as `upsert(_:on:_:as:)` does.
    @discardableResult
    public func upsert<T: RecordsEntity & Encodable>(_ model: T, on key: [String], omitting: Set<String> = [],
                                                   as ref: RecordRef? = nil) async throws -> RecordRef? {
        let on = try key.map { (name: String) throws(RecordsError) -> String in ModelEncoding.snakeCase(name) }
        return try await upsertLine(T.entityName, on: on, ref: ref, try Self.assignments(Self.fields(model, omitting: omitting)))
    }

    /// The model's fields, less `omitting` (property or attribute names).
    static func fields<T: Encodable>(_ model: T, omitting: Set<String>) throws -> [(name: String, literal: String)] {
        let left = Set(omitting.map(ModelEncoding.snakeCase))
        return try ModelEncoding.fields(model).filter { !left.contains($0.name) }
    }

    /// The key attributes' names and how a line names the record among `fields`: its key's
    /// literal (`42`), or a composite key's columns (`team=1 person=7`). An update or a delete
    /// names a stored record by it.
    static func key<T: RecordsEntity>(of type: T.Type, in fields: [(name: String, literal: String)]) throws(RecordsError) -> (names: Set<String>, text: String) {
        guard !T.keyAttributes.isEmpty else { throw .invalidRequest("\(T.self) names no key attribute: an update or a delete names a stored record") }
        var parts: [String] = []
        for attribute in T.keyAttributes {
            let name = ModelEncoding.snakeCase(attribute)
            guard let literal = fields.first(where: { $0.name == name })?.literal, literal != "nil" else {
                throw .invalidRequest("\(T.self) has no value for its key '\(attribute)': an update or a delete names a stored record")
            }
            parts.append(T.keyAttributes.count == 1 ? literal : "\(try Self.name(name))=\(literal)")
        }
        return (Set(T.keyAttributes.map(ModelEncoding.snakeCase)), parts.joined(separator: " "))
    }
}
