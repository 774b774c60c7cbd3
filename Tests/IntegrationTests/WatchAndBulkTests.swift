import Foundation
import Postgres
import Testing

@Suite struct WatchAndBulkTests {
    /// Pushed lines until `count` arrived (other lines are not expected meanwhile).
    private func events(_ client: LineClient, _ count: Int) throws -> [String] {
        var lines: [String] = []
        while lines.count < count, let line = try client.readLine() {
            if line.hasPrefix("! ") { lines.append(String(line.dropFirst(2))) }
        }
        return lines
    }

    @Test func watchSeesCommittedChangesFromAnotherServer() throws {
        let url = try TestEnvironment.freshDatabase()
        let a = try TestServer(databaseURL: url), b = try TestServer(databaseURL: url)
        let watcher = try b.client()
        #expect(try watcher.send("WATCH employee").status == "+OK watching employee")
        try watcher.ok("WATCH department")
        let editor = try a.client()
        try editor.ok("INSERT department AS #d name=\"Ops\" number=1")
        try editor.ok("INSERT employee AS #x first_name=\"X\" last_name=\"Y\" gender=1 department=#d")
        try editor.ok("INSERT employee AS #z first_name=\"Z\" last_name=\"W\" gender=2 department=#d")
        let ids = try editor.send("SAVE").lines.map { $0.split(separator: " ")[2] }
        #expect(Set(try events(watcher, 3)) == ["department \(ids[0]) inserted", "employee \(ids[1]) inserted", "employee \(ids[2]) inserted"])
        // Nothing from a unit rolled back or a save that failed.
        try editor.ok("INSERT employee first_name=\"Never\" last_name=\"Saved\" gender=1")
        try editor.ok("ROLLBACK")
        try editor.ok("INSERT employee first_name=\"Bad\" gender=1")
        #expect(try editor.send("SAVE").status.hasPrefix("-ERR VALIDATION"))
        try editor.ok("ROLLBACK")
        try editor.ok("UPDATE employee \(ids[1]) age=40")
        try editor.ok("SAVE")
        #expect(try events(watcher, 1) == ["employee \(ids[1]) updated"])
        // A cascade reports the records it reaches; SQL written directly is seen too.
        try editor.ok("DELETE department \(ids[0])")
        try editor.ok("SAVE")
        #expect(Set(try events(watcher, 3)) == ["department \(ids[0]) deleted", "employee \(ids[1]) deleted", "employee \(ids[2]) deleted"])
        try a.database().execute("INSERT INTO employee (id, first_name, last_name, gender) VALUES (4242, 'Direct', 'Sql', 1)")
        #expect(try events(watcher, 1) == ["employee 4242 inserted"])
        #expect(try watcher.send("UNWATCH").status == "+OK stopped watching 2 entities")
        try a.database().execute("DELETE FROM employee")
        #expect(try watcher.send("PING").lines.isEmpty)
        #expect(watcher.pushed.isEmpty)
    }

    /// A writer wakes the servers at its commit, and only one at a time (NOTIFY would serialize
    /// commits); the others are delivered all the same, once, even one whose log row is
    /// numbered before rows already read because it committed last; one rolled back never is.
    @Test func changesOfTransactionsThatDidNotNotifyAreDeliveredToo() throws {
        let server = try TestServer()
        let watcher = try server.client()
        try watcher.ok("WATCH game")
        let notifier = try server.database(), late = try server.database(), early = try server.database(), undone = try server.database()
        try notifier.execute("BEGIN; INSERT INTO game (id, name) VALUES (1, 'notifies')")
        try late.execute("BEGIN; INSERT INTO game (id, name) VALUES (2, 'commits last')")
        try early.execute("BEGIN; INSERT INTO game (id, name) VALUES (3, 'commits first')")
        try undone.execute("BEGIN; INSERT INTO game (id, name) VALUES (4, 'never')")
        try early.execute("COMMIT")
        try notifier.execute("COMMIT")
        #expect(Set(try events(watcher, 2)) == ["game 1 inserted", "game 3 inserted"])
        try undone.execute("ROLLBACK")
        try late.execute("COMMIT")
        #expect(try events(watcher, 1) == ["game 2 inserted"])
        usleep(1_500_000)  // a quiet read later: nothing more, nothing twice
        #expect(try watcher.send("PING").lines.isEmpty)
        #expect(watcher.pushed.isEmpty)
    }

