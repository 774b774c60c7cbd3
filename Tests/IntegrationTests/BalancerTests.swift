#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import RecordsClient
import Testing

/// A rolling restart as a deployment does it: HAProxy in front of two replicas, PgBouncer
/// behind them, each replica stopped and started again in turn while clients hold units of
/// work. Clients follow their sessions by themselves; nothing is lost or written twice.
@Suite(.serialized) struct BalancerTests {
    final class Said: @unchecked Sendable {  // guarded by `lock`
        private let lock = NSLock()
        private var lines: [String] = []
        func add(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }

    @Test func aRollingRestartLosesNoUnitOfAnyLibraryClient() async throws {
        let stack = try BalancedStack()
        let said = Said()
        var clients: [RecordsClient] = []
        var expected: [Int] = []
        for index in 0..<8 {
            let client = try await RecordsClient.connect(stack.url)
            await client.onResume { said.add($0) }
            let count = 1 + index % 5
            for row in 0..<count { _ = try await client.insert("project", ["name": "c\(index)-\(row)"]) }
            clients.append(client)
            expected.append(count)
        }
        // Each replica in turn, twice: every session moves at least once, some twice.
        for round in 0..<2 {
            for replica in 0..<2 {
                stack.stop(replica)
                try stack.start(replica)
                // One more change on every session between restarts: sent on a connection
                // whose server stopped, it runs once, on the resumed session.
                for (index, client) in clients.enumerated() {
                    _ = try await client.insert("project", ["name": "c\(index)-r\(round)-\(replica)"])
                    expected[index] += 1
                }
            }
        }
        for (index, client) in clients.enumerated() {
            #expect(try await client.pendingCount().pending == expected[index], "client \(index)")
            let saved = try await client.save()
            #expect(saved.ids.count == expected[index], "client \(index): \(saved.summary)")
        }
        let db = try Connection(stack.databaseURL)
        for index in 0..<clients.count {
            let rows = try db.query("SELECT count(*), count(DISTINCT name) FROM project WHERE name LIKE $1", ["c\(index)-%"])
            #expect(rows.string(0, 0) == "\(expected[index])" && rows.string(0, 1) == "\(expected[index])", "client \(index)")
        }
        #expect(try db.query("SELECT count(*) FROM records.handoff WHERE spent_at IS NULL").string(0, 0) == "0")
        // Every move was one line: `resumed: N pending change(s)`.
        #expect(said.all.count >= clients.count * 2, "\(said.all)")
        #expect(said.all.allSatisfy { $0.hasPrefix("resumed: ") && $0.hasSuffix(" pending change(s)") }, "\(said.all)")
        for client in clients { await client.close() }
    }

