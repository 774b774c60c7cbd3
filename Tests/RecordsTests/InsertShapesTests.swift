import Foundation
import Testing
@testable import Records

/// INSERT lines read by their shape (`InsertShapes`) answer exactly what the parser answers:
/// generated lines of a few shapes, values of every kind, and the edits that must not pass for
/// the shape (a space more, an operator where a value was, a value that runs into the next
/// name), each compared with `CommandParser.parse` of the same line.
@Suite struct InsertShapesTests {
    static func pick<T>(_ items: [T], _ random: inout Generator) -> T { items[Int(random.next() % UInt64(items.count))] }

    /// Values as a client may write them, and things in a value's place that are not one.
    static let values = [
        "1", "-7", "+5", "007", "3.25", ".5", "-0.5e3", "1e", "5b", "12345678901234567890",
        "\"Ada\"", "\"\"", "'single'", "\"tab\\there\"", "\"\\u00e9\"", "\"q\\\"uote\"", "\"unterminated", "\"bad\\q\"",
        "#d1", "#e2", "#", "true", "YES", "no", "False", "nil", "NULL", "maybe", "yesb", ".@count",
        "=5", "<5", ">5", "(", ")", ",", "[c]", "!", "&&", "\u{00e9}t\u{00e9}", "$x", "",
    ]
    static let shapes: [(entity: String, names: [String])] = [
        ("employee", ["first_name", "last_name", "gender", "age", "department"]),
        ("employee", ["age", "first_name"]),
        ("\"Tag Table\"", ["\"the label\"", "color"]),
        ("department", ["name", "number"]),
        ("Employee", ["AS", "first_name"]),
    ]

    static func line(_ random: inout Generator) -> String {
        let (entity, names) = pick(shapes, &random)
        let spaced = random.next() % 8 == 0
        var line = (random.next() % 10 == 0 ? pick(["insert", " INSERT", "INSERT\t"], &random) : "INSERT") + " " + entity
        if random.next() % 12 == 0 { line += " AS #" + pick(["r1", "r2", ""], &random) }
        for name in names {
            line += pick([" ", " ", " ", "  ", "\t", ""], &random) + name
            line += spaced ? pick([" = ", "= ", "="], &random) : "="
            // Mostly well-formed values, so shapes repeat and are read by their bytes.
            line += random.next() % 4 == 0 ? pick(values, &random) : pick(["1", "42", "\"x\"", "\"Lovelace\"", "#d1", "true"], &random)
        }
        if random.next() % 10 == 0 { line += pick([" ", "  ", " extra", " x=", " x=1", "\t"], &random) }
        return line
    }

    @Test func linesReadByShapeAnswerAsTheParserDoes() {
        let seed = UInt64(ProcessInfo.processInfo.environment["RECORDS_SHAPES_SEED"] ?? "") ?? UInt64(Date().timeIntervalSince1970 * 1000) % 100_000
        print("linesReadByShapeAnswerAsTheParserDoes seed \(seed) (RECORDS_SHAPES_SEED replays it)")
        var random = Generator(seed: seed)
        var shapes = InsertShapes()
        var read = 0
        for _ in 0..<20_000 {
            let line = Self.line(&random)
            let expected = Result { () throws(CommandError) in try CommandParser.parse(line, verb: .insert) }
            let known = shapes.shapes.count
            let got = Result { () throws(CommandError) in try shapes.parse(line, verb: .insert) }
            #expect(got == expected, "seed \(seed): \(line)")
            if known > 0, case .success = got { read += 1 }
        }
        // The shapes were used, not only learned.
        #expect(read > 5_000)
        #expect(shapes.shapes.count <= InsertShapes.capacity)
    }

    @Test func aShapeIsLearnedFromARepeatAndUsedForTheSameBytes() throws {
        var shapes = InsertShapes()
        _ = try shapes.parse("INSERT employee first_name=\"Ada\" age=36", verb: .insert)
        #expect(shapes.shapes.isEmpty)  // seen once: not yet worth a second lexing
        _ = try shapes.parse("INSERT employee first_name=\"Alan\" age=41", verb: .insert)
        let shape = try #require(shapes.shapes.first)
        #expect(shape.pieces == ["INSERT employee first_name=", " age=", ""].map { Array($0.utf8) })
        #expect(shape.nameOffsets == [16, 1])
        let command = try shapes.parse("INSERT employee first_name=\"Grace\" age=#p9", verb: .insert)
        #expect(command == .insert(entity: "employee", ref: nil, values: [
            Assignment(name: "first_name", value: .string("Grace"), offset: 16),
            Assignment(name: "age", value: .ref("p9"), offset: 35),
        ]))
        // Not an INSERT, or too long to keep: the parser's, and nothing learned.
        #expect(try shapes.parse("PING", verb: .ping) == .ping(nil))
        let long = "INSERT employee first_name=\"" + String(repeating: "a", count: InsertShapes.maxLineBytes) + "\" age=1"
        _ = try shapes.parse(long, verb: .insert)
        _ = try shapes.parse(long, verb: .insert)
        #expect(shapes.shapes.count == 1)
    }

    @Test func linesThatRepeatTheirNamesButNotTheirBytesAreSeldomLearned() throws {
        var shapes = InsertShapes()
        var learned = 0
        // Padding that changes from line to line: the names repeat, the bytes never do.
        for index in 0..<1_000 {
            let line = "INSERT employee age=7" + String(repeating: " ", count: 1 + index) + "first_name=\"x\""
            let before = shapes.shapes.first
            #expect(try shapes.parse(line, verb: .insert) == CommandParser.parse(line, verb: .insert))
            if let first = shapes.shapes.first, first !== before { learned += 1 }
        }
        // Learning stops at a few unused shapes, then learns one repeat in 64.
        #expect(learned <= InsertShapes.maxUnused + 1_000 / InsertShapes.backoff + 1)
        #expect(learned >= InsertShapes.maxUnused)
        // A line that matches a shape starts learning afresh.
        // A line of a kept shape starts learning afresh.
        let kept = try #require(shapes.shapes.first)
        let line = "INSERT employee age=8" + String(decoding: kept.pieces[1], as: UTF8.self) + "\"y\""
        #expect(try shapes.parse(line, verb: .insert) == CommandParser.parse(line, verb: .insert))
        #expect(shapes.unused == 0)
    }
}
