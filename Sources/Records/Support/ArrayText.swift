/// PostgreSQL's text of an array (`{a,"b c",NULL}`, `{{1,2},{3,4}}`) as the JSON array every
/// reply shows (`["a","b c",null]`): what CHANGES and conflicts show of an array attribute, as
/// GET and FIND do. Nil when the text is not an array literal (PostgreSQL will say why).
enum ArrayText {
    static func json(_ text: String, element: ValueKind) -> String? {
        var bytes = Array(text.utf8)[...]
        guard let value = parse(&bytes, element: element), bytes.isEmpty else { return nil }
        return value
    }

    private static func parse(_ bytes: inout ArraySlice<UInt8>, element: ValueKind) -> String? {
        guard bytes.first == UInt8(ascii: "{") else { return nil }
        bytes = bytes.dropFirst()
        var items: [String] = []
        if bytes.first == UInt8(ascii: "}") { bytes = bytes.dropFirst(); return "[]" }
        while true {
            if bytes.first == UInt8(ascii: "{") {
                guard let inner = parse(&bytes, element: element) else { return nil }
                items.append(inner)
            } else if bytes.first == UInt8(ascii: "\"") {
                bytes = bytes.dropFirst()
                var raw: [UInt8] = []
                while let byte = bytes.first, byte != UInt8(ascii: "\"") {
                    bytes = bytes.dropFirst()
                    if byte == UInt8(ascii: "\\"), let next = bytes.first { raw.append(next); bytes = bytes.dropFirst() } else { raw.append(byte) }
                }
                guard bytes.first == UInt8(ascii: "\"") else { return nil }
                bytes = bytes.dropFirst()
                items.append(shown(String(decoding: raw, as: UTF8.self), element: element))
            } else {
                let raw = bytes.prefix { $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "}") }
                bytes = bytes.dropFirst(raw.count)
                let word = String(decoding: raw, as: UTF8.self)
                items.append(word == "NULL" ? "null" : shown(word, element: element))
            }
            guard let separator = bytes.first else { return nil }
            bytes = bytes.dropFirst()
            if separator == UInt8(ascii: "}") { return "[" + items.joined(separator: ",") + "]" }
            guard separator == UInt8(ascii: ",") else { return nil }
        }
    }

    private static func shown(_ text: String, element: ValueKind) -> String {
        switch element {
        case .integer, .decimal, .double: text
        case .boolean: text == "t" || text == "true" ? "true" : "false"
        case .timestamp: JSON.quote(TimestampText.iso(text))
        default: JSON.quote(text)
        }
    }
}
