#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records
import RecordsProtocol

/// Reads pipelined by one session run as one pool job.
extension Server {
    static let maxBatch = 64

    /// Consecutive lines of batchable verbs (reads) run as one pool job.
    static func isRead(_ line: String) -> Bool { isRead(Verb.of(line)) }

    static func isRead(_ verb: Verb?) -> Bool { verb?.facts.batchable ?? false }

    /// A read and the reads pipelined right behind it: the loop parses them (the session is
    /// the loop's), and one pool job runs their database work in order on one connection and
    /// hands back their replies at once, or ahead of a FIND's streamed records.
    func runReads(_ first: String, on connection: ClientConnection) {
        var lines = [first]
        while lines.count < Self.maxBatch, let event = connection.nextEvent() {
            guard case .line(let line) = event, Self.isRead(line) else {
                connection.pushedBack = event
                break
            }
            lines.append(line)
        }
        let items: [BatchItem] = lines.map { line in
            switch connection.session.handle(line) {
            case .database(let work): .work(work)
            case .reply(let reply), .close(let reply), .skipData(let reply), .startTLS(let reply): .reply(encoded(reply))
            case .collect: .reply(encoded(.error(.internal, "IMPORT in a batch of reads")))
            case .cancel: .reply(encoded(.error(.internal, "CANCEL in a batch of reads")))
            }
        }
        onPool(connection, items)
    }
}

extension Server {
    /// The works at the start of `items` that `DatabaseWork.runPipelined` can send together.
    static func pipelinableRun(_ items: ArraySlice<BatchItem>) -> [DatabaseWork] {
        var run: [DatabaseWork] = []
        for item in items {
            guard case .work(let work) = item, work.isPipelinable else { break }
            run.append(work)
        }
        return run
    }
}

/// One command of a pool job: a reply known on the loop, or database work.
enum BatchItem: Sendable {
    case reply([UInt8])
    case work(DatabaseWork)
}
