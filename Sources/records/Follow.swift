#if canImport(Glibc)
import Glibc
#endif
import CLibEdit
import Foundation
import RecordsClient

struct Follow {
    let connection: LineConnection
    let printer: Printer

    /// `records watch`: WATCH, then each change as it comes (json: one object a line) until
    /// Ctrl-C, which ends it with status 0; 1 when the WATCH is refused, 3 when the server goes.
    func run(entity: String, predicate: String?) throws -> Int32 {
        let reply = try connection.send("WATCH \(entity)" + (predicate.map { " WHERE " + $0 } ?? ""))
        guard reply.isOK else {
            printer.error(reply)
            return 1
        }
        printer.note(reply.statusText + "; Ctrl-C stops")
        clibedit_catch_sigint()
        while clibedit_take_sigint() == 0 {
            if !connection.hasBufferedInput {
                var entry = pollfd(fd: connection.fileDescriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&entry, 1, 500) > 0 else { continue }
            }
            guard let lines = try connection.takeArrivedPushes() else {
                printer.note("records: the server closed the connection")
                return 3
            }
            for line in lines { printer.event(line) }
        }
        return 0
    }
}
