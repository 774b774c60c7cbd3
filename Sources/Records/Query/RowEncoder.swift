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

    /// The same record from a line of `COPY ... TO STDOUT` (FIND's stream; columns past
    /// the record's are left): its text is escaped, and COPY's escapes of a backslash, a line
    /// feed, a return and a tab are JSON's own, so a string is copied nearly as it comes.
    func append(line: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        scratchAppend(CopyLine(line), to: &out)
    }

    /// FIND's way: the record written in place at the end of the stream's batch.
    func append(line: UnsafeRawBufferPointer, to batch: inout StreamBatch) {
        let source = CopyLine(line)
        batch.write(atMost: most(source)) { write(source, into: $0) }
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
        var source = source
        // Unchecked reads of the tables (checked ones were a tenth of a FIND's encoding).
        return prefixBytes.withUnsafeBufferPointer { prefixes in formats.withUnsafeBufferPointer { formats in prefixRanges.withUnsafeBufferPointer { ranges in
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

    /// GET's way over values given as text (nil for NULL): what FIND's line of the same values
    /// must be, whatever COPY escaped.
    func append(values: [String?], to out: inout [UInt8]) {
        scratchAppend(TextRow(values: values), to: &out)
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

        /// Most values are a few bytes: those are copied as two overlapping loads and stores
        /// in place, not by a call to memmove (a call each, six a row, was 4% of a FIND's CPU).
        @inline(__always) mutating func copy(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let source = bytes.baseAddress else { return }
            let count = bytes.count
            let from = UnsafeRawPointer(source), to = UnsafeMutableRawPointer(base + at)
            if count >= 8 && count <= 16 {
                let head = from.loadUnaligned(as: UInt64.self), tail = from.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
                to.storeBytes(of: head, as: UInt64.self)
                to.storeBytes(of: tail, toByteOffset: count - 8, as: UInt64.self)
            } else if count >= 4 && count < 8 {
                let head = from.loadUnaligned(as: UInt32.self), tail = from.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
                to.storeBytes(of: head, as: UInt32.self)
                to.storeBytes(of: tail, toByteOffset: count - 4, as: UInt32.self)
            } else if count < 4 {
                var index = 0
                while index < count {
                    base[at + index] = source[index]
                    index += 1
                }
            } else {
                to.copyMemory(from: from, byteCount: count)
            }
            at += count
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
                string(bytes, copyText: true)
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

        /// `bytes` from `start` as a JSON string; returns where it ended. With `copyText`, the
        /// text is a COPY line's: a tab ends the field, and a backslash starts an escape,
        /// decoded and written as any other byte would be, so FIND's line is GET's. A tab is
        /// a byte JSON escapes, so the one search finds both: the field is read once.
        @discardableResult
        mutating func string(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int = 0, copyText: Bool) -> Int {
            byte(Self.quote)
            // A pointer and a while loop: a Range's iterator is a generic call a byte in a
            // debug build (what the tests run), which made a FIND of 100,000 rows take 7 s.
            guard let source = bytes.baseAddress else {
                byte(Self.quote)
                return start
            }
            var plainStart = start
            var index = Self.nextSpecial(source, from: start, count: bytes.count)
            while index < bytes.count {
                var current = source[index]
                if copyText && current == 9 { break }
                copy(UnsafeBufferPointer(start: source + plainStart, count: index - plainStart))
                index += 1
                if copyText && current == 92 && index < bytes.count && source[index] != 9 {
                    (current, index) = CopyRow.escape(bytes, after: index)
                }
                if Self.isSpecial(current) { escapeByte(current) } else { byte(current) }
                plainStart = index
                index = Self.nextSpecial(source, from: index, count: bytes.count)
            }
            copy(UnsafeBufferPointer(start: source + plainStart, count: index - plainStart))
            byte(Self.quote)
            return index
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
                string(bytes, copyText: false)
            }
        }
    }

}

/// Where a record's values come from: a query's row (GET) or a COPY row (FIND).
private protocol RecordSource {
    /// At least the bytes of the text of columns `0..<count` (0 for NULL).
    func escapedBytes(_ count: Int) -> Int
    /// Writes the column's value; false when it is NULL. Columns are asked for in order.
    mutating func write(_ column: Int, as format: RowEncoder.Format, to writer: inout RowEncoder.Writer) -> Bool
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

private struct TextRow: RecordSource {
    let values: [String?]

    func escapedBytes(_ count: Int) -> Int { values.prefix(count).reduce(0) { $0 + ($1?.utf8.count ?? 0) } }

    func write(_ column: Int, as format: RowEncoder.Format, to writer: inout RowEncoder.Writer) -> Bool {
        guard column < values.count, var value = values[column] else { return false }
        value.withUTF8 { writer.value($0, as: format) }
        return true
    }
}

/// A COPY line read field by field as the record is written: the encoder asks for columns
/// in order, so each field starts where the last ended. Splitting the line first, then
/// writing each field, was a fifth of a FIND's instructions.
private struct CopyLine: RecordSource {
    /// The line without its line feed.
    let bytes: UnsafeBufferPointer<UInt8>
    /// Where the next field starts; past the end once the last is read.
    var next = 0

    init(_ line: UnsafeRawBufferPointer) { bytes = CopyRow.fields(of: line) }

    /// The whole line's: a FIND's row holds the record's columns and perhaps its keys.
    func escapedBytes(_ count: Int) -> Int { bytes.count }

    mutating func write(_ column: Int, as format: RowEncoder.Format, to writer: inout RowEncoder.Writer) -> Bool {
        let start = next
        // A line of fewer fields than the record (never a FIND's own statement's) ends in NULLs.
        guard start <= bytes.count, let base = bytes.baseAddress else { return false }
        if CopyRow.isNull(bytes, at: start) {
            next = start + 3
            return false
        }
        if format == .string {
            next = writer.string(bytes, from: start, copyText: true) + 1
        } else {
            let end = CopyRow.fieldEnd(bytes, from: start)
            writer.escapedValue(UnsafeBufferPointer(start: base + start, count: end - start), as: format)
            next = end + 1
        }
        return true
    }
}
