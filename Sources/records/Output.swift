#if canImport(Glibc)
import Glibc
#endif
import CLibEdit
import Foundation
import RecordsProtocol
import RecordsClient

/// Prints replies for people (aligned tables) or programs (JSON lines, CSV).
struct Printer {
    let format: CLIOptions.Format
    let color: Bool
    let errorColor: Bool
    static let maxWidth = 32

    init(format: CLIOptions.Format?, environment: [String: String]) {
        let noColor = environment["NO_COLOR"] != nil
        color = !noColor && isatty(STDOUT_FILENO) == 1
        errorColor = !noColor && isatty(STDERR_FILENO) == 1
        self.format = format ?? (isatty(STDOUT_FILENO) == 1 ? .table : .json)
    }

    func reply(_ reply: WireReply, elapsed: Double) {
        if !reply.isOK {
            error(reply)
            return
        }
        let records = reply.lines.filter { $0.hasPrefix("{") }.map(JSONObject.parse)
        if !records.isEmpty && records.count == reply.lines.count {
            switch format {
            case .json: reply.lines.forEach { print($0) }
            case .csv: csv(records)
            case .table:
                table(records)
                print(dim("(\(reply.statusText), \(String(format: "%.1f", elapsed * 1000)) ms)"))
            }
            return
        }
        reply.lines.forEach { print($0) }
        if format == .table || reply.lines.isEmpty && !reply.statusText.isEmpty && format != .csv {
            if !reply.statusText.isEmpty { print(dim(reply.statusText)) }
        }
    }

    /// Sends `command` and prints its records as they arrive (json, csv): the first one shows
    /// at once and memory stays flat however many follow. Other lines and the status are then
    /// printed as `reply` would. Tables need every width first: they go through `reply`.
    func stream(_ command: String, on connection: LineConnection, elapsed: () -> Double) throws -> WireReply {
        guard format != .table else {
            let reply = try connection.send(command)
            self.reply(reply, elapsed: elapsed())
            return reply
        }
        var header: [String]?
        var others: [String] = []
        var streamed = 0
        try connection.write(command + "\n")
        let reply = try connection.readReply { (line: String) in
            guard line.hasPrefix("{") else { return others.append(line) }
            streamed += 1
            if format == .json { return print(line) }
            let record = JSONObject.parse(line)
            // Records of another shape (CHANGES' inserts and updates) start a header of their
            // own: no column is dropped.
            if header != record.map(\.key) {
                header = record.map(\.key)
                print(header!.map(Self.csvField).joined(separator: ","))
            }
            print(header!.map { key in
                guard let value = record.first(where: { $0.key == key })?.value, value != .null else { return "" }
                return Self.csvField(value.display)
            }.joined(separator: ","))
        }
        let rest = WireReply(lines: others, status: reply.status)
        if !rest.isOK || streamed == 0 || !others.isEmpty { self.reply(rest, elapsed: elapsed()) }
        return rest
    }

    func error(_ reply: WireReply) {
        let text = (reply.lines + ["ERROR " + reply.statusText]).joined(separator: "\n")
        FileHandle.standardError.write(((errorColor ? "\u{1B}[31m" + text + "\u{1B}[0m" : text) + "\n").data(using: .utf8)!)
    }

    /// A pushed line (WATCH): as sent, or under json one object (`{"entity":"game","key":"5","operation":"inserted"}`).
    func event(_ line: String) {
        guard format == .json else { return print("! " + line) }
        if let event = ChangeEvent(line: line) {
            print("{\"entity\":\(quotedString(event.entity)),\"key\":\(quotedString(event.key)),\"operation\":\(quotedString(event.operation))}")
        } else {
            print("{\"notice\":\(quotedString(line))}")
        }
    }

    func note(_ text: String) {
        FileHandle.standardError.write(((errorColor ? "\u{1B}[2m" + text + "\u{1B}[0m" : text) + "\n").data(using: .utf8)!)
    }

    private func dim(_ text: String) -> String { color ? "\u{1B}[2m" + text + "\u{1B}[0m" : text }

    /// nil is shown distinctly from an empty string.
    private var nilText: String { color ? "\u{1B}[2m∅\u{1B}[0m" : "∅" }

    /// Columns a terminal gives `text`: wide (CJK, most emoji) characters take two, combining
    /// marks none (wcwidth, under a UTF-8 locale).
    static func displayWidth(_ text: String) -> Int {
        text.unicodeScalars.reduce(0) { $0 + max(0, Int(clibedit_wcwidth($1.value))) }
    }

