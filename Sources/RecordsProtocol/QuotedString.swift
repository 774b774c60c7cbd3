/// A string as the protocol and JSON both write it: in double quotes, `"` and `\` escaped,
/// line breaks and tabs as `\n` `\r` `\t`, other control characters as `\uXXXX`. The server's
/// replies, the CLI's AUTH line and RecordsClient's values all quote with this.
public func quotedString(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 {
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}
