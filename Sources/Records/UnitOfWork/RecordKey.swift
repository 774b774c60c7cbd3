/// Identifies a stored record: its entity and the text of each primary-key column, in key
/// order, as PostgreSQL prints it (`7`, `3de2b81b-...`), so equal keys compare equal.
public struct RecordKey: Hashable, Sendable, Comparable, Codable {
    public var entity: String
    public var values: [String]

    public init(entity: String, values: [String]) {
        self.entity = entity
        self.values = values
    }

    public init(entity: String, id: String) {
        self.init(entity: entity, values: [id])
    }

    public static func < (a: RecordKey, b: RecordKey) -> Bool {
        a.entity != b.entity ? a.entity < b.entity : a.values.lexicographicallyPrecedes(b.values)
    }
}

extension Entity {
    /// How a record's key reads in replies, as a command would take it: `42`,
    /// `"3de2b81b-..."` for a key that is not a number, and `project=3 employee=7` for a
    /// composite key.
    public func show(_ key: RecordKey) -> String {
        guard key.values.count == self.key.count else { return key.values.joined(separator: ",") }
        if key.values.count == 1 { return Self.word(key.values[0], kind: self.key[0].kind) }
        return zip(self.key, key.values).map { attribute, value in
            label(attribute.name) + "=" + Self.word(value, kind: keyKind(attribute.name))
        }.joined(separator: " ")
    }

    /// `no employee with id 42`, `no tag with label "red"`, `no project_member with project=3 employee=7`.
    public func missing(_ key: RecordKey) -> String {
        "no \(name) with " + (self.key.count == 1 ? label(self.key[0].name) + " " : "") + show(key)
    }

    /// The kind of a key column's values: a foreign-key column's values are its target's.
    func keyKind(_ column: String) -> ValueKind {
        key.first { $0.name == column }?.kind ?? .other
    }

    /// A value as a command takes it: a number bare, anything else as a quoted string, a
    /// timestamp in ISO 8601 as GET shows it (the key holds PostgreSQL's text, which compares).
    static func word(_ value: String, kind: ValueKind) -> String {
        switch kind {
        case .integer, .decimal, .double: value
        case .timestamp: JSON.quote(TimestampText.iso(value))
        default: JSON.quote(value)
        }
    }
}
