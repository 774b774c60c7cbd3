import Foundation
import Postgres
import RecordsClient
import Testing

/// CANCEL: a session's running command stopped from another connection with the session's
/// key (PostgreSQL's cancel request is the model), and RecordsClient calls whose Task is
/// cancelled. The command kept waiting here is a SAVE behind a row lock held in SQL, so the
/// cancel is sent only once PostgreSQL shows it waiting.
@Suite struct CancelTests {
    /// Waits until a statement of this database waits for a lock; true when one does.
    private func aStatementWaitsForALock(_ db: Connection) -> Bool {
        eventually(tries: 300, every: 50_000, {
            (try? db.query("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").string(0, 0)) ?? "0"
        }, until: { $0 != "0" }) != "0"
    }

    @Test func aCancelFromAnotherConnectionStopsTheCommandAndKeepsTheUnit() throws {
        let server = try TestServer(arguments: ["--lock-timeout", "120"])
        let db = try server.database()
        try db.execute("INSERT INTO game (id, name) VALUES (1, 'Chess')")
        let session = try server.client(), other = try server.client()
        let key = try session.send("CANCEL KEY")
        let words = key.message.split(separator: " ").map(String.init)
        #expect(key.ok && words.count == 2 && words[0].hasPrefix("s") && words[1].count == 32, "\(key)")
        try session.ok(#"UPDATE game 1 name="Go""#)
        // Another transaction holds the row: the SAVE waits for it.
        let holder = try Connection(server.databaseURL)
        try holder.execute("BEGIN; SELECT * FROM game WHERE id = 1 FOR UPDATE")
        try session.write("SAVE\n")
        #expect(aStatementWaitsForALock(db))
        // A wrong key, a session that does not exist, a key of another session: answered the
        // same, and nothing is stopped.
        let wrong = String(words[1].reversed())
        #expect(try other.send("CANCEL \(words[0]) \(wrong)").status == "+OK cancel request sent")
        #expect(try other.send("CANCEL s999999 \(words[1])").status == "+OK cancel request sent")
        #expect(try other.send("CANCEL \(words[0])").status.hasPrefix("-ERR SYNTAX"))
        // The right one stops it.
        #expect(try other.send("CANCEL \(words[0]) \(words[1])").status == "+OK cancel request sent")
        let cancelled = try session.readReply()
        #expect(cancelled.status.hasPrefix("-ERR CANCELLED "), "\(cancelled)")
        // The session goes on, its unit as it was; the same SAVE then saves.
        #expect(try session.send("CHANGES").status.hasPrefix("+OK 1 pending change(s)"))
        try holder.execute("COMMIT")
        #expect(try session.send("SAVE").status == "+OK saved: 0 inserted, 1 updated, 0 deleted, 0 cascaded, 0 nullified")
        #expect(try db.query("SELECT name FROM game WHERE id = 1").string(0, 0) == "Go")
        // With nothing running, a cancel stops nothing.
        #expect(try other.send("CANCEL \(words[0]) \(words[1])").status == "+OK cancel request sent")
        #expect(try session.send("PING").status == "+OK PONG")
    }

    /// Needing no sign-in, as PostgreSQL's cancel request: the key is the authority.
    @Test func aCancelNeedsNoSignInButTheKey() throws {
        let server = try TestServer(arguments: ["--lock-timeout", "120"])
        let db = try server.database()
        try db.execute("INSERT INTO game (id, name) VALUES (1, 'Chess')")
        let admin = try server.client()
        try admin.ok(#"USER ADD alice writer "alice-password-1""#)
        let session = try server.client()
        try session.ok(#"AUTH alice "alice-password-1""#)
        let words = try session.send("CANCEL KEY").message.split(separator: " ").map(String.init)
        try session.ok(#"UPDATE game 1 name="Go""#)
        let holder = try Connection(server.databaseURL)
        try holder.execute("BEGIN; SELECT * FROM game WHERE id = 1 FOR UPDATE")
        try session.write("SAVE\n")
        #expect(aStatementWaitsForALock(db))
        let stranger = try server.client()
        #expect(try stranger.send("FIND game").status.hasPrefix("-ERR AUTH"))
        #expect(try stranger.send("CANCEL \(words[0]) \(words[1])").status == "+OK cancel request sent")
        #expect(try session.readReply().status.hasPrefix("-ERR CANCELLED "))
        try holder.execute("ROLLBACK")
    }

    /// A Task cancelled while its call runs on the server: the library sends CANCEL, the call
    /// throws CancellationError, and the session and its unit go on. A Task cancelled before
    /// its call sends nothing.
    @Test func cancellingATaskCancelsItsCommand() async throws {
        let server = try TestServer(arguments: ["--lock-timeout", "120"])
        let db = try server.database()
        try db.execute("INSERT INTO game (id, name) VALUES (1, 'Chess')")
        let app = try await RecordsClient.connect("records://127.0.0.1:\(server.port)")
        try await app.update("game", 1, ["name": "Go"])
        let holder = try Connection(server.databaseURL)
        try holder.execute("BEGIN; SELECT * FROM game WHERE id = 1 FOR UPDATE")
        let saving = Task { try await app.save() }
        // Waited for without holding a cooperative thread: the SAVE's Task needs one to start.
        var waiting = false
        for _ in 0..<1200 where !waiting {
            waiting = (try? db.query("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").string(0, 0)) != "0"
            if !waiting { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(waiting)
        saving.cancel()
        await #expect(throws: CancellationError.self) { try await saving.value }
        #expect(try await app.pendingCount().pending == 1)
        try holder.execute("COMMIT")
        #expect(try await app.save().summary == "saved: 0 inserted, 1 updated, 0 deleted, 0 cascaded, 0 nullified")
        // Cancelled before it is called: nothing goes to the server.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await app.insert("game", ["name": "Never"])
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(try await app.pendingCount().pending == 0)
        await app.close()
    }
}
