import Foundation

/// What each open session is doing and has cost, for operators (`GET /sessions` on the admin
/// listener, `recordsd sessions`), and the way to end one. The loop writes each session's line
/// after every turn that served it; the admin thread reads a copy. pgbouncer's `SHOW CLIENTS`
/// and PostgreSQL's `pg_stat_activity` are the models.
public final class SessionBoard: @unchecked Sendable {  // `entries` and `ender` guarded by `lock`
    public struct Entry: Sendable, Equatable {
        public var id: Int
        public var user: String?
        /// The client's address (a balancer's PROXY header's, when it sent one).
        public var address: String
        public var tls: Bool
        public var connectedAt: Date
        /// Pending changes in the unit of work, every scratchpad counted.
        public var pending: Int
        /// The last command's verb; `running` while its work is not answered yet.
        public var verb: String?
        public var running: Bool
        /// When the last command began (uptime nanoseconds).
        var commandStarted: UInt64
        public var bytesIn: Int
        public var bytesOut: Int
        public var watching: Int

        /// How long the running command has run, or how long the session has been idle.
        public func milliseconds(now: UInt64) -> Int { Int((now &- commandStarted) / 1_000_000) }
    }

    private let lock = NSLock()
    private var entries: [Int: Entry] = [:]
    private var ender: (@Sendable (Int) -> Void)?

    public init() {}

    func publish(_ entry: Entry) { lock.withLock { entries[entry.id] = entry } }
    func remove(_ id: Int) { _ = lock.withLock { entries.removeValue(forKey: id) } }
    func setEnder(_ end: @escaping @Sendable (Int) -> Void) { lock.withLock { ender = end } }

    /// Every open session, by id.
    public func list() -> [Entry] { lock.withLock { entries.values.sorted { $0.id < $1.id } } }

    /// Asks the loop to end session `id` (its pending changes dropped, like QUIT); false when
    /// there is no such session.
    public func end(_ id: Int) -> Bool {
        guard let end = lock.withLock({ entries[id] != nil ? ender : nil }) else { return false }
        end(id)
        return true
    }

    /// The JSON `GET /sessions` answers: an array, one object a session.
    public func json(now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let objects: [[String: Any]] = list().map { entry in
            ["id": entry.id, "user": entry.user ?? NSNull(), "address": entry.address, "tls": entry.tls,
             "connected_at": formatter.string(from: entry.connectedAt), "pending": entry.pending,
             "verb": entry.verb ?? NSNull(), "state": entry.running ? "running" : "idle",
             (entry.running ? "running_ms" : "idle_ms"): entry.milliseconds(now: now),
             "bytes_in": entry.bytesIn, "bytes_out": entry.bytesOut, "watching": entry.watching]
        }
        let data = (try? JSONSerialization.data(withJSONObject: objects, options: [.sortedKeys])) ?? Data("[]".utf8)
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}
