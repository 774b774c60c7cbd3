import Testing
@testable import Records

/// The parts of SQL built as text: identifiers, literals inlined for COPY, CSV records.
@Suite struct SQLTextTests {
    private func literal(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }

    @Test func identifiersDoubleTheirQuotes() {
        #expect(SQL.identifier("name") == "\"name\"")
        #expect(SQL.identifier("a\"b") == "\"a\"\"b\"")
        #expect(SQL.identifier("naïve") == "\"naïve\"")
    }

    @Test func parametersBecomeLiteralsOutsideQuotesOnly() {
        let sql = #"SELECT t0."a$1" FROM "t" AS t0 WHERE t0."x" = $1 AND t0."y" > $2 AND t0."z" = '$1' OR t0."w" IS $3"#
        #expect(SQL.inlining(sql, ["it's", "10", nil], literal: literal)
                == #"SELECT t0."a$1" FROM "t" AS t0 WHERE t0."x" = 'it''s' AND t0."y" > '10' AND t0."z" = '$1' OR t0."w" IS NULL"#)
    }

    @Test func parameterNumbersPastNineAndUnknownOnesStay() {
        let values = (1...12).map { Optional(String($0)) }
        #expect(SQL.inlining("$12 + $1 - $13", values, literal: literal) == "'12' + '1' - $13")
        #expect(SQL.inlining("a$ $x", [], literal: literal) == "a$ $x")
    }

    @Test func doubledQuotesInsideIdentifiersAndStringsKeepTheScannerInside() {
        #expect(SQL.inlining(#""a""$1" = 'b''$1' AND $1"#, ["v"], literal: literal) == #""a""$1" = 'b''$1' AND 'v'"#)
    }

    private func record(_ text: String) -> String {
        var out: [UInt8] = []
        Array(text.utf8).withUnsafeBytes { CSV.appendRecord($0, to: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    @Test func copyRecordsAreDotStuffedLineByLine() {
        #expect(record("1,plain\n") == "1,plain\n")
        #expect(record(".5,x\n") == "..5,x\n")
        #expect(record("-1,\"two\n+lines\n!three\"\n") == ".-1,\"two\n.+lines\n.!three\"\n")
        #expect(record("7,\"a\nb\"\n") == "7,\"a\nb\"\n")
    }
}
