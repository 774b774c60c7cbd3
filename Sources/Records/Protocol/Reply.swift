/// One reply: data lines, then exactly one status line (`+OK ...` or `-ERR CODE ...`).
///
/// Data lines can never be taken for a status line or a pushed event: a line that would start
/// with `+`, `-` or `!` (or contains a line break) is escaped when encoded.
public struct Reply: Equatable, Sendable, Codable {
    public enum Status: Equatable, Sendable, Codable {
        case ok(String)
        case error(ErrorCode, String)
    }

    public var lines: [String]
    public var status: Status
    /// The data lines as FORMAT JSON shows them, when they differ (a CONFLICT's details).
    public var jsonLines: [String]?

    public init(lines: [String] = [], status: Status) {
        self.lines = lines
        self.status = status
    }

    public static func ok(_ message: String = "", lines: [String] = []) -> Reply {
        Reply(lines: lines, status: .ok(message))
    }

    public static func error(_ code: ErrorCode, _ message: String, details: [String] = []) -> Reply {
        Reply(lines: details, status: .error(code, message))
    }

    /// The status line's text after `+OK ` or the code.
    public var statusMessage: String {
        switch status {
        case .ok(let message), .error(_, let message): message
        }
    }

    public var statusLine: String {
        switch status {
        case .ok(let message): message.isEmpty ? "+OK" : "+OK " + Reply.singleLine(message)
        case .error(let code, let message): "-ERR \(code.rawValue) " + Reply.singleLine(message)
        }
    }

    /// The wire form: each line ends in LF.
    public func encode(into out: inout [UInt8]) {
        for line in lines { Reply.appendDataLine(line, to: &out) }
        out.append(contentsOf: statusLine.utf8)
        out.append(UInt8(ascii: "\n"))
    }

    public static func appendDataLine(_ line: String, to out: inout [UInt8]) {
        if let first = line.utf8.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") || first == UInt8(ascii: "!") {
            out.append(UInt8(ascii: " "))
        }
        if line.utf8.contains(where: { $0 == 10 || $0 == 13 }) {
            out.append(contentsOf: singleLine(line).utf8)
        } else {
            out.append(contentsOf: line.utf8)
        }
        out.append(UInt8(ascii: "\n"))
    }

    public static func singleLine(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 10 || $0 == 13 }) else { return text }
        return text.replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n")
    }
}
