import Foundation
import Postgres

/// A whole-table FIND read as two halves at once, the second on another pooled connection.
///
/// PostgreSQL's backend sets the pace of a large FIND: one backend turns rows into text while
/// recordsd turns text into JSON. Reading the table's first blocks on the FIND's connection and
/// its last on a second one that imports the first's snapshot (`pg_export_snapshot`) lets two
/// backends share that work, and the rows are exactly those one snapshot sees.
///
/// The FIND's own worker (the leader) is the only one to write to its client: the helper's
/// batches wait here (a few at most: the helper waits while they do) and the leader passes
/// them on between its own. The second half is claimed once, by whoever comes first: the
/// helper as it starts, or the leader when its half is done and no helper has begun (the pool
/// had no worker free after all); so a FIND never waits for a worker that never comes.
final class SplitRead: @unchecked Sendable {  // every var guarded by `condition` but the leader's `forwarded`, `lent`, `asked`, `expired`
    enum Claim: Equatable {
        /// Nobody has begun the second half.
        case open
        /// The helper is importing the snapshot: the leader's transaction must stay open.
        case importing
        /// The helper reads it.
        case helper
        /// The leader reads it (no helper came, or its import failed).
        case leader
    }

    /// Tables smaller than this many blocks are read in one piece: a second connection costs
    /// a round trip and a hop between threads, worth it from a few megabytes.
    static let minimumBlocks = 1024
    /// Helper batches held for the leader at most.
    static let heldBatches = 4

    /// What the first round trip asks besides the snapshot: the table's size in blocks (null
    /// unless an ordinary table: a partitioned table's rows are in its partitions; a parent's
    /// children are divided by the same ranges of their own blocks, unevenly but whole), and
    /// from `minimumBlocks` on, the snapshot exported for the helper to import. Each takes the
    /// quoted table as its one parameter.
    static func probes(table: String) -> [(sql: String, parameters: [String?])] {
        let size = "pg_relation_size(c.oid) / current_setting('block_size')::bigint"
        let from = "FROM pg_class c WHERE c.oid = to_regclass($1) AND c.relkind = 'r'"
        return [("SELECT \(size) \(from)", [table]),
                ("SELECT pg_export_snapshot() \(from) AND \(size) >= \(minimumBlocks)", [table])]
    }

    /// Where the halves meet and the snapshot the helper imports, from the probes' answers;
    /// nil when the table is read in one piece.
    struct Plan {
        let middle: Int
        let exported: String

        init?<C: Collection>(_ probed: C) where C.Element == String? {
            guard probed.count == 2, let blocks = probed.first.flatMap({ $0 }).flatMap({ Int($0) }),
                  blocks >= SplitRead.minimumBlocks, let exported = probed.dropFirst().first.flatMap({ $0 }) else { return nil }
            self.middle = blocks / 2
            self.exported = exported
        }
    }

    private let condition = NSCondition()
    private var claim = Claim.open
    private var batches: [(bytes: [UInt8], records: Int)] = []
    private var stopped = false
    private var ended = false
    private var failure: Error?
    private var helperVersions: [(RecordKey, String)] = []
    /// Records the leader passed on for the helper (the leader's own, as is `lent`).
    private(set) var forwarded = 0
    /// A helper was asked for: the read can no longer start again on a fresh connection.
    private(set) var lent = false
    /// The table was large enough to split: a helper was asked for, whether or not one came.
    private(set) var asked = false

    /// The helper read the second half (once the read is over: how it was read).
    var helped: Bool { condition.withLock { claim == .helper } }

    /// On the leader: asks the pool for a helper that runs `job` now; false when no worker
    /// is free (the leader then reads the table in one piece).
    func lend(_ context: WorkContext, _ job: @escaping @Sendable (Lease) -> Void) -> Bool {
        asked = true
        guard let lend = context.lend else { return false }
        lent = lend { result in
            // No connection: the half stays unclaimed, and the leader reads it.
            if case .success(let lease) = result { job(lease) }
        }
        return lent
    }

    // MARK: The helper's side

    /// How long the helper waits for its lock on the table (milliseconds) before it leaves
    /// the half to the leader.
    static let helperLockTimeout = 500

    /// The helper's work, on its own worker and connection: the second half, `sql`, in a
    /// transaction that imports the leader's snapshot, as `identity` (row-level security).
    ///
    /// Its lock on `table` is taken with the import, before the half is its own: once the
    /// leader's transaction ends, a TRUNCATE (not MVCC-safe) could empty the table under a
    /// helper still to lock it, and its half would come back empty. A helper that cannot have
    /// the lock at once (an exclusive lock waits) leaves the half to the leader, which holds
    /// its own.
    func readSecondHalf(_ sql: String, table: String, exported: String, rows: inout FindRows, lease: Lease, settings: WorkSettings, identity: Identity) {
        guard helperBegins() else { return }
        let sink = SplitSink(self)
        let context = WorkContext(lease: lease, sink: sink, settings: settings)
        context.identity = identity
        var importing = true
        do {
            try context.assumeIdentity()
            var batch = StreamBatch(to: sink)
            try lease.connection.streamCopy(timeout: settings.bulkTimeout + Session.bulkTimeoutGrace, silence: settings.readTimeout, snapshot: false,
                                            probes: ["SELECT 1 FROM \(table) LIMIT 0"], importing: exported,
                                            lockTimeout: Self.helperLockTimeout) { _, _ in
                // The snapshot is imported: the leader's transaction may end.
                importing = false
                imported(true)
                return [sql]
            } rows: { line in
                let goOn = rows.take(line, into: &batch)
                sink.records = rows.count
                return goOn && batch.sendIfFull()
            }
            batch.finish()
            helperEnded(versions: rows.versions, failure: nil)
        } catch {
            // Before the import, nothing was read: the leader reads the half itself.
            if importing { imported(false) } else { helperEnded(versions: [], failure: error) }
        }
    }

