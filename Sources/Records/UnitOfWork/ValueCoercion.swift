import Foundation

/// Checks a typed literal against an attribute's kind and turns it into bind text, so a wrong
/// value is refused at the command, before anything is pending.
enum ValueCoercion {
    /// - Parameter name: for error messages only, so made only when one is (not per value).
    static func coerce(_ value: Value, to kind: ValueKind, name makeName: @autoclosure () -> String) throws(CommandError) -> FieldValue {
        // Errors are built apart (`wrong`): a local function capturing the value and the name
        // cost retains on every value checked, error or not.
        switch value {
        case .null: return .null
        case .ref: throw CommandError(.validation, "\(makeName()) is an attribute: #refs go in to-one relationships")
        case .bool(let b):
            switch kind {
            case .boolean, .other: return .text(b ? "true" : "false")
            case .json: return .text(b ? "true" : "false")
            default: throw wrong(makeName(), value, expected(kind))
            }
        case .number(let n):
            switch kind {
            case .integer(let bits):
                guard let (parsed, canonical) = wholeNumber(n) else { throw wrong(makeName(), value, "a whole number") }
                let limit = bits >= 64 ? Int64.max : (Int64(1) << (bits - 1)) - 1
                guard let parsed, parsed <= limit, parsed >= -limit - 1 else {
                    throw CommandError(.validation, "\(makeName()): \(n) is out of range for a \(bits)-bit integer")
                }
                // As PostgreSQL prints it (`+7` and `007` are 7), so keys compare equal.
                return .text(canonical ? n : String(parsed))
            case .decimal, .double, .other, .json: return .text(n)
            default: throw wrong(makeName(), value, expected(kind))
            }
        case .array(let elements):
            guard case .array(let element) = kind else { throw wrong(makeName(), value, kind.named) }
            return .text(try arrayLiteral(elements, element: element, name: makeName()))
        case .string(let s):
            switch kind {
            // An array still takes PostgreSQL's own literal (`"{a,b}"`), which it checks.
            case .string, .other, .array: return .text(s)
            case .double where ["nan", "infinity", "-infinity"].contains(s.lowercased()): return .text(s)
            case .date:
                guard isISODate(s, time: false) else { throw wrong(makeName(), value, "an ISO-8601 date such as \"2024-05-31\"") }
                return .text(s)
            case .timestamp:
                guard isISODate(s, time: true) else { throw wrong(makeName(), value, "an ISO-8601 date and time such as \"2024-05-31T14:30:00Z\"") }
                return .text(s)
            case .time: return .text(s)
            case .uuid:
                guard isUUID(s) else { throw wrong(makeName(), value, "a uuid such as \"0b9f6f2a-5d3c-4e53-9a52-2f6c1e0d8a11\"") }
                return .text(s.lowercased())  // as PostgreSQL prints it, so keys compare equal
            case .binary:
                guard let data = Data(base64Encoded: s) else { throw wrong(makeName(), value, "base64 text") }
                return .text(hexBytea(data))
            case .json:
                guard let data = s.data(using: .utf8),
                      (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil else {
                    throw wrong(makeName(), value, "JSON text")
                }
                return .text(s)
            default: throw wrong(makeName(), value, kind.named + ", not a string")
            }
        }
    }

    /// `["a", nil, "b"]` as PostgreSQL's array literal, `{"a",NULL,"b"}`: each element checked
    /// against the element kind (`tags[2]` in what an error names), quoted, escaped.
    static func arrayLiteral(_ elements: [Value], element: ValueKind, name: String) throws(CommandError) -> String {
        var out = "{"
        for (index, value) in elements.enumerated() {
            if index > 0 { out += "," }
            if case .array(let inner) = value {
                out += try arrayLiteral(inner, element: element, name: name)
                continue
            }
            switch try coerce(value, to: element, name: "\(name)[\(index + 1)]") {
            case .null: out += "NULL"
            case .text(let text):
                out += "\""
                for character in text.unicodeScalars {
                    if character == "\"" || character == "\\" { out += "\\" }
                    out.unicodeScalars.append(character)
                }
                out += "\""
            case .ref: throw CommandError(.validation, "\(name): an array holds values, not #refs")
            }
        }
        return out + "}"
    }

    /// `\x` and two hex digits a byte: bytea's input (`Hex`: a photo of a megabyte is decoded
    /// on the event loop).
    static func hexBytea(_ data: Data) -> String {
        data.withUnsafeBytes { Hex.lowercase($0, prefix: "\\x") }
    }

    /// What a value of `kind` is written as, for an error.
    private static func expected(_ kind: ValueKind) -> String { kind == .string ? "a string in double quotes" : kind.named }

    private static func wrong(_ name: String, _ value: Value, _ expected: String) -> CommandError {
        CommandError(.validation, "\(name) expects \(expected), got \(value)")
    }

    /// A sign and ASCII digits: the value (nil past 64 bits) and whether `text` is already
    /// written as PostgreSQL prints it; nil when it is not a whole number. Read byte by byte:
    /// every integer of every INSERT line comes through here.
    static func wholeNumber(_ text: String) -> (value: Int64?, canonical: Bool)? {
        var text = text
        return text.withUTF8 { utf8 in
            var at = 0
            let sign = utf8.first
            if sign == UInt8(ascii: "-") || sign == UInt8(ascii: "+") { at = 1 }
            guard at < utf8.count else { return nil }
            let first = utf8[at]
            let negative = sign == UInt8(ascii: "-")
            // Accumulated negative: Int64.min has no positive twin.
            var value: Int64? = 0
            for byte in utf8[at...] {
                guard byte >= 48 && byte <= 57 else { return nil }
                if let current = value {
                    let (times, overflow1) = current.multipliedReportingOverflow(by: 10)
                    let (next, overflow2) = times.subtractingReportingOverflow(Int64(byte - 48))
                    value = overflow1 || overflow2 ? nil : next
                }
            }
            if !negative, let current = value { value = current == .min ? nil : -current }
            let canonical = sign != UInt8(ascii: "+") && (first != 48 || utf8.count - at == 1) && !(negative && first == 48)
            return (value, canonical)
        }
    }

    /// `2024-05-31`, and with `time`: optionally `T14:30`, seconds, fraction and a zone.
    static func isISODate(_ s: String, time: Bool) -> Bool {
        let b = Array(s.utf8)
        func digits(_ from: Int, _ count: Int) -> Bool {
            from + count <= b.count && b[from..<(from + count)].allSatisfy { $0 >= 48 && $0 <= 57 }
        }
        guard digits(0, 4), b.count >= 10, b[4] == 45, digits(5, 2), b[7] == 45, digits(8, 2) else { return false }
        if b.count == 10 { return true }
        guard time, b[10] == UInt8(ascii: "T") || b[10] == 32, digits(11, 2), b.count >= 16, b[13] == 58, digits(14, 2) else { return false }
        var i = 16
        if i < b.count, b[i] == 58 {
            guard digits(i + 1, 2) else { return false }
            i += 3
            if i < b.count, b[i] == 46 {
                i += 1
                let start = i
                while i < b.count, b[i] >= 48, b[i] <= 57 { i += 1 }
                if i == start { return false }
            }
        }
        if i == b.count { return true }
        if b[i] == UInt8(ascii: "Z"), i + 1 == b.count { return true }
        guard b[i] == 43 || b[i] == 45, digits(i + 1, 2) else { return false }
        i += 3
        if i == b.count { return true }
        if b[i] == 58 { i += 1 }
        return digits(i, 2) && i + 2 == b.count
    }

    static func isUUID(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count == 36 else { return false }
        for (i, c) in b.enumerated() {
            if [8, 13, 18, 23].contains(i) { if c != 45 { return false }; continue }
            let hex = (c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70)
            if !hex { return false }
        }
        return true
    }
}
