/// Rows in `COPY ... FROM STDIN`'s text format: fields split by tabs, a line each, `\N` for
/// NULL, and a backslash before a backslash, line feed, carriage return or tab in a value
/// (the only bytes the format needs escaped; the rest reach the column's input as they are).
/// See https://www.postgresql.org/docs/15/sql-copy.html#id-1.9.3.55.9.2
enum CopyText {
    /// The rows of `columns` (one array a column, each as long as `rows`), a value's text as
    /// it would be bound as a parameter.
    static func rows(_ columns: [[String?]], count rows: Int) -> [UInt8] {
        var out: [UInt8] = []
        // Room for all, judged from the first rows: one allocation for the whole copy.
        let sample = min(rows, 8)
        var sampled = 0
        for column in columns { for value in column.prefix(sample) { sampled += (value?.utf8.count ?? 2) + 1 } }
        out.reserveCapacity(sample == 0 ? 0 : sampled * rows / sample + 64)
        for row in 0..<rows {
            for (index, column) in columns.enumerated() {
                if index > 0 { out.append(9) }
                guard var value = column[row] else {
                    out.append(92)
                    out.append(UInt8(ascii: "N"))
                    continue
                }
                value.withUTF8 { bytes in
                    // Most values need no escape: copied whole, not a byte at a time.
                    guard bytes.contains(where: needsEscape) else { return out.append(contentsOf: bytes) }
                    for byte in bytes {
                        switch byte {
                        case 92: out.append(92); out.append(92)
                        case 10: out.append(92); out.append(UInt8(ascii: "n"))
                        case 13: out.append(92); out.append(UInt8(ascii: "r"))
                        case 9: out.append(92); out.append(UInt8(ascii: "t"))
                        default: out.append(byte)
                        }
                    }
                }
            }
            out.append(10)
        }
        return out
    }

    private static func needsEscape(_ byte: UInt8) -> Bool { byte == 92 || byte == 10 || byte == 13 || byte == 9 }
}
