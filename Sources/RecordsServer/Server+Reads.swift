#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records

/// Reads pipelined by one session run as one pool job.
extension Server {
    /// Verbs that only read: consecutive ones run as one pool job.
    static let readVerbs: Set<Verb> = [.get, .find, .count, .explain]
    static let maxBatch = 64

    static func isRead(_ line: String) -> Bool {
        CommandParser.verb(of: line).map(readVerbs.contains) ?? false
    }

    /// A read and the reads pipelined right behind it: one pool job runs them in order on one
    /// connection (the session is the worker's meanwhile) and hands back their replies at once,
    /// or ahead of a FIND's streamed records.
    func runReads(_ first: String, on connection: ClientConnection) {
        var lines = [first]
        while lines.count < Self.maxBatch, let event = connection.nextEvent() {
            guard case .line(let line) = event, Self.isRead(line) else {
                connection.pushedBack = event
                break
            }
            lines.append(line)
        }
        let session = connection.session
        onPool(connection) { [self] database, sink in
            let batch = BatchSink(sink: sink)
            for line in lines {
                let reply: Reply
                switch session.handle(line) {
                case .reply(let immediate), .close(let immediate), .skipData(let immediate): reply = immediate
                case .collect: reply = .error(.internal, "IMPORT in a batch of reads")
                case .database(let work): reply = Self.perform(work, database, batch)
                }
                batch.pending += encoded(reply)
            }
            return batch.pending
        }
    }
}