    /// Writers wake only readers that wait to be woken (hold the quiet lock shared), and decide
    /// at their commit: while every reader polls (under a stream of writes), commits go
    /// without NOTIFY, which PostgreSQL would signal to every listening backend.
    @Test func writersWakeOnlyReadersThatWaitToBeWoken() throws {
        let server = try TestServer()
        let watcher = try server.client()
        try watcher.ok("WATCH game")
        let db = try server.database(), listener = try server.database()
        try listener.execute("LISTEN records_changes; LISTEN test_sentinel")
        /// The wake-ups that came before a sentinel sent now (notifications arrive in commit order).
        func wakeUps() throws -> Int {
            try db.execute("NOTIFY test_sentinel")
            var wakes = 0
            for _ in 0..<200 {
                var descriptor = pollfd(fd: listener.socket, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, 50)
                let notes = try listener.drainNotifications()
                wakes += notes.filter { $0.channel == "records_changes" }.count
                if notes.contains(where: { $0.channel == "test_sentinel" }) { return wakes }
            }
            return -1
        }
        let quietLock = "29283, 1903520101"  // ChangeFeed.quietLock: 'rc', 'quie'
        let holders = """
            SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND classid = 29283 AND objid = 1903520101
            AND mode = 'ShareLock' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """
        // The server's reader, idle, holds the quiet lock shared: a commit wakes it.
        #expect(try eventually({ try db.query(holders).string(0, 0) }, until: { $0 == "1" }) == "1")
        try db.execute("INSERT INTO game (id, name) VALUES (1, 'wakes')")
        #expect(try wakeUps() == 1)
        #expect(try events(watcher, 1) == ["game 1 inserted"])
        // Nobody waits to be woken (the server stopped; its registration lasts a while):
        // commits go without NOTIFY.
        _ = server.stop()
        try db.execute("INSERT INTO records.watched (server, entity) VALUES ('test', 'game') ON CONFLICT DO NOTHING")
        // (The stopped server's backend lets go of the lock when it notices its client left:
        // a moment later on a loaded machine.)
        #expect(try eventually({ try db.query(holders).string(0, 0) }, until: { $0 == "0" }) == "0")
        try db.execute("INSERT INTO game (id, name) VALUES (2, 'nobody to wake')")
        #expect(try wakeUps() == 0)
        // A reader that waits to be woken is woken again; the decision is the commit's, not
        // the statement's.
        let reader = try server.database()
        #expect(try reader.query("SELECT pg_try_advisory_lock_shared(\(quietLock))::text").string(0, 0) == "true")
        try db.execute("INSERT INTO game (id, name) VALUES (3, 'wakes the reader')")
        #expect(try wakeUps() == 1)
        try db.execute("BEGIN; INSERT INTO game (id, name) VALUES (4, 'written while it waited')")
        _ = try reader.query("SELECT pg_advisory_unlock_shared(\(quietLock))")
        try db.execute("COMMIT")
        #expect(try wakeUps() == 0)
        try db.execute("BEGIN; INSERT INTO game (id, name) VALUES (5, 'written while it polled')")
        _ = try reader.query("SELECT pg_try_advisory_lock_shared(\(quietLock))")
        try db.execute("COMMIT")
        #expect(try wakeUps() == 1)
        // A writer that decided early to skip the wake-up (its checks made now, then a slow
        // commit) stays in flight until its commit ends: a reader asking to be woken sees it.
        _ = try reader.query("SELECT pg_advisory_unlock_shared(\(quietLock))")
        let inFlight = "SELECT CASE WHEN pg_try_advisory_lock(29283, 1936419184) THEN NOT pg_advisory_unlock(29283, 1936419184) ELSE true END::text"
        #expect(try reader.query(inFlight).string(0, 0) == "false")
        try db.execute("BEGIN; INSERT INTO game (id, name) VALUES (6, 'decided early'); SET CONSTRAINTS ALL IMMEDIATE")
        #expect(try reader.query(inFlight).string(0, 0) == "true")
        try db.execute("COMMIT")
        #expect(try wakeUps() == 0)
        #expect(try reader.query(inFlight).string(0, 0) == "false")
        #expect(try db.query("SELECT count(*)::text FROM records.change_log WHERE entity = 'game'").string(0, 0) == "6")
    }

