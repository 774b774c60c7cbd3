/// A value ready to bind: text in PostgreSQL's input format, NULL, or a pending record's
/// `#ref`, resolved to its id during SAVE.
public enum FieldValue: Equatable, Sendable, Codable, CustomStringConvertible {
    case null
    case text(String)
    case ref(String)

    public var description: String {
        switch self {
        case .null: "nil"
        case .text(let t): JSON.quote(t)
        case .ref(let r): "#" + r
        }
    }
}

extension FieldValue {
    /// As FORMAT JSON shows a value: text, null, or a pending record as {"ref":"#e1"}.
    var json: JSON.Value {
        switch self {
        case .null: .null
        case .text(let text): .string(text)
        case .ref(let ref): .object([("ref", .string("#" + ref))])
        }
    }
}
