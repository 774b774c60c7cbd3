#if canImport(Glibc)
import Glibc
#endif
import Postgres

/// Writes records as JSON lines straight from PostgreSQL's text output: measured here,
/// PostgreSQL's own `row_to_json` costs about 2.6 µs a row, four times what the plain columns
/// cost, and would make a large FIND four times slower than COPY.
struct RowEncoder {
    /// How a column's text becomes JSON.
    enum Format: Equatable {
        /// Integers, decimals, floats: bare, except NaN and infinities, which are strings.
        case number
        /// `t` / `f`.
        case boolean
        /// Already JSON (json, jsonb, nested includes).
        case raw
        /// `2024-06-01 12:00:00+00` -> `"2024-06-01T12:00:00+00:00"`, as PostgreSQL's JSON prints it.
        case timestamp
        case string

        init(_ kind: ValueKind) {
            switch kind {
            case .integer, .decimal, .double: self = .number
            case .boolean: self = .boolean
            case .json: self = .raw
            case .timestamp: self = .timestamp
            default: self = .string
            }
        }
    }

    let keys: [String]
    private let formats: [Format]
    /// `{"key":` / `,"key":` for every field, back to back, and where each one is: the hot
    /// loop touches no reference-counted value.
    private let prefixBytes: [UInt8]
    private let prefixRanges: [Range<Int>]

    init(_ fields: [(key: String, format: Format)]) {
        keys = fields.map(\.key)
        formats = fields.map(\.format)
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        for (index, field) in fields.enumerated() {
            let start = bytes.count
            bytes.append(contentsOf: ((index == 0 ? "{" : ",") + JSON.quote(field.key) + ":").utf8)
            ranges.append(start..<bytes.count)
        }
        // Eight bytes past the last prefix, so each is copied a word at a time.
        prefixBytes = bytes + [UInt8](repeating: 0, count: 8)
        prefixRanges = ranges
    }

    var count: Int { formats.count }

    /// One record, with its line feed, from columns `0..<count` of `row`: written through a
    /// pointer into scratch space of the most the row can take (every byte escaped), then
    /// appended at once (appends a field at a time were a fifth of a large FIND's CPU). Small
    /// rows' scratch is on the stack; nothing is zero-filled (a debug build, what the tests
    /// run, filled it a generic call a byte).
    func append(_ result: QueryResult, row: Int, to out: inout [UInt8]) {
        scratchAppend(ResultRow(result: result, row: row), to: &out)
    }

    /// The same record from a row of `COPY ... TO STDOUT` (FIND's stream): its text is
    /// escaped, and COPY's escapes of a backslash, a line feed, a return and a tab are JSON's
    /// own, so a string is copied nearly as it comes.
    func append(_ row: CopyRow, to out: inout [UInt8]) {
        scratchAppend(row, to: &out)
    }

    /// FIND's way: the record written in place at the end of the stream's batch.
    func append(_ row: CopyRow, to batch: inout StreamBatch) {
        batch.write(atMost: most(row)) { write(row, into: $0) }
    }

