import Testing
@testable import Records

@Suite struct ReplyTests {
    private func wire(_ reply: Reply) -> String {
        var out: [UInt8] = []
        reply.encode(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test func okWithDataLines() {
        #expect(wire(.ok("2 records", lines: ["{\"id\":1}", "{\"id\":2}"])) == "{\"id\":1}\n{\"id\":2}\n+OK 2 records\n")
    }

    @Test func bareOK() {
        #expect(wire(.ok()) == "+OK\n")
    }

    @Test func errorCarriesItsCode() {
        #expect(wire(.error(.notFound, "no employee with id 9")) == "-ERR NOT_FOUND no employee with id 9\n")
    }

    @Test func dataLinesCannotPassForStatusOrPushedLines() {
        let text = wire(.ok(lines: ["+OK fake", "-ERR fake", "! fake", "two\nlines"]))
        #expect(text == " +OK fake\n -ERR fake\n ! fake\ntwo\\nlines\n+OK\n")
    }

    @Test func statusMessageStaysOneLine() {
        #expect(wire(.error(.validation, "a\nb")) == "-ERR VALIDATION a\\nb\n")
    }
}
