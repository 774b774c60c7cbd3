#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records

/// IMPORT: data lines framed on the loop, streamed to a COPY on a pool worker.
extension Server {
    /// Bytes of IMPORT data handed to the COPY at a time.
    static let importChunk = 256 * 1024

    /// One line of an IMPORT's data; the line `.` ends it. The state is changed in place: a
    /// copy per line would make an import of n lines cost O(n²).
    func gather(_ event: LineFramer.Event, for connection: ClientConnection) {
        guard connection.importing != nil else { return }
        let number = connection.importing!.lines + 1
        switch event {
        case .line("."), .line(".\r"):
            let state = connection.importing!
            connection.importing = nil
            connection.framer.keepsCarriageReturns = false
            if let reply = state.reply {
                connection.machine.importEnded(answered: true)
                return connection.append(bytes: reply)
            }
            if !state.started, let failure = state.feed.failure {
                connection.machine.importEnded(answered: true)
                return connection.append(failure)
            }
            state.feed.push(state.chunk)
            state.feed.finish()
            if !state.started { startImport(state, on: connection) }
            connection.machine.importEnded(answered: false)  // until the COPY's reply
        case .line(let line):
            connection.importing!.lines = number
            guard connection.importing!.feed.accepting else { return }  // failed or ended: dropped
            // Dot-stuffing: a data line starting with . has one more in front.
            var data = line.utf8.first == UInt8(ascii: ".") ? line.utf8.dropFirst() : line.utf8[...]
            if number == 1 && connection.importing!.job.takesHeader {
                if data.last == 13 { data = data.dropLast() }
                connection.importing!.header = String(data)
                return
            }
            // COPY takes a line `\.` outside a quoted field for the end of its data and would
            // drop the rows after it: in CSV it is the value `\.`, sent quoted.
            let content = data.last == 13 ? data.dropLast() : data
            if !connection.importing!.inQuotedField, content.elementsEqual("\\.".utf8) {
                connection.importing!.chunk.append(contentsOf: "\"\\.\"".utf8)
                if data.last == 13 { connection.importing!.chunk.append(13) }
            } else {
                connection.importing!.chunk.append(contentsOf: data)
            }
            // A quoted field may span lines: an odd number of quotes opens or closes one.
            if data.reduce(0, { $0 + ($1 == 34 ? 1 : 0) }) % 2 == 1 { connection.importing!.inQuotedField.toggle() }
            connection.importing!.chunk.append(10)
            guard connection.importing!.chunk.count >= Self.importChunk else { return }
            connection.importing!.feed.push(connection.importing!.chunk)
            connection.importing!.chunk = []
            connection.importing!.chunk.reserveCapacity(Self.importChunk + 4096)
            if !connection.importing!.started {
                connection.importing!.started = true
                startImport(connection.importing!, on: connection)
            }
        case .tooLong(let length):
            failImport(connection, .error(.limit, "IMPORT line \(number) too long (\(length)+ bytes): nothing was imported"))
        case .invalid(let reason):
            failImport(connection, .error(.syntax, "IMPORT line \(number): \(reason): nothing was imported"))
        }
    }

    /// A bad line: the rest of the data is read and dropped, the COPY aborted, and `reply`
    /// answers the `.`.
    func failImport(_ connection: ClientConnection, _ reply: Reply) {
        connection.importing!.lines += 1
        connection.importing!.chunk = []
        connection.importing!.feed.fail(reply)
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
        guard connection.importing != nil else { return completed(connection, bytes: bytes) }
        connection.importing!.reply = bytes
    }
}