    /// Under a stream of writes the server's reader lets go of the quiet lock and polls; once
    /// the stream stops it waits to be woken again. Every change is delivered once either way.
    @Test func aStreamOfWritesTurnsTheReaderToPollingAndBack() throws {
        let server = try TestServer()
        let watcher = try server.client()
        try watcher.ok("WATCH game")
        let db = try server.database()
        let holders = """
            SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND classid = 29283 AND objid = 1903520101
            AND mode = 'ShareLock' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """
        #expect(try eventually({ try db.query(holders).string(0, 0) }, until: { $0 == "1" }) == "1")
        var written = 0
        var polled = false
        while written < 5_000 && !polled {
            written += 1
            try db.execute("INSERT INTO game (id, name) VALUES (\(written), 'stream \(written)')")
            if written % 50 == 0 { polled = try db.query(holders).string(0, 0) == "0" }
        }
        #expect(polled, "the reader never polled in \(written) commits")
        #expect(try eventually({ try db.query(holders).string(0, 0) }, until: { $0 == "1" }) == "1")
        try db.execute("INSERT INTO game (id, name) VALUES (\(written + 1), 'after the stream')")
        var seen: [String: Int] = [:]
        while seen.count < written + 1, let line = try watcher.readLine() {
            guard line.hasPrefix("! game ") else { continue }
            for id in line.dropFirst(7).split(separator: " ").dropLast() { seen[String(id), default: 0] += 1 }
        }
        #expect(seen.count == written + 1 && seen.values.allSatisfy { $0 == 1 })
        usleep(1_500_000)  // a quiet read later: nothing more, nothing twice
        #expect(try watcher.send("PING").lines.isEmpty)
        #expect(watcher.pushed.isEmpty)
    }

    /// A server that starts installs WATCH's tables and triggers again: where they are in
    /// place it changes nothing, so it waits behind no open writer, and no writer waits
    /// behind it (ALTER TABLE and CREATE OR REPLACE TRIGGER lock even when nothing changes).
    @Test func aServerStartingStallsNoWriter() throws {
        let url = try TestEnvironment.freshDatabase()
        let first = try TestServer(databaseURL: url)
        let watcher = try first.client()
        try watcher.ok("WATCH game")
        let open = try first.database(), other = try first.database()
        try open.execute("BEGIN; INSERT INTO game (id, name) VALUES (1, 'left open')")
        let second = try TestServer(databaseURL: url)
        try other.execute("SET statement_timeout = 10000; INSERT INTO game (id, name) VALUES (2, 'not stalled')")
        try open.execute("COMMIT")
        let client = try second.client()
        #expect(try client.send("COUNT game").status == "+OK 2")
    }

    @Test func changesAreAnnouncedOnlyWhileSomeoneWatches() throws {
        let server = try TestServer()
        let db = try server.database()
        let watched = "SELECT coalesce(string_agg(entity, ','), '') FROM records.watched"
        #expect(try db.query(watched).string(0, 0) == "")
        let client = try server.client()
        try client.ok("WATCH game")
        #expect(try db.query(watched).string(0, 0) == "game")
        try client.ok("UNWATCH game")
        #expect(try eventually({ try db.query(watched).string(0, 0) }, until: { $0 == "" }) == "")
    }

    @Test func watchWithAPredicate() throws {
        let server = try TestServer()
        let watcher = try server.client()
        try watcher.ok("WATCH employee WHERE age > 50")
        let same = try server.client(), other = try server.client()  // one query serves both alike
        try same.ok("WATCH employee WHERE age > 50")
        try other.ok("WATCH employee WHERE age < 40")
        let db = try server.database()
        try db.execute("INSERT INTO employee (id, first_name, last_name, gender, age) VALUES (1, 'Young', 'A', 1, 30), (2, 'Old', 'B', 1, 60)")
        #expect(try events(watcher, 1) == ["employee 2 inserted"])
        #expect(try events(same, 1) == ["employee 2 inserted"])
        #expect(try events(other, 1) == ["employee 1 inserted"])
        try db.execute("UPDATE employee SET age = 70 WHERE id = 1")
        #expect(try events(watcher, 1) == ["employee 1 updated"])
        // Deletes are matched against the values the rows had, cascaded ones included.
        try db.execute("""
            INSERT INTO department (id, name, number) VALUES (1, 'Sales', 1);
            INSERT INTO employee (id, first_name, last_name, gender, age, department_id) VALUES (3, 'Kid', 'C', 1, 20, 1), (4, 'Elder', 'D', 1, 65, 1)
            """)
        #expect(try events(watcher, 1) == ["employee 4 inserted"])
        try db.execute("DELETE FROM employee WHERE id = 3")
        try db.execute("DELETE FROM employee WHERE id = 1")
        #expect(try events(watcher, 1) == ["employee 1 deleted"])
        try db.execute("DELETE FROM department WHERE id = 1")
        #expect(try events(watcher, 1) == ["employee 4 deleted"])
        #expect(try watcher.send("WATCH employee WHERE salary > 3").status.hasPrefix("-ERR UNKNOWN"))
    }

