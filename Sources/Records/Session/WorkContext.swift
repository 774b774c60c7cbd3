import Foundation
import Postgres
import RecordsProtocol

/// A worker's side of one pool job: the leased connection, the sink for streamed lines, and
/// the keys earlier works of the same job gave pending inserts (reads batched in one job see
/// the same ids).
public final class WorkContext {
    public let lease: Lease
    public let sink: LineSink
    private let counting: CountingSink
    /// Bytes the works of this job have streamed so far (their records, not their replies).
    var streamedBytes: Int { counting.bytes }
    let settings: WorkSettings
    var assigned: [String: AssignedKey] = [:]
    /// Who the work runs as (row-level security); applied again on a fresh connection.
    var identity = Identity.anonymous
    /// Runs a job on another pooled connection if one is free now (`ConnectionPool.submitIfIdle`),
    /// else says false: a large read may take a second connection (`SplitRead`).
    let lend: ((@escaping ConnectionPool.Job) -> Bool)?

    public init(lease: Lease, sink: LineSink, settings: WorkSettings, lend: ((@escaping ConnectionPool.Job) -> Bool)? = nil) {
        self.lease = lease
        let counting = CountingSink(sink)
        self.counting = counting
        self.sink = counting
        self.settings = settings
        self.lend = lend
    }

    public var connection: Connection { lease.connection }

    /// A fresh connection in place of a dead one, carrying the same identity.
    func reconnect() throws {
        try lease.reconnect()
        try assumeIdentity()
    }

    /// The connection runs as `identity` from now on. A database role that cannot be taken
    /// (dropped, or not granted to the server's login) refuses the work, saying which.
    func assumeIdentity() throws {
        let connection = self.connection, identity = self.identity
        guard case .failure(let error) = Result(catching: { () throws(PostgresError) in try connection.assume(identity) }) else { return }
        guard error.kind != .connection else { throw error }
        throw CommandError(.forbidden, "\(identity.user)'s database role \(identity.databaseRole ?? "-") cannot be taken: \(error.message)")
    }
}

/// Timeouts and limits the server applies to the database work of every session.
public struct WorkSettings: Sendable {
    /// Seconds a SAVE that could not reach PostgreSQL (nothing committed) is tried again on a
    /// new connection, which itself waits this long for a primary (`ConnectionPool`).
    public var failoverWait = 0
    /// What every pooled connection is set to when it opens: UTC and ISO dates (values read back
    /// as the protocol writes them), reads' statement timeout, and no JIT (compiling a large
    /// predicate ignores cancellation and time limits for minutes; short statements gain little).
    public var connectionSetup: [String] {
        ["SET TIME ZONE 'UTC'", "SET DateStyle TO ISO", "SET statement_timeout = \(readTimeout)", "SET jit = off"]
    }
    /// `statement_timeout` of SAVE's transaction, milliseconds (reads take the connection's own).
    public var saveTimeout = 60_000
    /// `lock_timeout` of SAVE's transaction: how long it waits for a row another one holds.
    public var lockTimeout = 5_000
    /// `statement_timeout` of EXPORT's COPY and IMPORT's, milliseconds.
    public var bulkTimeout = 300_000
    /// `statement_timeout` of reads, milliseconds (the pool's connections are set to it).
    public var readTimeout = 5_000
    /// Seconds a streamed reply (FIND, EXPORT) waits for a client that reads nothing before
    /// it stops and frees its connection.
    public var replyStall = 30
    /// --durable-units: how long a crashed server's sessions wait for RESUME (`--resume-ttl`);
    /// the server keeps its open sessions' states from expiring meanwhile. nil: off.
    public var durableTTL: Int?
    /// Where database work counts what it wrote (SAVE's rows, retries).
    public var metrics: Metrics?
    /// Sequence values taken ahead for SAVEs (nil: each SAVE allocates its keys in its
    /// transaction, a round trip more).
    public var keys: KeyReserve? = KeyReserve()
    public init() {}
}
