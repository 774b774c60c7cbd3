/// A literal as the client typed it, before it is checked against an attribute's type.
public enum Value: Equatable, Sendable, Codable, CustomStringConvertible {
    case null
    case bool(Bool)
    /// An integer or decimal literal, kept as typed so no precision is lost.
    case number(String)
    case string(String)
    /// `#name`: a pending record of the same unit of work.
    case ref(String)
    /// `["a", "b"]`, `[1, nil, 3]`, `[[1, 2], [3, 4]]`: an array column's value.
    indirect case array([Value])

    /// How the value reads back in CHANGES and errors.
    public var description: String {
        switch self {
        case .null: "nil"
        case .bool(let b): b ? "true" : "false"
        case .number(let n): n
        case .string(let s): quotedString(s)
        case .ref(let r): "#" + r
        case .array(let elements): "[" + elements.map(\.description).joined(separator: ", ") + "]"
        }
    }
}
