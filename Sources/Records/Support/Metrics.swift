import Foundation
import Postgres

/// Counters an operator scrapes (`GET /metrics` on the admin listener), in Prometheus's text
/// format. Every command is counted by verb and outcome (`ok`, the error code, or
/// `client_left` for a stream whose client left before its end); SAVEs by
/// duration; the rest by the `Counter` table. Cheap: one lock, a few updates a command.
public final class Metrics: @unchecked Sendable {  // all state guarded by `lock`
    /// SAVE durations' bucket bounds, seconds.
    static let saveBuckets: [Double] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// Commands' durations (each verb's), seconds: a GET takes tens of microseconds.
    static let commandBuckets: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5]

    /// Observations in cumulative buckets, as Prometheus counts a histogram.
    /// `name_bucket{labels,le="..."} n` ... `name_sum`, `name_count`.
    static func render(_ name: String, labels: String, bounds: [Double], _ histogram: Histogram) -> String {
        let prefix = labels.isEmpty ? "" : labels + ","
        let suffix = labels.isEmpty ? "" : "{\(labels)}"
        var out = ""
        for (index, bound) in bounds.enumerated() { out += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(histogram.counts[index])\n" }
        out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(histogram.total)\n\(name)_sum\(suffix) \(histogram.sum)\n\(name)_count\(suffix) \(histogram.total)\n"
        return out
    }

    /// What the process is, for `recordsd_build_info`: the version, and the revision the
    /// deployment names (`RECORDSD_REVISION`, set at build or deploy time; `unknown` without).
    let version: String
    let revision = ProcessInfo.processInfo.environment["RECORDSD_REVISION"] ?? "unknown"

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
    private var saves = Histogram(Metrics.saveBuckets)
    private var commandSeconds: [String: Histogram] = [:]
    /// The verb last timed and its histogram, kept out of `commandSeconds` until another verb comes.
    private var timedVerb = ""
    private var timed = Histogram([])
    private var signedInSessions = 0
    /// The most recent WATCH lag: seconds from a change's commit to its events being queued.
    private var watchLag = 0.0

    public init(version: String = "unknown") { self.version = version }

    /// A command answered: its verb and `ok` or the error code (lower case), and how long it took.
    public func command(_ verb: String, outcome: String, seconds: Double) {
        lock.lock()
        // A run of one verb updates the histogram in hand, not one found by hashing its name.
        if verb != timedVerb {
            if !timedVerb.isEmpty { commandSeconds[timedVerb] = timed }
            timed = commandSeconds[verb] ?? Histogram(Self.commandBuckets)
            timedVerb = verb
        }
        timed.observe(seconds, Self.commandBuckets)
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
        lock.withLock { saves.observe(seconds, Self.saveBuckets) }
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
        // Lower case, as every label value here (`not_found`, `conflict`, `client_left`).
        case .error(let code, _): code.rawValue.lowercased()
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

    /// The pool's wait for a connection, as a histogram: bounds, cumulative counts, seconds in
    /// all, jobs.
    /// The pool's waits for a connection, with their buckets' bounds.
    public struct Waits: Sendable {
        public var bounds: [Double], histogram: Histogram
        public init(bounds: [Double], histogram: Histogram) { (self.bounds, self.histogram) = (bounds, histogram) }
    }

    /// The text format (version 0.0.4): the process's and build's, the caller's samples, then
    /// the counters and histograms.
    public func render(samples: [Sample], poolWaits: Waits? = nil) -> String {
        lock.lock()
        flushLastCommand()
        if !timedVerb.isEmpty { commandSeconds[timedVerb] = timed }
        let commands = self.commands, counters = self.counters, saves = self.saves, commandSeconds = self.commandSeconds
        let watchLag = self.watchLag, signedIn = signedInSessions
        lock.unlock()
        var out = ProcessMetrics.render()
        out += "# HELP recordsd_build_info The running build: its version and revision (always 1).\n# TYPE recordsd_build_info gauge\n"
        out += "recordsd_build_info{version=\"\(Self.escaped(version))\",revision=\"\(Self.escaped(revision))\"} 1\n"
        for sample in samples + [Sample("recordsd_sessions_signed_in", "Sessions signed in as a user.", Double(signedIn))] {
            out += "# HELP \(sample.name) \(sample.help)\n# TYPE \(sample.name) \(sample.type)\n\(sample.name) \(Self.number(sample.value))\n"
        }
        out += "# HELP recordsd_watch_lag_seconds Seconds from the latest change's commit to its events being queued for watching sessions.\n"
        out += "# TYPE recordsd_watch_lag_seconds gauge\nrecordsd_watch_lag_seconds \(Self.number(watchLag))\n"
        out += "# HELP recordsd_commands_total Commands answered, by verb and outcome (ok, the error code in lower case, client_left).\n"
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
        out += Self.render("recordsd_save_seconds", labels: "", bounds: Self.saveBuckets, saves)
        out += "# HELP recordsd_command_seconds Time from a command's line to its reply (a stream's to its end), by verb.\n"
        out += "# TYPE recordsd_command_seconds histogram\n"
        for verb in commandSeconds.keys.sorted() {
            let h = commandSeconds[verb]!
            out += Self.render("recordsd_command_seconds", labels: "verb=\"\(verb)\"", bounds: Self.commandBuckets, h)
        }
        if let poolWaits {
            out += "# HELP recordsd_pool_wait_seconds Time jobs waited for a PostgreSQL connection.\n# TYPE recordsd_pool_wait_seconds histogram\n"
            out += Self.render("recordsd_pool_wait_seconds", labels: "", bounds: poolWaits.bounds, poolWaits.histogram)
        }
        return out
    }

    /// A label's value as the text format writes it.
    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}
