/// Rows in `COPY ... FROM STDIN`'s text format: fields split by tabs, a line each, `\N` for
/// NULL, and a backslash before a backslash, line feed, carriage return or tab in a value
/// (the only bytes the format needs escaped; the rest reach the column's input as they are).
/// Written as the values are found, so a bulk's values are never gathered first.
/// See https://www.postgresql.org/docs/15/sql-copy.html#id-1.9.3.55.9.2
struct CopyText {
    private(set) var bytes: [UInt8] = []
    private var rowStarted = false

    /// Room for `rows` of about `bytesPerRow`: one allocation for most copies.
    init(rows: Int, bytesPerRow: Int = 48) {
        bytes.reserveCapacity(rows * bytesPerRow)
    }

    /// The next field of the current row: `value` as it would be bound as a parameter.
    mutating func append(_ value: String?) {
        if rowStarted { bytes.append(9) }
        rowStarted = true
        guard var value else {
            bytes.append(92)
            bytes.append(UInt8(ascii: "N"))
            return
        }
        value.withUTF8 { text in
            // Most values need no escape: copied whole, not a byte at a time.
            guard text.contains(where: Self.needsEscape) else { return bytes.append(contentsOf: text) }
            for byte in text {
                switch byte {
                case 92: bytes.append(92); bytes.append(92)
                case 10: bytes.append(92); bytes.append(UInt8(ascii: "n"))
                case 13: bytes.append(92); bytes.append(UInt8(ascii: "r"))
                case 9: bytes.append(92); bytes.append(UInt8(ascii: "t"))
                default: bytes.append(byte)
                }
            }
        }
    }

    mutating func endRow() {
        bytes.append(10)
        rowStarted = false
    }

    private static func needsEscape(_ byte: UInt8) -> Bool { byte == 92 || byte == 10 || byte == 13 || byte == 9 }
}
