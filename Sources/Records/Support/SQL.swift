/// Helpers for the parts of SQL that cannot be parameters. Identifiers reach here only after
/// they were checked against the reflected model; they are quoted all the same.
public enum SQL {
    /// `"name"`, with embedded quotes doubled.
    /// Called for every identifier of every statement, so it avoids Foundation's string search.
    public static func identifier(_ name: String) -> String {
        var out = "\""
        out.reserveCapacity(name.utf8.count + 2)
        for ch in name.unicodeScalars {
            if ch == "\"" { out += "\"" }
            out.unicodeScalars.append(ch)
        }
        return out + "\""
    }

    /// A PostgreSQL array literal (`{"a","b",NULL}`) to bind as one text parameter.
    public static func arrayLiteral<S: Sequence>(_ elements: S) -> String where S.Element == String? {
        var out = "{"
        var first = true
        for element in elements {
            if !first { out += "," }
            first = false
            guard let element else { out += "NULL"; continue }
            out += "\""
            for ch in element.unicodeScalars {
                if ch == "\"" || ch == "\\" { out += "\\" }
                out.unicodeScalars.append(ch)
            }
            out += "\""
        }
        return out + "}"
    }
}
