import Foundation
import Postgres
import Testing
@testable import Records

/// The rows SAVE copies into PostgreSQL: whatever a value holds, `CopyRow` (which reads what
/// PostgreSQL writes in the same format) reads it back unchanged, NULL apart from every text.
@Suite struct CopyTextTests {
    private func readBack(_ data: [UInt8], columns: Int) -> [[String?]] {
        var rows: [[String?]] = []
        for line in data.split(separator: 10, omittingEmptySubsequences: false).dropLast() {
            Array(line).withUnsafeBytes { bytes in
                CopyRow.reading(bytes) { row in rows.append((0..<row.count).map { row.string($0) }) }
            }
        }
        #expect(rows.allSatisfy { $0.count == columns })
        return rows
    }

    @Test func theBytesTheFormatNamesAreEscapedAndNoOthers() {
        let data = CopyText.rows([["a\tb", nil, "", "\\N"], ["line\nfeed", "cr\r", "back\\slash", "ünï \"q\" 🙂"]], count: 4)
        #expect(String(decoding: data, as: UTF8.self) == "a\\tb\tline\\nfeed\n\\N\tcr\\r\n\tback\\\\slash\n\\\\N\tünï \"q\" 🙂\n")
        #expect(readBack(data, columns: 2) == [["a\tb", "line\nfeed"], [nil, "cr\r"], ["", "back\\slash"], ["\\N", "ünï \"q\" 🙂"]])
        #expect(CopyText.rows([[], []], count: 0).isEmpty)
    }

    /// Seeded random values over the bytes that matter (`RECORDS_COPYTEXT_SEED` replays one).
    @Test func anyValueComesBackAsItWent() {
        let seed = UInt64(ProcessInfo.processInfo.environment["RECORDS_COPYTEXT_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970 * 1000) % 100_000
        print("anyValueComesBackAsItWent seed \(seed) (RECORDS_COPYTEXT_SEED replays it)")
        var state = seed &+ 0x9E37_79B9_7F4A_7C15
        func next() -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(truncatingIfNeeded: state >> 33)
        }
        let pieces = ["a", "\\", "\t", "\n", "\r", "N", "\\N", ".", "\\.", " ", "é", "𝄞", "\u{1}", ",", "\""]
        let rows = 300, width = 4
        let columns: [[String?]] = (0..<width).map { _ in
            (0..<rows).map { _ in next() % 9 == 0 ? nil : (0..<(next() % 6)).map { _ in pieces[next() % pieces.count] }.joined() }
        }
        let back = readBack(CopyText.rows(columns, count: rows), columns: width)
        #expect(back.count == rows, "seed \(seed)")
        for row in 0..<min(rows, back.count) {
            #expect(back[row] == columns.map { $0[row] }, "seed \(seed): row \(row)")
        }
    }
}

extension CopyText {
    /// The rows of `columns` (one array a column, each as long as `rows`), as a plan writes them.
    static func rows(_ columns: [[String?]], count rows: Int) -> [UInt8] {
        var text = CopyText(rows: rows)
        for row in 0..<rows {
            for column in columns { text.append(column[row]) }
            text.endRow()
        }
        return text.bytes
    }
}
