import Foundation
import Testing
@testable import RecordsClient

@Suite struct WireTests {
    @Test func repliesArePiecedTogetherFromAnySplitOfTheBytes() throws {
        let wire = Array("{\"id\":1}\n ! escaped\n! memo 3 inserted\n+OK 1 record\n-ERR NOT_FOUND no memo with id 9\n".utf8)
        // Every split point gives the same events: a push mid-reply is taken apart from it.
        for cut in 0...wire.count {
            var reader = ReplyReader()
            let events = try reader.feed(wire[..<cut]) + reader.feed(wire[cut...])
            #expect(events == [
                .pushed("memo 3 inserted"),
                .reply(WireReply(lines: ["{\"id\":1}", "! escaped"], status: "+OK 1 record")),
                .reply(WireReply(lines: [], status: "-ERR NOT_FOUND no memo with id 9")),
            ])
        }
    }

    @Test func errorsCarryTheirCodeAndDetailLines() throws {
        let reply = WireReply(lines: ["#e1 employee: last_name is required", "#e2 employee: age must be a number"], status: "-ERR VALIDATION 2 problems; nothing was saved")
        #expect(throws: RecordsError.server(code: .validation, message: "2 problems; nothing was saved", details: reply.lines)) { try reply.checked() }
        #expect(WireReply(lines: [], status: "-ERR UNAVAILABLE PostgreSQL is away").code == .unavailable)
        // Codes come from the protocol's one table; a word outside it is not this protocol.
        let strange = WireReply(lines: [], status: "-ERR TEAPOT short and stout")
        #expect(strange.code == nil && strange.codeWord == "TEAPOT")
        #expect(throws: RecordsError.protocolViolation("unknown error code in -ERR TEAPOT short and stout")) { try strange.checked() }
        #expect(WireReply(lines: [], status: "+OK saved").message == "saved")
        #expect(ReplyReader.unstuffed("..dot") == ".dot" && ReplyReader.unstuffed(".-dash") == "-dash" && ReplyReader.unstuffed("plain") == "plain")
        #expect(ReplyReader.unescaped(" +plus") == "+plus" && ReplyReader.unescaped(" plain") == " plain")
    }

    @Test func valuesAreQuotedByTheLibraryNeverSpliced() throws {
        let line = try RequestFormat.format("name == %@ AND age > %@ AND %K == %@ AND x == %@", ["O\"Neil\\\n\t\u{1}", 30, "department.name", Optional<String>.none, true] as [any RecordsLiteral])
        #expect(line == #"name == "O\"Neil\\\n\t\u0001" AND age > 30 AND department.name == nil AND x == true"#)
        #expect(throws: RecordsError.self) { try RequestFormat.format("a == %@", []) }
        #expect(throws: RecordsError.self) { try RequestFormat.format("a == %@", [1, 2] as [any RecordsLiteral]) }
        #expect(throws: RecordsError.self) { try RequestFormat.format("%K == 1", ["x OR 1"] as [any RecordsLiteral]) }
        #expect(throws: RecordsError.self) { try "nul\u{0}".recordsLiteral() }
        #expect(try Date(timeIntervalSince1970: 1_717_243_200.5).recordsLiteral() == #""2024-06-01T12:00:00.500000Z""#)
    }

    @Test func timestampsAndEventsAreRead() throws {
        #expect(RecordDecoding.parseTimestamp("2024-06-01T12:00:00+00:00") == Date(timeIntervalSince1970: 1_717_243_200))
        let precise = RecordDecoding.parseTimestamp("2024-06-01T12:00:00.250000+00:00")!.timeIntervalSince1970
        #expect(abs(precise - 1_717_243_200.25) < 1e-6)
        #expect(ChangeEvent(line: "assignment project=3 employee=7 deleted") == ChangeEvent(entity: "assignment", key: "project=3 employee=7", operation: .deleted))
        #expect(ChangeEvent(line: "overflow 3 events dropped") == nil)
        // Keys typed as their columns are.
        #expect(ChangeEvent(line: "assignment project=3 employee=7 deleted")?.keyValue == .object(["project": .integer(3), "employee": .integer(7)]))
        #expect(ChangeEvent(line: "memo 14 inserted")?.keyValue == .integer(14))
        #expect(ChangeEvent(line: #"tag "a b=c \"d\"" updated"#)?.keyValue == .text(#"a b=c "d""#))
        #expect(ChangeEvent(line: "price 2.50 updated")?.keyValue == .decimal(Decimal(string: "2.5")!))
        #expect(ChangeEvent(line: #"visit member="x y" day="2026-01-02" inserted"#)?.keyValue == .object(["member": .text("x y"), "day": .text("2026-01-02")]))
        #expect(ChangeEvent(line: #"tag "a-uuid" inserted"#)?.keyValue.description == #""a-uuid""#)
        #expect(RecordsClient.nextCursor("2 records; next page: AFTER c6264") == "c6264")
        #expect(RecordsClient.nextCursor("2 records") == nil)
    }

    /// What a user of the library found (each failed before).
    @Test func literalsURLsAndTimestampsAsAUserFoundThem() throws {
        // A fraction that rounds up to a whole second carries into the seconds.
        #expect(try Date(timeIntervalSince1970: 1717165800.9999996).recordsLiteral() == "\"2024-05-31T14:30:01.000000Z\"")
        #expect(try Date(timeIntervalSince1970: -0.5).recordsLiteral() == "\"1969-12-31T23:59:59.500000Z\"")
        // A placeholder inside quotes would break out of the string: refused; %% stays a percent.
        #expect(throws: RecordsError.self) { try RequestFormat.format("name == '%@'", ["x' OR name != 'y"]) }
        #expect(throws: RecordsError.self) { try RequestFormat.format("name == \"%@\"", ["x"]) }
        #expect(try RequestFormat.format("name == \"50%%\" AND age > %@", [3]) == "name == \"50%\" AND age > 3")
        #expect(try RequestFormat.format(#"name == "a\"%%" AND id == %@"#, [1]) == #"name == "a\"%" AND id == 1"#)
        // The URL's user and password are decoded once; ports beyond 65535 are refused.
        let url = try RecordsURL("records://carol:abc%2541xyz@127.0.0.1:7878")
        #expect(url.user == "carol" && url.password == "abc%41xyz")
        #expect(throws: RecordsError.self) { try RecordsURL("records://127.0.0.1:92637") }
        #expect(try RecordsURL("RECORDS://127.0.0.1").tls == .off)
        // A timestamp without time zone reads as UTC.
        #expect(RecordDecoding.parseTimestamp("2024-05-31T14:30:00") == Date(timeIntervalSince1970: 1717165800))
    }
}
