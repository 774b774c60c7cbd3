import Foundation
import Testing

/// Operators see what each session costs and can end one: `GET /sessions` and
/// `POST /sessions/ID/kill` on the admin listener, with the admin token, and `recordsd sessions`
/// (pgbouncer's SHOW CLIENTS and pg_terminate_backend are the models).
@Suite struct SessionsEndpointTests {
    static func tokenFile(_ token: String) throws -> String {
        let path = NSTemporaryDirectory() + "recordsd-admin-token-\(UUID().uuidString)"
        try (token + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func sessions(_ admin: Int, _ file: String) throws -> [[String: Any]] {
        let listed = try runRecordsd(["sessions", "--json", "--admin-listen", "127.0.0.1:\(admin)", "--admin-token-file", file])
        #expect(listed.status == 0, "\(listed)")
        return try #require(try JSONSerialization.jsonObject(with: Data(listed.output.utf8)) as? [[String: Any]], "\(listed)")
    }

    @Test func operatorsListSessionsAndEndOne() throws {
        let file = try Self.tokenFile("token-of-this-test-0123456789")
        let server = try TestServer(arguments: ["--admin-listen", "127.0.0.1:0", "--admin-token-file", file])
        let admin = try server.adminPort()
        let writer = try server.client(), watcher = try server.client()
        try writer.ok(#"INSERT game name="Pending one""#)
        try writer.ok(#"INSERT game name="Pending two""#)
        try watcher.ok("WATCH game")
        let rows = try Self.sessions(admin, file)
        #expect(rows.count == 2, "\(rows)")
        let writerRow = try #require(rows.first { $0["pending"] as? Int == 2 }, "\(rows)")
        let watcherRow = try #require(rows.first { $0["watching"] as? Int == 1 }, "\(rows)")
        #expect(writerRow["verb"] as? String == "INSERT" && writerRow["state"] as? String == "idle" && writerRow["tls"] as? Bool == false)
        #expect(writerRow["address"] as? String == "127.0.0.1" && writerRow["user"] is NSNull)
        #expect((writerRow["bytes_in"] as? Int ?? 0) == #"INSERT game name="Pending one""#.utf8.count + #"INSERT game name="Pending two""#.utf8.count + 2)
        #expect((writerRow["bytes_out"] as? Int ?? 0) > 0 && writerRow["idle_ms"] is Int)
        #expect(watcherRow["verb"] as? String == "WATCH")
        // The table people read.
        let table = try runRecordsd(["sessions", "--admin-listen", "127.0.0.1:\(admin)"], environment: ["RECORDSD_ADMIN_TOKEN_FILE": file])
        #expect(table.status == 0 && table.output.hasPrefix("id  user  address    tls  state  verb") && table.output.hasSuffix("(2 sessions)\n"), "\(table)")
        // Ended: told why, closed, its pending changes dropped (nothing to resume).
        let id = try #require(writerRow["id"] as? Int)
        let killed = try runRecordsd(["sessions", "kill", "\(id)", "--admin-listen", "127.0.0.1:\(admin)", "--admin-token-file", file])
        #expect(killed.status == 0 && killed.output == "session \(id) is being ended\n", "\(killed)")
        #expect(try writer.readToEnd() == ["! ended an operator ended this session"])
        let after = try Self.sessions(admin, file)
        #expect(after.compactMap { $0["id"] as? Int } == [try #require(watcherRow["id"] as? Int)])
        let missing = try runRecordsd(["sessions", "kill", "\(id)", "--admin-listen", "127.0.0.1:\(admin)", "--admin-token-file", file])
        #expect(missing.status == 1 && missing.error.contains("answered 404 Not Found: no session \(id)"), "\(missing)")
        #expect(try watcher.send("PING").status == "+OK PONG")
    }

    /// A session ended while its command runs: the command is answered, then the connection
    /// closes (it stayed open and went on serving once its SAVE was answered).
    @Test func aSessionEndedMidCommandClosesAfterItsReply() throws {
        let file = try Self.tokenFile("token-of-this-test-0123456789")
        let server = try TestServer(arguments: ["--admin-listen", "127.0.0.1:0", "--admin-token-file", file, "--lock-timeout", "60"])
        let admin = try server.adminPort()
        let db = try server.database()
        try db.execute("INSERT INTO department (id, name, number) VALUES (1, 'Ops', 1)")
        let writer = try server.client()
        try writer.ok(#"UPDATE department 1 name="Mine""#)
        // Another transaction holds the row: the SAVE waits for it.
        let holder = try server.database()
        try holder.execute("BEGIN")
        _ = try holder.query("SELECT 1 FROM department WHERE id = 1 FOR UPDATE")
        try writer.write("SAVE\n")
        var running = false
        for _ in 0..<200 where !running {
            running = try Self.sessions(admin, file).contains { $0["state"] as? String == "running" }
            if !running { usleep(50_000) }
        }
        #expect(running)
        let id = try #require(try Self.sessions(admin, file).first?["id"] as? Int)
        let killed = try runRecordsd(["sessions", "kill", "\(id)", "--admin-listen", "127.0.0.1:\(admin)", "--admin-token-file", file])
        #expect(killed.status == 0, "\(killed)")
        try holder.execute("ROLLBACK")
        let told = try writer.readToEnd()
        #expect(told.count == 2 && told.first == "! ended an operator ended this session" && told.last?.hasPrefix("+OK saved: 0 inserted, 1 updated") == true, "\(told)")
        #expect(try db.query("SELECT name FROM department WHERE id = 1").string(0, 0) == "Mine")
        #expect(try Self.sessions(admin, file).isEmpty)
    }

    @Test func sessionsAreRefusedWithoutTheToken() throws {
        let file = try Self.tokenFile("token-of-this-test-0123456789")
        let server = try TestServer(arguments: ["--admin-listen", "127.0.0.1:0", "--admin-token-file", file])
        let admin = try server.adminPort()
        _ = try server.client()
        #expect(try adminGet(admin, "/sessions").status == "HTTP/1.1 401 Unauthorized")
        let wrong = try Self.tokenFile("token-of-this-test-0123456780")
        let refused = try runRecordsd(["sessions", "--admin-listen", "127.0.0.1:\(admin)", "--admin-token-file", wrong])
        #expect(refused.status == 1 && refused.error.contains("answered 401 Unauthorized"), "\(refused)")
        // A kill is a POST, and with the token only.
        let http = try LineClient(port: admin, readBanner: false)
        try http.write("POST /sessions/1/kill HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        #expect(try http.readLine() == "HTTP/1.1 401 Unauthorized\r")
        let get = try LineClient(port: admin, readBanner: false)
        try get.write("GET /sessions/1/kill HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer token-of-this-test-0123456789\r\n\r\n")
        #expect(try get.readLine() == "HTTP/1.1 405 Method Not Allowed\r")
        // A server given no token answers no one.
        let open = try TestServer(arguments: ["--admin-listen", "127.0.0.1:0"])
        #expect(try adminGet(try open.adminPort(), "/sessions").status == "HTTP/1.1 403 Forbidden")
        let short = try runRecordsd(["sessions", "--admin-listen", "127.0.0.1:1"], environment: ["RECORDSD_ADMIN_TOKEN": "short"])
        #expect(short.status == 2 && short.error.contains("an admin token is at least 16 characters"), "\(short)")
    }
}
