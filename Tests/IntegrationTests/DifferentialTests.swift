import Foundation
import Postgres
import Testing

// A differential test of the unit of work: seeded random schemas (every key kind, foreign keys
// with every delete rule, self-references, join tables) and seeded random units of work
// (inserts with #refs, updates and deletes by key, by #ref and by predicate, NEST/MERGE/DISCARD,
// reads, units SAVE must refuse and their fixes) go through one recordsd; the same changes go,
// as plain SQL, into a second database of the same DDL; after every SAVE both must hold the
// same rows, and SAVE must refuse exactly what the database refuses.
//
// Environment:
// - `RECORDS_DIFF_SEED`: `random`, a number (the run's seed), or `seed:schema` to replay one
//   schema of a run (the failure report prints it).
// - `RECORDS_DIFF_SCHEMAS` (200), `RECORDS_DIFF_UNITS` units per schema (50),
//   `RECORDS_DIFF_WORKERS` sessions at once (4).
// - `RECORDS_DIFF_LOGIC=sql`: the reference reads predicates with SQL's three-valued logic
//   instead of NSPredicate's (see DiffPredicateWriter), to look past that difference.
// - `RECORDS_DIFF_REPORT`: where the full report of every mismatch is written
//   (default `$TMPDIR/recordsd-differential-<seed>.txt`).
@Suite struct DifferentialTests {
    static let defaultSeed: UInt64 = 20_261_130

    struct Settings {
        var seed: UInt64
        var only: Int?
        var schemas: Int
        var units: Int
        var workers: Int
    }

    static func settings() throws -> Settings {
        let environment = ProcessInfo.processInfo.environment
        func number(_ name: String, _ fallback: Int) throws -> Int {
            guard let text = environment[name], !text.isEmpty else { return fallback }
            guard let value = Int(text), value > 0 else { throw TestFailure("\(name)=\(text) is not a positive number") }
            return value
        }
        var settings = Settings(seed: defaultSeed, only: nil, schemas: try number("RECORDS_DIFF_SCHEMAS", 200),
                                units: try number("RECORDS_DIFF_UNITS", 50), workers: try number("RECORDS_DIFF_WORKERS", 4))
        if let text = environment["RECORDS_DIFF_SEED"], !text.isEmpty {
            if text == "random" {
                settings.seed = UInt64.random(in: 1...UInt64(Int64.max))
            } else {
                let parts = text.split(separator: ":")
                guard let seed = UInt64(parts[0]), parts.count <= 2 else { throw TestFailure("RECORDS_DIFF_SEED=\(text): expected random, SEED or SEED:SCHEMA") }
                settings.seed = seed
                if parts.count == 2 {
                    guard let schema = Int(parts[1]), schema >= 0 else { throw TestFailure("RECORDS_DIFF_SEED=\(text): the schema is a number") }
                    settings.only = schema
                }
            }
        }
        return settings
    }

    static func schema(_ number: Int, seed: UInt64) -> DiffSchema {
        var random = SeededRandom(seed: SeededRandom.mix(seed, UInt64(number) * 2))
        return DiffSchema.generate(number: number, random: &random)
    }

