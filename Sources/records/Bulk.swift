import Foundation
import RecordsClient

/// `records export` and `records import`, with a progress bar on a terminal's stderr.
struct Bulk {
    let connection: LineConnection
    let printer: Printer

    func export(entity: String, predicate: String?) throws -> Int32 {
        let progress = Progress(total: nil)
        var rows = -1  // the header is not a record
        var bytes = 0
        let out = FileHandle.standardOutput
        var buffer = Data()
        try connection.write("EXPORT \(entity)" + (predicate.map { " WHERE " + $0 } ?? "") + "\n")
        // Dot-stuffed: a line starting with . had one more put in front, taken off by the reader.
        let reply = try connection.readReply(dotStuffed: true) { (text: String) in
            buffer.append(contentsOf: text.utf8)
            buffer.append(10)
            rows += 1
            bytes += text.utf8.count + 1
            if buffer.count > 1 << 16 {
                out.write(buffer)
                buffer.removeAll(keepingCapacity: true)
                progress.show(rows: rows, bytes: bytes)
            }
        }
        out.write(buffer)
        progress.finish(rows: max(rows, 0), bytes: bytes)
        guard reply.isOK else {
            if reply.statusText.hasPrefix("UNKNOWN unknown verb") { printer.note("this server does not support EXPORT") }
            printer.error(reply)
            return 1
        }
        return 0
    }

    func importFile(entity: String, path: String) throws -> Int32 {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw UsageError(description: "cannot read \(path)") }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
        let progress = Progress(total: size)
        try connection.write("IMPORT \(entity)\n")
        var carry = Data()
        var rows = -1
        var sent = 0
        var records = CSVRecords()
        /// Sends whole lines; false when they are not UTF-8 (the import is then abandoned).
        func send(_ bytes: Data) throws -> Bool {
            guard let lines = Lines.split(bytes) else { return false }
            var out = ""
            for line in lines {
                out += CSVRecords.stuffed(records.take(line)) + "\n"
                rows += 1
            }
            try connection.write(out)
            return true
        }
        var valid = true
        while valid {
            let chunk = handle.readData(ofLength: 1 << 20)
            if chunk.isEmpty { break }
            carry.append(chunk)
            guard let last = carry.lastIndex(of: 10) else { continue }
            let complete = carry[carry.startIndex..<last]
            valid = try send(complete)
            carry = Data(carry[(last + 1)...])
            sent += complete.count + 1
            progress.show(rows: rows, bytes: sent)
        }
        if valid && !carry.isEmpty { valid = try send(carry) }
        guard valid else {
            // The COPY is under way: leaving aborts it, so nothing is imported.
            connection.close()
            progress.finish(rows: max(rows, 0), bytes: sent)
            printer.note("records: \(path) is not UTF-8 text (after line \(max(rows, 0) + 1)): nothing was imported")
            return 1
        }
        try connection.write(".\n")
        let reply = try connection.readReply()
        progress.finish(rows: max(rows, 0), bytes: size ?? sent)
        guard reply.isOK else {
            if reply.statusText.hasPrefix("UNKNOWN unknown verb") { printer.note("this server does not support IMPORT") }
            printer.error(reply)
            return 1
        }
        printer.note(reply.statusText)
        return 0
    }
}

/// rows, rate, bytes and, when the size is known, ETA; on stderr, only when it is a terminal.
final class Progress {
    let total: Int?
    let started = Date()
    let visible = isatty(STDERR_FILENO) == 1
    private var last = Date.distantPast

    init(total: Int?) { self.total = total }

    func show(rows: Int, bytes: Int) {
        guard visible, Date().timeIntervalSince(last) > 0.1 else { return }
        last = Date()
        draw(rows: rows, bytes: bytes, done: false)
    }

    func finish(rows: Int, bytes: Int) {
        guard visible else { return }
        draw(rows: rows, bytes: bytes, done: true)
        FileHandle.standardError.write("\n".data(using: .utf8)!)
    }

    private func draw(rows: Int, bytes: Int, done: Bool) {
        let elapsed = max(Date().timeIntervalSince(started), 0.001)
        var text = "\r\(rows) rows  \(Int(Double(rows) / elapsed)) rows/s  \(bytes / 1024) KiB"
        if let total, total > 0 {
            let fraction = min(1, Double(bytes) / Double(total))
            let bar = String(repeating: "█", count: Int(fraction * 20)) + String(repeating: "░", count: 20 - Int(fraction * 20))
            let eta = done ? 0 : Int(elapsed / max(fraction, 0.0001) * (1 - fraction))
            text = "\r\(bar) \(Int(fraction * 100))%  " + text.dropFirst() + (done ? "" : "  ETA \(eta)s")
        }
        // Erased to the line's end: a shorter line (the last, without its ETA) left the end of
        // the one before behind (`TA 0s`).
        FileHandle.standardError.write((text + "\u{1B}[K").data(using: .utf8)!)
    }
}
