#if canImport(Glibc)
import Glibc
#endif
import CLibEdit
import Foundation
import RecordsProtocol
import RecordsClient

/// Prints replies for people (aligned tables) or programs (JSON lines, CSV).
final class Printer {
    let format: CLIOptions.Format
    let color: Bool
    let errorColor: Bool
    static let maxWidth = 32

    /// psql's `\x`: one block a record (`on`), tables (`off`), or blocks when a table would be
    /// wider than the terminal (`auto`, the default).
    enum Expanded: String { case on, off, auto }
    var expanded = Expanded.auto
    /// `$PAGER` (`less -S` when unset; none when empty), used on a terminal for output taller
    /// than it; never when stdout is not a terminal.
    let pager: String?
    private let terminal: Bool
    /// `--format json|csv` given: stdout holds that format only, and the server is asked for
    /// every reply that has a JSON form (DESCRIBE, INFO, SAVE's ids ...). Without it, stdout
    /// that is not a terminal gets records as JSON lines and other lines as the server sent
    /// them, status lines included, as a script's reader expects.
    let chosen: Bool
    var asksForJSON: Bool { chosen && format != .table }

    init(format: CLIOptions.Format?, environment: [String: String]) {
        let noColor = environment["NO_COLOR"] != nil
        terminal = isatty(STDOUT_FILENO) == 1
        color = !noColor && terminal
        errorColor = !noColor && isatty(STDERR_FILENO) == 1
        self.format = format ?? (terminal ? .table : .json)
        chosen = format != nil
        let pagerCommand = environment["PAGER"] ?? "less -S"
        pager = terminal && !pagerCommand.trimmingCharacters(in: .whitespaces).isEmpty ? pagerCommand : nil
    }

    /// Columns and rows of the terminal on stdout; nil when it is not one.
    var terminalSize: (columns: Int, rows: Int)? {
        guard terminal else { return nil }
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return (Int(size.ws_col), Int(size.ws_row))
    }

    /// Lines for people: through the pager when taller than the terminal.
    func show(_ lines: [String]) {
        if let pager, let size = terminalSize, size.rows > 0, lines.count >= size.rows - 1, let pipe = popen(pager, "w") {
            for line in lines { fputs(line + "\n", pipe) }
            pclose(pipe)
            _ = clibedit_take_sigint()  // a Ctrl-C in the pager ended the pager only
            return
        }
        for line in lines { print(line) }
    }

    /// A reply as the format has it. For programs (json, csv) stdout holds only that format:
    /// under json every line is one object (a record as sent, a line of text as `{"line":...}`,
    /// the status as `{"status":...}`); under csv only records, the rest going to stderr. A
    /// verb that reads records (`verb`) gives only its records, so a pipe into `jq` gets them
    /// alone; every other reply gives its status, as the shell shows it.
    func reply(_ reply: WireReply, elapsed: Double, verb: Verb? = nil) {
        if !reply.isOK {
            error(reply)
            return
        }
        let records = reply.lines.filter { $0.hasPrefix("{") }.map(JSONObject.parse)
        // Records alone: a reading verb's (an unknown line's when every line is a record).
        if !records.isEmpty && records.count == reply.lines.count && (verb == nil || Self.readsRecords(verb)) {
            switch format {
            case .json: reply.lines.forEach { print($0) }
            case .csv: csv(records)
            case .table:
                show(layout(records) + [dim("(\(reply.statusText), \(String(format: "%.1f", elapsed * 1000)) ms)")])
            }
            return
        }
        let status = reply.statusText.isEmpty || Self.readsRecords(verb) && format != .table ? nil : reply.statusText
        switch format {
        case .table where verb == .help:
            // Prose: wrapped at word boundaries to the terminal's width, paged when taller.
            let width = terminalSize?.columns ?? Int.max
            let body = reply.lines.flatMap { Self.wrapped($0, width: width) }
            show(body + (status.map { Self.wrapped($0, width: width).map(dim) } ?? []))
        case .table:
            reply.lines.forEach { print($0) }
            if let status { print(dim(status)) }
        case .json where !chosen:
            reply.lines.forEach { print($0) }
            if let status { print(status) }
        case .json:
            for line in reply.lines { print(line.hasPrefix("{") ? line : "{\"line\":\(quotedString(line))}") }
            if let status { print("{\"status\":\(quotedString(status))}") }
        case .csv:
            for line in reply.lines { note(line) }
            if let status { note(status) }
        }
    }

