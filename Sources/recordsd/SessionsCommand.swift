import Foundation
import RecordsServer

/// `recordsd sessions [--json]` and `recordsd sessions kill ID`: the admin listener's
/// `/sessions`, as a table (pgbouncer's SHOW CLIENTS is the model), with the admin token.
struct SessionsCommand {
    var options: Options
    var arguments: [String]

    /// An address to connect to for one a listener is bound to (any address: loopback).
    static func reachable(_ host: String) -> String {
        host == "0.0.0.0" || host == "*" || host.isEmpty ? "127.0.0.1" : host == "::" ? "::1" : host
    }

    func run() throws {
        guard let admin = options.adminListen else { throw UsageError(description: "sessions needs --admin-listen or RECORDSD_ADMIN_LISTEN (the server's admin address)") }
        guard let token = options.adminToken else { throw UsageError(description: "sessions needs the admin token: --admin-token-file or RECORDSD_ADMIN_TOKEN(_FILE)") }
        let host = Self.reachable(admin.host)
        let json = options.json
        let method: String, path: String
        switch arguments {
        case []: (method, path) = ("GET", "/sessions")
        case let words where words.count == 2 && words[0] == "kill":
            guard let id = Int(words[1]), id > 0 else { throw UsageError(description: "sessions kill takes a session id (a number), not '\(words[1])'") }
            (method, path) = ("POST", "/sessions/\(id)/kill")
        default: throw UsageError(description: "sessions takes nothing, --json, or kill ID, not '\(arguments.joined(separator: " "))'")
        }
        guard let answer = AdminServer.request(host: host, port: admin.port, method: method, path: path, token: token) else {
            throw Refusal(description: "no answer from the admin listener at \(host):\(admin.port)")
        }
        guard answer.status.hasPrefix("HTTP/1.1 200") else {
            throw Refusal(description: "\(host):\(admin.port) answered \(answer.status.dropFirst(9)): \(answer.body.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        if method == "POST" || json { return print(answer.body, terminator: "") }
        guard let rows = (try? JSONSerialization.jsonObject(with: Data(answer.body.utf8))) as? [[String: Any]] else {
            throw Refusal(description: "the admin listener's /sessions was not a JSON array")
        }
        print(Self.table(rows), terminator: "")
    }

    static let columns = ["id", "user", "address", "tls", "state", "verb", "ms", "pending", "watching", "bytes_in", "bytes_out", "connected_at"]

    /// Aligned columns, one session a line.
    static func table(_ rows: [[String: Any]]) -> String {
        let cells: [[String]] = rows.map { row in
            columns.map { column -> String in
                let value = column == "ms" ? (row["running_ms"] ?? row["idle_ms"]) : row[column]
                switch value {
                case let bool as Bool where column == "tls": return bool ? "yes" : "no"
                case let text as String: return text
                case let number as NSNumber: return number.stringValue
                default: return "-"
                }
            }
        }
        let widths = columns.indices.map { index in ([columns[index]] + cells.map { $0[index] }).map(\.count).max() ?? 0 }
        func line(_ words: [String]) -> String {
            zip(words, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces) + "\n"
        }
        return ([line(columns)] + cells.map(line)).joined() + "(\(rows.count) session\(rows.count == 1 ? "" : "s"))\n"
    }
}
