import Foundation
import RecordsProtocol

/// A load sends INSERT lines that differ only in their values: `INSERT employee first_name="Ada"
/// age=36`, then `... first_name="Alan" age=41`. Once the parser has read one, its bytes around
/// the values (the shape) are kept; a later line whose bytes match the shape's is read by
/// comparing them and lexing its values only, with no tokens made for the verb, the entity and
/// the names. Any difference (a space more, `AS #r`, a value that lexes as something else)
/// falls back to the parser, which learns the new shape. The result is always what the parser
/// gives: the same bytes around the same kinds of tokens tokenize alike.
public struct InsertShapes: Sendable {
    /// Shared, not copied: a line tries each without retaining its arrays.
    final class Shape: Sendable {
        /// The line's bytes before the first value, between values, and after the last.
        let pieces: [[UInt8]]
        let entity: String
        let names: [String]
        /// Where each name starts in the piece before its value (an error's column).
        let nameOffsets: [Int]

        init(pieces: [[UInt8]], entity: String, names: [String], nameOffsets: [Int]) {
            self.pieces = pieces
            self.entity = entity
            self.names = names
            self.nameOffsets = nameOffsets
        }
    }

    /// Shapes kept, the latest first: a load that interleaves a few entities.
    static let capacity = 4
    /// Longer lines and lines of more pairs are parsed, not kept.
    static let maxLineBytes = 4096
    static let maxNames = 64

    private(set) var shapes: [Shape] = []
    /// The entity and names of the last line parsed: a shape is learned when a line repeats
    /// them (learning lexes the line again, wasted on lines that never repeat).
    private var lastParsed: (entity: String, names: [String])?
    /// Shapes learned since a line last matched one. Past `maxUnused`, the lines repeat their
    /// names but not their bytes (columns padded to a width): only every `backoff`th repeat
    /// is learned, so lexing twice never doubles what such a load costs.
    private(set) var unused = 0
    private var skipped = 0
    static let maxUnused = 8
    static let backoff = 64

    public init() {}

    /// `line` read as `CommandParser.parse(line, verb:)` reads it.
    public mutating func parse(_ line: String, verb: Verb?) throws(CommandError) -> Command {
        guard verb == .insert, line.utf8.count <= Self.maxLineBytes else { return try CommandParser.parse(line, verb: verb) }
        var lexer: Lexer?
        if !shapes.isEmpty {
            var reader = Lexer(line)
            for (index, shape) in shapes.enumerated() {
                guard let command = Self.read(&reader, as: shape) else { continue }
                if index > 0 { shapes.swapAt(0, index) }
                unused = 0
                return command
            }
            lexer = reader
        }
        let command = try CommandParser.parse(line, verb: verb)
        guard case .insert(let entity, nil, let values) = command, !values.isEmpty, values.count <= Self.maxNames else { return command }
        let names = values.map(\.name)
        guard let last = lastParsed, last.entity == entity, last.names == names else {
            lastParsed = (entity, names)
            return command
        }
        if unused >= Self.maxUnused {
            skipped += 1
            guard skipped % Self.backoff == 0 else { return command }
        }
        var learner = lexer ?? Lexer(line)
        if let shape = Self.learn(command, &learner) {
            unused += 1
            shapes.insert(shape, at: 0)
            if shapes.count > Self.capacity { shapes.removeLast() }
        }
        return command
    }

    /// The line as `shape`, or nil when its bytes around the values differ or a value is not
    /// one value token.
    static func read(_ lexer: inout Lexer, as shape: Shape) -> Command? {
        let bytes = lexer.bytes
        var at = 0
        var values: [Assignment] = []
        values.reserveCapacity(shape.names.count)
        for index in shape.names.indices {
            let piece = shape.pieces[index]
            guard bytes.count - at > piece.count, same(bytes, at, piece) else { return nil }
            let nameAt = at + shape.nameOffsets[index]
            at += piece.count
            // The value starts right there: no space more than the shape's.
            guard bytes[at] != 32, bytes[at] != 9 else { return nil }
            lexer.position = at
            guard let token = try? lexer.next(), let value = Value(token: token) else { return nil }
            at = lexer.position
            values.append(Assignment(name: shape.names[index], value: value, offset: nameAt))
        }
        let last = shape.pieces[shape.names.count]
        guard bytes.count - at == last.count, same(bytes, at, last) else { return nil }
        return .insert(entity: shape.entity, ref: nil, values: values)
    }

    /// `piece` is in `bytes` at `at` (which has room for it).
    private static func same(_ bytes: [UInt8], _ at: Int, _ piece: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { line in
            piece.withUnsafeBufferPointer { piece in
                piece.isEmpty || memcmp(line.baseAddress! + at, piece.baseAddress!, piece.count) == 0
            }
        }
    }

    /// The shape of a line the parser read as `command`: `INSERT entity name=value ...`, one
    /// token each, nothing else.
    static func learn(_ command: Command, _ lexer: inout Lexer) -> Shape? {
        guard case .insert(let entity, nil, let values) = command, !values.isEmpty, values.count <= maxNames else { return nil }
        // Each token's start and end: verb, entity, then name, '=', value for each pair.
        lexer.position = 0
        var spans: [(start: Int, end: Int)] = []
        while true {
            guard let token = try? lexer.next() else { return nil }
            if case .end = token.kind { break }
            spans.append((token.offset, lexer.position))
        }
        guard spans.count == 2 + 3 * values.count else { return nil }
        let bytes = lexer.bytes
        var pieces: [[UInt8]] = []
        var offsets: [Int] = []
        var pieceStart = 0
        for index in values.indices {
            let name = spans[2 + 3 * index], value = spans[4 + 3 * index]
            guard values[index].offset == name.start else { return nil }
            pieces.append(Array(bytes[pieceStart..<value.start]))
            offsets.append(name.start - pieceStart)
            pieceStart = value.end
        }
        pieces.append(Array(bytes[pieceStart...]))
        return Shape(pieces: pieces, entity: entity, names: values.map(\.name), nameOffsets: offsets)
    }
}
