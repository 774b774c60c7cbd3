import Foundation

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

    /// A command stopped by CANCEL (its statement cancelled, or never begun).
    public static let cancelled = Reply.error(.cancelled, "the command was cancelled (CANCEL): nothing it would have changed was saved; the unit of work is as it was")

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
        var out: [UInt8] = []
        appendStatus(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The wire form: each line ends in LF. Written byte by byte, no line made as a String
    /// first (every INSERT of a pipelined unit is answered here).
    public func encode(into out: inout [UInt8]) {
        for line in lines { Reply.appendDataLine(line, to: &out) }
        appendStatus(to: &out)
        out.append(UInt8(ascii: "\n"))
    }

    /// `+OK message` or `-ERR CODE message`, on one line.
    private func appendStatus(to out: inout [UInt8]) {
        switch status {
        case .ok(let message):
            out.append(UInt8(ascii: "+"))
            out.append(UInt8(ascii: "O"))
            out.append(UInt8(ascii: "K"))
            if !message.isEmpty {
                out.append(UInt8(ascii: " "))
                Reply.appendSingleLine(message, to: &out)
            }
        case .error(let code, let message):
            out.append(contentsOf: "-ERR ".utf8)
            out.append(contentsOf: code.rawValue.utf8)
            out.append(UInt8(ascii: " "))
            Reply.appendSingleLine(message, to: &out)
        }
    }

    public static func appendDataLine(_ line: String, to out: inout [UInt8]) {
        if let first = line.utf8.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") || first == UInt8(ascii: "!") {
            out.append(UInt8(ascii: " "))
        }
        appendSingleLine(line, to: &out)
        out.append(UInt8(ascii: "\n"))
    }

    /// `text` with CR and LF written as backslash-r and backslash-n (as `singleLine`), appended.
    static func appendSingleLine(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return }
            // Most messages hold no line break: found absent by memchr, copied whole.
            guard memchr(base, 10, bytes.count) != nil || memchr(base, 13, bytes.count) != nil else {
                out.append(contentsOf: bytes)
                return
            }
            var plainStart = 0
            for index in 0..<bytes.count where bytes[index] == 10 || bytes[index] == 13 {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart..<index]))
                out.append(UInt8(ascii: "\\"))
                out.append(bytes[index] == 10 ? UInt8(ascii: "n") : UInt8(ascii: "r"))
                plainStart = index + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart...]))
        }
    }

    public static func singleLine(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 10 || $0 == 13 }) else { return text }
        var out: [UInt8] = []
        appendSingleLine(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
