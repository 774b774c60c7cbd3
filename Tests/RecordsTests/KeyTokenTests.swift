import Foundation
import Testing
@testable import Records
import RecordsProtocol

/// Keys as client libraries make them, for SAVE KEY and RESUME: the request language's lexer
/// refused most of them (a uuid starting with a digit lexed as a malformed number).
@Suite struct KeyTokenTests {
    /// The shapes a client generates, from a seeded generator.
    enum Shape: CaseIterable {
        case uuid4, uuid7, ulid, prefixed, base64url, base64, colons

        func make(_ g: inout Generator) -> String {
            func hex(_ count: Int) -> String { (0..<count).map { _ in String(g.next() % 16, radix: 16) }.joined() }
            func pick(_ alphabet: String, _ count: Int) -> String {
                let letters = Array(alphabet)
                return String((0..<count).map { _ in letters[Int(g.next() % UInt64(letters.count))] })
            }
            switch self {
            case .uuid4: return "\(hex(8))-\(hex(4))-4\(hex(3))-\(pick("89ab", 1))\(hex(3))-\(hex(12))"
            case .uuid7: return String(String(format: "%012llx", g.next() >> 16).prefix(8)) + "-\(hex(4))-7\(hex(3))-a\(hex(3))-\(hex(12))"
            case .ulid: return pick("0123456789", 1) + pick("0123456789ABCDEFGHJKMNPQRSTVWXYZ", 25)
            case .prefixed: return pick("abcdefghijklmnopqrstuvwxyz", 1 + Int(g.next() % 6)) + "-" + pick("w0123456789", 1 + Int(g.next() % 3)) + "-\(g.next() % 10_000)"
            case .base64url: return Data((0..<(8 + Int(g.next() % 24))).map { _ in UInt8(g.next() % 256) }).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            case .base64: return Data((0..<(1 + Int(g.next() % 30))).map { _ in UInt8(g.next() % 256) }).base64EncodedString()
            case .colons: return "bank:w\(g.next() % 8):\(g.next() % 1000)"
            }
        }
    }

    static func keys(seed: UInt64, count: Int) -> [String] {
        var generator = Generator(seed: seed)
        return (0..<count).map { Shape.allCases[$0 % Shape.allCases.count].make(&generator) }
    }

    @Test func everyShapeOfKeyIsTakenAsTyped() throws {
        let seed = UInt64.random(in: 1...999_999)
        for key in Self.keys(seed: seed, count: 700) {
            #expect(KeyToken.isBare(key), "seed \(seed): \(key)")
            #expect(try CommandParser.parse("SAVE KEY \(key)") == .save(.fail, key: key), "seed \(seed): \(key)")
            #expect(try CommandParser.parse("save merge key \(key)  ") == .save(.merge, key: key), "seed \(seed): \(key)")
            #expect(try CommandParser.parse("RESUME \(key)") == .resume(token: key), "seed \(seed): \(key)")
            // As the client library writes it.
            #expect(try CommandParser.parse("SAVE KEY \(KeyToken.literal(key))") == .save(.fail, key: key), "seed \(seed): \(key)")
        }
    }

    @Test func theReportedKeys() throws {
        for key in ["6f1c0d52-order-17", "3de2b81b-a3f1-4c1a-9d2e-0b1c2d3e4f5a", "bank-w0-1", "order-17", "01JDRY8X3T6W6Q0A9M2V5K7C4B", "42"] {
            #expect(try CommandParser.parse("SAVE KEY \(key)") == .save(.fail, key: key))
        }
    }

    @Test func otherKeysAreQuoted() throws {
        for key in ["two words", "tab\there", "ünïcode", "semi;colon", "quote\"d", String(repeating: "k", count: 200)] {
            let literal = KeyToken.literal(key)
            #expect(try CommandParser.parse("SAVE KEY \(literal)") == .save(.fail, key: key), "\(literal)")
            #expect(try CommandParser.parse("RESUME \(literal)") == .resume(token: key), "\(literal)")
        }
        #expect(try CommandParser.parse(#"SAVE KEY 'single quoted'"#) == .save(.fail, key: "single quoted"))
    }

    @Test func whatIsNotAKeyIsSaidWithItsColumn() throws {
        func error(_ line: String) -> String {
            do { _ = try CommandParser.parse(line); return "parsed" } catch { return "\(error.code.rawValue) \(error.message)" }
        }
        #expect(error("SAVE KEY a;b") == "SYNTAX at 11: a SAVE KEY is \(KeyToken.grammar)")
        #expect(error("SAVE KEY k FORCE") == "SYNTAX a SAVE KEY is one word or one quoted string, last on the line (SAVE FORCE KEY k)")
        #expect(error("SAVE KEY") == "SYNTAX expected a SAVE KEY: \(KeyToken.grammar)")
        #expect(error(#"SAVE KEY """#) == "SYNTAX a SAVE KEY is 1 to 200 bytes")
        #expect(error(#"SAVE KEY "open"#) == "SYNTAX at 10: unterminated string")
        #expect(error("SAVE KEY " + String(repeating: "k", count: 201)) == "SYNTAX a SAVE KEY is 1 to 200 bytes")
        #expect(error("SAVE NOW") == "SYNTAX SAVE takes FORCE, THEIRS or MERGE, then KEY k, not 'NOW'")
        #expect(error("SAVE FORCE NOW") == "SYNTAX at 12: expected KEY k or the end of the line, found 'NOW'")
        #expect(error("RESUME") == "SYNTAX expected the resume token of a handoff notice: \(KeyToken.grammar)")
        #expect(error("RESUME rt1 more") == "SYNTAX at 12: expected the end of the line after the token, found 'more'")
    }
}
