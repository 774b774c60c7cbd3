import Foundation
import Postgres
import Testing
@testable import Records

/// Rows of `COPY ... TO STDOUT` (FIND's stream): split, decoded, and written as JSON records.
@Suite struct CopyRowTests {
    /// A value as PostgreSQL's COPY TO writes it in text format (CopyAttributeOutText).
    static func copyEscaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{8}": out += "\\b"
            case "\u{C}": out += "\\f"
            case "\u{B}": out += "\\v"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private func withRow<T>(_ line: String, _ body: (CopyRow) -> T) -> T {
        let bytes = Array(line.utf8)
        return bytes.withUnsafeBytes { raw in CopyRow.reading(raw, body) }
    }

    private func withLine<T>(_ line: String, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        Array(line.utf8).withUnsafeBytes(body)
    }

    @Test func fieldsSplitAtTabsWithNullsAndEmptiesApart() {
        withRow("1\t\\N\t\tx\\ty\t\n") { row in
            #expect(row.count == 5)
            #expect(row.string(0) == "1")
            #expect(row.isNull(1) && row.string(1) == nil && row.length(1) == 0)
            #expect(row.string(2) == "" && !row.isNull(2))
            #expect(row.string(3) == "x\ty")
            #expect(row.string(4) == "")
        }
        // `\N` is NULL only as a whole field: the text `\N` is written `\\N`.
        withRow("\\\\N\ta\\Nb") { row in
            #expect(row.string(0) == "\\N")
            #expect(row.string(1) == "aNb")
        }
    }

    @Test func rowsOfManyFieldsGrowTheirRoom() {
        let line = (0..<100).map(String.init).joined(separator: "\t")
        withRow(line) { row in
            #expect(row.count == 100)
            #expect((0..<100).map { row.string($0) } == (0..<100).map(String.init))
        }
    }

    @Test func everyEscapeOfTheTextFormatDecodes() {
        withRow(#"\b\f\n\r\t\v\\\101\x41\x4g\q\"#) { row in
            #expect(row.string(0) == "\u{8}\u{C}\n\r\t\u{B}\\AA\u{4}gq\\")
        }
    }

