/// How the server validates, binds and prints an attribute, derived from its PostgreSQL type.
public enum ValueKind: Equatable, Sendable {
    case string
    case integer(bits: Int)
    case decimal
    case double
    case boolean
    case date
    case timestamp
    case time
    case binary
    case uuid
    case json
    /// An array of values of one kind (`text[]`, `integer[]`, an enum's array): JSON arrays in
    /// replies, `["a", "b"]` on writes, its elements compared with ANY, ALL, NONE, CONTAINS.
    indirect case array(ValueKind)
    /// Any other type: passed to PostgreSQL as text, which validates it.
    case other

    /// Maps a `pg_type.typname` to a kind.
    public init(typeName: String) {
        // An array type is its element type's name after an underscore (`_text`, `_weekday`).
        if typeName.hasPrefix("_"), typeName.count > 1 {
            self = .array(ValueKind(typeName: String(typeName.dropFirst())))
            return
        }
        switch typeName {
        case "int2": self = .integer(bits: 16)
        case "int4": self = .integer(bits: 32)
        case "int8": self = .integer(bits: 64)
        case "numeric": self = .decimal
        case "float4", "float8": self = .double
        case "bool": self = .boolean
        case "text", "varchar", "bpchar", "name", "citext": self = .string
        case "date": self = .date
        case "timestamp", "timestamptz": self = .timestamp
        case "time", "timetz": self = .time
        case "bytea": self = .binary
        case "uuid": self = .uuid
        case "json", "jsonb": self = .json
        default: self = .other
        }
    }

    /// Any of the integer widths.
    public var isInteger: Bool {
        if case .integer = self { return true }
        return false
    }

    /// `a date`, `an integer`, `an array of string`: the name as an error message reads it.
    public var named: String { (name.first == "i" || name.first == "a" ? "an " : "a ") + name }

    /// The kind of an array's elements; nil for other kinds.
    public var element: ValueKind? {
        if case .array(let element) = self { return element }
        return nil
    }

    /// A short name for DESCRIBE and error messages.
    public var name: String {
        switch self {
        case .string: "string"
        case .integer: "integer"
        case .decimal: "decimal"
        case .double: "double"
        case .boolean: "boolean"
        case .date: "date"
        case .timestamp: "timestamp"
        case .time: "time"
        case .binary: "binary"
        case .uuid: "uuid"
        case .json: "json"
        case .array(let element): "array of \(element.name)"
        case .other: "text"
        }
    }
}
