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
        prefixBytes = bytes
        prefixRanges = ranges
    }

    var count: Int { formats.count }

    /// One record, with its line feed, from columns `0..<count` of `row`.
    func append(_ result: QueryResult, row: Int, to out: inout [UInt8]) {
        prefixBytes.withUnsafeBufferPointer { prefixes in
            for column in 0..<formats.count {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: prefixes[prefixRanges[column]]))
                if let bytes = result.bytes(row, column) {
                    Self.append(bytes, as: formats[column], to: &out)
                } else {
                    out.append(contentsOf: [UInt8(ascii: "n"), UInt8(ascii: "u"), UInt8(ascii: "l"), UInt8(ascii: "l")])
                }
            }
        }
        if formats.isEmpty { out.append(UInt8(ascii: "{")) }
        out.append(UInt8(ascii: "}"))
        out.append(10)
    }

    func line(_ result: QueryResult, row: Int) -> String {
        var out: [UInt8] = []
        append(result, row: row, to: &out)
        out.removeLast()
        return String(decoding: out, as: UTF8.self)
    }

    private static let quote = UInt8(ascii: "\"")

    static func append(_ bytes: UnsafeBufferPointer<UInt8>, as format: Format, to out: inout [UInt8]) {
        switch format {
        case .raw:
            out.append(contentsOf: bytes)
        case .boolean:
            out.append(contentsOf: bytes.first == UInt8(ascii: "t") ? Array("true".utf8) : Array("false".utf8))
        case .number:
            // NaN, Infinity, -Infinity are not JSON numbers.
            if let last = bytes.last, last == UInt8(ascii: "N") || last == UInt8(ascii: "y") {
                out.append(quote)
                out.append(contentsOf: bytes)
                out.append(quote)
            } else {
                out.append(contentsOf: bytes)
            }
        case .timestamp:
            out.append(quote)
            let start = out.count
            out.append(contentsOf: bytes)
            if let space = out[start...].firstIndex(of: 32) { out[space] = UInt8(ascii: "T") }
            // A zone of whole hours (`+00`) becomes `+00:00`.
            let count = out.count - start
            if count >= 3, out[out.count - 3] == UInt8(ascii: "+") || out[out.count - 3] == UInt8(ascii: "-"),
               out.count - 3 > start + 10 {
                out.append(contentsOf: Array(":00".utf8))
            }
            out.append(quote)
        case .string:
            out.append(quote)
            var plainStart = 0
            for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == quote || byte == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart..<index]))
                switch byte {
                case quote: out.append(contentsOf: [92, quote])
                case 92: out.append(contentsOf: [92, 92])
                case 10: out.append(contentsOf: [92, UInt8(ascii: "n")])
                case 13: out.append(contentsOf: [92, UInt8(ascii: "r")])
                case 9: out.append(contentsOf: [92, UInt8(ascii: "t")])
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
                }
                plainStart = index + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart...]))
            out.append(quote)
        }
    }
}
