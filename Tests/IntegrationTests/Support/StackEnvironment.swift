import Foundation
import RecordsClient
import Testing

/// The deployed stack the stack suite runs against, named by the variables docker-compose.yml
/// gives the `integration` service, which scripts/local-stack/run sets the same way for its
/// processes on loopback: one suite, one set of variables, two launchers.
///   RECORDS_URL, RECORDS_SECOND_URL   the two replicas (records://user@host:port?tls=require)
///   RECORDS_BALANCER_URL              HAProxy in front of them
///   RECORDS_TLS_CA                    the CA their certificate is signed by
///   RECORDS_PASSWORD_FILE             the password of the URLs' user
///   DATABASE_URL_FILE                 the database owner's URL (for checks of the data)
///   RECORDS_FAULT_DIR                 where the fault round asks its launcher for faults
struct StackEnvironment {
    struct Endpoint {
        var host: String
        var port: Int
        var user: String?
        /// `?tls=require`: STARTTLS, trusting RECORDS_TLS_CA.
        var startTLS = false

        init(_ text: String) throws {
            guard let url = URLComponents(string: text), let host = url.host else { throw TestFailure("bad endpoint \(text)") }
            self.host = host
            port = url.port ?? 7878
            user = url.user
            startTLS = url.queryItems?.contains { $0.name == "tls" && $0.value == "require" } == true
        }
    }

    var first: Endpoint
    var second: Endpoint
    var balancer: Endpoint
    var balancerURL: String
    var caFile: String?
    var password: String
    var databaseURL: String

    /// The stack, or a failure that says how to get one (never a silent skip).
    static func current() throws -> StackEnvironment {
        let environment = TestEnvironment.environment
        guard let first = environment["RECORDS_URL"], let second = environment["RECORDS_SECOND_URL"],
              let balancer = environment["RECORDS_BALANCER_URL"] else {
            Issue.record("RECORDS_URL, RECORDS_SECOND_URL and RECORDS_BALANCER_URL are not set: the stack suite runs through scripts/local-stack/run or scripts/compose-test, which start a stack and set them")
            throw TestFailure("no stack")
        }
        let password = try environment["RECORDS_PASSWORD_FILE"].map { try String(contentsOfFile: $0, encoding: .utf8) }?
            .trimmingCharacters(in: .newlines) ?? environment["RECORDS_PASSWORD"] ?? ""
        return StackEnvironment(first: try Endpoint(first), second: try Endpoint(second), balancer: try Endpoint(balancer),
                                balancerURL: balancer, caFile: environment["RECORDS_TLS_CA"], password: password,
                                databaseURL: try TestEnvironment.adminURL())
    }

    /// A signed-in line client of `endpoint`.
    func client(_ endpoint: Endpoint, timeout: Int = 20) throws -> LineClient {
        let client = try LineClient(port: endpoint.port, host: endpoint.host, timeout: timeout)
        if endpoint.startTLS { try client.startTLS(ca: caFile ?? "", serverName: endpoint.host) }
        if let user = endpoint.user { try client.ok("AUTH \(user) \"\(password)\"") }
        return client
    }

    /// A RecordsClient of the balancer, signed in: it follows its session to the other replica
    /// by itself.
    func libraryClient() async throws -> RecordsClient {
        var url = URLComponents(string: balancerURL)!
        url.password = password
        return try await RecordsClient.connect(url.string!, caFile: caFile, connectTimeout: 10)
    }
}

/// Faults the launcher performs on the stack for the fault round: the suite writes
/// `N.request` ("kill recordsd-1"), the launcher does it and writes `N.done` ("ok" or what
/// failed). Actions: `kill SERVICE` (SIGKILL), `start SERVICE`, `restart postgres`, `recreate
/// SERVICE` (a deploy of one replica: stopped with SIGTERM, started anew); each returns once
/// the service is healthy again (start, restart, recreate) or gone (kill).
struct FaultControl {
    let directory: String
    private var next = 0

    init() throws {
        guard let directory = TestEnvironment.environment["RECORDS_FAULT_DIR"] else {
            Issue.record("RECORDS_FAULT_DIR is not set: the fault round runs through scripts/local-stack/run or scripts/compose-test, which perform its faults")
            throw TestFailure("no fault control")
        }
        self.directory = directory
    }

    /// Asks for `action` and waits until it is done (at most `timeout` seconds).
    mutating func perform(_ action: String, timeout: Double = 180) async throws {
        next += 1
        let base = directory + "/\(next)"
        print("fault round: \(action)")
        try Data((action + "\n").utf8).write(to: URL(fileURLWithPath: base + ".request.tmp"))
        try FileManager.default.moveItem(atPath: base + ".request.tmp", toPath: base + ".request")
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let answer = try? String(contentsOfFile: base + ".done", encoding: .utf8) {
                let text = answer.trimmingCharacters(in: .whitespacesAndNewlines)
                guard text == "ok" else { throw TestFailure("\(action): \(text)") }
                return
            }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        throw TestFailure("\(action): not done within \(Int(timeout)) s")
    }
}
