import Foundation
import RecordsClient

/// A migrations folder holding one file of SQL: a schema written for a test, served by a
/// `TestServer` in place of the sample domain.
final class Schema {
    let directory: String

    init(_ sql: String) throws {
        directory = NSTemporaryDirectory() + "recordsd-schema-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try sql.write(toFile: directory + "/0001_schema.sql", atomically: true, encoding: .utf8)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }
}

extension TestServer {
    /// A server for `schema` on a fresh database.
    convenience init(schema: Schema, arguments: [String] = []) throws {
        try self.init(arguments: ["--migrations", schema.directory] + arguments)
    }
}

extension WireReply {
    /// The `#ref entity key` lines of a SAVE, as ref -> key.
    var savedKeys: [String: String] {
        Dictionary(uniqueKeysWithValues: lines.compactMap { line -> (String, String)? in
            guard line.hasPrefix("#") else { return nil }
            let parts = line.split(separator: " ", maxSplits: 2)
            guard parts.count == 3 else { return nil }
            return (String(parts[0]), String(parts[2]))
        })
    }
}