    @Test func filteredWatchesAskABoundedNumberOfQueriesAndSayWhatTheyMissed() throws {
        let server = try TestServer()
        // 40 distinct predicates and a change of 30,000 rows (30 events): 1,200 checks, past 1,000.
        let watchers = try (0..<40).map { index -> LineClient in
            let client = try server.client()
            try client.ok("WATCH game WHERE name ENDSWITH \"-\(index)\"")
            return client
        }
        try server.database().execute("INSERT INTO game (name) SELECT 'g-' || i FROM generate_series(1, 30000) i")
        var told = 0, events = 0
        for watcher in watchers {
            var done = false
            for _ in 0..<40 where !done {
                try watcher.write("PING done\n")
                while let line = try watcher.readLine() {
                    if line == "+OK done" { break }
                    if line.hasPrefix("! overflow ") { told += 1; done = true } else if line.hasPrefix("! game ") { events += 1; done = true }
                }
                if !done { usleep(100_000) }
            }
        }
        // Some sessions got their matches, the rest were told events went unchecked.
        #expect(told > 0)
        #expect(told + events > 0)
        #expect(try server.client().send("PING alive").status == "+OK alive")
    }

    @Test func aWatcherThatDoesNotReadLosesTheOldestEventsAndIsTold() throws {
        let server = try TestServer()
        let watcher = try server.client()
        try watcher.ok("WATCH game")
        try server.database().execute("INSERT INTO game (name) SELECT 'g' || i FROM generate_series(1, 300000) i")
        usleep(3_000_000)  // the server reads the 300,000 keys and queues their events meanwhile
        var received = 0
        var dropped = 0
        // Events come between replies: ask until all 300,000 are accounted for (a loaded machine
        // may take longer to read the log).
        for _ in 0..<40 where received + dropped < 300_000 {
            try watcher.write("PING done\n")
            while let line = try watcher.readLine() {
                if line == "+OK done" { break }
                if line.hasPrefix("! overflow ") { dropped += Int(line.split(separator: " ")[2])! } else if line.hasPrefix("! game ") { received += 1 }
            }
            if received + dropped < 300_000 { usleep(250_000) }
        }
        #expect(dropped > 0)
        #expect(received + dropped == 300_000)
    }

