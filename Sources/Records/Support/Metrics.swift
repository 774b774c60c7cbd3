import Foundation

/// Counters an operator scrapes (`GET /metrics` on the admin listener), in Prometheus's text
/// format. Every command is counted by verb and outcome (`ok` or the error code); SAVEs by
/// duration. Cheap: one lock, a few dictionary updates a command.
public final class Metrics: @unchecked Sendable {  // all state guarded by `lock`
    /// SAVE durations' bucket bounds, seconds.
    static let saveBuckets: [Double] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private let lock = NSLock()
    private var commands: [String: Int] = [:]  // "verb\u{0}outcome"
    private var saveCounts = [Int](repeating: 0, count: Metrics.saveBuckets.count)
    private var saveTotal = 0
    private var saveSeconds = 0.0

    public init() {}

    /// A command answered: its verb and `ok` or the error code.
    public func command(_ verb: String, outcome: String) {
        lock.lock()
        commands[verb + "\u{0}" + outcome, default: 0] += 1
        lock.unlock()
    }

    public func save(seconds: Double) {
        lock.lock()
        for (index, bound) in Self.saveBuckets.enumerated() where seconds <= bound { saveCounts[index] += 1 }
        saveTotal += 1
        saveSeconds += seconds
        lock.unlock()
    }

    /// The outcome a reply counts under.
    public static func outcome(_ reply: Reply) -> String {
        switch reply.status {
        case .ok: "ok"
        case .error(let code, _): code.rawValue
        }
    }

    /// The text format (version 0.0.4): `gauges` first (sessions, pool), then the counters.
    public func render(gauges: [(name: String, help: String, value: Int)]) -> String {
        lock.lock()
        let commands = self.commands, saveCounts = self.saveCounts, saveTotal = self.saveTotal, saveSeconds = self.saveSeconds
        lock.unlock()
        var out = ""
        for gauge in gauges {
            out += "# HELP \(gauge.name) \(gauge.help)\n# TYPE \(gauge.name) gauge\n\(gauge.name) \(gauge.value)\n"
        }
        out += "# HELP recordsd_commands_total Commands answered, by verb and outcome (ok or the error code).\n"
        out += "# TYPE recordsd_commands_total counter\n"
        for key in commands.keys.sorted() {
            let parts = key.split(separator: "\u{0}", omittingEmptySubsequences: false)
            out += "recordsd_commands_total{verb=\"\(parts[0])\",outcome=\"\(parts[1])\"} \(commands[key]!)\n"
        }
        out += "# HELP recordsd_save_seconds Time SAVE held a database connection.\n# TYPE recordsd_save_seconds histogram\n"
        for (index, bound) in Self.saveBuckets.enumerated() {
            out += "recordsd_save_seconds_bucket{le=\"\(bound)\"} \(saveCounts[index])\n"
        }
        out += "recordsd_save_seconds_bucket{le=\"+Inf\"} \(saveTotal)\nrecordsd_save_seconds_sum \(saveSeconds)\nrecordsd_save_seconds_count \(saveTotal)\n"
        return out
    }
}
