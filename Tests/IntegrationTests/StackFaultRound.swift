import Foundation
import Postgres
import RecordsClient
import Testing

/// The fault round, run against a deployed stack after StackTests (`scripts/compose-test`,
/// `scripts/local-stack/run`): library clients keep editing and saving units through the
/// balancer while the launcher kills a replica mid-unit, restarts PostgreSQL, and deploys both
/// replicas one after the other. Every row a SAVE acknowledged must be in the database once,
/// and no other row: no unit lost, nothing doubled, no command failed for good.
@Suite(.serialized) struct StackFaultRound {
    @Test func faultsLoseNothingAcknowledged() async throws {
        let stack = try StackEnvironment.current()
        var control = try FaultControl()
        let run = "fault-" + UUID().uuidString.prefix(8).lowercased()
        let stop = Flag()
        let moves = Counter()
        var tasks: [Task<FaultWorker.Tally, Never>] = []
        for index in 0..<6 {
            let client = try await stack.libraryClient()
            let events = EventLog()
            await client.onResume { line in
                moves.add()
                events.add(line)
            }
            tasks.append(Task { await FaultWorker(client: client, prefix: "\(run)-w\(index)", events: events).run(until: stop) })
        }
        func load(_ seconds: Double) async throws { try await Task.sleep(nanoseconds: UInt64(seconds * 1e9)) }

        try await load(3)
        try await control.perform("kill recordsd-1")      // mid-unit: its sessions resume on recordsd-2
        try await load(4)
        try await control.perform("start recordsd-1")
        try await load(3)
        try await control.perform("restart postgres")     // sessions stay; their work waits
        try await load(3)
        try await control.perform("recreate recordsd-1")  // a rolling deploy, under load
        try await control.perform("recreate recordsd-2")
        try await load(3)
        stop.set()

        var tally = FaultWorker.Tally()
        for task in tasks { tally.add(await task.value) }
        let db = try Connection(stack.databaseURL)
        let rows = try db.query("SELECT name, count(*) FROM contact WHERE name LIKE $1 GROUP BY name", [run + "-%"])
        var stored: [String: Int] = [:]
        for row in 0..<rows.rowCount { stored[rows.string(row, 0)!] = rows.int(row, 1) }
        let acknowledged = Set(tally.acknowledged)
        let lost = acknowledged.filter { stored[$0] == nil }.count
        let doubled = stored.values.filter { $0 > 1 }.count
        let unacknowledged = stored.keys.filter { !acknowledged.contains($0) }.count
        print("""
            fault round: 6 clients, \(tally.saves) saves, \(acknowledged.count) rows acknowledged; \
            units lost \(tally.unitsLost), rows lost \(lost), doubled \(doubled), unacknowledged \(unacknowledged); \
            failed commands \(tally.failures.count); UNAVAILABLE answers \(tally.unavailable), \
            inserts settled by the unit's count \(tally.settled), sessions moved \(moves.value)
            """)
        #expect(tally.saves > 0 && moves.value > 0)
        #expect(tally.unitsLost == 0 && lost == 0 && doubled == 0 && unacknowledged == 0,
                "lost \(acknowledged.filter { stored[$0] == nil }.sorted().prefix(10)); doubled \(stored.filter { $0.value > 1 }.keys.sorted().prefix(10))")
        #expect(tally.failures.isEmpty, "\(tally.failures.prefix(10))")
        // The round leaves the stack as it found it.
        try db.execute("DELETE FROM contact WHERE name LIKE '\(run)-%'")
    }
}

/// One client of the fault round: units of 1-5 inserts into `contact`, each SAVEd with a SAVE
/// KEY, so that a SAVE whose answer was lost is asked again and answered once. A command that
/// met a fault is settled, not guessed: an INSERT by the unit's count, a SAVE by its key.
final class FaultWorker {
    struct Tally {
        var saves = 0
        var acknowledged: [String] = []
        var unitsLost = 0
        var failures: [String] = []
        var unavailable = 0
        var settled = 0

