import Foundation
import Postgres
import Testing

/// Endpoints come from the same environment variables docker-compose sets:
/// `DATABASE_URL` (an admin connection that may create databases) and `RECORDSD_BIN`.
enum TestEnvironment {
    static let environment = ProcessInfo.processInfo.environment

    /// A generated test's seed: `variable`'s value when set (to replay a failure), else a new
    /// one; printed with how to replay it.
    static func seed(_ variable: String, for test: String) -> UInt64 {
        let seed = environment[variable].flatMap(UInt64.init) ?? UInt64.random(in: 1...999_999)
        print("\(test) seed \(seed) (\(variable) replays it)")
        return seed
    }

    /// The repository root, found from this file's path.
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The migrations: the repository's, or those of RECORDS_TEST_ROOT (the test image has the
    /// runtime image's, under /srv/recordsd).
    static var migrations: String { (environment["RECORDS_TEST_ROOT"] ?? root) + "/migrations" }

    /// The `records` CLI.
    static var recordsBinary: String {
        environment["RECORDS_BIN"] ?? root + "/.build/debug/records"
    }

    static var recordsdBinary: String {
        environment["RECORDSD_BIN"] ?? root + "/.build/debug/recordsd"
    }

    /// The admin URL; a test without it fails and says why (it never skips silently).
    /// Under compose it comes from a secret file (DATABASE_URL_FILE).
    static func adminURL() throws -> String {
        let fromFile = environment["DATABASE_URL_FILE"].flatMap { try? String(contentsOfFile: $0, encoding: .utf8) }?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard let url = environment["DATABASE_URL"] ?? fromFile, !url.isEmpty else {
            Issue.record("DATABASE_URL is not set: run the integration tests through scripts/test, which starts a throwaway PostgreSQL")
            throw TestFailure("no DATABASE_URL")
        }
        return url
    }

    /// A new, empty database on the test cluster; returns its URL.
    static func freshDatabase() throws -> String {
        let admin = try adminURL()
        let name = "rt_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let connection = try Connection(admin)
        try connection.execute("CREATE DATABASE \(name)")
        connection.close()
        if environment["RECORDS_IN_COMPOSE"] != nil { Created.shared.add(name, admin: admin) }
        return url(admin, database: name)
    }

    /// Databases made in the compose stack's PostgreSQL (which outlives the suite), dropped
    /// when the suite's process exits.
    final class Created: @unchecked Sendable {  // `names`, `admin` guarded by `lock`
        static let shared = Created()
        private let lock = NSLock()
        private var names: [String] = []
        private var admin: String?

        func add(_ name: String, admin: String) {
            lock.lock()
            if names.isEmpty { atexit { Created.shared.dropAll() } }
            names.append(name)
            self.admin = admin
            lock.unlock()
        }

        func dropAll() {
            lock.lock()
            let all = names, url = admin
            names.removeAll()
            lock.unlock()
            guard let url, let connection = try? Connection(url) else { return }
            for name in all { _ = try? connection.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }
            connection.close()
        }
    }

    static func url(_ url: String, database: String) -> String {
        var components = URLComponents(string: url)!
        components.path = "/" + database
        return components.string!
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
