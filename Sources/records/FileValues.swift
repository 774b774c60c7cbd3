import Foundation
import RecordsClient
import RecordsProtocol

/// `attr=@file:PATH` (or `attr=@file:"a path with spaces"`) in an INSERT, UPDATE or UPSERT:
/// the file's contents as the attribute's value, read by the CLI, so that a value larger than
/// an argument may be (a 200 KB photo) goes in whole. Sent as the attribute's type has it:
/// base64 for a binary attribute, the file's text (UTF-8) for any other. The types come from
/// DESCRIBE under FORMAT JSON, asked only for a line that holds such a value.
enum FileValues {
    /// One `attr=@file:PATH` of a line: where its value is, and the file.
    struct Use {
        var attribute: String
        var path: String
        var value: Range<String.Index>
    }

    /// `line` with each `@file:` value replaced by its literal.
    static func expand(_ line: String, on connection: LineConnection, jsonReplies: Bool) throws -> String {
        guard line.contains("@file:") else { return line }
        let uses = try find(in: line)
        guard !uses.isEmpty else { return line }
        let words = line.split(separator: " ", maxSplits: 2)
        guard let verb = Verb.of(line), [.insert, .update, .upsert].contains(verb), words.count > 1 else {
            throw UsageError(description: "@file: values go in INSERT, UPDATE and UPSERT lines")
        }
        let types = try attributeTypes(of: String(words[1]), on: connection, jsonReplies: jsonReplies)
        var expanded = line
        for use in uses.reversed() {
            guard let data = FileManager.default.contents(atPath: use.path) else {
                throw UsageError(description: "cannot read \(use.path) (the value of \(use.attribute))")
            }
            let literal: String
            if types[use.attribute.lowercased()] == "binary" {
                literal = "\"" + data.base64EncodedString() + "\""
            } else {
                guard let text = String(data: data, encoding: .utf8) else {
                    throw UsageError(description: "\(use.path) is not UTF-8 text, and \(use.attribute) is not a binary attribute")
                }
                literal = try text.recordsLiteral()
            }
            expanded.replaceSubrange(use.value, with: literal)
        }
        return expanded
    }

    /// The `attr=@file:...` of a line, outside its quoted strings.
    static func find(in line: String) throws -> [Use] {
        var uses: [Use] = []
        var quote: Character?
        var escaped = false
        var index = line.startIndex
        while index < line.endIndex {
            let character = line[index]
            if let open = quote {
                if escaped { escaped = false } else if character == "\\" { escaped = true } else if character == open { quote = nil }
                index = line.index(after: index)
                continue
            }
            if character == "\"" || character == "'" { quote = character }
            if character == "=", line[line.index(after: index)...].hasPrefix("@file:") {
                let name = line[..<index].reversed().prefix { $0.isLetter || $0.isNumber || $0 == "_" }
                let start = line.index(after: index)
                var pathStart = line.index(start, offsetBy: 6)
                var end: String.Index
                let path: String
                if pathStart < line.endIndex, line[pathStart] == "\"" {
                    pathStart = line.index(after: pathStart)
                    guard let close = line[pathStart...].firstIndex(of: "\"") else { throw UsageError(description: "@file:\" needs its closing quote") }
                    path = String(line[pathStart..<close])
                    end = line.index(after: close)
                } else {
                    end = line[pathStart...].firstIndex(where: { $0 == " " || $0 == "\t" }) ?? line.endIndex
                    path = String(line[pathStart..<end])
                }
                guard !name.isEmpty, !path.isEmpty else { throw UsageError(description: "@file: takes attr=@file:PATH") }
                uses.append(Use(attribute: String(name.reversed()), path: path, value: start..<end))
                index = end
                continue
            }
            index = line.index(after: index)
        }
        return uses
    }

    /// Attribute name (lower case) → type (`binary`, `string` ...).
    private static func attributeTypes(of entity: String, on connection: LineConnection, jsonReplies: Bool) throws -> [String: String] {
        guard let described = try Described.ask(entity, on: connection, jsonReplies: jsonReplies) else {
            throw UsageError(description: "cannot learn the attributes of \(entity): DESCRIBE \(entity) answered no entity")
        }
        return Dictionary(described.attributes.map { ($0.name.lowercased(), $0.type) }) { first, _ in first }
    }
}
