import Foundation
import RecordsProtocol

/// One reply as the protocol frames it: data lines, then one status line.
public struct WireReply: Sendable, Equatable, CustomStringConvertible {
    /// Data lines, unescaped (a line the server prefixed with a space, because it began with
    /// `+`, `-` or `!`, has the space removed).
    public var lines: [String]
    /// The status line as sent: `+OK ...` or `-ERR CODE ...`.
    public var status: String

    public init(lines: [String], status: String) {
        self.lines = lines
        self.status = status
    }

    public var isOK: Bool { status.hasPrefix("+OK") }

    /// The status line's text after `+OK `, or after the error code.
    public var message: String {
        if status.hasPrefix("+OK ") { return String(status.dropFirst(4)) }
        if status.hasPrefix("-ERR ") {
            let rest = status.dropFirst(5)
            return String(rest.drop { $0 != " " }.dropFirst())
        }
        return ""
    }

    /// The status line without `+OK ` or `-ERR ` (an error's code included), as people read it.
    public var statusText: String {
        if status.hasPrefix("+OK ") { return String(status.dropFirst(4)) }
        if status.hasPrefix("-ERR ") { return String(status.dropFirst(5)) }
        return status == "+OK" ? "" : status
    }

    /// The error code of an `-ERR` status (`.notFound`, `.conflict`, ...), from the protocol's
    /// table; nil for `+OK` and for a word the table does not have (`codeWord` gives it).
    public var code: ErrorCode? { codeWord.flatMap(ErrorCode.init(rawValue:)) }

    /// The word after `-ERR`, as sent.
    public var codeWord: String? {
        guard status.hasPrefix("-ERR ") else { return nil }
        return String(status.dropFirst(5).prefix { $0 != " " })
    }

    /// The reply as a thrown error when it is one.
    public func checked() throws(RecordsError) -> WireReply {
        guard let word = codeWord else { return self }
        // Server and client share the table: a word outside it is not this protocol.
        guard let code = ErrorCode(rawValue: word) else { throw .protocolViolation("unknown error code in \(status)") }
        if code == .conflict, !lines.isEmpty,
           let conflicts = try? lines.map({ try JSONDecoder().decode(Conflict.self, from: Data($0.utf8)) }) {
            throw RecordsError.conflict(message: message, conflicts: conflicts)
        }
        if code == .alreadySaved {
            throw RecordsError.alreadySaved(message: message, saved: SaveResult(lines: lines, summary: nil))
        }
        throw RecordsError.server(code: code, message: message, details: lines)
    }

    public var description: String { (lines + [status]).joined(separator: "\n") }
}

/// Splits the server's bytes into lines, and lines into replies and pushed lines (`! ...`),
/// which may arrive between replies or in the middle of one. Pure: fed bytes, it returns what
/// they complete. The one framing of the protocol on the client side (the library, the CLI and
/// the tests all read through it).
public struct ReplyReader: Sendable {
    public enum Event: Sendable, Equatable {
        case reply(WireReply)
        case pushed(String)
    }

    private var buffer: [UInt8] = []
    /// Where the next line starts, and how far a newline was looked for (a long line is
    /// scanned once, however many reads it takes).
    private var start = 0
    private var scanned = 0
    private var lines: [String] = []
    /// A line longer than this is a broken stream, not a reply.
    public var maxLineLength = 64 << 20

    public init() {}

    /// The events `bytes` complete, in order.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(RecordsError) -> [Event] {
        try append(bytes)
        var events: [Event] = []
        while let event = next() { events.append(event) }
        return events
    }

    /// Adds bytes read from the server.
    public mutating func append(_ bytes: some Sequence<UInt8>) throws(RecordsError) {
        if start > 0 && start * 2 >= buffer.count {
            buffer.removeSubrange(0..<start)
            scanned -= start
            start = 0
        }
        buffer.append(contentsOf: bytes)
        if buffer.count - start > maxLineLength, buffer[scanned...].firstIndex(of: 10) == nil {
            throw .protocolViolation("a line longer than \(maxLineLength) bytes")
        }
    }

    /// Bytes held that do not yet make a whole line, or lines not yet taken.
    public var hasBufferedBytes: Bool { start < buffer.count }

    /// The next whole line as sent (without its `\n`), if the bytes hold one. The server ends
    /// lines with `\n` alone: a `\r` before it is data (a CSV field's line break in EXPORT).
    public mutating func nextLine() -> String? {
        guard let newline = buffer[scanned...].firstIndex(of: 10) else {
            scanned = buffer.count
            return nil
        }
        let line = String(decoding: buffer[start..<newline], as: UTF8.self)
        start = newline + 1
        scanned = start
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
            scanned = 0
        }
        return line
    }

    /// The next reply or pushed line the bytes complete. Data lines are handed to `onLine` as
    /// they come when it is given (a stream), else kept for the reply. An EXPORT's lines are
    /// `dotStuffed` (CSV, a leading `.` taken off) rather than space-escaped.
    public mutating func next(dotStuffed: Bool = false, onLine: ((String) -> Void)? = nil) -> Event? {
        while let piece = nextPiece(dotStuffed: dotStuffed) {
            switch piece {
            case .data(let data): if let onLine { onLine(data) } else { lines.append(data) }
            case .reply(let reply):
                defer { lines.removeAll() }
                return .reply(WireReply(lines: lines, status: reply.status))
            case .pushed(let line): return .pushed(line)
            }
        }
        return nil
    }

    /// One line of what the bytes hold, classified: a data line (given back, not kept), a
    /// reply's status line (its `lines` empty: the caller kept or streamed the data), or a
    /// pushed line.
    public enum Piece: Sendable, Equatable {
        case data(String)
        case reply(WireReply)
        case pushed(String)
    }

    public mutating func nextPiece(dotStuffed: Bool = false) -> Piece? {
        guard let line = nextLine() else { return nil }
        if line.hasPrefix("+OK") || line.hasPrefix("-ERR") { return .reply(WireReply(lines: [], status: line)) }
        if line.hasPrefix("!") { return .pushed(String(line.dropFirst(line.hasPrefix("! ") ? 2 : 1))) }
        return .data(dotStuffed ? Self.unstuffed(line) : Self.unescaped(line))
    }

    /// A data line as the server meant it: one that began with `+`, `-` or `!` was sent with a
    /// space in front.
    static func unescaped(_ line: String) -> String {
        let bytes = line.utf8
        guard bytes.count >= 2, bytes.first == UInt8(ascii: " ") else { return line }
        let second = bytes[bytes.index(after: bytes.startIndex)]
        guard second == UInt8(ascii: "+") || second == UInt8(ascii: "-") || second == UInt8(ascii: "!") else { return line }
        return String(line.dropFirst())
    }

    /// An EXPORT's CSV line: the server doubles a leading `.` and puts one before a line that
    /// begins with `+`, `-` or `!`; the reader takes one off.
    public static func unstuffed(_ line: String) -> String {
        line.hasPrefix(".") ? String(line.dropFirst()) : line
    }
}
