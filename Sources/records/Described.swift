import Foundation
import RecordsClient

/// An entity as DESCRIBE tells it under FORMAT JSON: its attributes with their types, and its
/// relationships with their targets. Asked when a line needs it (Tab completion, `@file:`
/// values); a connection in text format is put back in it after.
struct Described {
    var attributes: [(name: String, type: String)]
    var relationships: [(name: String, target: String)]

    /// nil when the server does not describe it (no such entity).
    static func ask(_ entity: String, on connection: LineConnection, jsonReplies: Bool) throws -> Described? {
        if !jsonReplies { _ = try connection.send("FORMAT JSON") }
        defer { if !jsonReplies { _ = try? connection.send("FORMAT TEXT") } }
        let described = try connection.send("DESCRIBE \(entity)")
        guard described.isOK, let line = described.lines.first,
              let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
        func pairs(_ key: String, _ second: String) -> [(String, String)] {
            (object[key] as? [[String: Any]] ?? []).compactMap { item in
                guard let name = item["name"] as? String, let value = item[second] as? String else { return nil }
                return (name, value)
            }
        }
        return Described(attributes: pairs("attributes", "type"), relationships: pairs("relationships", "target"))
    }
}
