#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import RecordsClient
import Testing

/// SAVE KEY as clients use it: keys in the shapes their libraries make, a used key answered as
/// done (never as a conflict), and transfers between accounts that stay exactly-once while
/// PostgreSQL restarts and the server is killed.
@Suite struct SaveKeyTests {
    /// Keys as client libraries make them: uuids (either case), ULIDs, `prefix-n`, base64url
    /// and base64, `a:b:c`.
    static func clientKey(_ index: Int, _ g: inout SystemRandomNumberGenerator) -> String {
        func pick(_ alphabet: String, _ count: Int) -> String {
            let letters = Array(alphabet)
            return String((0..<count).map { _ in letters[Int.random(in: 0..<letters.count, using: &g)] })
        }
        let bytes = Data((0..<Int.random(in: 6...30, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
        switch index % 7 {
        case 0: return UUID().uuidString.lowercased()
        case 1: return UUID().uuidString
        case 2: return pick("0123456789", 1) + pick("0123456789ABCDEFGHJKMNPQRSTVWXYZ", 25)
        case 3: return "bank-w\(Int.random(in: 0...9, using: &g))-\(Int.random(in: 1...99_999, using: &g))"
        case 4: return bytes.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        case 5: return bytes.base64EncodedString()
        default: return "\(Int.random(in: 0...9_999, using: &g)):order:\(Int.random(in: 0...99, using: &g))"
        }
    }

    @Test func everyShapeOfKeyRoundTripsThroughSaveKeyAndResume() throws {
        let server = try TestServer()
        let first = try server.client(), retry = try server.client()
        var g = SystemRandomNumberGenerator()
        var keys: [String] = []
        for index in 0..<42 {
            let key = Self.clientKey(index, &g)
            keys.append(key)
            try first.ok(#"INSERT game name="k\#(index)""#)
            let saved = try first.send("SAVE KEY \(key)")
            #expect(saved.status == "+OK saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified", "\(key): \(saved)")
            // The same unit under the same key, from a session that never saw the answer.
            try retry.ok(#"INSERT game name="k\#(index)""#)
            let again = try retry.send("SAVE KEY \(key)")
            #expect(again.status == saved.status && again.lines == saved.lines, "\(key): \(again)")
            // RESUME takes the key as a token and says it is not one of its own: not a lexer's error.
            #expect(try retry.send("RESUME \(key)").status == "-ERR SYNTAX not a resume token: expected rt and 32 hex digits, as the handoff notice gave it", "\(key)")
        }
        print("SaveKeyTests keys: \(keys.prefix(7).joined(separator: " "))")
        #expect(try server.database().query("SELECT count(*) FROM game").int(0, 0) == 42)
        #expect(try server.database().query("SELECT count(*) FROM records.save_keys").int(0, 0) == 42)
    }

    @Test func theLibraryTellsAUsedKeyFromAConflict() async throws {
        let server = try TestServer()
        let a = try await RecordsClient.connect("records://127.0.0.1:\(server.port)")
        let b = try await RecordsClient.connect("records://127.0.0.1:\(server.port)")
        let key = UUID().uuidString.lowercased()
        try await a.insert("game", ["name": "once"])
        let first = try await a.save(key: key)
        // b lost the answer, read again and made its change again: the key says it is done.
        try await b.insert("game", ["name": "once again"])
        do {
            try await b.save(key: key)
            Issue.record("a used key saved again")
        } catch RecordsError.alreadySaved(let message, let saved) {
            #expect(saved == first, "\(saved) \(first)")
            #expect(message.hasPrefix("SAVE KEY \(key) was used by a save that committed at"))
        }
        #expect(try server.database().query("SELECT string_agg(name, ',') FROM game").string(0, 0) == "once")
    }

    /// Clients move amounts between accounts, each transfer read, changed and saved under a
    /// key of its own, while PostgreSQL is restarted twice and the server killed twice (with
    /// --durable-units, so its sessions resume on the server started again). Every read sees
    /// the total unchanged, and the balances at the end are the acknowledged transfers
    /// replayed: none lost, none twice.
    @Test func transfersStayExactlyOnceThroughCrashes() async throws {
        let cluster = try PrivateCluster()
        let accounts = 8, opening = 1_000
        let setup = try Connection(cluster.url)
        try setup.execute("CREATE TABLE account (id int PRIMARY KEY, balance bigint NOT NULL)")
        try setup.execute("INSERT INTO account SELECT n, \(opening) FROM generate_series(1, \(accounts)) n")
        setup.close()
        let port = try freeLoopbackPort()
        let arguments = ["--listen", "127.0.0.1:\(port)", "--durable-units", "--pool-size", "4"]
        var server = try TestServer(databaseURL: cluster.url, arguments: arguments)
        let stop = Flag()
        let url = "records://127.0.0.1:\(port)"
        var tasks: [Task<TransferWorker.Tally, Never>] = []
        for _ in 0..<4 {
            tasks.append(Task { await TransferWorker(url: url, accounts: accounts, total: accounts * opening).run(until: stop) })
        }
        func pause(_ seconds: Double) async throws { try await Task.sleep(nanoseconds: UInt64(seconds * 1e9)) }
        for round in 0..<2 {
            try await pause(2)
            try cluster.stop()
            try await pause(1)
            try cluster.start()
            try await pause(2)
            kill(server.process.processIdentifier, SIGKILL)
            server.process.waitUntilExit()
            server = try TestServer(databaseURL: cluster.url, arguments: arguments + ["--no-migrate"])
            print("SaveKeyTests: round \(round) of faults done")
        }
        try await pause(2)
        stop.set()
        var tally = TransferWorker.Tally()
        for task in tasks { tally.add(await task.value) }
        var expected = [Int](repeating: opening, count: accounts + 1)
        for transfer in tally.acknowledged {
            expected[transfer.from] -= transfer.amount
            expected[transfer.to] += transfer.amount
        }
        let db = try Connection(cluster.url)
        let rows = try db.query("SELECT id, balance FROM account ORDER BY id")
        let stored = (0..<rows.rowCount).map { rows.int($0, 1)! }
        print("SaveKeyTests transfers: \(tally.acknowledged.count) acknowledged, \(tally.done) answered as done by their key, \(tally.conflicts) conflicts, \(tally.reads) reads, \(tally.unavailable) UNAVAILABLE")
        #expect(tally.acknowledged.count > 0 && tally.reads > 0)
        #expect(tally.brokenReads.isEmpty, "\(tally.brokenReads.prefix(5))")
        #expect(tally.failures.isEmpty, "\(tally.failures.prefix(5))")
        #expect(stored == Array(expected.dropFirst()), "stored \(stored), replayed \(Array(expected.dropFirst()))")
        _ = server
    }
}

/// One client of the transfer test: reads every account (the total must hold), then moves an
/// amount between two of them under a SAVE KEY, until told to stop. A transfer is acknowledged
/// once its SAVE (or a later SAVE under the same key, answered ALREADY_SAVED) says so.
final class TransferWorker {
    struct Transfer { var from: Int; var to: Int; var amount: Int }
    struct Tally {
        var acknowledged: [Transfer] = []
        var done = 0, conflicts = 0, reads = 0, unavailable = 0
        var brokenReads: [String] = []
        var failures: [String] = []
        mutating func add(_ other: Tally) {
            acknowledged += other.acknowledged
            done += other.done; conflicts += other.conflicts; reads += other.reads; unavailable += other.unavailable
            brokenReads += other.brokenReads
            failures += other.failures
        }
    }

    private let url: String
    private let accounts: Int
    private let total: Int
    private var generator: SystemRandomNumberGenerator
    private var client: RecordsClient?
    private var tally = Tally()

    init(url: String, accounts: Int, total: Int) {
        self.url = url
        self.accounts = accounts
        self.total = total
        generator = SystemRandomNumberGenerator()
    }

    func run(until stop: Flag) async -> Tally {
        while !stop.isSet {
            let from = Int.random(in: 1...accounts, using: &generator)
            var to = Int.random(in: 1...accounts, using: &generator)
            if to == from { to = from % accounts + 1 }
            let transfer = TransferWorker.Transfer(from: from, to: to, amount: Int.random(in: 1...50, using: &generator))
            do {
                try await move(transfer, key: UUID().uuidString.lowercased())
            } catch {
                tally.failures.append("\(error)")
                return tally
            }
        }
        await client?.close()
        return tally
    }

    /// A client, connected anew when the last one's session is gone.
    private func connected() async throws -> RecordsClient {
        if let client { return client }
        let fresh = try await RecordsClient.connect(url, connectTimeout: 2)
        client = fresh
        return fresh
    }

    /// Reads, changes and saves until the transfer is saved or its key says it was; two
    /// minutes at most.
    private func move(_ transfer: Transfer, key: String) async throws {
        let deadline = Date().addingTimeInterval(120)
        while true {
            guard Date() < deadline else { throw TestFailure("transfer \(key) not settled in 120 s") }
            do {
                let client = try await connected()
                try await client.rollback()
                let balances = try await readAll(client)
                try await client.update("account", transfer.from, ["balance": balances[transfer.from]! - transfer.amount])
                try await client.update("account", transfer.to, ["balance": balances[transfer.to]! + transfer.amount])
                try await client.save(key: key, patience: 60)
                tally.acknowledged.append(transfer)
                return
            } catch RecordsError.alreadySaved {
                // A save of this transfer committed and its answer was lost: it is done.
                tally.done += 1
                tally.acknowledged.append(transfer)
                try? await client?.rollback()
                return
            } catch RecordsError.conflict {
                tally.conflicts += 1
            } catch RecordsError.server(code: .unavailable, _, _) {
                tally.unavailable += 1
                try await Task.sleep(nanoseconds: 200_000_000)
            } catch let error as RecordsError {
                switch error {
                case .connection, .unreachable:
                    // The session is gone: a new one reads again and saves under the same key.
                    await client?.close()
                    client = nil
                    try await Task.sleep(nanoseconds: 200_000_000)
                default:
                    throw error
                }
            }
        }
    }

    /// Every balance, checking the total.
    private func readAll(_ client: RecordsClient) async throws -> [Int: Int] {
        let reply = try await client.request("FIND account")
        var balances: [Int: Int] = [:]
        for line in reply.lines {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let id = object["id"] as? Int, let balance = object["balance"] as? Int else { continue }
            balances[id] = balance
        }
        tally.reads += 1
        let sum = balances.values.reduce(0, +)
        if balances.count != accounts || sum != total { tally.brokenReads.append("\(balances.count) accounts, total \(sum)") }
        return balances
    }
}
