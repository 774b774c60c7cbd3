/// A value ready to bind: text in PostgreSQL's input format, NULL, or a pending record's
/// `#ref`, resolved to its id during SAVE.
public enum FieldValue: Equatable, Sendable, CustomStringConvertible {
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
