/// Helpers for the parts of SQL that cannot be parameters. Identifiers reach here only after
/// they were checked against the reflected model; they are quoted all the same.
public enum SQL {
    /// `"name"`, with embedded quotes doubled.
    /// Called for every identifier of every statement, so it avoids Foundation's string search.
    public static func identifier(_ name: String) -> String {
        var name = name
        return name.withUTF8 { bytes in
            var quotes = 0
            for byte in bytes where byte == 34 { quotes += 1 }
            // Written byte by byte into the string's own storage: a scalar at a time, this was
            // a good part of a one-row SAVE.
            return String(unsafeUninitializedCapacity: bytes.count + quotes + 2) { out in
                var at = 0
                out[at] = 34
                at += 1
                for byte in bytes {
                    out[at] = byte
                    at += 1
                    if byte == 34 {
                        out[at] = 34
                        at += 1
                    }
                }
                out[at] = 34
                return at + 1
            }
        }
    }

    /// `sql` with each `$n` outside quoted identifiers and strings replaced by
    /// `literal(parameters[n - 1])` (`NULL` for nil), for the one statement that cannot take
    /// parameters: COPY. An untyped literal is resolved from its context exactly as an untyped
    /// parameter is, so the statement means the same; `literal` must quote safely
    /// (libpq's `PQescapeLiteral`).
    public static func inlining<E: Error>(_ sql: String, _ parameters: [String?],
                                          literal: (String) throws(E) -> String) throws(E) -> String {
        let bytes = Array(sql.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 16 * parameters.count)
        var quote: UInt8? = nil  // the quote we are inside: " or '
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if let open = quote {
                if byte == open { quote = nil }  // a doubled quote closes and reopens: same result
            } else if byte == 34 || byte == 39 {
                quote = byte
            } else if byte == 36, index + 1 < bytes.count, (48...57).contains(bytes[index + 1]) {
                var end = index + 1
                var number = 0
                while end < bytes.count, (48...57).contains(bytes[end]) {
                    number = number * 10 + Int(bytes[end] - 48)
                    end += 1
                }
                if number >= 1 && number <= parameters.count {
                    let value = try parameters[number - 1].map(literal) ?? "NULL"
                    out.append(contentsOf: value.utf8)
                    index = end
                    continue
                }
            }
            out.append(byte)
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `COPY (query) TO STDOUT [WITH (options)]` for a query with parameters, its values
    /// inlined (`inlining`): FIND's stream and EXPORT.
    public static func copyOut<E: Error>(_ query: String, _ parameters: [String?], options: String? = nil,
                                         literal: (String) throws(E) -> String) throws(E) -> String {
        "COPY (" + (try inlining(query, parameters, literal: literal)) + ") TO STDOUT" + with(options)
    }

    /// `COPY table (columns) TO STDOUT [WITH (options)]`: every row of a table, read by COPY
    /// itself, not through a query; `table` comes quoted (`Model.table`).
    public static func copyOut(table: String, _ columns: [String], options: String? = nil) -> String {
        "COPY \(table) (" + columns.map(identifier).joined(separator: ", ") + ") TO STDOUT" + with(options)
    }

    /// A COPY's ` WITH (options)`, or nothing.
    private static func with(_ options: String?) -> String { options.map { " WITH (\($0))" } ?? "" }

    /// A PostgreSQL array literal (`{"a","b",NULL}`) to bind as one text parameter.
    public static func arrayLiteral<S: Sequence>(_ elements: S) -> String where S.Element == String? {
        // Built as bytes: the element loop runs once per value of a multi-row insert.
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(elements.underestimatedCount * 12 + 2)
        var first = true
        for element in elements {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            guard var element else { out.append(contentsOf: "NULL".utf8); continue }
            out.append(UInt8(ascii: "\""))
            element.withUTF8 { bytes in
                // Copied a run at a time between the bytes to escape, not a byte at a time: most
                // values have none, a bytea's hex one (its leading `\x`), in a megabyte.
                var start = 0, at = 0
                while at < bytes.count {
                    let byte = bytes[at]
                    if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<at]))
                        out.append(UInt8(ascii: "\\"))
                        start = at
                    }
                    at += 1
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// The elements of a one-dimensional array's text form (`{a,"b c",NULL}`), as PostgreSQL
    /// prints `text[]`.
    public static func parseArray(_ text: String) -> [String?] {
        let bytes = Array(text.utf8)
        guard bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else { return [] }
        var elements: [String?] = []
        var index = 1
        let end = bytes.count - 1
        while index < end {
            var element: [UInt8] = []
            if bytes[index] == UInt8(ascii: "\"") {
                index += 1
                while index < end, bytes[index] != UInt8(ascii: "\"") {
                    if bytes[index] == UInt8(ascii: "\\") { index += 1 }
                    if index < end { element.append(bytes[index]) }
                    index += 1
                }
                index += 1  // the closing quote
                elements.append(String(decoding: element, as: UTF8.self))
            } else {
                while index < end, bytes[index] != UInt8(ascii: ",") {
                    element.append(bytes[index])
                    index += 1
                }
                let word = String(decoding: element, as: UTF8.self)
                elements.append(word == "NULL" ? nil : word)
            }
            index += 1  // the comma
        }
        return elements
    }
}
