import Foundation
import Postgres
import Testing

/// Two recordsd servers on one PostgreSQL. Under docker compose (`docker compose run --rm
/// integration`) they are the stack's two replicas, named by RECORDS_URL and
/// RECORDS_SECOND_URL (records://user@host:port, RECORDS_PASSWORD when they need AUTH);
/// locally, two recordsd processes are started on a fresh database. Same tests either way.
@Suite struct StackTests {
    struct Endpoint {
        var host: String
        var port: Int
        var user: String?
        var owner: AnyObject?
        /// `?tls=require`: STARTTLS, trusting RECORDS_TLS_CA.
        var startTLS = false
    }

    /// The two replicas and the database they share.
    static func stack() throws -> (Endpoint, Endpoint, String) {
        let environment = TestEnvironment.environment
        if let first = environment["RECORDS_URL"], let second = environment["RECORDS_SECOND_URL"] {
            func endpoint(_ text: String) throws -> Endpoint {
                guard let url = URLComponents(string: text), let host = url.host else { throw TestFailure("bad endpoint \(text)") }
                return Endpoint(host: host, port: url.port ?? 7878, user: url.user,
                                startTLS: url.queryItems?.contains { $0.name == "tls" && $0.value == "require" } == true)
            }
            return (try endpoint(first), try endpoint(second), try TestEnvironment.adminURL())
        }
        let url = try TestEnvironment.freshDatabase()
        let a = try TestServer(databaseURL: url), b = try TestServer(databaseURL: url)
        return (Endpoint(host: "127.0.0.1", port: a.port, owner: a), Endpoint(host: "127.0.0.1", port: b.port, owner: b), url)
    }

    static func client(_ endpoint: Endpoint) throws -> LineClient {
        let client = try LineClient(port: endpoint.port, host: endpoint.host)
        client.owner = endpoint.owner
        if endpoint.startTLS {
            try client.startTLS(ca: TestEnvironment.environment["RECORDS_TLS_CA"] ?? "", serverName: endpoint.host)
        }
        if let user = endpoint.user {
            let password = try TestEnvironment.environment["RECORDS_PASSWORD_FILE"].map { try String(contentsOfFile: $0, encoding: .utf8) }?
                .trimmingCharacters(in: .newlines) ?? TestEnvironment.environment["RECORDS_PASSWORD"] ?? ""
            try client.ok("AUTH \(user) \"\(password)\"")
        }
        return client
    }

    @Test func bothReplicasServeTheSameModelWithMigrationsAppliedOnce() throws {
        let (a, b, database) = try Self.stack()
        for endpoint in [a, b] {
            let client = try Self.client(endpoint)
            #expect(try client.send("PING").status == "+OK PONG")
            #expect(try client.send("ENTITIES").status == "+OK 11 entities")
        }
        let applied = try Connection(database).query("SELECT count(*) FROM records.schema_migrations").int(0, 0)
        #expect(applied == (try migrationFileCount()))
    }

    @Test func aSaveOnOneReplicaIsSeenAndWatchedOnTheOther() throws {
        let (a, b, _) = try Self.stack()
        let watcher = try Self.client(b)
        try watcher.ok("WATCH game")
        let editor = try Self.client(a)
        let name = "stack-" + UUID().uuidString
        try editor.ok("INSERT game AS #g name=\"\(name)\"")
        let id = try editor.send("SAVE").lines[0].split(separator: " ")[2]
        var event: String?
        while event == nil, let line = try watcher.readLine() {
            if line == "! game \(id) inserted" { event = line }
        }
        #expect(event != nil)
        #expect(try watcher.send("COUNT game WHERE name == \"\(name)\"").status == "+OK 1")
        try watcher.ok("UNWATCH")
        // The stack outlives the suite: what this test wrote goes.
        try editor.ok("DELETE game WHERE name == \"\(name)\"")
        #expect(try editor.send("SAVE").status.hasPrefix("+OK saved: 0 inserted, 0 updated, 1 deleted"))
    }

    /// Under compose, the stack's balancer serves the replicas (locally BalancerTests start
    /// HAProxy in front of two servers themselves).
    @Test func theBalancerServesTheReplicas() throws {
        guard let text = TestEnvironment.environment["RECORDS_BALANCER_URL"] else { return }
        guard let url = URLComponents(string: text), let host = url.host else { throw TestFailure("bad endpoint \(text)") }
        let balancer = Endpoint(host: host, port: url.port ?? 7870, user: url.user,
                                startTLS: url.queryItems?.contains { $0.name == "tls" && $0.value == "require" } == true)
        let name = "balanced-" + UUID().uuidString
        let client = try Self.client(balancer)
        try client.ok("INSERT game name=\"\(name)\"")
        #expect(try client.send("SAVE").status.hasPrefix("+OK saved: 1 inserted"))
        try client.ok("DELETE game WHERE name == \"\(name)\"")
        #expect(try client.send("SAVE").status.hasPrefix("+OK saved: 0 inserted, 0 updated, 1 deleted"))
    }

}

/// The migrations this suite's server applies.
func migrationFileCount() throws -> Int {
    try FileManager.default.contentsOfDirectory(atPath: TestEnvironment.migrations).filter { $0.hasSuffix(".sql") }.count
}