    private func scratchAppend<Source: RecordSource>(_ source: Source, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: most(source)) { scratch in
            out.append(contentsOf: UnsafeBufferPointer(start: scratch.baseAddress!, count: write(source, into: scratch.baseAddress!)))
        }
    }

    /// The most bytes a record can take: every byte escaped, `null` or quotes around each
    /// value, and a word of slack.
    private func most<Source: RecordSource>(_ source: Source) -> Int {
        prefixBytes.count + 3 + 6 * source.escapedBytes(formats.count) + 8 * formats.count + 8
    }

    /// Writes one record from either source at `base`, which has room for `most(source)`;
    /// returns its length. Generic, so each source is compiled on its own (closures instead
    /// cost a large FIND 8% more instructions).
    private func write<Source: RecordSource>(_ source: Source, into base: UnsafeMutablePointer<UInt8>) -> Int {
        // Unchecked reads of the tables (checked ones were a tenth of a FIND's encoding).
        prefixBytes.withUnsafeBufferPointer { prefixes in formats.withUnsafeBufferPointer { formats in prefixRanges.withUnsafeBufferPointer { ranges in
            var writer = Writer(base: base, at: 0)
            for column in 0..<formats.count {
                writer.copyWords(prefixes.baseAddress! + ranges[column].lowerBound, count: ranges[column].count)
                if !source.write(column, as: formats[column], to: &writer) { writer.copy("null") }
            }
            if formats.isEmpty { writer.byte(UInt8(ascii: "{")) }
            writer.byte(UInt8(ascii: "}"))
            writer.byte(10)
            return writer.at
        }}}
    }

    func line(_ result: QueryResult, row: Int) -> String {
        var out: [UInt8] = []
        append(result, row: row, to: &out)
        out.removeLast()
        return String(decoding: out, as: UTF8.self)
    }

    /// Writes into storage already grown to fit: no capacity checks, no reference counting.
    fileprivate struct Writer {
        let base: UnsafeMutablePointer<UInt8>
        var at: Int

        private static let quote = UInt8(ascii: "\"")
        private static let hex = Array("0123456789abcdef".utf8)

        mutating func byte(_ byte: UInt8) {
            base[at] = byte
            at += 1
        }

        mutating func copy(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
            (base + at).update(from: source, count: bytes.count)
            at += bytes.count
        }

        /// `count` bytes a word at a time: the source has eight bytes past its end to read and
        /// the scratch space a word to spare (a short prefix cost more through memcpy).
        @inline(__always) mutating func copyWords(_ source: UnsafePointer<UInt8>, count: Int) {
            var index = 0
            while index < count {
                UnsafeMutableRawPointer(base + at + index).storeBytes(of: UnsafeRawPointer(source + index).loadUnaligned(as: UInt64.self), as: UInt64.self)
                index += 8
            }
            at += count
        }

        mutating func copy(_ text: StaticString) {
            copy(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
        }

        /// A value as COPY's text format escapes it. Numbers, booleans and timestamps never
        /// hold a backslash; JSON and strings may.
        mutating func escapedValue(_ bytes: UnsafeBufferPointer<UInt8>, as format: Format) {
            switch format {
            case .string:
                string(bytes, copyEscaped: true)
            case .number:
                number(bytes)  // a FIND's most common column, kept out of `value`'s switch
            case .raw where bytes.baseAddress.map({ memchr($0, 92, bytes.count) != nil }) ?? false:
                let start = at
                CopyRow.decode(bytes) { byte($0) }
                lineBreaksToSpaces(from: start)
            default:
                value(bytes, as: format)
            }
        }

        /// `bytes` as a JSON string. With `copyEscaped`, the text is COPY's: a backslash starts
        /// an escape, decoded and written as any other byte would be, so FIND's line is GET's.
        mutating func string(_ bytes: UnsafeBufferPointer<UInt8>, copyEscaped: Bool) {
            byte(Self.quote)
            // A pointer and a while loop: a Range's iterator is a generic call a byte in a
            // debug build (what the tests run), which made a FIND of 100,000 rows take 7 s.
            guard let source = bytes.baseAddress else { return byte(Self.quote) }
            var plainStart = 0
            var index = Self.nextSpecial(source, from: 0, count: bytes.count)
            while index < bytes.count {
                copy(UnsafeBufferPointer(start: source + plainStart, count: index - plainStart))
                var current = source[index]
                index += 1
                if copyEscaped && current == 92 && index < bytes.count {
                    (current, index) = CopyRow.escape(bytes, after: index)
                }
                if Self.isSpecial(current) { escapeByte(current) } else { byte(current) }
                plainStart = index
                index = Self.nextSpecial(source, from: index, count: bytes.count)
            }
            copy(UnsafeBufferPointer(start: source + plainStart, count: bytes.count - plainStart))
            byte(Self.quote)
        }

        /// A byte a JSON string escapes: a control character, `"` or `\`.
        private static func isSpecial(_ byte: UInt8) -> Bool { byte < 0x20 || byte == quote || byte == 92 }

        /// Where the next byte a JSON string escapes (a control character, `"` or `\`) is,
        /// from `index`, else `count`. Eight bytes a step: most text holds none.
        static func nextSpecial(_ source: UnsafePointer<UInt8>, from index: Int, count: Int) -> Int {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            var at = index
            while at + 8 <= count {
                let word = UnsafeRawPointer(source + at).loadUnaligned(as: UInt64.self)
                let quote = word ^ (ones &* 0x22)
                let backslash = word ^ (ones &* 0x5C)
                // A byte below 0x20, or one that is zero after the xor; the lowest one flagged
                // is exact (a borrow only flags bytes above it).
                let control = (word &- (ones &* 0x20)) & ~word
                let equal = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)
                let found = (control | equal) & highs
                if found != 0 { return at + found.trailingZeroBitCount >> 3 }
                at += 8
            }
            while at < count {
                if isSpecial(source[at]) { return at }
                at += 1
            }
            return count
        }

        /// A quote, backslash or control character inside a JSON string.
        mutating func escapeByte(_ current: UInt8) {
            byte(92)
            switch current {
            case Self.quote: byte(Self.quote)
            case 92: byte(92)
            case 10: byte(UInt8(ascii: "n"))
            case 13: byte(UInt8(ascii: "r"))
            case 9: byte(UInt8(ascii: "t"))
            default:
                byte(UInt8(ascii: "u"))
                byte(48)
                byte(48)
                byte(Self.hex[Int(current >> 4)])
                byte(Self.hex[Int(current & 15)])
            }
        }

        /// JSON text may hold line breaks between its tokens (a `json` column keeps its input's);
        /// a record is one line, so they become spaces, which mean the same. Inside a JSON
        /// string a line break is always escaped.
        mutating func lineBreaksToSpaces(from start: Int) {
            var index = start
            while index < at {
                if base[index] == 10 || base[index] == 13 { base[index] = 32 }
                index += 1
            }
        }

        /// NaN, Infinity, -Infinity are not JSON numbers: they become strings.
        @inline(__always) mutating func number(_ bytes: UnsafeBufferPointer<UInt8>) {
            if let last = bytes.last, last == UInt8(ascii: "N") || last == UInt8(ascii: "y") {
                byte(Self.quote)
                copy(bytes)
                byte(Self.quote)
            } else {
                copy(bytes)
            }
        }

        mutating func value(_ bytes: UnsafeBufferPointer<UInt8>, as format: Format) {
            switch format {
            case .raw:
                let start = at
                copy(bytes)
                lineBreaksToSpaces(from: start)
            case .boolean:
                copy(bytes.first == UInt8(ascii: "t") ? "true" : "false")
            case .number:
                number(bytes)
            case .timestamp:
                byte(Self.quote)
                let start = at
                // ` BC` follows the zone (`0044-03-15 12:00:00+00 BC`): it goes after `:00`.
                let era = bytes.count >= 3 && bytes[bytes.count - 3] == 32 && bytes[bytes.count - 2] == UInt8(ascii: "B") && bytes[bytes.count - 1] == UInt8(ascii: "C")
                copy(era ? UnsafeBufferPointer(rebasing: bytes.dropLast(3)) : bytes)
                if let space = bytes.firstIndex(of: 32) { base[start + space] = UInt8(ascii: "T") }
                // A zone of whole hours (`+00`) becomes `+00:00`.
                if at - start >= 3, base[at - 3] == UInt8(ascii: "+") || base[at - 3] == UInt8(ascii: "-"), at - 3 > start + 10 {
                    byte(UInt8(ascii: ":"))
                    byte(UInt8(ascii: "0"))
                    byte(UInt8(ascii: "0"))
                }
                if era { copy(" BC") }
                byte(Self.quote)
            case .string:
                string(bytes, copyEscaped: false)
            }
        }
    }

}