    /// Every connection comes from HAProxy's address; its PROXY header (send-proxy) names the
    /// client, so one client's failed sign-ins lock out that client only.
    @Test func throttlingSeesEachClientBehindTheBalancer() throws {
        let stack = try BalancedStack(arguments: ["--auth-delay", "0.1", "--auth-lock-after", "3", "--auth-lock-seconds", "60"])
        stack.stop(1)  // one replica: the throttle is per server
        try stack.client().ok(#"USER ADD carol writer "carol-password""#)
        let attacker = try stack.client(from: "127.0.0.2")
        for guess in 1...3 { #expect(try attacker.send("AUTH carol guess-\(guess)").status == "-ERR AUTH invalid user name or password") }
        #expect(try attacker.send("AUTH carol carol-password").status.hasPrefix("-ERR AUTH too many failed attempts for carol from this address"))
        #expect(try stack.client(from: "127.0.0.3").send("AUTH carol carol-password").status == "+OK signed in as carol (writer)")
    }

    /// Both replicas away for longer than the shell's ten seconds of reconnecting: the shell
    /// stays at its prompt, says the session waits, tries again, and resumes the unit once a
    /// replica is back. The old shell ended (exit 3) and left its two changes behind.
    @Test func theShellWaitsForItsSessionWhenEveryReplicaIsAway() throws {
        let stack = try BalancedStack()
        let marks = stack.directory + "/marks"
        try FileManager.default.createDirectory(atPath: marks, withIntermediateDirectories: true)
        let handed = Handed(stack)
        let operator_ = Thread {
            let stack = handed.value
            while !FileManager.default.fileExists(atPath: marks + "/stop") { usleep(50_000) }
            stack.stop(0)
            stack.stop(1)
            FileManager.default.createFile(atPath: marks + "/stopped", contents: nil)
            while !FileManager.default.fileExists(atPath: marks + "/start") { usleep(50_000) }
            try? stack.start(0)
            try? stack.start(1)
            FileManager.default.createFile(atPath: marks + "/started", contents: nil)
        }
        operator_.start()
        func await_(_ mark: String) -> String { "for i in $(seq 600); do [ -f \(marks)/\(mark) ] && break; sleep 0.1; done" }
        let out = try typedShell(port: stack.balancerPort, [
            (#"INSERT project name="away-1"\#r"#, 1), (#"INSERT project name="away-2"\#r"#, 1),
            ("run:touch \(marks)/stop; " + await_("stopped"), 13),
            ("run:touch \(marks)/start; " + await_("started"), 12),
            (#"INSERT project name="away-3"\#r"#, 1), ("SAVE\r", 1.5), ("QUIT\r", 1),
        ])
        #expect(out.contains("no server at localhost:\(stack.balancerPort) took this session back yet; its pending changes wait there: the next line tries again"), "\(out)")
        #expect(out.contains("resumed: 2 pending change(s)\nlocalhost [2]> "), "\(out)")
        #expect(out.contains("localhost [3]> SAVE"), "\(out)")
        #expect(out.hasSuffix("exit 0\n"), "\(out)")
        let db = try Connection(stack.databaseURL)
        #expect(try db.query("SELECT string_agg(name, ',' ORDER BY name) FROM project WHERE name LIKE 'away-%'").string(0, 0) == "away-1,away-2,away-3")
    }

    @Test func theShellResumesAfterARestartAndSaysSoInOneLine() throws {
        let stack = try BalancedStack()
        // The shell makes two changes; then both replicas are restarted in turn (the one the
        // shell is on hands it off; it reconnects through the balancer and resumes at its
        // prompt); a third change and SAVE follow.
        let marks = stack.directory + "/marks"
        try FileManager.default.createDirectory(atPath: marks, withIntermediateDirectories: true)
        let handed = Handed(stack)
        let restarter = Thread {
            let stack = handed.value
            while !FileManager.default.fileExists(atPath: marks + "/go") { usleep(50_000) }
            for replica in 0..<2 {
                stack.stop(replica)
                try? stack.start(replica)
            }
            FileManager.default.createFile(atPath: marks + "/done", contents: nil)
        }
        restarter.start()
        let out = try typedShell(port: stack.balancerPort, [
            (#"INSERT project name="shell-1"\#r"#, 1), (#"INSERT project name="shell-2"\#r"#, 1),
            ("run:touch \(marks)/go; for i in $(seq 600); do [ -f \(marks)/done ] && break; sleep 0.1; done", 1.5),
            (#"INSERT project name="shell-3"\#r"#, 1), ("SAVE\r", 1.5), ("QUIT\r", 1),
        ])
        #expect(out.contains("resumed: 2 pending change(s)\nlocalhost [2]> "), "\(out)")
        #expect(out.contains("localhost [3]> SAVE"), "\(out)")
        #expect(!out.contains("! shutdown") && !out.contains("! handoff") && !out.contains("reconnecting"), "\(out)")
        #expect(out.hasSuffix("exit 0\n"), "\(out)")
        let db = try Connection(stack.databaseURL)
        #expect(try db.query("SELECT string_agg(name, ',' ORDER BY name) FROM project WHERE name LIKE 'shell-%'").string(0, 0) == "shell-1,shell-2,shell-3")
    }
}