        mutating func add(_ other: Tally) {
            saves += other.saves
            acknowledged += other.acknowledged
            unitsLost += other.unitsLost
            failures += other.failures
            unavailable += other.unavailable
            settled += other.settled
        }
    }

    private let client: RecordsClient
    private let prefix: String
    /// What happened to this client, for a failure's message: resumes, faults met.
    private let events: EventLog
    private var pending: [String] = []
    private var refs: [RecordRef] = []
    private var inserted = 0
    private var unit = 0
    private var tally = Tally()

    init(client: RecordsClient, prefix: String, events: EventLog) {
        self.client = client
        self.prefix = prefix
        self.events = events
    }

    func run(until stop: Flag) async -> Tally {
        do {
            while !stop.isSet {
                let size = Int.random(in: 1...5)
                while pending.count < size { try await insertOne() }
                try await saveUnit()
            }
        } catch {
            tally.failures.append("\(prefix): \(error)")
            if !pending.isEmpty { tally.unitsLost += 1 }
        }
        await client.close()
        return tally
    }

    /// Retries what a fault interrupted, for at most two minutes: UNAVAILABLE (PostgreSQL away)
    /// and a connection lost and resumed elsewhere (`settle` says whether it ran).
    private func retrying(settle: () async throws -> Bool, _ body: () async throws -> Void) async throws {
        let deadline = Date().addingTimeInterval(120)
        while true {
            do {
                try await body()
                return
            } catch let error as RecordsError {
                events.add("\(error)")
                guard Date() < deadline else { throw error }
                switch error {
                case .server(code: .unavailable, _, _):
                    tally.unavailable += 1
                case .connection:
                    // The session moved and the line may or may not have run.
                    if try await settling(settle) {
                        tally.settled += 1
                        return
                    }
                default:
                    throw error
                }
                try await Task.sleep(nanoseconds: 200_000_000)
            }
        }
    }

    /// Asks `settle` until it answers (it may meet the same faults).
    private func settling(_ settle: () async throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(120)
        while true {
            do {
                return try await settle()
            } catch let error as RecordsError {
                guard Date() < deadline else { throw error }
                if case .server(code: .unavailable, _, _) = error { tally.unavailable += 1 }
                try await Task.sleep(nanoseconds: 200_000_000)
            }
        }
    }

    private func insertOne() async throws {
        inserted += 1
        let name = "\(prefix)-\(inserted)"
        let before = pending.count
        var ref: RecordRef?
        try await retrying(settle: { try await self.client.pendingCount().pending == before + 1 }) {
            ref = try await client.insert("contact", ["name": name])
        }
        pending.append(name)
        if let ref { refs.append(ref) }
    }

    /// RecordsClient's `save(key:)` sends the same SAVE KEY again after an UNAVAILABLE or a
    /// lost answer (on the session resumed elsewhere): the unit is saved once.
    private func saveUnit() async throws {
        events.add("SAVE of \(pending.joined(separator: ", ")) as \(refs.map(\.description).joined(separator: ", "))")
        let saved = try await client.save(key: UUID().uuidString.lowercased(), patience: 120)
        tally.saves += 1
        tally.acknowledged += pending
        // Every insert the unit was told of is among what SAVE says it wrote.
        let missing = refs.filter { saved.ids[$0] == nil }
        if !missing.isEmpty {
            tally.failures.append("\(prefix): SAVE wrote \(saved.ids.count) of the unit's \(refs.count) inserts (\(saved.summary)); missing \(missing); what happened: \(events.recent)")
        }
        pending.removeAll()
        refs.removeAll()
        events.add("saved: \(saved.summary)")
    }
}

/// A client's recent events, kept for a failure's message.
final class EventLog: @unchecked Sendable {  // `lines` guarded by `lock`
    private let lock = NSLock()
    private var lines: [String] = []
    func add(_ line: String) {
        lock.withLock {
            lines.append("\(Date().timeIntervalSince1970): \(line)")
            if lines.count > 12 { lines.removeFirst() }
        }
    }
    var recent: [String] { lock.withLock { lines } }
}

final class Flag: @unchecked Sendable {  // `value` guarded by `lock`
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
