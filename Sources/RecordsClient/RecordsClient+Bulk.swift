import Foundation

/// EXPORT's CSV lines, read from the connection as the caller asks for them: the server waits
/// while the caller is slow (its stream waits on the socket), so memory stays flat however many
/// rows. Lines come in batches of what the socket already holds, one queue hop a batch.
public struct ExportLines: AsyncSequence, Sendable {
    public typealias Element = String
    let client: RecordsClient
    let line: String

    public struct AsyncIterator: AsyncIteratorProtocol {
        let client: RecordsClient
        let line: String
        var started = false
        var finished = false
        var batch: [String] = []
        var position = 0

        public mutating func next() async throws -> String? {
            if position < batch.count {
                defer { position += 1 }
                return batch[position]
            }
            guard !finished else { return nil }
            let (lines, ended) = try await client.exportBatch(start: started ? nil : line)
            started = true
            finished = ended
            batch = lines
            position = 0
            return try await next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(client: client, line: line) }
}

extension RecordsClient {
    /// EXPORT as CSV lines (the header first), pulled as the caller reads them: `select` names
    /// the columns (key paths), `orderBy` the order (as FIND's). The connection serves nothing
    /// else until the sequence ends; an error reply is thrown at its end.
    public func export(_ entity: String, select: [String] = [], where predicate: String? = nil, _ arguments: any RecordsLiteral...,
                       orderBy: [String] = []) throws -> ExportLines {
        ExportLines(client: self, line: "EXPORT \(try Self.name(entity))" + (try Self.selectClause(select, distinct: false))
                    + (try Self.whereClause(predicate, arguments)) + (try SortKey.orderBy(orderBy)))
    }

    /// On the queue: sends the EXPORT the first time, then takes the lines the socket holds
    /// (at least one, or the end).
    func exportBatch(start line: String?) async throws -> (lines: [String], ended: Bool) {
        try await onQueue { [self] () throws(RecordsError) in
            guard let connection else { throw .connection("closed") }
            if let line { try connection.write(line + "\n") }
            var lines: [String] = []
            repeat {
                switch try connection.nextPiece(dotStuffed: true) {
                case .data(let text): lines.append(text)
                case .end(let reply):
                    _ = try reply.checked()
                    return (lines, true)
                }
            } while lines.count < 4096 && connection.hasBufferedInput
            return (lines, false)
        }
    }

    /// IMPORT of CSV lines (the header first, unless `columns` are given) in one transaction,
    /// sent as they come from `lines`; returns the server's summary (`imported 3 records`).
    /// Each element is one line of the protocol: a quoted field's line break makes two elements.
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
            var sent = false
            for line in lines {
                guard !line.contains(where: { $0 == "\n" || $0 == "\r\n" }) else {
                    let problem = "an IMPORT line holds a line break: \(line.prefix(40))...; give each line of the CSV as its own element"
                    // Once data went out the COPY is under way: only leaving aborts it.
                    if sent { connection.close() }
                    throw .invalidRequest(problem + (sent ? "; the connection is closed so nothing is imported" : "; nothing was sent"))
                }
                chunk += (line.hasPrefix(".") ? "." : "") + line + "\n"
                if chunk.utf8.count >= 1 << 16 {
                    try connection.write(chunk)
                    chunk = ""
                    sent = true
                }
            }
            try connection.write(chunk + ".\n")
            return try connection.readReply().checked().message
        }
    }
}