    /// A cell's text on one line: line breaks, tabs and other control characters escaped.
    static func oneLine(_ text: String) -> String {
        // Control characters, and the bidirectional overrides that would reorder the row.
        func hidden(_ scalar: Unicode.Scalar) -> Bool {
            scalar.value < 0x20 || scalar.value == 0x7F || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
        }
        guard text.unicodeScalars.contains(where: hidden) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += String(format: "\\x%02x", scalar.value)
                } else if hidden(scalar) {
                    out += String(format: "\\u{%04x}", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    private func table(_ records: [[(key: String, value: JSONObject.Value)]]) {
        var keys: [String] = []
        for record in records { for (key, _) in record where !keys.contains(key) { keys.append(key) } }
        let rows = records.map { record in keys.map { key in record.first { $0.key == key }?.value } }
        let widths = keys.indices.map { column in
            min(Self.maxWidth, max(Self.displayWidth(keys[column]), rows.map { Self.displayWidth(Self.oneLine($0[column]?.display ?? "∅")) }.max() ?? 0))
        }
        func cell(_ raw: String, _ width: Int, isNil: Bool = false) -> String {
            let text = Self.oneLine(raw)
            var cut = text
            if Self.displayWidth(text) > width {
                // Characters while they fit in width - 1 columns, then the ellipsis.
                cut = ""
                var used = 0
                for character in text {
                    let w = Self.displayWidth(String(character))
                    if used + w > width - 1 { break }
                    cut.append(character)
                    used += w
                }
                cut += "…"
            }
            let padded = cut + String(repeating: " ", count: max(0, width - Self.displayWidth(cut)))
            return isNil ? (color ? "\u{1B}[2m" + padded + "\u{1B}[0m" : padded) : padded
        }
        print(keys.indices.map { cell(keys[$0], widths[$0]) }.joined(separator: " │ "))
        print(widths.map { String(repeating: "─", count: $0) }.joined(separator: "─┼─"))
        for row in rows {
            print(row.indices.map { i in
                guard let value = row[i], value != .null else { return cell("∅", widths[i], isNil: true) }
                return cell(value.display, widths[i])
            }.joined(separator: " │ "))
        }
    }

    private func csv(_ records: [[(key: String, value: JSONObject.Value)]]) {
        var keys: [String]?
        for record in records {
            // A record of another shape starts a header of its own: no column is dropped.
            if keys != record.map(\.key) {
                keys = record.map(\.key)
                print(keys!.map(Self.csvField).joined(separator: ","))
            }
            print(keys!.map { key in
                guard let value = record.first(where: { $0.key == key })?.value, value != .null else { return "" }
                return Self.csvField(value.display)
            }.joined(separator: ","))
        }
    }

    static func csvField(_ text: String) -> String {
        guard text.isEmpty || text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// The top level of a JSON object with its keys in order (JSONSerialization loses the order).
enum JSONObject {
    enum Value: Equatable {
        case null
        case string(String)
        /// Numbers, booleans, nested objects and arrays, as written.
        case raw(String)

        var display: String {
            switch self {
            case .null: "∅"
            case .string(let s): s
            case .raw(let r): r
            }
        }
    }

    static func parse(_ line: String) -> [(key: String, value: Value)] {
        let chars = Array(line.utf8)
        var i = 1
        var pairs: [(String, Value)] = []
        func skipSpace() { while i < chars.count, chars[i] == 32 { i += 1 } }
        func stringEnd(_ from: Int) -> Int {
            var j = from + 1
            while j < chars.count, chars[j] != 34 { j += chars[j] == 92 ? 2 : 1 }
            return j
        }
        func decode(_ range: Range<Int>) -> String {
            // Most strings hold no escape: the text between the quotes, without a JSON parser.
            if range.count >= 2, chars[range.lowerBound] == 34, !chars[range].contains(92) {
                return String(decoding: chars[(range.lowerBound + 1)..<(range.upperBound - 1)], as: UTF8.self)
            }
            let text = String(decoding: chars[range], as: UTF8.self)
            return (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)) as? String ?? text
        }
        while i < chars.count {
            skipSpace()
            guard i < chars.count, chars[i] == 34 else { break }
            let keyEnd = stringEnd(i)
            let key = decode(i..<(keyEnd + 1))
            i = keyEnd + 1
            skipSpace()
            i += 1  // colon
            skipSpace()
            let start = i
            var depth = 0
            while i < chars.count {
                let c = chars[i]
                if c == 34 { i = stringEnd(i) + 1; continue }
                if c == 123 || c == 91 { depth += 1 }
                if c == 125 || c == 93 { if depth == 0 { break }; depth -= 1 }
                if c == 44 && depth == 0 { break }
                i += 1
            }
            let raw = String(decoding: chars[start..<i], as: UTF8.self)
            let value: Value = raw == "null" ? .null : (raw.hasPrefix("\"") ? .string(decode(start..<i)) : .raw(raw))
            pairs.append((key, value))
            i += 1  // comma or closing brace
        }
        return pairs
    }
}
