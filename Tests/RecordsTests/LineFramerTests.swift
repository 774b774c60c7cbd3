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

    /// Every split of a line of exactly the limit and its CR LF frames it: a read that ends
    /// between the CR and the LF once made it one byte too long.
    @Test func lineOfExactlyTheLimitPassesWhereverItsCRLFIsSplit() {
        let bytes = Array("PING\r\nINFO\n".utf8)
        for split in 1..<bytes.count {
            var framer = LineFramer(maxLineLength: 4)
            framer.append(bytes[..<split])
            var events = drain(&framer)
            framer.append(bytes[split...])
            events += drain(&framer)
            #expect(events == [.line("PING"), .line("INFO")], "split at \(split)")
        }
        // A CR kept (IMPORT's data) is the line's, but a row is as long whichever way it ends.
        var framer = LineFramer(maxLineLength: 4)
        framer.keepsCarriageReturns = true
        framer.append(Array("PING\r".utf8))
        #expect(drain(&framer).isEmpty)
        framer.append(Array("\nPINGS\r\n".utf8))
        #expect(drain(&framer) == [.line("PING\r"), .tooLong(length: 5)])
        // A refusal gives the line's length without the CR of its CR LF.
        var split = LineFramer(maxLineLength: 4)
        split.append(Array("PINGS\r".utf8))
        #expect(drain(&split) == [.tooLong(length: 5)])
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

    @Test func manyLinesInOnePacketAreTakenWithoutShiftingTheRest() {
        var framer = LineFramer()
        let lines = (0..<20_000).map { "PING \($0)" }
        framer.append(Array((lines.joined(separator: "\n") + "\nPART").utf8))
        var taken = 0
        while case .line? = framer.next() { taken += 1 }
        #expect(taken == 20_000)
        #expect(framer.bufferedByteCount == 4)
        framer.append(Array("IAL\n".utf8))
        #expect(drain(&framer) == [.line("PARTIAL")])
    }

    @Test func aSmallerLimitAppliesFromTheNextLine() {
        var framer = LineFramer(maxLineLength: 100)
        framer.maxLineLength = 4
        framer.append(Array("AUTH x y\nPING\n".utf8))
        #expect(drain(&framer) == [.tooLong(length: 8), .line("PING")])
    }

    @Test func carriageReturnsKeptWhileAsked() {
        var framer = LineFramer()
        framer.keepsCarriageReturns = true
        framer.append(Array("\"a\r\nb\"\r\n".utf8))
        #expect(drain(&framer) == [.line("\"a\r"), .line("b\"\r")])
    }
}
