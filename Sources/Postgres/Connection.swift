#if canImport(Glibc)
import Glibc
#endif
import CLibPQ
import Foundation

/// One libpq connection. Not thread-safe: libpq forbids two threads on one `PGconn`, so a
/// `Connection` is confined to whichever thread currently owns it (a pool worker, at most one).
/// `PQfinish` happens in `close()` and nowhere else.
public final class Connection {
    private var handle: OpaquePointer?
    private var cachedCanceller: Canceller?
    /// SQL text -> name of its prepared statement on this connection.
    private var prepared: [String: String] = [:]
    /// Numbers prepared statements, never reused on one connection: names forgotten while a
    /// transaction was aborted (DEALLOCATE cannot run there) must not collide.
    private var preparedSerial = 0
    /// Statements forgotten but still prepared server-side: deallocated at the next chance.
    private var preparedStale = false
    /// Beyond this many, the cache is dropped (DEALLOCATE ALL) and starts again.
    public static let preparedLimit = 512
    /// What session settings the owner applied, as the owner names them (recordsd: the
    /// identity its work runs as). A new connection has none; `close` forgets them.
    public var settingsTag: String?

    /// Connects with a URL (`postgresql://...`) or a conninfo string (`host=... dbname=...`).
    /// An empty string uses libpq's `PG*` environment variables.
    /// Defaults that the string may override: a 5 s connect timeout, application_name recordsd.
    /// The client encoding is always UTF8, whatever the database's: the protocol is UTF-8.
    public init(_ conninfo: String, applicationName: String = "recordsd") throws(PostgresError) {
        // With expand_dbname, later keywords override earlier ones: defaults go first.
        let keywords = ["connect_timeout", "application_name", "dbname", "client_encoding"]
        let values = ["5", applicationName, conninfo, "UTF8"]
        let conn = withCStrings(keywords) { keys in
            withCStrings(values) { vals in PQconnectdbParams(keys, vals, 1) }
        }
        handle = conn
        guard let conn, PQstatus(conn) == CONNECTION_OK else {
            let message = conn.map { Self.errorMessage($0) } ?? "out of memory"
            close()
            throw PostgresError(kind: .connection, message: message)
        }
        // Server notices (e.g. "relation already exists, skipping") would go to stderr raw.
        PQsetNoticeProcessor(conn, { _, _ in }, nil)
    }

    deinit { close() }

    /// What a server says to a connection attempt, without signing in (libpq's PQping).
    public enum Answer: Sendable {
        /// It accepts connections: a failed sign-in was the password's, database's or role's.
        case accepting
        /// It answers but accepts none now (starting up, shutting down, too many clients).
        case rejecting
        /// Nothing answers (down, unreachable).
        case noResponse
        /// The connection string cannot be used: libpq did not try.
        case badParameters
    }

    public static func ping(_ conninfo: String) -> Answer {
        let keywords = ["connect_timeout", "dbname"]
        let values = ["5", conninfo]
        let status = withCStrings(keywords) { keys in withCStrings(values) { vals in PQpingParams(keys, vals, 1) } }
        switch status {
        case PQPING_OK: return .accepting
        case PQPING_REJECT: return .rejecting
        case PQPING_NO_ATTEMPT: return .badParameters
        default: return .noResponse
        }
    }

    public func close() {
        if let handle { PQfinish(handle) }
        handle = nil
        cachedCanceller = nil
        prepared.removeAll()
        preparedStale = false
        settingsTag = nil
    }

    /// False once the connection broke; a pool drops such connections.
    public var isHealthy: Bool {
        guard let handle else { return false }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// Whether an idle connection is still usable, without a round trip. A pooled connection
    /// listens to nothing, so a socket that turned readable while idle holds the news that the
    /// server went away (a restart's "terminating connection", a crash, an idle timeout):
    /// anything to read, or a closed socket, means it must be replaced.
    public func isAliveWhileIdle() -> Bool {
        guard let handle, PQstatus(handle) == CONNECTION_OK else { return false }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return true }
        _ = PQconsumeInput(handle)
        return false
    }

