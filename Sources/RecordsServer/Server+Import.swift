#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records

/// IMPORT: the COPY on a pool worker, fed by the connection's data lines
/// (`ClientConnection+Import`).
extension Server {
    func importFeed(for connection: ClientConnection) -> ImportFeed {
        ImportFeed(stallSeconds: configuration.importStallSeconds) { [inbox, id = connection.id] in
            inbox.post(.importRoom(connection: id))
        }
    }

    /// Runs the COPY on a pool worker, fed as the lines arrive. The worker is free as soon as
    /// the COPY ends; a reply that comes before the client's `.` waits for it on the loop.
    func startImport(_ state: ImportState, on connection: ClientConnection) {
        let job = state.job, feed = state.feed, header = state.header
        let limit = configuration.maxReplyBytes
        pool.submit(connection.poolUse.standing(), streams: true) { [inbox, id = connection.id] database in
            let started = DispatchTime.now().uptimeNanoseconds
            let reply: Reply
            switch database {
            case .success(let lease): reply = job.run(header: header, next: feed.next, on: lease.connection, cancelled: { lease.wasCancelled })
            case .failure(let error):
                reply = .error(.unavailable, "PostgreSQL is unavailable (\(error.message)); nothing was imported: try again when it is back")
            }
            feed.abandon()  // data still to come is dropped up to the `.`
            let bytes = Self.encoded(feed.failure ?? reply, limit: limit)
            let held = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            inbox.post(.importFinished(connection: id, bytes: bytes, held: held))
        }
    }

    /// On the loop: the COPY's reply, sent now, or after the client's `.` when that has not
    /// come yet (replies stay in order).
    func importFinished(_ connection: ClientConnection, bytes: [UInt8]) {
        guard connection.importing != nil else { return connection.completed(bytes: bytes) }
        connection.importing!.reply = bytes
    }
}
