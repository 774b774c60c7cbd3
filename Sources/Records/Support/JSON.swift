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
        /// JSON text as it stands (a number's digits, an array as PostgreSQL wrote it).
        case raw(String)
        case array([Value])
        case object([(String, Value)])

        public var text: String {
            switch self {
            case .string(let s): JSON.quote(s)
            case .int(let i): String(i)
            case .bool(let b): b ? "true" : "false"
            case .null: "null"
            case .raw(let text): text
            case .array(let items): "[" + items.map(\.text).joined(separator: ",") + "]"
            case .object(let pairs): "{" + pairs.map { JSON.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
            }
        }

        public static func == (a: Value, b: Value) -> Bool { a.text == b.text }

        static func optional(_ text: String?) -> Value { text.map(Value.string) ?? .null }
    }

    /// Whether `text` is a JSON number (`-0.5`, `12e3`; not `NaN`, `+1`, `.5` or `1.`).
    static func isNumber(_ text: String) -> Bool {
        var bytes = text.utf8[...]
        func digits() -> Int {
            let count = bytes.prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }.count
            bytes = bytes.dropFirst(count)
            return count
        }
        if bytes.first == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
        let leading = bytes.first
        let whole = digits()
        guard whole > 0, whole == 1 || leading != UInt8(ascii: "0") else { return false }
        if bytes.first == UInt8(ascii: ".") {
            bytes = bytes.dropFirst()
            guard digits() > 0 else { return false }
        }
        if bytes.first == UInt8(ascii: "e") || bytes.first == UInt8(ascii: "E") {
            bytes = bytes.dropFirst()
            if bytes.first == UInt8(ascii: "+") || bytes.first == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
            guard digits() > 0 else { return false }
        }
        return bytes.isEmpty
    }
}
