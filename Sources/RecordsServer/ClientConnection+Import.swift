import Records
import RecordsProtocol

/// IMPORT on the connection: its data lines, framed on the loop, go to the feed of a COPY the
/// host runs on a pool worker (`Server+Import`).
extension ClientConnection {
    /// Bytes of IMPORT data handed to the COPY at a time.
    static let importChunk = 256 * 1024

    /// One line of an IMPORT's data; the line `.` ends it. The state is changed in place: a
    /// copy per line would make an import of n lines cost O(n²).
    func gather(_ event: LineFramer.Event) {
        guard importing != nil else { return }
        let number = importing!.lines + 1
        switch event {
        case .line("."), .line(".\r"):
            let state = importing!
            importing = nil
            framer.keepsCarriageReturns = false
            if let reply = state.reply {
                machine.importEnded(answered: true)
                return append(bytes: reply)
            }
            if !state.started, let failure = state.feed.failure {
                machine.importEnded(answered: true)
                return append(failure)
            }
            state.feed.push(state.chunk)
            state.feed.finish()
            if !state.started { host.startImport(state, on: self) }
            machine.importEnded(answered: false)  // until the COPY's reply
        case .line(let line):
            importing!.lines = number
            guard importing!.feed.accepting else { return }  // failed or ended: dropped
            // Dot-stuffing: a data line starting with . has one more in front.
            var data = line.utf8.first == UInt8(ascii: ".") ? line.utf8.dropFirst() : line.utf8[...]
            if number == 1 && importing!.job.takesHeader {
                if data.last == 13 { data = data.dropLast() }
                importing!.header = String(data)
                return
            }
            // COPY takes a line `\.` outside a quoted field for the end of its data and would
            // drop the rows after it: in CSV it is the value `\.`, sent quoted.
            let content = data.last == 13 ? data.dropLast() : data
            if !importing!.inQuotedField, content.elementsEqual("\\.".utf8) {
                importing!.chunk.append(contentsOf: "\"\\.\"".utf8)
                if data.last == 13 { importing!.chunk.append(13) }
            } else {
                importing!.chunk.append(contentsOf: data)
            }
            // A quoted field may span lines: an odd number of quotes opens or closes one.
            if data.reduce(0, { $0 + ($1 == 34 ? 1 : 0) }) % 2 == 1 { importing!.inQuotedField.toggle() }
            importing!.chunk.append(10)
            guard importing!.chunk.count >= Self.importChunk else { return }
            importing!.feed.push(importing!.chunk)
            importing!.chunk = []
            importing!.chunk.reserveCapacity(Self.importChunk + 4096)
            if !importing!.started {
                importing!.started = true
                host.startImport(importing!, on: self)
            }
        case .tooLong(let length):
            failImport(.error(.limit, "IMPORT line \(number) too long (\(length)+ bytes): nothing was imported"))
        case .invalid(let reason):
            failImport(.error(.syntax, "IMPORT line \(number): \(reason): nothing was imported"))
        }
    }

    /// A bad line: the rest of the data is read and dropped, the COPY aborted, and `reply`
    /// answers the `.`.
    func failImport(_ reply: Reply) {
        importing!.lines += 1
        importing!.chunk = []
        importing!.feed.fail(reply)
    }
}
