import Foundation

/// One reply as the protocol frames it: data lines, then one status line.
public struct WireReply: Sendable, Equatable {
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

    /// The error code of an `-ERR` status (`NOT_FOUND`, `CONFLICT`, ...).
    public var code: String? {
        guard status.hasPrefix("-ERR ") else { return nil }
        return String(status.dropFirst(5).prefix { $0 != " " })
    }

    /// The reply as a thrown error when it is one.
    public func checked() throws(RecordsError) -> WireReply {
        guard let code else { return self }
        throw RecordsError.server(code: code, message: message, details: lines)
    }
}

/// Splits the server's bytes into replies and pushed lines (`! ...`), which may arrive between
/// replies or in the middle of one. Pure: fed bytes, it returns what they complete.
public struct ReplyReader: Sendable {
    public enum Event: Sendable, Equatable {
        case reply(WireReply)
        case pushed(String)
    }

    private var buffer: [UInt8] = []
    private var lines: [String] = []
    /// A line longer than this is a broken stream, not a reply.
    public var maxLineLength = 64 << 20

    public init() {}

    /// The events `bytes` complete, in order.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(RecordsError) -> [Event] {
        buffer.append(contentsOf: bytes)
        var events: [Event] = []
        var start = 0
        while let end = buffer[start...].firstIndex(of: 10) {
            var line = buffer[start..<end]
            if line.last == 13 { line = line.dropLast() }
            start = end + 1
            if let event = take(String(decoding: line, as: UTF8.self)) { events.append(event) }
        }
        buffer.removeFirst(start)
        if buffer.count > maxLineLength { throw .protocolViolation("a line longer than \(maxLineLength) bytes") }
        return events
    }

    private mutating func take(_ line: String) -> Event? {
        if line.hasPrefix("+OK") || line.hasPrefix("-ERR") {
            defer { lines.removeAll() }
            return .reply(WireReply(lines: lines, status: line))
        }
        if line.hasPrefix("!") { return .pushed(String(line.dropFirst(line.hasPrefix("! ") ? 2 : 1))) }
        lines.append(Self.unescaped(line))
        return nil
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
