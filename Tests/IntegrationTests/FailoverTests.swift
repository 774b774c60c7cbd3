#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Testing

/// A replicated PostgreSQL that fails over (pg_auto_failover: a monitor, a primary and a
/// synchronous standby, started by scripts/formation): while the formation has no primary,
/// work waits for the new one instead of answering UNAVAILABLE (`--failover-wait`, 30 s by
/// default for a URL of several hosts), and nothing acknowledged is lost or written twice.
/// Before, a planned switch under one saving client answered UNAVAILABLE 20 times.
@Suite(.serialized) struct FailoverTests {
    final class Formation {
        let dir = NSTemporaryDirectory() + "recordsd-formation-\(UUID().uuidString.prefix(8))"
        var url = ""

        init() throws {
            let started = try runProcess(TestEnvironment.root + "/scripts/formation", ["start", dir])
            guard started.status == 0, let line = started.output.split(separator: "\n").first(where: { $0.hasPrefix("url=") }) else {
                _ = try? runProcess(TestEnvironment.root + "/scripts/formation", ["stop", dir])
                throw PostgresError(kind: .connection, message: "the formation did not start: \(started.error)")
            }
            url = String(line.dropFirst(4))
        }

        func run(_ action: String) throws {
            let done = try runProcess(TestEnvironment.root + "/scripts/formation", [action, dir])
            #expect(done.status == 0, "\(action): \(done)")
        }

        deinit { _ = try? runProcess(TestEnvironment.root + "/scripts/formation", ["stop", dir]) }
    }

    /// Clients saving and reading while `fault` happens: what each was answered.
    struct Load {
        var acknowledged: [String] = []
        var failures: [String] = []
        var reads = 0
        /// SAVEs answered UNAVAILABLE (each then sent again).
        var unavailable = 0
        var unavailableAnswers: Set<String> = []
    }

