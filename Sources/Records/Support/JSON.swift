import RecordsProtocol

/// Minimal JSON text helpers for the reply encoder; rows themselves are encoded by PostgreSQL.
public enum JSON {
    /// `text` (JSON) without the spaces outside its strings: `json_build_object` writes
    /// `{"k" : 1, "n" : 2}`, every other reply `{"k":1,"n":2}`.
    public static func compact(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        var inString = false, escaped = false
        for byte in text.utf8 {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == 0x20 || byte == 0x0A || byte == 0x09 || byte == 0x0D {
                continue
            }
            out.append(byte)
        }
        return String(decoding: out, as: UTF8.self)
    }

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