    /// Cancels the statement this connection runs, from any thread (`PQcancel`); made once
    /// per connection.
    public func canceller() -> Canceller? {
        if let cachedCanceller { return cachedCanceller }
        guard let handle, let token = PQgetCancel(handle) else { return nil }
        cachedCanceller = Canceller(token)
        return cachedCanceller
    }

    public var inTransaction: Bool {
        guard let handle else { return false }
        return PQtransactionStatus(handle) != PQTRANS_IDLE
    }

    /// The server's process id, for logs and tests.
    public var backendPID: Int {
        handle.map { Int(PQbackendPID($0)) } ?? 0
    }

    /// The server this connection reached, `host:port` as libpq chose it from the URL's hosts
    /// (the primary, under `target_session_attrs=read-write`).
    public var serverAddress: String {
        guard let handle else { return "" }
        return (PQhost(handle).map { String(cString: $0) } ?? "") + ":" + (PQport(handle).map { String(cString: $0) } ?? "")
    }

    public var socket: Int32 {
        handle.map { PQsocket($0) } ?? -1
    }

    // MARK: - Queries

    /// Runs one statement with its values bound as text parameters ($1, $2, ...).
    /// Values are never spliced into the SQL text.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> QueryResult {
        let conn = try open()
        let raw: OpaquePointer? = withParameters(parameters) { count, values in
            PQexecParams(conn, sql, count, nil, values, nil, nil, 0)
        }
        return try check(raw)
    }

    /// Like `query`, through a prepared statement kept per connection: the statement is parsed
    /// and planned once, then only bound and executed. For the SQL a server runs again and
    /// again (reads by the same shape).
    @discardableResult
    public func queryPrepared(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> QueryResult {
        let conn = try open()
        let name = try preparedName(sql, parameters: parameters.count)
        let raw: OpaquePointer? = withParameters(parameters) { count, values in
            PQexecPrepared(conn, name, count, values, nil, nil, 0)
        }
        do {
            return try check(raw)
        } catch {
            // A schema change can invalidate a cached plan's result type: prepare afresh once.
            if error.sqlState?.rawValue == "0A000" {
                forgetPreparedStatements()
                return try query(sql, parameters)
            }
            throw error
        }
    }

    /// Every statement is prepared afresh, the old ones deallocated once outside a
    /// transaction: after a schema change invalidated a cached plan's result type (SQLSTATE
    /// 0A000), or a role's bypass of row-level security changed (`ConnectionPool`).
    public func forgetPreparedStatements() {
        prepared.removeAll()
        preparedStale = true
    }

    /// A name never used on this connection: a plan invalidated inside an aborted transaction
    /// keeps its name taken.
    private func newPreparedName() -> String {
        preparedSerial += 1
        return "r\(preparedSerial)"
    }

    /// The name `sql` is prepared under on this connection, preparing it the first time.
    private func preparedName(_ sql: String, parameters: Int) throws(PostgresError) -> String {
        if let known = prepared[sql] { return known }
        let conn = try open()
        if (preparedStale || prepared.count >= Self.preparedLimit) && PQtransactionStatus(conn) == PQTRANS_IDLE {
            try execute("DEALLOCATE ALL")
            prepared.removeAll()
            preparedStale = false
        }
        let name = newPreparedName()
        _ = try check(PQprepare(conn, name, sql, Int32(parameters), nil))
        prepared[sql] = name
        return name
    }

    /// Runs a script of several statements without parameters (migrations, BEGIN/COMMIT).
    @discardableResult
    public func execute(_ script: String) throws(PostgresError) -> QueryResult {
        let conn = try open()
        return try check(PQexec(conn, script))
    }

    /// Runs `body` inside BEGIN ... COMMIT; any error rolls back and is rethrown.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            if isHealthy { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Runs `COPY ... TO STDOUT` (text format), calling `rows` with each row's line as it
    /// arrives (its line feed included; `CopyRow` splits it where the caller needs its
    /// fields), so a result of any size flows through in constant memory: libpq reads the
    /// socket only as rows are asked for, and a caller that waits holds PostgreSQL back through
    /// TCP. `rows` returns false to stop early. The statement is allowed `timeout` milliseconds
    /// in all (in the caller's transaction when there is one, else in one of its own); while
    /// this side waits for it, PostgreSQL gets `silence` milliseconds to send more (it flushes
    /// about 8 KB at a time), else the statement is cancelled: a runaway query is stopped as
    /// soon as a read's would be, a slow client counts against `timeout` only.
    ///
    /// COPY rather than a query's rows: libpq hands over a row as one allocation, where
    /// single-row mode builds a whole result a row (its column descriptions copied, name by
    /// name); measured on 10⁶ rows that was half this side's CPU. PostgreSQL spends about the
    /// same on either. COPY takes no parameters: `sql` has its values inlined.
    /// See https://www.postgresql.org/docs/15/libpq-copy.html
    ///
    /// The statements are chosen once the snapshot they will see is known: with `snapshot`,
    /// outside a transaction, the stream runs in a REPEATABLE READ transaction whose snapshot
    /// (`pg_current_snapshot()`'s text, `xmin:xmax:xip,...`) is read first, in the same round
    /// trip as BEGIN, and handed to `statements`; the rows streamed are exactly those that
    /// snapshot sees. Otherwise `statements` is given nil. `probes`, expressions of one value
    /// each with their values inlined, are asked in that round trip too, in the transaction
    /// the stream runs in, and their values handed to `statements` second. With `importing`
    /// (an id `pg_export_snapshot()` gave another transaction, still open), the stream runs in
    /// a REPEATABLE READ transaction that sees that transaction's snapshot. `lockTimeout`
    /// (milliseconds) bounds the first round trip's waits for locks (its probes').
    ///
    /// `statements` may give several COPYs, streamed one after another in the one transaction;
    /// `next(i)`, asked before the i-th (from 1), may skip it.
    public func streamCopy(timeout: Int, silence: Int, snapshot: Bool, probes: [String] = [], importing: String? = nil, lockTimeout: Int? = nil,
                           statements: (_ snapshot: String?, _ probed: [String?]) throws(PostgresError) -> [String],
                           next: (Int) -> Bool = { _ in true },
                           rows: (UnsafeRawBufferPointer) -> Bool) throws(PostgresError) {
        let ownTransaction = !inTransaction
        let snapshotted = snapshot && ownTransaction
        let asked = (snapshotted ? ["pg_current_snapshot()::text"] : []) + probes.map { "(" + $0 + ")" }
        let begin = if let importing, ownTransaction {
            "BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT \(try escapeLiteral(importing)); "
        } else {
            snapshotted ? "BEGIN ISOLATION LEVEL REPEATABLE READ; " : ownTransaction ? "BEGIN; " : ""
        }
        let locks = lockTimeout.map { "; SET LOCAL lock_timeout = \(max(1, $0))" } ?? ""
        let started = try execute(begin + "SET LOCAL statement_timeout = \(max(0, timeout))" + locks
                                  + (asked.isEmpty ? "" : "; SELECT " + asked.joined(separator: ", ")))
        do throws(PostgresError) {
            let first = snapshotted ? 1 : 0
            let sqls = try statements(snapshotted ? started.string(0, 0) : nil, probes.indices.map { started.string(0, first + $0) })
            streaming: for (index, sql) in sqls.enumerated() where index == 0 || next(index) {
                switch try copyOut(sql, silence: silence, rows: rows) {
                case .done: continue streaming
                case .stopped: break streaming
                case .closed: return
                }
            }
            if ownTransaction { try execute("COMMIT") }
        } catch {
            if ownTransaction && isHealthy { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// How one COPY of a stream ended.
    private enum CopyEnd {
        /// Every row was handed over.
        case done
        /// `rows` said stop; the connection is still in the transaction.
        case stopped
        /// `rows` said stop long before the end: the connection was closed instead.
        case closed
    }

    /// One COPY of `streamCopy`, each row handed to `rows`.
    private func copyOut(_ sql: String, silence: Int, rows: (UnsafeRawBufferPointer) -> Bool) throws(PostgresError) -> CopyEnd {
        let conn = try open()
        guard PQsendQuery(conn, sql) == 1 else { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
        var cancelled = false
        if !Self.resultArrives(conn, within: silence) {
            cancel()  // answered by the statement's error, 57014
            cancelled = true
        }
        guard let first = PQgetResult(conn) else { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
        let start = QueryResult(owning: first)
        if start.status != PGRES_COPY_OUT {
            let failure = withExtendedLifetime(start) {
                start.status == PGRES_FATAL_ERROR ? Self.error(from: first, connection: conn)
                    : PostgresError(kind: .unexpected, message: "COPY did not start")
            }
            while let raw = PQgetResult(conn) { _ = QueryResult(owning: raw) }
            throw failure
        }
        var wanted = true
        var skipped = 0
        copying: while true {
            var buffer: UnsafeMutablePointer<CChar>?
            let length = PQgetCopyData(conn, &buffer, 1)
            if length == 0 {
                // No whole row buffered yet (asynchronous mode), or the connection broke:
                // libpq then says 0 again, never -2, and has closed its socket.
                if PQstatus(conn) != CONNECTION_OK { break copying }
                if !Self.readable(conn, within: cancelled ? -1 : silence) {
                    cancel()
                    cancelled = true
                }
                continue
            }
            guard length > 0, let buffer else { break copying }  // -1: done, the result follows; -2: broken
            defer { PQfreemem(buffer) }
            if wanted {
                wanted = rows(UnsafeRawBufferPointer(start: buffer, count: Int(length)))
            } else {
                // A few more rows (LIMIT n+1's last) are read and dropped; past those, the
                // connection is closed: PostgreSQL stops at its next send, and no cancel
                // request can reach a later statement.
                skipped += 1
                if skipped > Self.rowsReadAfterStop {
                    close()
                    return .closed
                }
            }
        }
        var failure: PostgresError?
        while let raw = PQgetResult(conn) {
            let result = QueryResult(owning: raw)
            withExtendedLifetime(result) {
                if result.status != PGRES_COMMAND_OK && failure == nil { failure = Self.error(from: raw, connection: conn) }
            }
        }
        // A caller that stopped has its answer: an error after it (a cancel) changes nothing.
        if let failure, wanted { throw failure }
        if PQstatus(conn) != CONNECTION_OK { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
        return wanted ? .done : .stopped
    }

    /// Rows a stopped stream still reads before it closes the connection instead.
    static let rowsReadAfterStop = 1000

    /// Whether a result can be taken without blocking, waiting for PostgreSQL's next bytes at
    /// most `milliseconds` of silence; true too when the connection broke (`PQgetResult` says so).
    private static func resultArrives(_ conn: OpaquePointer, within milliseconds: Int) -> Bool {
        while PQisBusy(conn) == 1 {
            var descriptor = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(clamping: max(1, milliseconds)))
            if ready == 0 { return false }
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 || PQconsumeInput(conn) == 0 { return true }
        }
        return true
    }

    /// Waits at most `milliseconds` (-1: as long as it takes) for bytes on the socket and
    /// takes them in; false when none came. True too when the connection broke (libpq says so
    /// next).
    private static func readable(_ conn: OpaquePointer, within milliseconds: Int) -> Bool {
        while true {
            // No socket: the connection broke and libpq closed it (poll would wait forever).
            guard PQsocket(conn) >= 0 else { return true }
            var descriptor = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, milliseconds < 0 ? -1 : Int32(clamping: max(1, milliseconds)))
            if ready == 0 { return false }
            if ready < 0 && errno == EINTR { continue }
            _ = PQconsumeInput(conn)
            return true
        }
    }

    // MARK: - COPY

    /// What feeds `copyIn` next: more data, the end, or an abort that loads nothing.
    public enum CopyChunk {
        case data([UInt8])
        case end
        case abort(String)
    }

    /// `COPY ... FROM STDIN` fed chunk by chunk by `next` until it says `.end` (or `.abort`),
    /// so the data never needs to be whole in memory. Returns the rows loaded. On a bad row
    /// PostgreSQL rejects the whole COPY: the error's `context` names the line
    /// ("COPY t, line 5000: ..."). `meanwhile` runs once the data is sent, while PostgreSQL
    /// loads it. See https://www.postgresql.org/docs/15/libpq-copy.html
    public func copyIn(_ sql: String, meanwhile: () -> Void = {}, next: () -> CopyChunk) throws(PostgresError) -> Int {
        let conn = try open()
        guard let raw = PQexec(conn, sql) else { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
        let start = QueryResult(owning: raw)
        if PQresultStatus(raw) != PGRES_COPY_IN {
            if PQresultStatus(raw) == PGRES_FATAL_ERROR { throw Self.error(from: raw, connection: conn) }
            throw PostgresError(kind: .unexpected, message: "COPY did not start")
        }
        _ = start
        var sendFailed = false
        var abortReason: String?
        feeding: while true {
            switch next() {
            case .data(let bytes):
                // After a failed send the rest is still taken from `next`, so its producer is never left waiting.
                guard !sendFailed, !bytes.isEmpty else { continue }
                let sent = bytes.withUnsafeBytes { raw in
                    PQputCopyData(conn, raw.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(raw.count))
                }
                if sent != 1 { sendFailed = true }
            case .end:
                break feeding
            case .abort(let reason):
                abortReason = reason
                break feeding
            }
        }
        if sendFailed || PQputCopyEnd(conn, abortReason) != 1 { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
        if abortReason == nil { meanwhile() }
        var rows = 0
        var failure: PostgresError?
        while let raw = PQgetResult(conn) {
            let result = QueryResult(owning: raw)
            if PQresultStatus(raw) == PGRES_COMMAND_OK {
                rows = result.affectedRows
            } else if failure == nil {
                failure = Self.error(from: raw, connection: conn)
                failure?.context = PQresultErrorField(raw, CLibPQ_DIAG_CONTEXT).map { String(cString: $0) }
            }
        }
        if let failure { throw failure }
        return rows
    }

    /// `COPY (query) TO STDOUT`: hands each row's bytes (one record, newline-terminated) to
    /// `row` as libpq delivers them. When `row` returns false the query is cancelled and the
    /// rest discarded. Returns the rows delivered.
    @discardableResult
    public func copyOut(_ sql: String, row: (UnsafeRawBufferPointer) -> Bool) throws(PostgresError) -> Int {
        let conn = try open()
        guard let raw = PQexec(conn, sql) else { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
        let start = QueryResult(owning: raw)
        if PQresultStatus(raw) != PGRES_COPY_OUT {
            if PQresultStatus(raw) == PGRES_FATAL_ERROR { throw Self.error(from: raw, connection: conn) }
            throw PostgresError(kind: .unexpected, message: "COPY did not start")
        }
        _ = start
        var count = 0
        var wanted = true
        while true {
            var buffer: UnsafeMutablePointer<CChar>?
            let length = PQgetCopyData(conn, &buffer, 0)
            if length < 0 { break }  // -1: done, the result follows; -2: broken
            if let buffer {
                if wanted {
                    count += 1
                    if !row(UnsafeRawBufferPointer(start: buffer, count: Int(length))) {
                        wanted = false
                        cancel()
                    }
                }
                PQfreemem(buffer)
            }
        }
        var failure: PostgresError?
        while let raw = PQgetResult(conn) {
            let result = QueryResult(owning: raw)
            if PQresultStatus(raw) != PGRES_COMMAND_OK && failure == nil { failure = Self.error(from: raw, connection: conn) }
            _ = result
        }
        if let failure, wanted { throw failure }
        if PQstatus(conn) != CONNECTION_OK { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
        return count
    }

    /// Asks PostgreSQL to cancel the statement running on this connection (best effort).
    public func cancel() {
        canceller()?.cancel()
    }

    /// `text` as a safely quoted SQL literal (`PQescapeLiteral`: this connection's encoding and
    /// settings decide the escaping), for statements that cannot take parameters, like COPY.
    public func escapeLiteral(_ text: String) throws(PostgresError) -> String {
        let conn = try open()
        let escaped = text.withCString { PQescapeLiteral(conn, $0, strlen($0)) }
        guard let escaped else { throw PostgresError(kind: .unexpected, message: Self.errorMessage(conn)) }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }

    // MARK: - Pipeline

    /// A statement of a pipeline failed; the ones after it were not run.
    public struct PipelineFailure: Error {
        public var index: Int
        public var error: PostgresError
    }

    /// Sends every statement at once and reads their results (libpq's pipeline mode): one
    /// round trip for the lot. Statements must return small results (the connection blocks
    /// while sending). After a failure, PostgreSQL skips the rest up to the end of the pipeline.
    /// Those `prepared` says are sent as statements prepared once per connection (as
    /// `queryPrepared`): parsed and planned the first time, only bound and executed after.
    /// See https://www.postgresql.org/docs/15/libpq-pipeline-mode.html
    /// `meanwhile` runs once the statements are sent, before their results are read: work
    /// of the caller's that overlaps PostgreSQL's.
    public func pipeline(_ statements: [(sql: String, parameters: [String?])],
                         prepared: (Int) -> Bool = { _ in false }, meanwhile: () -> Void = {}) throws -> [QueryResult] {
        var results: [QueryResult] = []
        results.reserveCapacity(statements.count)
        try pipelined(statements, prepared: prepared, meanwhile: meanwhile) { results.append($1) }
        return results
    }

    /// `pipeline` of statements all prepared, each result handed to `each` as it arrives (one
    /// held at a time, however large): the reads a client pipelines reach PostgreSQL in one
    /// round trip, each planned once. A failed statement throws `PipelineFailure` after the
    /// results before it were handed over.
    public func pipelinePrepared(_ statements: [(sql: String, parameters: [String?])],
                                 each: (Int, QueryResult) throws -> Void) throws {
        try pipelined(statements, prepared: { _ in true }, each: each)
    }

    /// How a statement of a pipeline goes: as text, or under a prepared name, preparing it
    /// first in the same pipeline when this connection has not yet (so a statement PostgreSQL
    /// refuses to prepare fails at its place, after the ones before it ran).
    private enum Sending {
        case text
        case prepared(name: String, prepare: Bool)
    }

    /// Sends the statements and one sync, then hands each statement's result to `each` in
    /// order, up to the first that failed.
    private func pipelined(_ statements: [(sql: String, parameters: [String?])], prepared isPrepared: (Int) -> Bool,
                           meanwhile: () -> Void = {}, each: (Int, QueryResult) throws -> Void) throws {
        let conn = try open()
        guard !statements.isEmpty else { return meanwhile() }
        let fresh = Set(statements.indices.filter { isPrepared($0) && self.prepared[statements[$0].sql] == nil }.map { statements[$0].sql })
        if (preparedStale || (!fresh.isEmpty && self.prepared.count + fresh.count > Self.preparedLimit)) && PQtransactionStatus(conn) == PQTRANS_IDLE {
            try execute("DEALLOCATE ALL")  // up front: the names below must all stay valid
            self.prepared.removeAll()
            preparedStale = false
        }
        var naming: [String: String] = [:]
        let sending = statements.indices.map { index -> Sending in
            let sql = statements[index].sql
            guard isPrepared(index) else { return .text }
            if let name = self.prepared[sql] ?? naming[sql] { return .prepared(name: name, prepare: false) }
            let name = newPreparedName()
            naming[sql] = name
            return .prepared(name: name, prepare: true)
        }
        guard PQenterPipelineMode(conn) == 1 else { throw PostgresError(kind: .unexpected, message: Self.errorMessage(conn)) }
        // A pipeline cut short (the server went away mid-way) cannot leave pipeline mode: the
        // connection is closed then, so it is replaced, never used again half in a pipeline.
        defer { if PQexitPipelineMode(conn) != 1 { close() } }
        for (index, statement) in statements.enumerated() {
            let sent = withParameters(statement.parameters) { count, values -> Int32 in
                switch sending[index] {
                case .text:
                    return PQsendQueryParams(conn, statement.sql, count, nil, values, nil, nil, 0)
                case .prepared(let name, let prepare):
                    if prepare, PQsendPrepare(conn, name, statement.sql, count, nil) != 1 { return 0 }
                    return PQsendQueryPrepared(conn, name, count, values, nil, nil, 0)
                }
            }
            guard sent == 1 else { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
        }
        guard PQpipelineSync(conn) == 1 else { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
        // Sent (libpq flushes at the sync; what did not fit waits for the reads below).
        meanwhile()
        var failure: PipelineFailure?
        var handing: Error?
        /// The last result of one sent command, read up to its end (a failure is noted).
        func next(_ index: Int) throws -> QueryResult {
            var last: QueryResult?
            while let raw = PQgetResult(conn) {
                let result = QueryResult(owning: raw)
                switch PQresultStatus(raw) {
                case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_PIPELINE_ABORTED: break
                default:
                    if failure == nil { failure = PipelineFailure(index: index, error: Self.error(from: raw, connection: conn)) }
                }
                last = result
            }
            guard let last else { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
            return last
        }
        for index in statements.indices {
            if case .prepared(let name, true) = sending[index] {
                // Known from now on only if PostgreSQL prepared it (not skipped, not refused).
                if try next(index).status == PGRES_COMMAND_OK { self.prepared[statements[index].sql] = name }
            }
            let last = try next(index)
            // Past a failure (or a consumer's error) the rest is read and dropped, up to the sync.
            if failure == nil && handing == nil {
                do { try each(index, last) } catch { handing = error }
            }
        }
        // The synchronization point ends the pipeline.
        while let raw = PQgetResult(conn) {
            let status = QueryResult(owning: raw).status
            if status == PGRES_PIPELINE_SYNC { break }
        }
        if let handing { throw handing }
        if let failure {
            // A schema change invalidated a cached plan's result type: prepare afresh.
            if failure.error.sqlState?.rawValue == "0A000" { forgetPreparedStatements() }
            throw failure
        }
        if PQstatus(conn) != CONNECTION_OK { throw PostgresError(kind: .connection, message: Self.errorMessage(conn)) }
    }

    // MARK: - Notifications

    public struct Notification: Sendable {
        public var channel: String
        public var payload: String
        public var pid: Int
    }

    /// Reads what the socket has and returns the notifications received since the last call.
    public func drainNotifications() throws(PostgresError) -> [Notification] {
        let conn = try open()
        if PQconsumeInput(conn) == 0 {
            throw PostgresError(kind: .connection, message: Self.errorMessage(conn))
        }
        var received: [Notification] = []
        while let note = PQnotifies(conn) {
            received.append(Notification(
                channel: String(cString: note.pointee.relname),
                payload: String(cString: note.pointee.extra),
                pid: Int(note.pointee.be_pid)))
            PQfreemem(note)
        }
        return received
    }

    // MARK: - Internals

    private func open() throws(PostgresError) -> OpaquePointer {
        guard let handle else {
            throw PostgresError(kind: .connection, message: "connection is closed")
        }
        return handle
    }

    /// Takes ownership of `raw` (unless `owned` already has it) and throws its error, if any.
    private func check(_ raw: OpaquePointer?, owned: QueryResult? = nil) throws(PostgresError) -> QueryResult {
        guard let conn = handle else {
            throw PostgresError(kind: .connection, message: "connection is closed")
        }
        guard let raw else {
            throw PostgresError(kind: PQstatus(conn) == CONNECTION_OK ? .unexpected : .connection,
                                message: Self.errorMessage(conn))
        }
        let result = owned ?? QueryResult(owning: raw)
        switch PQresultStatus(raw) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            return result
        default:
            throw Self.error(from: raw, connection: conn)
        }
    }

    static func error(from result: OpaquePointer, connection: OpaquePointer) -> PostgresError {
        func field(_ code: Int32) -> String? {
            PQresultErrorField(result, code).map { String(cString: $0) }
        }
        let state = field(CLibPQ_DIAG_SQLSTATE).map(SQLState.init(rawValue:))
        let broken = PQstatus(connection) != CONNECTION_OK
        var message = field(CLibPQ_DIAG_MESSAGE_PRIMARY)
            ?? String(cString: PQresultErrorMessage(result)).libpqMessageAsOneLine()
        if message.isEmpty { message = errorMessage(connection) }
        return PostgresError(
            kind: broken || state == nil ? .connection : .server,
            sqlState: state, message: message,
            detail: field(CLibPQ_DIAG_MESSAGE_DETAIL), hint: field(CLibPQ_DIAG_MESSAGE_HINT),
            schema: field(CLibPQ_DIAG_SCHEMA_NAME), table: field(CLibPQ_DIAG_TABLE_NAME), column: field(CLibPQ_DIAG_COLUMN_NAME),
            constraint: field(CLibPQ_DIAG_CONSTRAINT_NAME))
    }

    static func errorMessage(_ conn: OpaquePointer) -> String {
        String(cString: PQerrorMessage(conn)).libpqMessageAsOneLine()
    }
}

extension String {
    /// libpq's message as one line: it writes a message a line, and goes on with a line of a
    /// message indented by a tab ("server closed the connection unexpectedly\n\tThis probably
    /// means..."). A continued line joins with a space, the next message follows a "; ", and
    /// the last line break goes: a reply's status line then holds no escaped break or tab.
    public func libpqMessageAsOneLine() -> String {
        var out = ""
        var pendingBreak = false
        var index = startIndex
        while index < endIndex {
            let character = self[index]
            index = self.index(after: index)
            if character.isNewline {
                pendingBreak = true
                continue
            }
            if pendingBreak {
                pendingBreak = false
                if character == "\t" || character == " " {
                    // A continuation: its indent becomes one space.
                    while index < endIndex, self[index] == "\t" || self[index] == " " { index = self.index(after: index) }
                    out.append(" ")
                    continue
                }
                if !out.isEmpty { out.append("; ") }
            }
            out.append(character == "\t" ? " " : character)
        }
        while out.last == " " { out.removeLast() }
        return out
    }
}

/// Calls `body` with a C array of C strings that lives for the duration of the call.
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafePointer<CChar>?] = strings.map { UnsafePointer(strdup($0)) }
    pointers.append(nil)
    defer { for p in pointers { free(UnsafeMutablePointer(mutating: p)) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// Calls `body` with libpq's parameter array: NULL pointers stand for SQL NULL.
func withParameters<R>(_ parameters: [String?], _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    if parameters.isEmpty { return body(0, nil) }
    let pointers: [UnsafePointer<CChar>?] = parameters.map { $0.map { UnsafePointer(strdup($0)) } ?? nil }
    defer { for p in pointers { free(UnsafeMutablePointer(mutating: p)) } }
    return pointers.withUnsafeBufferPointer { body(Int32(parameters.count), $0.baseAddress) }
}

/// Cancels the statement a connection runs, from any thread: libpq's `PGcancel` is made for
/// that (`PQcancel` is thread-safe). The only owner of its `PGcancel`.
public final class Canceller: @unchecked Sendable {  // `token` used only under `lock`
    private let lock = NSLock()
    private let token: OpaquePointer

    init(_ token: OpaquePointer) { self.token = token }
    deinit { PQfreeCancel(token) }

    /// Best effort: the statement may finish first.
    public func cancel() {
        lock.lock()
        defer { lock.unlock() }
        var message = [CChar](repeating: 0, count: 256)
        _ = PQcancel(token, &message, Int32(message.count))
    }
}