    static func underLoad(_ server: TestServer, run: String, writers: Int = 2, settle: UInt32 = 1_500_000,
                          fault: () throws -> Void) throws -> Load {
        let load = Locked(Load())
        let stop = Locked(false)
        let finished = DispatchSemaphore(value: 0)
        for writer in 0..<writers {
            let client = Handed(try Self.patientClient(server))
            Thread.detachNewThread {
                var index = 0
                while !stop.value {
                    index += 1
                    let name = "\(run)-\(writer)-\(index)"
                    do {
                        let inserted = try client.value.send(#"INSERT game name="\#(name)""#)
                        guard inserted.status.hasPrefix("+OK") else { load.with { $0.failures.append(inserted.status) }; break }
                        // As a client does: a SAVE answered UNAVAILABLE is sent again with its key,
                        // which answers what the first did if it had committed after all.
                        var saved = try client.value.send("SAVE KEY \(run)-\(writer)-\(index)")
                        while saved.status.hasPrefix("-ERR UNAVAILABLE") && !stop.value {
                            load.with { $0.unavailable += 1; $0.unavailableAnswers.insert(saved.status) }
                            usleep(100_000)
                            saved = try client.value.send("SAVE KEY \(run)-\(writer)-\(index)")
                        }
                        if saved.status.hasPrefix("-ERR UNAVAILABLE") { break }
                        guard saved.status.hasPrefix("+OK saved") || saved.status.hasPrefix("-ERR ALREADY_SAVED") else {
                            load.with { $0.failures.append(saved.status) }
                            break
                        }
                        load.with { $0.acknowledged.append(name) }
                    } catch {
                        load.with { $0.failures.append("\(error)") }
                        break
                    }
                }
                finished.signal()
            }
        }
        let reader = Handed(try Self.patientClient(server))
        Thread.detachNewThread {
            while !stop.value {
                do {
                    let counted = try reader.value.send("COUNT game")
                    guard counted.status.hasPrefix("+OK") else { load.with { $0.failures.append("COUNT: " + counted.status) }; break }
                    load.with { $0.reads += 1 }
                } catch {
                    load.with { $0.failures.append("COUNT: \(error)") }
                    break
                }
            }
            finished.signal()
        }
        usleep(1_500_000)
        try fault()
        usleep(settle)
        stop.with { $0 = true }
        for _ in 0...writers { finished.wait() }
        return load.value
    }

    /// A client that waits for a reply as long as a promotion may take (`--failover-wait`, 30 s,
    /// and a SAVE run again after it), not the tests' usual 20 s.
    static func patientClient(_ server: TestServer) throws -> LineClient {
        let client = try LineClient(port: server.port, timeout: 90)
        client.owner = server
        return client
    }

    /// Every acknowledged row is on the new primary once, and no other row of the run.
    static func stored(_ url: String, run: String) throws -> [String] {
        let primary = try Connection(url)
        defer { primary.close() }
        return try primary.query("SELECT name FROM game WHERE name LIKE $1 ORDER BY name", [run + "-%"]).column(0).compactMap { $0 }
    }

    /// A session watching `game` from before the fault: each row the run stored must be pushed
    /// to it as inserted, across the switch, or the session told of a gap in one line. Asks
    /// (PING) until every row was pushed, up to 10 s after the load; returns the rows never
    /// pushed and the lines that were not events.
    static func watched(_ watcher: LineClient, _ url: String, run: String) throws -> (missed: [String], others: [String]) {
        let primary = try Connection(url)
        defer { primary.close() }
        let stored = Set(try primary.query("SELECT id::text FROM game WHERE name LIKE $1", [run + "-%"]).column(0).compactMap { $0 })
        var pushedIDs = Set<String>(), others: [String] = []
        _ = eventually(tries: 100, {
            _ = try? watcher.send("PING")
            for line in watcher.pushed.dropFirst(pushedIDs.count + others.count) {
                let words = line.split(separator: " ")
                if words.count == 4, words[1] == "game", words[3] == "inserted" { pushedIDs.insert(String(words[2])) } else { others.append(line) }
            }
            return stored.subtracting(pushedIDs)
        }, until: { $0.isEmpty })
        return (stored.subtracting(pushedIDs).sorted(), others)
    }

    /// The address in INFO's `primary: HOST:PORT, ...` line.
    static func address(_ line: String) -> String {
        String(line.dropFirst("primary: ".count).prefix { $0 != "," })
    }

    @Test func aPlannedFailoverIsAPauseAndLosesNothing() throws {
        let formation = try Formation()
        let server = try TestServer(databaseURL: formation.url)
        let run = "planned\(UInt16.random(in: 0...UInt16.max))"
        // Operators see the formation: INFO names the primary and its synchronous standby.
        let observer = try server.client()
        let primaryLine = { try observer.send("INFO").lines.first { $0.hasPrefix("primary: ") } ?? "" }
        let before = eventually(tries: 100, { (try? primaryLine()) ?? "" }, until: { $0.contains("1 standby (1 synchronous)") })
        #expect(before.contains("1 standby (1 synchronous)") && before.hasSuffix("; primary changes seen: 0"), "\(before)")
        let watcher = try server.client()
        try watcher.ok("WATCH game")
        let load = try Self.underLoad(server, run: run) { try formation.run("failover") }
        print("failover, planned: \(load.acknowledged.count) saves acknowledged, \(load.reads) reads, failures: \(load.failures), UNAVAILABLE \(load.unavailable): \(load.unavailableAnswers.sorted()); COMMITs cut off: \(server.log.components(separatedBy: "COMMIT got no answer").count - 1)")
        #expect(load.failures == [] && load.unavailable == 0)
        #expect(load.acknowledged.count > 0 && load.reads > 0)
        #expect(try Self.stored(formation.url, run: run) == load.acknowledged.sorted())
        let watch = try Self.watched(watcher, formation.url, run: run)
        #expect(watch.missed.isEmpty && watch.others.isEmpty, "WATCH missed \(watch.missed.count) rows; other lines: \(watch.others.prefix(5))")
        // The switch is seen: the primary is the other node now, once.
        let after = eventually(tries: 100, { (try? primaryLine()) ?? "" }, until: { $0.hasSuffix("primary changes seen: 1") })
        #expect(after.hasSuffix("; primary changes seen: 1") && Self.address(after) != Self.address(before), "\(before) -> \(after)")
        #expect(server.log.contains("PostgreSQL's primary is now \(Self.address(after)) (was \(Self.address(before)))"), "\(server.log.suffix(2000))")
        // The server follows the new primary: a fresh session saves there.
        let fresh = try server.client()
        try fresh.ok(#"INSERT game name="\#(run)-after""#)
        #expect(try fresh.send("SAVE").status.hasPrefix("+OK saved: 1 inserted"))
    }

    /// The primary's machine dies (its keeper and PostgreSQL killed with -9, left down): work
    /// waits while the monitor promotes the standby (about 15 s here), a SAVE whose COMMIT
    /// got no answer is settled by its mark on the new primary (synchronous replication had
    /// it), and every acknowledged row is there once. The formation then serves as a lone
    /// primary, and says so.
    @Test func aCrashedPrimaryIsAPauseAndLosesNothingAcknowledged() throws {
        let formation = try Formation()
        let server = try TestServer(databaseURL: formation.url)
        let run = "crash\(UInt16.random(in: 0...UInt16.max))"
        let observer = try server.client()
        let primaryLine = { try observer.send("INFO").lines.first { $0.hasPrefix("primary: ") } ?? "" }
        _ = eventually(tries: 100, { (try? primaryLine()) ?? "" }, until: { $0.contains("1 standby (1 synchronous)") })
        let watcher = try server.client()
        try watcher.ok("WATCH game")
        let load = try Self.underLoad(server, run: run, settle: 3_000_000) {
            try formation.run("crash")
            // Until the new primary takes writes: the load goes on meanwhile.
            let promoted = eventually(tries: 600, { (try? primaryLine()) ?? "" }, until: { $0.hasSuffix("primary changes seen: 1") })
            #expect(promoted.hasSuffix("primary changes seen: 1"), "\(promoted)")
        }
        print("failover, crash: \(load.acknowledged.count) saves acknowledged, \(load.reads) reads, failures: \(load.failures), UNAVAILABLE \(load.unavailable): \(load.unavailableAnswers.sorted()); COMMITs cut off: \(server.log.components(separatedBy: "COMMIT got no answer").count - 1)")
        #expect(load.failures == [] && load.unavailable == 0)
        #expect(load.acknowledged.count > 0 && load.reads > 0)
        let stored = try Self.stored(formation.url, run: run)
        #expect(stored == load.acknowledged.sorted(), "lost: \(Set(load.acknowledged).subtracting(stored).sorted()), not acknowledged: \(Set(stored).subtracting(load.acknowledged).sorted())")
        let watch = try Self.watched(watcher, formation.url, run: run)
        #expect(watch.missed.isEmpty && watch.others.isEmpty, "WATCH missed \(watch.missed.count) rows; other lines: \(watch.others.prefix(5))")
        let lone = try primaryLine()
        #expect(lone.contains(", no standby (a lone primary"), "\(lone)")
    }
}
