/// PostgreSQL's text of a timestamp (`2026-07-20 10:05:00+00`) as every reply shows one, ISO
/// 8601 (`2026-07-20T10:05:00+00:00`): the date and time joined by `T`, a zone of whole hours
/// given its minutes, ` BC` kept last. `RowEncoder` does the same on a row's bytes, in place.
enum TimestampText {
    static func iso(_ text: String) -> String {
        var body = Substring(text)
        let era = body.hasSuffix(" BC")
        if era { body = body.dropLast(3) }
        var out = String(body)
        if let space = out.firstIndex(of: " ") { out.replaceSubrange(space...space, with: "T") }
        let utf8 = Array(out.utf8)
        if utf8.count >= 3, utf8[utf8.count - 3] == UInt8(ascii: "+") || utf8[utf8.count - 3] == UInt8(ascii: "-"), utf8.count - 3 > 10 {
            out += ":00"
        }
        return era ? out + " BC" : out
    }
}
