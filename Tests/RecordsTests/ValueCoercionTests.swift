import Foundation
import Testing
@testable import Records

@Suite struct ValueCoercionTests {
    private func coerce(_ value: Value, _ kind: ValueKind) throws -> FieldValue {
        try ValueCoercion.coerce(value, to: kind, name: "x")
    }

    @Test func integersAreRangeChecked() throws {
        #expect(try coerce(.number("32767"), .integer(bits: 16)) == .text("32767"))
        #expect(throws: CommandError(.validation, "x: 32768 is out of range for a 16-bit integer")) { try coerce(.number("32768"), .integer(bits: 16)) }
        #expect(throws: CommandError.self) { try coerce(.number("99999999999999999999"), .integer(bits: 64)) }
        #expect(throws: CommandError.self) { try coerce(.number("1.5"), .integer(bits: 32)) }
        #expect(throws: CommandError.self) { try coerce(.string("1"), .integer(bits: 32)) }
    }

    @Test func integersAreWrittenAsPostgreSQLPrintsThem() throws {
        // Compared against Int64's own parser and printer: the bytewise reader must agree.
        for text in ["0", "7", "+7", "007", "-0", "-007", "+0", "-12", "9223372036854775807", "-9223372036854775808",
                     "9223372036854775808", "-9223372036854775809", "000000000000000000000000001", "2147483647", "-2147483648"] {
            let expected = Int64(text).map { FieldValue.text(String($0)) }
            #expect((try? coerce(.number(text), .integer(bits: 64))) == expected, "\(text)")
        }
        #expect(try coerce(.number("-2147483648"), .integer(bits: 32)) == .text("-2147483648"))
        #expect(throws: CommandError(.validation, "x: 2147483648 is out of range for a 32-bit integer")) { try coerce(.number("2147483648"), .integer(bits: 32)) }
        for text in ["", "-", "+", "1e3", "1.0", "٣", "12a", "--1"] {
            #expect(throws: CommandError.self, "\(text)") { try coerce(.number(text), .integer(bits: 64)) }
        }
    }

    @Test func stringsNeedQuotes() {
        #expect(throws: CommandError(.validation, "x expects a string in double quotes, got 42")) { try coerce(.number("42"), .string) }
    }

    @Test func datesAreISO8601() throws {
        #expect(try coerce(.string("2024-05-31"), .timestamp) == .text("2024-05-31"))
        #expect(try coerce(.string("2024-05-31T14:30:00Z"), .timestamp) == .text("2024-05-31T14:30:00Z"))
        #expect(try coerce(.string("2024-05-31 14:30:00.123+02:00"), .timestamp) == .text("2024-05-31 14:30:00.123+02:00"))
        #expect(throws: CommandError.self) { try coerce(.string("31/05/2024"), .timestamp) }
        #expect(throws: CommandError.self) { try coerce(.string("2024-05-31T14:30"), .date) }
    }

    @Test func binaryIsBase64() throws {
        #expect(try coerce(.string("AAEC/w=="), .binary) == .text("\\x000102ff"))
        #expect(throws: CommandError.self) { try coerce(.string("not base64!"), .binary) }
    }

    @Test func uuidsAndJSON() throws {
        #expect(try coerce(.string("0b9f6f2a-5d3c-4e53-9a52-2f6c1e0d8a11"), .uuid) == .text("0b9f6f2a-5d3c-4e53-9a52-2f6c1e0d8a11"))
        #expect(throws: CommandError.self) { try coerce(.string("0b9f6f2a"), .uuid) }
        #expect(try coerce(.string("{\"a\":1}"), .json) == .text("{\"a\":1}"))
        #expect(throws: CommandError.self) { try coerce(.string("{a:1}"), .json) }
    }

    @Test func refsOnlyForRelationships() {
        #expect(throws: CommandError.self) { try coerce(.ref("a"), .string) }
    }

    @Test func pluralsForInverseNames() {
        #expect(Inflection.plural("employee") == "employees")
        #expect(Inflection.plural("journal_entry") == "journal_entries")
        #expect(Inflection.plural("address") == "addresses")
        #expect(Inflection.plural("day") == "days")
    }

    /// Every byte value through base64 to bytea's hex, and the array literal that carries it
    /// (escapes at the start, in the middle and at the end of a value).
    @Test func binaryBecomesHexAndArraysEscapeWhatTheyMust() throws {
        let all = Data((0...255).map { UInt8($0) })
        let hex = try ValueCoercion.coerce(.string(all.base64EncodedString()), to: .binary, name: "photo")
        #expect(hex == .text("\\x" + (0...255).map { String(format: "%02x", $0) }.joined()))
        #expect(SQL.arrayLiteral([#"\x00"#, #"a"b"#, #"end\"#, nil, "plain"]) == #"{"\\x00","a\"b","end\\","NULL","plain"}"#.replacingOccurrences(of: #""NULL""#, with: "NULL"))
        #expect(try ValueCoercion.arrayLiteral([.string("a,b"), .null, .string(#"q"x"#)], element: .string, name: "tags") == #"{"a,b",NULL,"q\"x"}"#)
    }
}
