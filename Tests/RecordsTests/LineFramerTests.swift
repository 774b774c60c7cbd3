import Testing
@testable import Records

@Suite struct LineFramerTests {
    private func drain(_ framer: inout LineFramer) -> [LineFramer.Event] {
        var events: [LineFramer.Event] = []
        while let event = framer.next() { events.append(event) }
        return events
    }

    @Test func splitsLinesOnLFAndCRLF() {
        var framer = LineFramer()
        framer.append(Array("PING\r\nINFO\nQUIT\r\n".utf8))
        #expect(drain(&framer) == [.line("PING"), .line("INFO"), .line("QUIT")])
    }

    @Test func joinsPacketsSplitAnywhere() {
        var framer = LineFramer()
        let bytes = Array("INSERT game name=\"Go\"\r\nPING\n".utf8)
        var events: [LineFramer.Event] = []
        for byte in bytes {
            framer.append([byte])
            events += drain(&framer)
        }
        #expect(events == [.line("INSERT game name=\"Go\""), .line("PING")])
    }

    @Test func emptyLinesAreLines() {
        var framer = LineFramer()
        framer.append(Array("\n\r\n".utf8))
        #expect(drain(&framer) == [.line(""), .line("")])
    }

    @Test func overlongLineIsReportedOnceAndSkipped() {
        var framer = LineFramer(maxLineLength: 8)
        framer.append(Array("0123456789".utf8))
        #expect(drain(&framer) == [.tooLong(length: 10)])
        framer.append(Array("more junk\nPING\n".utf8))
        #expect(drain(&framer) == [.line("PING")])
        #expect(framer.bufferedByteCount == 0)
    }

    @Test func overlongCompleteLineInOnePacket() {
        var framer = LineFramer(maxLineLength: 4)
        framer.append(Array("abcdef\nPING\n".utf8))
        #expect(drain(&framer) == [.tooLong(length: 6), .line("PING")])
    }

    @Test func lineOfExactlyTheLimitPasses() {
        var framer = LineFramer(maxLineLength: 4)
        framer.append(Array("PING\n".utf8))
        #expect(drain(&framer) == [.line("PING")])
    }

    @Test func invalidUTF8AndNULAreRefusedButFramingGoesOn() {
        var framer = LineFramer()
        framer.append([0x50, 0xff, 0xfe, 0x0a] + Array("A\u{0}B\nPING\n".utf8))
        #expect(drain(&framer) == [.invalid(reason: "line is not valid UTF-8"), .invalid(reason: "NUL byte in line"), .line("PING")])
    }

    @Test func multibyteCharactersSplitAcrossPackets() {
        var framer = LineFramer()
        let bytes = Array("PING ü€\n".utf8)
        framer.append(bytes[0..<6])
        #expect(drain(&framer) == [])
        framer.append(bytes[6...])
        #expect(drain(&framer) == [.line("PING ü€")])
    }
}