/// Where a record's values come from: a query's row (GET) or a COPY row (FIND).
private protocol RecordSource {
    /// At least the bytes of the text of columns `0..<count` (0 for NULL).
    func escapedBytes(_ count: Int) -> Int
    /// Writes the column's value; false when it is NULL.
    func write(_ column: Int, as format: RowEncoder.Format, to writer: inout RowEncoder.Writer) -> Bool
}

private struct ResultRow: RecordSource {
    let result: QueryResult
    let row: Int

    func escapedBytes(_ count: Int) -> Int {
        var total = 0
        for column in 0..<count { total += result.length(row, column) }
        return total
    }

    func write(_ column: Int, as format: RowEncoder.Format, to writer: inout RowEncoder.Writer) -> Bool {
        guard let bytes = result.bytes(row, column) else { return false }
        writer.value(bytes, as: format)
        return true
    }
}

extension CopyRow: RecordSource {
    /// The whole line's: a FIND's row holds the record's columns and perhaps its keys.
    fileprivate func escapedBytes(_ count: Int) -> Int { byteCount }

    fileprivate func write(_ column: Int, as format: RowEncoder.Format, to writer: inout RowEncoder.Writer) -> Bool {
        guard let bytes = escaped(column) else { return false }
        writer.escapedValue(bytes, as: format)
        return true
    }
}
