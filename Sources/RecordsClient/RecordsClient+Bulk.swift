import Foundation

extension RecordsClient {
    /// EXPORT as a stream of CSV lines (the header first), read as they arrive: memory stays
    /// flat however many rows. The connection serves nothing else until the stream ends.
    public func export(_ entity: String, where predicate: String? = nil, _ arguments: any RecordsLiteral...) throws -> AsyncThrowingStream<String, Error> {
        let line = "EXPORT \(try Self.name(entity))" + (try Self.whereClause(predicate, arguments))
        return AsyncThrowingStream(bufferingPolicy: .unbounded) { continuation in
            queue.async { [self] in
                guard let connection else { return continuation.finish(throwing: RecordsError.connection("closed")) }
                do throws(RecordsError) {
                    try connection.write(line + "\n")
                    let reply = try connection.readReply(dotStuffed: true) { continuation.yield($0) }
                    _ = try reply.checked()
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
        }
    }

    /// IMPORT of CSV lines (the header first, unless `columns` are given) in one transaction,
    /// sent as they come from `lines`; returns the server's summary (`imported 3 records`).
    @discardableResult
    public func importCSV(_ entity: String, columns: [String]? = nil, lines: some Sequence<String> & Sendable) async throws -> String {
        var command = "IMPORT \(try Self.name(entity))"
        if let columns {
            command += " (" + (try columns.map { (name: String) throws(RecordsError) -> String in try Self.name(name) }).joined(separator: ", ") + ")"
        }
        let header = command
        return try await onQueue { [self] () throws(RecordsError) in
            guard let connection else { throw .connection("closed") }
            var chunk = header + "\n"
            for line in lines {
                // One protocol line each (a quoted field's line break makes two lines).
                guard !line.contains("\n") else {
                    connection.close()
                    throw .invalidRequest("an IMPORT line holds a line break: \(line.prefix(40))...; the connection is closed, as the IMPORT was begun")
                }
                chunk += (line.hasPrefix(".") ? "." : "") + line + "\n"
                if chunk.utf8.count >= 1 << 16 {
                    try connection.write(chunk)
                    chunk = ""
                }
            }
            try connection.write(chunk + ".\n")
            return try connection.readReply().checked().message
        }
    }
}
