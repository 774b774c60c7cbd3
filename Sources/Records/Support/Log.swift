import Foundation

/// One event a line on stderr: time, level, session, message.
public enum Log {
    public enum Level: Int, Comparable, Sendable, CaseIterable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        public var name: String { ["debug", "info", "warning", "error"][rawValue] }
        public init?(name: String) {
            guard let level = Level.allCases.first(where: { $0.name == name.lowercased() || (name.lowercased() == "warn" && $0 == .warning) }) else { return nil }
            self = level
        }
    }

    nonisolated(unsafe) public static var level: Level = .info
    private static let lock = NSLock()
    nonisolated(unsafe) private static let formatter: ISO8601DateFormatter = {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f
    }()

    public static func debug(_ message: @autoclosure () -> String, session: Int? = nil) { write(.debug, session, message) }
    public static func info(_ message: @autoclosure () -> String, session: Int? = nil) { write(.info, session, message) }
    public static func warning(_ message: @autoclosure () -> String, session: Int? = nil) { write(.warning, session, message) }
    public static func error(_ message: @autoclosure () -> String, session: Int? = nil) { write(.error, session, message) }

    /// Text from a client as one quoted word: no newline or control character it holds can
    /// start a line of its own in the log.
    public static func quoted(_ text: String) -> String {
        let plain = !text.isEmpty && text.unicodeScalars.allSatisfy {
            ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || "_.@-".unicodeScalars.contains($0)
        }
        return plain ? text : JSON.quote(text)
    }

    private static func write(_ level: Level, _ session: Int?, _ message: () -> String) {
        guard level >= Self.level else { return }
        lock.lock()
        defer { lock.unlock() }
        let who = session.map { "s\($0)" } ?? "-"
        // One event a line, always: a line break inside a message (a PostgreSQL error's, a
        // client's text) is escaped, so nothing can forge a line of its own.
        let line = "\(formatter.string(from: Date())) \(level.name.uppercased()) \(who) \(Reply.singleLine(message()))\n"
        FileHandle.standardError.write(line.data(using: .utf8)!)
    }
}