    /// Generated strings of every character below 0x80 and a few beyond, escaped as COPY
    /// does, come out of the encoder as JSON that decodes to the string, with the escapes
    /// GET's encoder writes (no `\b` or `\f`).
    @Test func generatedStringsComeOutAsTheirJSON() throws {
        let seed = UInt64(Date().timeIntervalSince1970 * 1000) % 100_000
        var generator = Generator(seed: seed)
        func next() -> UInt64 { generator.next() }
        let alphabet: [String] = (1..<128).map { String(UnicodeScalar(UInt8($0))) } + ["é", "😀", "\\N", "\\x41", "\\101"]
        let encoder = RowEncoder([(key: "s", format: .string), (key: "j", format: .raw), (key: "n", format: .number)])
        for _ in 0..<500 {
            let text = (0..<Int(next() % 30)).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] }.joined()
            let json = try String(decoding: JSONSerialization.data(withJSONObject: ["k": text]), as: UTF8.self)
            let line = Self.copyEscaped(text) + "\t" + Self.copyEscaped("{\n\t\"k\" :\r\n" + json.dropFirst(5).dropLast()  + "}") + "\t12.5\n"
            var out: [UInt8] = []
            withLine(line) { encoder.append(line: $0, to: &out) }
            #expect(out.last == 10 && out.filter { $0 == 10 }.count == 1, "seed \(seed): \(text.debugDescription)")
            let record = try #require(try JSONSerialization.jsonObject(with: Data(out)) as? [String: Any], "seed \(seed)")
            #expect(record["s"] as? String == text, "seed \(seed): \(text.debugDescription)")
            #expect((record["j"] as? [String: Any])?["k"] as? String == text, "seed \(seed): \(text.debugDescription)")
            #expect(record["n"] as? Double == 12.5)
        }
    }

    /// Timestamps as PostgreSQL's JSON prints them: a `T`, a zone of whole hours with its
    /// minutes, and an era after the zone.
    @Test func timestampsAreWrittenAsPostgreSQLsJSONWritesThem() {
        let encoder = RowEncoder([(key: "a", format: .timestamp), (key: "b", format: .timestamp), (key: "c", format: .timestamp),
                                  (key: "d", format: .timestamp), (key: "e", format: .timestamp)])
        var out: [UInt8] = []
        withLine("0044-03-15 12:00:00+00 BC\t0044-03-15 12:00:00 BC\t2024-06-01 12:00:00+05:30\t2024-06-01 12:00:00.5-03\tinfinity") {
            encoder.append(line: $0, to: &out)
        }
        #expect(String(decoding: out, as: UTF8.self) == #"{"a":"0044-03-15T12:00:00+00:00 BC","b":"0044-03-15T12:00:00 BC","c":"2024-06-01T12:00:00+05:30","d":"2024-06-01T12:00:00.5-03:00","e":"infinity"}"# + "\n")
    }

    @Test func controlCharactersAreWrittenAsGetWritesThem() {
        let encoder = RowEncoder([(key: "s", format: .string)])
        var out: [UInt8] = []
        withLine(#"\b\f\v\n\r\t\\"# + "\u{1}\"") { encoder.append(line: $0, to: &out) }
        #expect(String(decoding: out, as: UTF8.self) == #"{"s":"\u0008\u000c\u000b\n\r\t\\\u0001\""}"# + "\n")
    }

    /// Generated lines of every format, NULLs, escapes and columns past the record's, read
    /// field by field as FIND reads them, come out as GET writes the same values decoded
    /// (RECORDS_COPYLINE_SEED replays a printed seed).
    @Test func generatedLinesEncodeAsGetEncodesTheirValues() {
        let seed = UInt64(ProcessInfo.processInfo.environment["RECORDS_COPYLINE_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970 * 1000) % 100_000
        var generator = Generator(seed: seed)
        func next(_ below: Int) -> Int { Int(generator.next() % UInt64(below)) }
        let formats: [RowEncoder.Format] = [.number, .boolean, .raw, .timestamp, .string]
        let samples: [RowEncoder.Format: [String]] = [
            .number: ["0", "-12.5", "123456789012345678", "NaN", "Infinity", "-Infinity", "1e-7"],
            .boolean: ["t", "f"],
            .raw: ["{}", "[1, 2]", "{\"a\\\"b\": \"x\\ny\"}", "{\n\t\"k\": 1\r\n}", "\"\\N\"", "null"],
            .timestamp: ["2024-06-01 12:00:00+00", "0044-03-15 12:00:00+00 BC", "2024-06-01 12:00:00.123456+05:30", "infinity"],
        ]
        let alphabet: [String] = ["a", "b", "\t", "\n", "\r", "\\", "\"", "\u{1}", "\u{8}", "\u{C}", "\u{B}", "\u{1F}", " ", "é", "😀", "N", "\\N"]
        for _ in 0..<2000 {
            let fields = (0..<(1 + next(9))).map { _ in formats[next(formats.count)] }
            let extra = next(3)
            var values: [String?] = []
            for format in fields {
                if next(5) == 0 { values.append(nil); continue }
                if let choices = samples[format] { values.append(choices[next(choices.count)]); continue }
                values.append((0..<next(20)).map { _ in alphabet[next(alphabet.count)] }.joined())
            }
            let line = (values + (0..<extra).map { _ in next(2) == 0 ? nil : "k\t\(next(100))" })
                .map { $0.map(Self.copyEscaped) ?? "\\N" }.joined(separator: "\t") + (next(2) == 0 ? "\n" : "")
            let encoder = RowEncoder(fields.enumerated().map { (key: "c\($0.offset)", format: $0.element) })
            var expected: [UInt8] = [], got: [UInt8] = []
            encoder.append(values: values, to: &expected)
            withLine(line) { encoder.append(line: $0, to: &got) }
            #expect(got == expected, "seed \(seed): \(line.debugDescription) gave \(String(decoding: got, as: UTF8.self).debugDescription)")
            if got != expected { return }
        }
    }

    /// Generated lines of tabs, `\N`s and bytes near a tab's value (0x08, 0x88, 0x89, 0), of
    /// every length around the eight-byte steps, split as a plain search for tabs splits them
    /// (RECORDS_COPYROW_SEED replays a printed seed).
    @Test func generatedLinesSplitAsAPlainSearchDoes() {
        let seed = UInt64(ProcessInfo.processInfo.environment["RECORDS_COPYROW_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970 * 1000) % 100_000
        var generator = Generator(seed: seed)
        func next() -> UInt64 { generator.next() }
        let pieces: [[UInt8]] = [[9], [9], [8], [0x89], [0x88], [92, 78], [65], [0], [0xFF], [92]]
        var row = CopyRow(capacity: 1)
        defer { row.deallocate() }
        for _ in 0..<3000 {
            var line: [UInt8] = []
            for _ in 0..<Int(next() % 40) { line += pieces[Int(next() % UInt64(pieces.count))] }
            if next() % 2 == 0 { line.append(10) }
            var expected: [[UInt8]?] = []
            var field: [UInt8] = []
            for byte in line.last == 10 ? line.dropLast() : line[...] {
                if byte == 9 { expected.append(field == [92, 78] ? nil : field); field = [] } else { field.append(byte) }
            }
            expected.append(field == [92, 78] ? nil : field)
            let got: [[UInt8]?] = line.withUnsafeBytes { raw in
                row.load(raw)
                return (0..<row.count).map { row.escaped($0).map(Array.init) }
            }
            #expect(got == expected, "seed \(seed): \(line)")
            if got != expected { return }
        }
    }
}

/// libpq's messages are lines, continued with a tab; a reply's status line holds them as one.
@Suite struct LibpqMessageTests {
    @Test func libpqsLinesBecomeOneLine() {
        let dead = "FATAL:  terminating connection due to administrator command\nserver closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n\tbefore or while processing the request.\n"
        #expect(dead.libpqMessageAsOneLine() == "FATAL:  terminating connection due to administrator command; server closed the connection unexpectedly This probably means the server terminated abnormally before or while processing the request.")
        #expect("connection to server at \"127.0.0.1\", port 1 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?\n".libpqMessageAsOneLine()
                == "connection to server at \"127.0.0.1\", port 1 failed: Connection refused Is the server running on that host and accepting TCP/IP connections?")
        #expect("no line break".libpqMessageAsOneLine() == "no line break")
        #expect("a\ttab\r\n\r\nb \n".libpqMessageAsOneLine() == "a tab; b")
        #expect("".libpqMessageAsOneLine() == "")
    }
}