    @Test func unitsOfWorkAgreeWithPlainSQL() throws {
        let settings = try Self.settings()
        let started = Date()
        let numbers = settings.only.map { [$0] } ?? Array(0..<settings.schemas)
        let schemas = numbers.map { Self.schema($0, seed: settings.seed) }
        let ddl = schemas.map(\.ddl).joined(separator: "\n")
        let file = try Schema(ddl)
        // Semantics, not speed: a statement of a trivial unit once ran past the default 5 s
        // while every suite shared the two cores.
        let server = try TestServer(schema: file, arguments: ["--pool-size", "4", "--statement-timeout", "60"])
        let referenceURL = try TestEnvironment.freshDatabase()
        let setup = try Connection(referenceURL)
        try setup.execute(ddl)
        setup.close()
        let ready = Date()

        let shared = DiffShared()
        let handedServer = Handed(server)
        let group = DispatchGroup()
        for _ in 0..<min(settings.workers, schemas.count) {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                var client: LineClient?
                var served: Connection?
                var reference: Connection?
                while true {
                    guard let position = shared.take(below: schemas.count) else { return }
                    let schema = schemas[position]
                    let label = "\(settings.seed):\(schema.number)"
                    do {
                        if client == nil { client = try handedServer.value.client() }
                        if served == nil { served = try handedServer.value.database() }
                        if reference == nil { reference = try Connection(referenceURL) }
                        let run = try DiffSchemaRun(schema: schema, seed: label, randomSeed: SeededRandom.mix(settings.seed, UInt64(schema.number) * 2 + 1),
                                                    client: client!, served: served!, reference: reference!)
                        var failure: Error?
                        do { try run.run(units: settings.units) } catch { failure = error }
                        shared.add(run.mismatches, run.stats, failure.map { "seed \(label), unit \(run.stats.units): \($0)" })
                        if failure != nil { client = nil; served = nil; reference = nil }
                    } catch {
                        shared.add([], DiffStats(), "seed \(label): \(error)")
                        client = nil
                        served = nil
                        reference = nil
                    }
                }
            }
            thread.stackSize = 4 << 20
            thread.start()
        }
        group.wait()
        let elapsed = Date().timeIntervalSince(started)
        let (mismatches, stats, harness) = shared.results

        var byCategory: [String: Int] = [:]
        for mismatch in mismatches { byCategory[mismatch.category, default: 0] += 1 }
        let summary = """
            differential: seed \(settings.seed)\(settings.only.map { ":\($0)" } ?? ""), \(schemas.count) schemas (\(schemas.reduce(0) { $0 + $1.tables.count }) tables), \
            \(stats.units) units, \(stats.commands) commands, \(stats.saved) saves accepted, \(stats.refused) refused \
            (\(stats.invalidUnits) units invalid on purpose, \(stats.fixedAndSaved) fixed and saved), \(stats.inserted) rows inserted, \
            \(stats.deleted) deleted; \(mismatches.count) mismatch(es)\(byCategory.isEmpty ? "" : " " + byCategory.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")); \
            setup \(String(format: "%.1f", ready.timeIntervalSince(started))) s, total \(String(format: "%.1f", elapsed)) s
            """
        print(summary)
        if !mismatches.isEmpty {
            let path = ProcessInfo.processInfo.environment["RECORDS_DIFF_REPORT"]
                ?? NSTemporaryDirectory() + "recordsd-differential-\(settings.seed).txt"
            let text = mismatches.sorted { ($0.seed, $0.unit) < ($1.seed, $1.unit) }.map(\.report).joined(separator: "\n\n")
            try? text.write(toFile: path, atomically: true, encoding: .utf8)
            print("differential: every mismatch is reported in \(path); replay one with RECORDS_DIFF_SEED=<seed:schema>")
            // The first of each kind in full.
            var shown = Set<String>()
            for mismatch in mismatches.sorted(by: { ($0.seed, $0.unit) < ($1.seed, $1.unit) }) where shown.insert(mismatch.category).inserted {
                Issue.record(Comment(rawValue: mismatch.report))
            }
        }
        for failure in harness { Issue.record(Comment(rawValue: "the harness failed: \(failure)")) }
        #expect(mismatches.count == 0, Comment(rawValue: summary))
        #expect(stats.units >= settings.units * schemas.count * 9 / 10 || !mismatches.isEmpty || !harness.isEmpty, Comment(rawValue: "too few units ran: \(summary)"))
    }
}

// What the worker threads share: the next schema to run, and what the runs found.
final class DiffShared: @unchecked Sendable {  // every field guarded by `lock`
    private let lock = NSLock()
    private var next = 0
    private var mismatches: [DiffMismatch] = []
    private var stats = DiffStats()
    private var harness: [String] = []

    func take(below count: Int) -> Int? {
        lock.lock()
        defer { lock.unlock() }
        guard next < count else { return nil }
        next += 1
        return next - 1
    }

    func add(_ found: [DiffMismatch], _ more: DiffStats, _ failure: String?) {
        lock.lock()
        defer { lock.unlock() }
        mismatches += found
        stats.add(more)
        if let failure { harness.append(failure) }
    }

    var results: ([DiffMismatch], DiffStats, [String]) {
        lock.lock()
        defer { lock.unlock() }
        return (mismatches, stats, harness)
    }
}