    /// The helper starting: whether the second half is its to read (then it imports the
    /// snapshot and says `imported`).
    func helperBegins() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard claim == .open, !stopped else { return false }
        claim = .importing
        return true
    }

    /// The helper's import is done (`succeeded`) or failed before any row: on failure the
    /// leader reads the half itself.
    func imported(_ succeeded: Bool) {
        condition.lock()
        claim = succeeded ? .helper : .leader
        condition.broadcast()
        condition.unlock()
    }

    /// Holds one of the helper's batches for the leader, waiting while `heldBatches` wait;
    /// false once the leader stopped (its client left or stalled, or it failed).
    func hold(_ bytes: [UInt8], records: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while batches.count >= Self.heldBatches && !stopped { condition.wait() }
        guard !stopped else { return false }
        batches.append((bytes, records))
        condition.broadcast()
        return true
    }

    /// The helper's end: its versions, or the error that stopped it.
    func helperEnded(versions: [(RecordKey, String)], failure: Error?) {
        condition.lock()
        helperVersions = versions
        self.failure = failure
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    // MARK: The leader's side

    /// Before the second half, on the leader's connection: true when the leader reads it.
    /// While the helper imports the snapshot this waits (the leader's transaction, which
    /// exported it, must stay open until then).
    func leaderTakesSecondHalf() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if claim == .open { claim = .leader }
        while claim == .importing { condition.wait() }
        return claim == .leader
    }

    /// Passes on the batches the helper holds now; false when the client said stop.
    func forward(to sink: LineSink, until deadline: DispatchTime) -> Bool {
        while let (bytes, records) = take(waiting: false) {
            guard pass(bytes, records, to: sink, until: deadline) else { return false }
        }
        return true
    }

    /// The leader stopped because the read ran past its deadline (`--bulk-timeout`).
    private(set) var expired = false

    /// Sends one of the helper's batches on; false (and the helper stopped) when the client
    /// said stop or the deadline has passed.
    private func pass(_ bytes: [UInt8], _ records: Int, to sink: LineSink, until deadline: DispatchTime) -> Bool {
        let goOn = sink.send(bytes)
        forwarded += records  // the client has them, unless it left
        if goOn && DispatchTime.now() >= deadline { expired = true }
        guard goOn && !expired else {
            stop()
            return false
        }
        return true
    }

    /// After the leader's own rows: passes on the helper's until it ends, and throws what
    /// stopped it. Returns the helper's versions, as many as fit after the leader's `held`
    /// under `ReadVersions.limit`.
    func drain(to sink: LineSink, after held: Int, until deadline: DispatchTime) throws -> [(RecordKey, String)] {
        condition.lock()
        let helping = claim == .helper && !stopped
        condition.unlock()
        guard helping else { return [] }
        while let (bytes, records) = take(waiting: true) {
            guard pass(bytes, records, to: sink, until: deadline) else { return [] }
        }
        condition.lock()
        defer { condition.unlock() }
        if let failure {
            // Past the deadline, PostgreSQL's own limit (five seconds later) is what stopped it.
            guard DispatchTime.now() < deadline else {
                expired = true
                return []
            }
            throw failure
        }
        return Array(helperVersions.prefix(max(0, ReadVersions.limit - held)))
    }

    /// The leader stops (its client left or stalled, or it failed): a helper not yet begun
    /// never begins, one reading stops at its next batch.
    func stop() {
        condition.lock()
        stopped = true
        batches.removeAll()
        condition.broadcast()
        condition.unlock()
    }

    /// The next batch held; with `waiting`, waits for one until the helper ends (nil then).
    private func take(waiting: Bool) -> (bytes: [UInt8], records: Int)? {
        condition.lock()
        defer { condition.unlock() }
        while batches.isEmpty && waiting && !ended && !stopped { condition.wait() }
        guard !batches.isEmpty else { return nil }
        condition.broadcast()
        return batches.removeFirst()
    }
}

/// The helper's batches go to the leader through its `SplitRead`, with the records each holds.
final class SplitSink: LineSink {
    private let split: SplitRead
    /// Records the helper has written to its batch so far (the helper's thread only).
    var records = 0
    private var held = 0

    init(_ split: SplitRead) { self.split = split }

    func send(_ lines: [UInt8]) -> Bool {
        defer { held = records }
        return split.hold(lines, records: records - held)
    }

    // The leader's sink says these; the helper stops when the leader does.
    var stalled: Bool { false }
    var stopping: Bool { false }
    var left: Bool { false }
}