    /// Verbs whose reply is records or descriptions (or CSV), printed alone for programs.
    static func readsRecords(_ verb: Verb?) -> Bool {
        switch verb {
        case .find, .get, .aggregate, .export, .info, .describe, .entities: true
        default: false
        }
    }

    /// Sends `command` and prints its records as they arrive (json, csv): the first one shows
    /// at once and memory stays flat however many follow. Other lines and the status are then
    /// printed as `reply` would. Tables need every width first: they go through `reply`.
    func stream(_ command: String, on connection: LineConnection, elapsed: () -> Double) throws -> WireReply {
        guard format != .table else {
            let reply = try connection.send(command)
            self.reply(reply, elapsed: elapsed(), verb: Verb.of(command))
            return reply
        }
        var header: [String]?
        var others: [String] = []
        var streamed = 0
        try connection.write(command + "\n")
        let reply = try connection.readReply { [self] (line: String) in
            guard line.hasPrefix("{") else { return others.append(line) }
            streamed += 1
            if format == .json { return print(line) }
            csvRecord(JSONObject.parse(line), header: &header)
        }
        let rest = WireReply(lines: others, status: reply.status)
        let verb = Verb.of(command)
        if !rest.isOK || streamed == 0 || !others.isEmpty || !Self.readsRecords(verb) { self.reply(rest, elapsed: elapsed(), verb: verb) }
        return rest
    }

    func error(_ reply: WireReply) {
        let text = (reply.lines + ["ERROR " + reply.statusText]).joined(separator: "\n")
        FileHandle.standardError.write(((errorColor ? "\u{1B}[31m" + text + "\u{1B}[0m" : text) + "\n").data(using: .utf8)!)
    }

