import Foundation

/// A bounded pool of PostgreSQL connections, each owned by its own worker thread.
///
/// libpq calls block, so they never run on the threads that serve sockets nor on Swift's
/// cooperative pool: a job submitted here runs on a worker thread with that worker's
/// connection. Connections open lazily and are replaced when they break, so the pool
/// reconnects by itself after PostgreSQL comes back.
public final class ConnectionPool: @unchecked Sendable {  // all state guarded by `condition`
    public typealias Job = @Sendable (Result<Lease, PostgresError>) -> Void

    public struct Statistics: Sendable {
        public var size: Int
        public var open: Int
        public var busy: Int
        public var queued: Int
    }

    public let size: Int
    private let conninfo: String
    private let setup: [String]
    private let condition = NSCondition()
    private var queue: [Job] = []
    private var queueHead = 0
    private var openCount = 0
    private var busyCount = 0
    private var stopping = false
    private var workers: [Thread] = []
    private var running = 0

    /// - Parameters:
    ///   - setup: statements run once on each new connection (session settings).
    public init(conninfo: String, size: Int, setup: [String] = []) {
        precondition(size > 0, "pool size must be positive")
        self.conninfo = conninfo
        self.size = size
        self.setup = setup
        for index in 0..<size {
            let thread = Thread { [unowned self] in self.work() }
            thread.name = "pg-\(index)"
            thread.stackSize = 1 << 20
            workers.append(thread)
        }
        running = size
        workers.forEach { $0.start() }
    }

    /// Queues `job`; it runs on a worker thread with a healthy connection, or with the error
    /// that prevented connecting. The job must leave the connection outside any transaction.
    public func submit(_ job: @escaping Job) {
        condition.lock()
        if stopping {
            condition.unlock()
            job(.failure(PostgresError(kind: .connection, message: "the server is shutting down")))
            return
        }
        queue.append(job)
        condition.signal()
        condition.unlock()
    }

    public var statistics: Statistics {
        condition.lock()
        defer { condition.unlock() }
        return Statistics(size: size, open: openCount, busy: busyCount, queued: queue.count - queueHead)
    }

    /// Lets queued jobs finish, then closes every connection and joins the workers.
    public func shutdown() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// The next job for a worker; `finished` says the worker's previous job is done (one lock
    /// round per job instead of two).
    private func nextJob(finished: Bool) -> Job? {
        condition.lock()
        defer { condition.unlock() }
        if finished { busyCount -= 1 }
        while queueHead == queue.count && !stopping { condition.wait() }
        guard queueHead < queue.count else { return nil }
        let job = queue[queueHead]
        queueHead += 1
        if queueHead > 1024 && queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        busyCount += 1
        return job
    }

    /// A connection used this recently is taken as alive without probing its socket: one
    /// syscall less per job under load, while one idle across a restart is still probed.
    private static let probeAfterIdleNanoseconds: UInt64 = 100_000_000

    private func work() {
        var connection: Connection?
        var lastUsed: UInt64 = 0
        var finished = false
        while let job = nextJob(finished: finished) {
            finished = true
            let now = DispatchTime.now().uptimeNanoseconds
            if let conn = connection, now - lastUsed > Self.probeAfterIdleNanoseconds || !conn.isHealthy,
               !conn.isAliveWhileIdle() {
                connection = nil
                adjustOpen(-1)
            }
            if connection == nil {
                do {
                    connection = try open()
                    adjustOpen(+1)
                } catch {
                    job(.failure(error))
                    continue
                }
            }
            let lease = Lease(connection: connection!, open: open)
            job(.success(lease))
            connection = lease.connection  // the job may have replaced a broken one
            if let conn = connection, conn.isHealthy, conn.inTransaction {
                _ = try? conn.execute("ROLLBACK")  // a job that forgot: never leak a transaction
            }
            lastUsed = DispatchTime.now().uptimeNanoseconds
        }
        if connection != nil { adjustOpen(-1) }
        connection?.close()
        condition.lock()
        running -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// A new connection with the pool's session settings.
    private func open() throws(PostgresError) -> Connection {
        let fresh = try Connection(conninfo)
        for statement in setup { try fresh.execute(statement) }
        return fresh
    }

    private func adjustOpen(_ delta: Int) {
        condition.lock()
        openCount += delta
        condition.unlock()
    }
}

/// A pooled connection lent to one job, on the worker thread that owns it. A job whose
/// connection broke may replace it (`reconnect`) to try again or to ask about a transaction
/// whose COMMIT got no answer; the worker keeps the new one.
public final class Lease {
    public private(set) var connection: Connection
    private let open: () throws(PostgresError) -> Connection

    init(connection: Connection, open: @escaping () throws(PostgresError) -> Connection) {
        self.connection = connection
        self.open = open
    }

    /// A fresh connection in place of the current one.
    @discardableResult
    public func reconnect() throws(PostgresError) -> Connection {
        let fresh = try open()
        if connection.isHealthy { connection.close() }
        connection = fresh
        return fresh
    }
}
