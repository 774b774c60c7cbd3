import Foundation
import RecordsProtocol

/// A value a request line can carry: quoted and escaped by the library, never concatenated
/// by the caller (`find(..., where: "age > %@ AND name == %@", 30, "O\"Neil")`).
public protocol RecordsLiteral: Sendable {
    /// The value as the protocol writes it.
    func recordsLiteral() throws(RecordsError) -> String
}

extension String: RecordsLiteral {
    public func recordsLiteral() throws(RecordsError) -> String {
        guard !unicodeScalars.contains("\0") else { throw .invalidRequest("a string holds NUL, which the protocol does not carry") }
        return quotedString(self)
    }
}

extension Substring: RecordsLiteral {
    public func recordsLiteral() throws(RecordsError) -> String { try String(self).recordsLiteral() }
}

extension Int: RecordsLiteral { public func recordsLiteral() -> String { String(self) } }
extension Int64: RecordsLiteral { public func recordsLiteral() -> String { String(self) } }
extension Int32: RecordsLiteral { public func recordsLiteral() -> String { String(self) } }
extension Int16: RecordsLiteral { public func recordsLiteral() -> String { String(self) } }
extension UInt32: RecordsLiteral { public func recordsLiteral() -> String { String(self) } }

extension Double: RecordsLiteral {
    public func recordsLiteral() throws(RecordsError) -> String {
        guard isFinite else { throw .invalidRequest("\(self) is not a number the protocol carries") }
        return "\(self)"
    }
}

extension Float: RecordsLiteral {
    public func recordsLiteral() throws(RecordsError) -> String { try Double(self).recordsLiteral() }
}

/// Exact, as numeric columns keep it (`12.30`).
extension Decimal: RecordsLiteral {
    public func recordsLiteral() throws(RecordsError) -> String {
        guard !isNaN else { throw .invalidRequest("NaN is not a number the protocol carries") }
        return description
    }
}

/// Binary, as the protocol carries it: base64 text.
extension Data: RecordsLiteral {
    public func recordsLiteral() throws(RecordsError) -> String { try base64EncodedString().recordsLiteral() }
}

extension Bool: RecordsLiteral { public func recordsLiteral() -> String { self ? "true" : "false" } }

extension UUID: RecordsLiteral {
    public func recordsLiteral() throws(RecordsError) -> String { try uuidString.lowercased().recordsLiteral() }
}

extension Date: RecordsLiteral {
    /// ISO 8601 in UTC with microseconds, as PostgreSQL keeps timestamps.
    public func recordsLiteral() throws(RecordsError) -> String {
        // Whole microseconds first, then split: rounding the fraction alone could give 1,000,000.
        let total = Int64((timeIntervalSince1970 * 1_000_000).rounded())
        let (whole, micros) = (total >= 0 ? total / 1_000_000 : (total - 999_999) / 1_000_000, Int(((total % 1_000_000) + 1_000_000) % 1_000_000))
        var time = time_t(whole)
        var parts = tm()
        gmtime_r(&time, &parts)
        let text = String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                          Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), micros)
        return try text.recordsLiteral()
    }
}

extension Optional: RecordsLiteral where Wrapped: RecordsLiteral {
    public func recordsLiteral() throws(RecordsError) -> String {
        switch self {
        case .some(let value): try value.recordsLiteral()
        case .none: "nil"
        }
    }
}

/// A list, for IN and BETWEEN (`"age IN %@", [30, 40]`): `{30, 40}`.
extension Array: RecordsLiteral where Element: RecordsLiteral {
    public func recordsLiteral() throws(RecordsError) -> String {
        "{" + (try map { (value: Element) throws(RecordsError) -> String in try value.recordsLiteral() }).joined(separator: ", ") + "}"
    }
}

/// A pending record of the unit of work (`#e1`), as INSERT named it.
public struct RecordRef: RecordsLiteral, Hashable, Sendable, CustomStringConvertible {
    public let name: String
    public init(_ name: String) { self.name = name.hasPrefix("#") ? name : "#" + name }
    public func recordsLiteral() throws(RecordsError) -> String {
        guard Self.isName(name.dropFirst()) else { throw .invalidRequest("'\(name)' is not a #ref") }
        return name
    }
    public var description: String { name }
    static func isName(_ text: Substring) -> Bool {
        !text.isEmpty && text.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "_" }
    }
}

/// Request lines built from a format and separately passed values.
public enum RequestFormat {
    /// `%@` takes the next value, quoted; `%K` the next value as a key path (checked, never
    /// quoted); `%%` is a percent sign.
    public static func format(_ format: String, _ arguments: [any RecordsLiteral]) throws(RecordsError) -> String {
        var out = ""
        var rest = arguments[...]
        var chars = format.makeIterator()
        var quote: Character?  // inside a string the format itself holds
        var escaped = false
        while let c = chars.next() {
            if let open = quote {
                // A placeholder in quotes would be text to NSPredicate, and here a way to break
                // out of the string: refused.
                if c == "%" {
                    guard chars.next() == "%" else {
                        throw .invalidRequest("'\(format)': %@ and %K go without quotes (the library quotes values)")
                    }
                    out.append("%")
                    continue
                }
                let wasEscaped = escaped
                escaped = c == "\\" && !wasEscaped
                if c == open && !wasEscaped { quote = nil }
                out.append(c)
                continue
            }
            if c == "\"" || c == "'" {
                quote = c
                escaped = false
                out.append(c)
                continue
            }
            guard c == "%" else { out.append(c); continue }
            switch chars.next() {
            case "@":
                guard let value = rest.popFirst() else { throw .invalidRequest("'\(format)' has more %@ and %K than values") }
                out += try value.recordsLiteral()
            case "K":
                guard let value = rest.popFirst() else { throw .invalidRequest("'\(format)' has more %@ and %K than values") }
                guard let path = value as? String, isKeyPath(path) else { throw .invalidRequest("%K takes a key path like department.name") }
                out += path
            case "%": out += "%"
            default: throw .invalidRequest("'\(format)': only %@, %K and %% are understood")
            }
        }
        guard rest.isEmpty else { throw .invalidRequest("'\(format)' has fewer %@ and %K than values (\(arguments.count))") }
        return out
    }

    /// Names and dotted paths of names (`department.name`, `employees.@count`).
    public static func isKeyPath(_ text: String) -> Bool {
        !text.isEmpty && text.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { part in
            let name = part.hasPrefix("@") ? part.dropFirst() : part
            return !name.isEmpty && name.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "_" }
                && !(name.first?.isNumber ?? true)
        }
    }
}
