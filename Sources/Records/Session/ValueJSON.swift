import Foundation

/// A stored or pending value's text as JSON, typed by its column's kind the way a FIND writes
/// the column: numbers and booleans bare, timestamps in ISO 8601, binary in base64, arrays and
/// json as JSON, the rest as strings. CHANGES and SAVE's conflicts under FORMAT JSON show
/// values this way, so a program decodes a conflict's values as it decodes a record's.
enum ValueJSON {
    /// `text` in PostgreSQL's text form (as read, or as a pending value is bound); nil is NULL.
    /// Text that is not of its kind's form (a number PostgreSQL prints as `NaN`) stays a string.
    static func value(_ text: String?, kind: ValueKind?) -> JSON.Value {
        guard let text else { return .null }
        switch kind {
        case .integer?, .decimal?, .double?:
            return JSON.isNumber(text) ? .raw(text) : .string(text)
        case .boolean?:
            switch text.lowercased() {
            case "t", "true": return .bool(true)
            case "f", "false": return .bool(false)
            default: return .string(text)
            }
        case .timestamp?:
            return .string(TimestampText.iso(text))
        case .binary?:
            guard text.hasPrefix("\\x"), let data = Hex.decode(text.dropFirst(2)) else { return .string(text) }
            return .string(Data(data).base64EncodedString())
        case .json?:
            guard (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil else { return .string(text) }
            return .raw(JSON.compact(text))
        case .array(let element)?:
            return ArrayText.json(text, element: element).map(JSON.Value.raw) ?? .string(text)
        default:
            return .string(text)
        }
    }

    /// A pending value: a pending record's `#ref` as `{"ref":"#e1"}`.
    static func value(_ field: FieldValue, kind: ValueKind?) -> JSON.Value {
        switch field {
        case .null: .null
        case .text(let text): value(text, kind: kind)
        case .ref: field.json
        }
    }
}

extension Model {
    /// The kind of `column` of `entity`: its attribute's, or for a foreign key the referenced
    /// column's.
    func kind(ofColumn column: String, in entity: Entity?) -> ValueKind? {
        guard let entity else { return nil }
        if let relationship = entity.relationship(column: column) { return referencedKind(relationship) }
        return entity.attribute(named: column)?.kind
    }
}
