import Foundation
/// Lines of a script or a CSV file, split at `\n` bytes (a Swift `Character` holds `\r\n` as
/// one, so a String split on "\n" would not split a CRLF file at all).
enum Lines {
    /// The pieces of `bytes` between `\n`s (n of them make n + 1 pieces, the last empty when
    /// the bytes end with one); nil when they are not UTF-8.
    static func split(_ bytes: some Collection<UInt8>) -> [String]? {
        var lines: [String] = []
        var start = bytes.startIndex
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if bytes[index] == 10 {
                guard let line = String(validating: bytes[start..<index], as: UTF8.self) else { return nil }
                lines.append(line)
                start = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        guard let last = String(validating: bytes[start...], as: UTF8.self) else { return nil }
        lines.append(last)
        return lines
    }

    /// What a typed line leaves open: a quoted string (its quote), and parentheses not yet
    /// closed. The shell then reads on, as psql does.
    static func open(_ text: String) -> (quote: Character?, depth: Int) {
        var quote: Character?
        var escaped = false
        var depth = 0
        for character in text {
            if let open = quote {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == open { quote = nil }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == "(" {
                depth += 1
            } else if character == ")" {
                depth = max(0, depth - 1)
            }
        }
        return (quote, depth)
    }

    /// `text` cut at each `;` outside quotes: the commands a `;` ended (trimmed, empty ones
    /// left out) and what follows the last `;`, not yet ended.
    static func statements(_ text: String) -> (ended: [String], rest: String) {
        var ended: [String] = []
        var current = ""
        var quote: Character?
        var escaped = false
        for character in text {
            if let open = quote {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == open { quote = nil }
            } else if character == "\"" || character == "'" {
                quote = character
            } else if character == ";" {
                let command = current.trimmingCharacters(in: .whitespaces)
                if !command.isEmpty { ended.append(command) }
                current = ""
                continue
            }
            current.append(character)
        }
        return (ended, current)
    }

    /// A script's command line: a CRLF file's `\r` is not part of it.
    static func command(_ line: String) -> String {
        line.utf8.last == 13 ? String(line.utf8.dropLast())! : line
    }
}

/// Where CSV records end: a line break inside double quotes is data, so a CRLF file's `\r` is
/// taken off only where a record ends, never inside a quoted field.
struct CSVRecords {
    private var inQuotes = false

    /// The line as it goes to the server (dot-stuffed by the caller).
    mutating func take(_ line: String) -> String {
        for byte in line.utf8 where byte == UInt8(ascii: "\"") { inQuotes.toggle() }
        return !inQuotes && line.utf8.last == 13 ? String(line.utf8.dropLast())! : line
    }

    /// IMPORT's data line as the protocol carries it: one `.` more in front of a line starting with `.`.
    static func stuffed(_ line: String) -> String { (line.hasPrefix(".") ? "." : "") + line }
}
