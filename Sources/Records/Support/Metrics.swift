import Foundation

/// Counters an operator scrapes (`GET /metrics` on the admin listener), in Prometheus's text
/// format. Every command is counted by verb and outcome (`ok`, the error code, or
/// `client_left` for a stream whose client left before its end); SAVEs by
/// duration; the rest by the `Counter` table. Cheap: one lock, a few updates a command.
public final class Metrics: @unchecked Sendable {  // all state guarded by `lock`
    /// SAVE durations' bucket bounds, seconds.
    static let saveBuckets: [Double] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// The counters besides commands and SAVE durations: one table, rendered in order.
    public enum Counter: Int, CaseIterable, Sendable {
        case bytesIn, bytesOut
        case rowsInserted, rowsUpdated, rowsDeleted, rowsNullified
        case saveRetries
        case savesQueued, saveGroups, saveGroupsRunAlone, savesGrouped
        case watchEventsQueued, watchEventsDropped
        case tlsHandshakes, tlsHandshakeFailures
        case sessionsRefused, linesTooLong, repliesStalled
        case sessionsHandedOff, handOffsFailed
        case readsSplit, readsWhole

        /// Metric name, labels, help (the same name's help is printed once).
        var facts: (name: String, labels: String, help: String) {
            switch self {
            case .bytesIn: ("recordsd_bytes_total", #"direction="in""#, "Bytes read from and written to clients (after TLS).")
            case .bytesOut: ("recordsd_bytes_total", #"direction="out""#, "")
            case .rowsInserted: ("recordsd_rows_written_total", #"operation="inserted""#, "Rows written by committed SAVEs (deleted includes cascades).")
            case .rowsUpdated: ("recordsd_rows_written_total", #"operation="updated""#, "")
            case .rowsDeleted: ("recordsd_rows_written_total", #"operation="deleted""#, "")
            case .rowsNullified: ("recordsd_rows_written_total", #"operation="nullified""#, "")
            case .saveRetries: ("recordsd_save_retries_total", "", "SAVE attempts run again after a serialization failure or deadlock.")
            case .savesQueued: ("recordsd_saves_queued_total", "", "SAVEs that went through the group-commit queue (each may still have run alone).")
            case .saveGroups: ("recordsd_save_groups_total", #"outcome="together""#, "Groups of SAVEs of several sessions (group commit): sent as one transaction, or rolled back for a failing member and run one by one.")
            case .saveGroupsRunAlone: ("recordsd_save_groups_total", #"outcome="run_alone""#, "")
            case .savesGrouped: ("recordsd_saves_grouped_total", "", "SAVEs that went in a group (committed or not).")
            case .watchEventsQueued: ("recordsd_watch_events_total", #"outcome="queued""#, "WATCH events queued for sessions, and dropped because a session fell behind.")
            case .watchEventsDropped: ("recordsd_watch_events_total", #"outcome="dropped""#, "")
            case .tlsHandshakes: ("recordsd_tls_handshakes_total", #"outcome="ok""#, "TLS handshakes with clients, by outcome.")
            case .tlsHandshakeFailures: ("recordsd_tls_handshakes_total", #"outcome="failed""#, "")
            case .sessionsRefused: ("recordsd_limits_total", #"limit="sessions""#, "Limits hit outside a command's reply: sessions refused, lines too long, replies to clients that stopped reading.")
            case .linesTooLong: ("recordsd_limits_total", #"limit="line_length""#, "")
            case .repliesStalled: ("recordsd_limits_total", #"limit="reply_stall""#, "")
            case .sessionsHandedOff: ("recordsd_handoffs_total", #"outcome="stored""#, "Sessions handed off at shutdown for RESUME, and those whose state could not be stored.")
            case .handOffsFailed: ("recordsd_handoffs_total", #"outcome="failed""#, "")
            case .readsSplit: ("recordsd_split_reads_total", #"outcome="two_halves""#, "Whole-table FINDs large enough to read in two halves at once: read so, or whole on one connection (no pooled connection was free, or the helper came too late).")
            case .readsWhole: ("recordsd_split_reads_total", #"outcome="whole""#, "")
            }
        }
    }

    private let lock = NSLock()
    private var commands: [String: Int] = [:]  // "verb\u{0}outcome"
    private var counters = [Int](repeating: 0, count: Counter.allCases.count)
    private var saveCounts = [Int](repeating: 0, count: Metrics.saveBuckets.count)
    private var saveTotal = 0
    private var saveSeconds = 0.0
    private var signedInSessions = 0
    /// The most recent WATCH lag: seconds from a change's commit to its events being queued.
    private var watchLag = 0.0

    public init() {}

    /// A command answered: its verb and `ok` or the error code.
    public func command(_ verb: String, outcome: String) {
        lock.lock()
        // Commands come in runs (a client pipelining INSERTs): the same counter as the last
        // one is found by comparing, not by building and hashing its key.
        if let last = lastCommand, last.verb == verb, last.outcome == outcome {
            lastCommand!.count += 1
        } else {
            flushLastCommand()
            lastCommand = (verb, outcome, 1)
        }
        lock.unlock()
    }

    /// The run being counted, not yet in `commands`.
    private var lastCommand: (verb: String, outcome: String, count: Int)?

    /// Call with `lock` held.
    private func flushLastCommand() {
        guard let last = lastCommand else { return }
        commands[last.verb + "\u{0}" + last.outcome, default: 0] += last.count
        lastCommand = nil
    }

    public func add(_ counter: Counter, _ amount: Int = 1) {
        guard amount != 0 else { return }
        lock.lock()
        counters[counter.rawValue] += amount
        lock.unlock()
    }

    public func value(_ counter: Counter) -> Int {
        lock.withLock { counters[counter.rawValue] }
    }

    public func save(seconds: Double) {
        lock.lock()
        for (index, bound) in Self.saveBuckets.enumerated() where seconds <= bound { saveCounts[index] += 1 }
        saveTotal += 1
        saveSeconds += seconds
        lock.unlock()
    }

    /// A session signed in (+1) or ended signed in, or signed out (-1).
    public func signedIn(_ delta: Int) {
        lock.withLock { signedInSessions += delta }
    }

    public func watchLag(seconds: Double) {
        lock.withLock { watchLag = max(0, seconds) }
    }

    /// The outcome of a stream (FIND, EXPORT) whose client left before its end.
    public static let clientLeft = "client_left"

    /// The outcome a reply counts under.
    public static func outcome(_ reply: Reply) -> String {
        switch reply.status {
        case .ok: "ok"
        case .error(let code, _): code.rawValue
        }
    }

    /// A gauge or counter the caller measures (sessions, the pool).
    public struct Sample: Sendable {
        public var name: String
        public var help: String
        public var type: String
        public var value: Double
        public init(_ name: String, _ help: String, type: String = "gauge", _ value: Double) {
            self.name = name
            self.help = help
            self.type = type
            self.value = value
        }
    }

    /// The text format (version 0.0.4): the caller's samples first, then the counters.
    public func render(samples: [Sample]) -> String {
        lock.lock()
        flushLastCommand()
        let commands = self.commands, counters = self.counters, saveCounts = self.saveCounts
        let saveTotal = self.saveTotal, saveSeconds = self.saveSeconds, watchLag = self.watchLag, signedIn = signedInSessions
        lock.unlock()
        var out = ""
        for sample in samples + [Sample("recordsd_sessions_signed_in", "Sessions signed in as a user.", Double(signedIn))] {
            out += "# HELP \(sample.name) \(sample.help)\n# TYPE \(sample.name) \(sample.type)\n\(sample.name) \(Self.number(sample.value))\n"
        }
        out += "# HELP recordsd_watch_lag_seconds Seconds from the latest change's commit to its events being queued for watching sessions.\n"
        out += "# TYPE recordsd_watch_lag_seconds gauge\nrecordsd_watch_lag_seconds \(Self.number(watchLag))\n"
        out += "# HELP recordsd_commands_total Commands answered, by verb and outcome (ok or the error code).\n"
        out += "# TYPE recordsd_commands_total counter\n"
        for key in commands.keys.sorted() {
            let parts = key.split(separator: "\u{0}", omittingEmptySubsequences: false)
            out += "recordsd_commands_total{verb=\"\(parts[0])\",outcome=\"\(parts[1])\"} \(commands[key]!)\n"
        }
        var named: Set<String> = []
        for counter in Counter.allCases {
            let facts = counter.facts
            if named.insert(facts.name).inserted {
                let help = Counter.allCases.first { $0.facts.name == facts.name }!.facts.help
                out += "# HELP \(facts.name) \(help)\n# TYPE \(facts.name) counter\n"
            }
            out += facts.name + (facts.labels.isEmpty ? "" : "{\(facts.labels)}") + " \(counters[counter.rawValue])\n"
        }
        out += "# HELP recordsd_save_seconds Time SAVE held a database connection.\n# TYPE recordsd_save_seconds histogram\n"
        for (index, bound) in Self.saveBuckets.enumerated() {
            out += "recordsd_save_seconds_bucket{le=\"\(bound)\"} \(saveCounts[index])\n"
        }
        out += "recordsd_save_seconds_bucket{le=\"+Inf\"} \(saveTotal)\nrecordsd_save_seconds_sum \(saveSeconds)\nrecordsd_save_seconds_count \(saveTotal)\n"
        return out
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}
