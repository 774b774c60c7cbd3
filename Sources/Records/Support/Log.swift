import Foundation
import Synchronization

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

    /// Events below this level are not written. Set once at start; read from every thread.
    public static var level: Level {
        get { Level(rawValue: threshold.load(ordering: .relaxed)) ?? .info }
        set { threshold.store(newValue.rawValue, ordering: .relaxed) }
    }
    private static let threshold = Atomic<Int>(Level.info.rawValue)

    /// `--log-format json`: each event one JSON object (`time`, `level`, `session`, `message`)
    /// for log collectors; text by default. Set once at start.
    public static var json: Bool {
        get { jsonFormat.load(ordering: .relaxed) }
        set { jsonFormat.store(newValue, ordering: .relaxed) }
    }
    private static let jsonFormat = Atomic<Bool>(false)
    private static let lock = NSLock()

    /// A structured event: in JSON its fields are keys of the object (`verb`, `outcome`,
    /// `duration_ms` ...); in text only the message shows, for people.
    public static func event(_ level: Level, _ message: @autoclosure () -> String, session: Int? = nil, fields: @autoclosure () -> [(String, JSON.Value)]) {
        write(level, session, message, fields: json ? fields() : [])
    }

    /// A line for stdout that programs wait for (`recordsd listening on HOST:PORT`): as it is
    /// in text, one JSON object with the message and its fields under `--log-format json`.
    public static func announce(_ message: String, fields: [(String, JSON.Value)] = []) {
        let line = json
            ? JSON.Value.object([("time", .string(timestamp())), ("level", .string("info"))] + fields + [("message", .string(message))]).text
            : message
        print(line)
    }

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

    private static func write(_ level: Level, _ session: Int?, _ message: () -> String, fields: [(String, JSON.Value)] = []) {
        guard level >= Self.level else { return }
        lock.lock()
        defer { lock.unlock() }
        let who = session.map { "s\($0)" } ?? "-"
        // One event a line, always: a line break inside a message (a PostgreSQL error's, a
        // client's text) is escaped, so nothing can forge a line of its own.
        let line = json
            ? JSON.Value.object([("time", .string(timestamp())), ("level", .string(level.name)),
                                 ("session", session.map { .string("s\($0)") } ?? .null)] + fields + [("message", .string(message()))]).text + "\n"
            : "\(timestamp()) \(level.name.uppercased()) \(who) \(Reply.singleLine(message()))\n"
        FileHandle.standardError.write(line.data(using: .utf8)!)
    }

    /// The time in UTC, ISO 8601 with milliseconds (`2026-11-30T12:00:00.000Z`).
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millis = Int(now.tv_nsec / 1_000_000)
        let fraction = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(fraction)Z"
    }
}