    /// A pushed line (WATCH): as sent, or under json one object (`{"entity":"game","key":5,"operation":"inserted"}`, the key typed as its columns are).
    func event(_ line: String) {
        guard format == .json else { return print("! " + line) }
        if let event = ChangeEvent(line: line) {
            // The key typed as its columns are: a number, a string, an object for a composite key.
            print("{\"entity\":\(quotedString(event.entity)),\"key\":\(event.keyValue),\"operation\":\(quotedString(event.operation.rawValue))}")
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

    /// `line` cut at spaces into lines of at most `width` columns, each continuation indented
    /// as the line is; a word longer than the width stands alone on its line.
    static func wrapped(_ line: String, width: Int) -> [String] {
        guard width > 0, displayWidth(line) > width else { return [line] }
        // HELP's columns: in a terminal too narrow for a deep indent, two spaces stand for it.
        let leading = line.prefix { $0 == " " }.count
        let indent = String(repeating: " ", count: leading * 2 <= width ? leading : min(leading, 2))
        var lines: [String] = []
        var current = ""
        var currentWidth = 0
        for word in line.dropFirst(leading).split(separator: " ", omittingEmptySubsequences: false) {
            let wordWidth = displayWidth(String(word))
            if currentWidth > indent.count && currentWidth + 1 + wordWidth > width {
                lines.append(current)
                current = ""
                currentWidth = 0
            }
            if currentWidth == 0 {
                current = indent + word
                currentWidth = indent.count + wordWidth
            } else {
                current += " " + word
                currentWidth += 1 + wordWidth
            }
        }
        lines.append(current)
        return lines
    }

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

    /// A table, or one block a record when expanded (or when the table is wider than the terminal).
    private func layout(_ records: [[(key: String, value: JSONObject.Value)]]) -> [String] {
        let table = self.table(records)
        let columns = terminalSize?.columns
        switch expanded {
        case .off: return table
        case .on: return blocks(records, columns: columns)
        case .auto:
            guard let columns, let first = table.first, Self.displayWidth(first) > columns else { return table }
            return blocks(records, columns: columns)
        }
    }

    /// psql's expanded display: `-[ RECORD 1 ]-`, then `key │ value` lines.
    private func blocks(_ records: [[(key: String, value: JSONObject.Value)]], columns: Int?) -> [String] {
        let keyWidth = records.flatMap { $0.map { Self.displayWidth($0.key) } }.max() ?? 0
        let room = columns.map { max(8, $0 - keyWidth - 3) }
        var lines: [String] = []
        for (index, record) in records.enumerated() {
            let title = "-[ RECORD \(index + 1) ]"
            lines.append(title + String(repeating: "-", count: max(1, min(columns ?? 40, keyWidth + 3 + 32) - title.count)))
            for (key, value) in record {
                var text = value == .null ? "∅" : Self.oneLine(value.display)
                if let room, Self.displayWidth(text) > room { text = Self.cut(text, to: room) }
                lines.append(key + String(repeating: " ", count: keyWidth - Self.displayWidth(key)) + " │ " + (value == .null ? dim(text) : text))
            }
        }
        return lines
    }

    /// Characters while they fit in `width` - 1 columns, then an ellipsis.
    static func cut(_ text: String, to width: Int) -> String {
        var cut = ""
        var used = 0
        for character in text {
            let w = displayWidth(String(character))
            if used + w > width - 1 { break }
            cut.append(character)
            used += w
        }
        return cut + "…"
    }

    private func table(_ records: [[(key: String, value: JSONObject.Value)]]) -> [String] {
        var keys: [String] = []
        for record in records { for (key, _) in record where !keys.contains(key) { keys.append(key) } }
        let rows = records.map { record in keys.map { key in record.first { $0.key == key }?.value } }
        let widths = keys.indices.map { column in
            min(Self.maxWidth, max(Self.displayWidth(keys[column]), rows.map { Self.displayWidth(Self.oneLine($0[column]?.display ?? "∅")) }.max() ?? 0))
        }
        // A column of numbers is right-aligned, as psql aligns them (its heading too).
        let numeric = keys.indices.map { column in
            rows.contains { $0[column] != nil && $0[column] != .null }
                && rows.allSatisfy { row in
                    guard let value = row[column], case .raw(let text) = value else { return row[column] == nil || row[column] == .null }
                    return text.first.map { $0 == "-" || $0.isNumber } ?? false
                }
        }
        func cell(_ raw: String, _ width: Int, isNil: Bool = false, right: Bool = false) -> String {
            let text = Self.oneLine(raw)
            let cut = Self.displayWidth(text) > width ? Self.cut(text, to: width) : text
            let padding = String(repeating: " ", count: max(0, width - Self.displayWidth(cut)))
            let padded = right ? padding + cut : cut + padding
            return isNil ? (color ? "\u{1B}[2m" + padded + "\u{1B}[0m" : padded) : padded
        }
        var lines = [keys.indices.map { cell(keys[$0], widths[$0], right: numeric[$0]) }.joined(separator: " │ ")]
        lines.append(widths.map { String(repeating: "─", count: $0) }.joined(separator: "─┼─"))
        for row in rows {
            lines.append(row.indices.map { i in
                guard let value = row[i], value != .null else { return cell("∅", widths[i], isNil: true, right: numeric[i]) }
                return cell(value.display, widths[i], right: numeric[i])
            }.joined(separator: " │ "))
        }
        return lines
    }

    private func csv(_ records: [[(key: String, value: JSONObject.Value)]]) {
        var header: [String]?
        for record in records { csvRecord(record, header: &header) }
    }

    /// One record as a CSV line, after a header line when its keys are not the previous
    /// record's (CHANGES' inserts and updates have shapes of their own: no column is dropped).
    /// Its values then come in the header's order as they are.
    private func csvRecord(_ record: [(key: String, value: JSONObject.Value)], header: inout [String]?) {
        if header?.elementsEqual(record.lazy.map(\.key)) != true {
            header = record.map(\.key)
            print(header!.map(Self.csvField).joined(separator: ","))
        }
        print(record.map { $0.value == .null ? "" : Self.csvField($0.value.display) }.joined(separator: ","))
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