    @Test func exportThenImportIntoAnEmptyDatabaseIsIdentical() throws {
        let source = try TestServer()
        try source.database().execute("""
            INSERT INTO friend (first_name, last_name, status, photo) VALUES
              ('Ann', 'Lee', NULL, '\\x00ff0a0d2c22'), ('', 'Comma, "Quoted"', 'line1
            line2', NULL), ('-dash', '.dot', '!bang', ''::bytea);
            INSERT INTO journal_entry (date, location, rating) VALUES ('2024-05-31 06:00:00+00', '+plus', 3);
            """)
        let exporter = try source.client()
        let friends = try exporter.send("EXPORT friend ORDER BY id")
        #expect(friends.status == "+OK exported 3 records")
        #expect(friends.lines[0] == "id,first_name,last_name,status,photo,owner")
        #expect(friends.lines.contains(".-dash,..dot,!bang,\"\"") == false)  // the id leads each line
        let journal = try exporter.send("EXPORT journal_entry")
        let target = try TestServer()
        let importer = try target.client()
        for (entity, reply) in [("friend", friends), ("journal_entry", journal)] {
            try importer.write("IMPORT \(entity)\n" + reply.lines.joined(separator: "\n") + "\n.\n")
            let imported = try importer.readReply()
            #expect(imported.status == "+OK imported \(entity == "friend" ? "3 records" : "1 record")", "\(imported) for \(reply.lines)")
        }
        let query = "SELECT id, first_name, last_name, status, encode(photo, 'hex') FROM friend ORDER BY id"
        let before = try source.database().query(query), after = try target.database().query(query)
        #expect(before.rowCount == 3 && after.rowCount == 3)
        for row in 0..<3 { for column in 0..<5 { #expect(before.string(row, column) == after.string(row, column), "row \(row) column \(column)") } }
        #expect(try target.database().query("SELECT date = '2024-05-31 06:00:00+00' AND location = '+plus' FROM journal_entry").bool(0, 0) == true)
    }

    @Test func aBadLineLeavesTheTableUnchanged() throws {
        let server = try TestServer()
        let client = try server.client()
        var data = "number,key,value\n"
        for i in 1...6000 { data += i == 4999 ? "oops,bad,1\n" : "\(i),k\(i),\(i)\n" }
        try client.write("IMPORT setting\n" + data + ".\n")
        let reply = try client.readReply()
        #expect(reply.status.hasPrefix("-ERR VALIDATION IMPORT failed, nothing was imported: line 5000: "))  // then PostgreSQL's words
        #expect(try server.database().query("SELECT count(*) FROM setting").string(0, 0) == "0")
        // A refused IMPORT's data, sent right behind it, is skipped up to its `.`, never run.
        try client.write("IMPORT setting (nope)\n1,10\nINSERT setting number=5 value=5\nSAVE\n.\n")
        #expect(try client.readReply().status == "-ERR UNKNOWN IMPORT: setting has no column 'nope'; the data that follows, up to a line holding \".\", is skipped")
        #expect(try client.send("CHANGES").status == "+OK no pending changes")
        try client.write("IMPORT nothing\n.\n")
        #expect(try client.readReply().status.hasPrefix("-ERR UNKNOWN unknown entity 'nothing'"))
        try client.write("IMPORT setting (number, value)\n1,10\n2,20\n.\n")
        #expect(try client.readReply().status == "+OK imported 2 records")
        #expect(try client.send("COUNT setting").status == "+OK 2")
    }

    /// An import larger than the server's in-memory feed (4 MiB) streams into COPY while the
    /// client sends; a bad line near the end still leaves the table unchanged, and a client
    /// that leaves mid-import gives its pooled connection back.
    @Test func largeImportsStreamAllOrNothing() throws {
        let server = try TestServer(arguments: ["--pool-size", "1"])
        let client = try server.client()
        func data(badAt: Int?) -> String {
            var text = "number,key,value\n"
            text.reserveCapacity(8_000_000)
            for i in 1...300_000 { text += i == badAt ? "\(i),k,oops\n" : "\(i),key-number-\(i),\(i)\n" }
            return text
        }
        try client.write("IMPORT setting\n" + data(badAt: 299_000) + ".\n")
        #expect(try client.readReply().status.hasPrefix("-ERR VALIDATION IMPORT failed, nothing was imported: line 299001: "))
        #expect(try client.send("COUNT setting").status == "+OK 0")
        try client.write("IMPORT setting\n" + data(badAt: nil) + ".\n")
        #expect(try client.readReply().status == "+OK imported 300000 records")
        #expect(try server.database().query("SELECT count(*), sum(value) FROM setting").string(0, 1) == "45000150000")

        let leaving = try server.client()
        try leaving.write("IMPORT setting (number, value)\n" + String(repeating: "1,1\n", count: 200_000))
        leaving.shutdown()
        usleep(300_000)
        #expect(try client.send("COUNT setting").status == "+OK 300000")
    }

    /// An importer that stops sending while its COPY runs loses it after --import-stall, and the
    /// pooled connection goes back; the reply still waits for its `.`.
    @Test func aStalledImportGivesItsConnectionBack() throws {
        let server = try TestServer(arguments: ["--pool-size", "1", "--import-stall", "1"])
        let importer = try server.client()
        try importer.write("IMPORT setting (number, value)\n" + (1...40_000).map { "\($0),\($0)\n" }.joined())  // > 256 KiB: COPY starts
        let db = try server.database()
        let copying = try eventually(tries: 100, every: 20_000, {
            try db.query("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'COPY %'").string(0, 0)
        }, until: { $0 != "0" })
        #expect(copying == "1")
        let other = try LineClient(port: server.port, timeout: 10)
        #expect(try other.send("COUNT setting").status == "+OK 0")  // the one connection is free again
        try importer.write("40001,1\n.\n")
        #expect(try importer.readReply().status == "-ERR LIMIT IMPORT: no data for 1 s while its COPY held a connection; nothing was imported")
        #expect(try importer.send("COUNT setting").status == "+OK 0")
    }
}
