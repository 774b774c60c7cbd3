import RecordsProtocol

/// Minimal JSON text helpers for the reply encoder; rows themselves are encoded by PostgreSQL.
public enum JSON {
    /// A JSON string literal.
    public static func quote(_ text: String) -> String { quotedString(text) }
}

extension JSON {
    /// A JSON value written with its object keys in the order given (FORMAT JSON replies).
    public indirect enum Value: Sendable, Equatable {
        case string(String), int(Int), bool(Bool), null
        case array([Value])
        case object([(String, Value)])

        public var text: String {
            switch self {
            case .string(let s): JSON.quote(s)
            case .int(let i): String(i)
            case .bool(let b): b ? "true" : "false"
            case .null: "null"
            case .array(let items): "[" + items.map(\.text).joined(separator: ",") + "]"
            case .object(let pairs): "{" + pairs.map { JSON.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
            }
        }

        public static func == (a: Value, b: Value) -> Bool { a.text == b.text }

        static func optional(_ text: String?) -> Value { text.map(Value.string) ?? .null }
    }
}
