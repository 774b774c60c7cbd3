import Foundation
import Postgres
import Testing

/// The pool against a real PostgreSQL reached through a proxy that can stop taking new
/// connections while those it carries go on working.
@Suite struct ConnectionPoolTests {
    /// A pool that cannot open one more connection (in the compose stack, the engine's DNS stops
    /// answering for 20-40 s after a container starts: "could not translate host name") serves
    /// its jobs on the connections it has. It failed them after `failoverWait` instead, although
    /// a connection to the same server stood idle a moment later: the fault round saw a sign-in
    /// answered UNAVAILABLE while other sessions kept saving.
    @Test func aPoolThatCannotGrowServesOnTheConnectionsItHas() throws {
        let (proxy, through, _) = try CutProxy.toFreshDatabase()
        let pool = ConnectionPool(conninfo: through, size: 4, failoverWait: 1)
        defer { pool.shutdown() }
        let done = DispatchGroup()
        let answers = Answers()
        func submit(_ count: Int) {
            for index in 0..<count {
                done.enter()
                pool.submit { result in
                    defer { done.leave() }
                    do {
                        let lease = try result.get()
                        let rows = try lease.connection.query("SELECT $1::int + 1 FROM pg_sleep(0.02)", [String(index)])
                        answers.add(rows.string(0, 0) ?? "nil")
                    } catch {
                        answers.add("failed: \(error)")
                    }
                }
            }
            done.wait()
        }
        submit(1)
        #expect(pool.statistics.open == 1)
        proxy.refuseConnections(true)
        submit(12)
        proxy.refuseConnections(false)
        #expect(answers.sorted == (["1"] + (0..<12).map { String($0 + 1) }).sorted(), "\(answers.sorted)")
        #expect(pool.statistics.open == 1)
    }
}

private final class Answers: @unchecked Sendable {  // `values` guarded by `lock`
    private let lock = NSLock()
    private var values: [String] = []
    func add(_ value: String) { lock.withLock { values.append(value) } }
    var sorted: [String] { lock.withLock { values.sorted() } }
}
