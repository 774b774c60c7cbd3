#if canImport(Glibc)
import Glibc
#endif
import Postgres

/// CSV as PostgreSQL's COPY reads and writes it: NULL is an empty unquoted field, an empty
/// string is `""`, fields with commas, quotes or line breaks are quoted with `""` for `"`.
enum CSV {
    /// One line of fields (EXPORT's header), quoted as needed and dot-stuffed.
    static func appendLine(_ fields: [[UInt8]], to out: inout [UInt8]) {
        var line: [UInt8] = []
        for (index, field) in fields.enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            field.withUnsafeBufferPointer { appendField($0, to: &line) }
        }
        line.append(10)
        line.withUnsafeBytes { appendRecord($0, to: &out) }
    }

    static func appendField(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        let needsQuotes = bytes.isEmpty || bytes.contains { $0 == 44 || $0 == 34 || $0 == 10 || $0 == 13 }
            || bytes.first == 32 || bytes.last == 32
        guard needsQuotes else { return out.append(contentsOf: bytes) }
        out.append(34)
        for byte in bytes {
            if byte == 34 { out.append(34) }
            out.append(byte)
        }
        out.append(34)
    }

    /// One record as COPY wrote it (newline-terminated; quoted fields may hold more line
    /// breaks), dot-stuffed onto `out`.
    static func appendRecord(_ record: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2 * record.count) { scratch in
            out.append(contentsOf: UnsafeBufferPointer(start: scratch.baseAddress!, count: dotStuffed(record, into: scratch.baseAddress!)))
        }
    }

    /// The same, written in place at the end of a stream's batch.
    static func appendRecord(_ record: UnsafeRawBufferPointer, to batch: inout StreamBatch) {
        batch.write(atMost: 2 * record.count) { dotStuffed(record, into: $0) }
    }

    /// Writes `record` with a dot before each of its lines that starts with `.`, `+`, `-` or
    /// `!` (dot-stuffing, as every data line is); returns the bytes written, at most twice
    /// the record's.
    private static func dotStuffed(_ record: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>) -> Int {
        guard let base = record.baseAddress else { return 0 }
        var start = 0
        var written = 0
        while start < record.count {
            let first = record[start]
            if first == 46 || first == 43 || first == 45 || first == 33 {
                out[written] = 46
                written += 1
            }
            let end = memchr(base + start, 10, record.count - start).map { $0 - UnsafeMutableRawPointer(mutating: base) + 1 } ?? record.count
            UnsafeMutableRawPointer(out + written).copyMemory(from: base + start, byteCount: end - start)
            written += end - start
            start = end
        }
        return written
    }

    /// The fields of one CSV line (a header), unquoting as needed.
    static func split(_ line: String) -> [String] {
        var fields: [String] = []
        var field = ""
        var quoted = false
        var iterator = Array(line).makeIterator()
        var pending: Character? = nil
        while let ch = pending ?? iterator.next() {
            pending = nil
            if quoted {
                if ch == "\"" {
                    if let next = iterator.next() {
                        if next == "\"" { field.append("\"") } else { quoted = false; pending = next }
                    } else { quoted = false }
                } else { field.append(ch) }
            } else if ch == "\"" {
                quoted = true
            } else if ch == "," {
                fields.append(field)
                field = ""
            } else {
                field.append(ch)
            }
        }
        fields.append(field)
        return fields
    }
}
