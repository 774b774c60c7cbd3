import Foundation

/// A bounded pool of PostgreSQL connections, each owned by its own worker thread.
///
/// libpq calls block, so they never run on the threads that serve sockets nor on Swift's
/// cooperative pool: a job submitted here runs on a worker thread with that worker's
/// connection. Connections open lazily and are replaced when they break, so the pool
/// reconnects by itself after PostgreSQL comes back.
///
/// Which job a free worker takes is `PoolScheduler`'s decision: clients whose jobs give their
/// connection back quickly go first, and slow work (a statement that runs long, a SAVE waiting on
/// a row lock, a FIND streaming to a client that does not read) never takes the last worker.
public final class ConnectionPool: @unchecked Sendable {  // all state guarded by `condition`
    public typealias Job = @Sendable (Result<Lease, PostgresError>) -> Void

    public struct Statistics: Sendable {
        public var size: Int
        public var open: Int
        public var busy: Int
        public var queued: Int
        /// The waits in the queue of the jobs started since the pool began, by `waitBuckets`
        /// (their count is the jobs started, their sum the seconds waited in all).
        public var waits = Histogram(ConnectionPool.waitBuckets)
        /// Workers waiting now for a PostgreSQL that cannot be reached (a failover), and the
        /// seconds all of them waited so, in all.
        public var waitingForServer = 0
        public var serverWaitSeconds: Double = 0
    }

    /// The bounds of the wait histogram, seconds.
    public static let waitBuckets: [Double] = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5]

    public let size: Int
    private let conninfo: String
    private let setup: [String]
    private let condition = NSCondition()
    private var scheduler: PoolScheduler<Job>
    private var waits = Histogram(ConnectionPool.waitBuckets)
    private var openCount = 0
    private var stopping = false
    /// Seconds `open` keeps trying a PostgreSQL that cannot be reached.
    let failoverWait: Double
    /// Workers waiting for a PostgreSQL that cannot be reached (guarded by `condition`).
    private var waitingForServer = 0
    private var serverWaitNanoseconds: UInt64 = 0
    private var workers: [Thread] = []
    private var running = 0
    /// Bumped when every connection's prepared statements must be planned again; each worker
    /// compares it with the one its connection last saw before a job.
    private var planGeneration = 0
    /// The statement each busy worker runs may be cancelled from another thread (shutdown).
    private var cancellers: [Int: Canceller] = [:]
    /// Workers whose current job was cancelled by `cancelRunning`.
    private var cancelled: Set<Int> = []
    /// Workers waiting for a job, the last to finish on top: a job wakes the top one, whose
    /// connection is open and its statements prepared (a shared condition woke the one idle
    /// longest, so a lightly used pool opened a connection for each of its first jobs and kept
    /// every one of them cold).
    private var idle: [Int] = []
    /// What each waiting worker sleeps on.
    private let wakers: [DispatchSemaphore]

    /// - Parameters:
    ///   - setup: statements run once on each new connection (session settings).
    ///   - failoverWait: seconds a connection that cannot be made is tried again before the
    ///     job is told (a formation with no primary for a moment: work pauses instead of failing).
    public init(conninfo: String, size: Int, setup: [String] = [], failoverWait: Double = 0) {
        precondition(size > 0, "pool size must be positive")
        self.conninfo = conninfo
        self.failoverWait = failoverWait
        self.size = size
        self.scheduler = PoolScheduler(size: size)
        self.setup = setup
        self.wakers = (0..<size).map { _ in DispatchSemaphore(value: 0) }
        for index in 0..<size {
            let thread = Thread { [unowned self] in self.work(index) }
            thread.name = "pg-\(index)"
            thread.stackSize = 1 << 20
            workers.append(thread)
        }
        running = size
        workers.forEach { $0.start() }
    }

    /// Queues `job`; it runs on a worker thread with a healthy connection, or with the error
    /// that prevented connecting. The job must leave the connection outside any transaction.
    /// - Parameter standing: how quickly the client's recent jobs gave their connection back.
    public func submit(_ standing: PoolStanding = .proven, streams: Bool = false, _ job: @escaping Job) {
        condition.lock()
        if stopping {
            condition.unlock()
            job(.failure(PostgresError(kind: .connection, message: "the server is shutting down")))
            return
        }
        scheduler.enqueue(job, standing, streams: streams, at: DispatchTime.now().uptimeNanoseconds)
        if let worker = idle.popLast() { wakers[worker].signal() }
        condition.unlock()
    }

    /// Queues `job` (a stream's) only if a worker is free for it now and takes nothing from
    /// anyone: no job waits, a worker is idle, and slow work would still have room for one
    /// more besides (`PoolScheduler`'s reserve untouched). A large read takes a second
    /// connection this way (`SplitRead`). False: not queued.
    public func submitIfIdle(_ job: @escaping Job) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let now = DispatchTime.now().uptimeNanoseconds
        guard !stopping, scheduler.queued == 0, scheduler.slowRunning(now: now) + 1 < size - scheduler.reserve,
              let worker = idle.popLast() else { return false }
        scheduler.enqueue(job, .proven, streams: true, at: now)
        wakers[worker].signal()
        return true
    }

    public var statistics: Statistics {
        condition.lock()
        defer { condition.unlock() }
        return Statistics(size: size, open: openCount, busy: scheduler.busy, queued: scheduler.queued,
                          waits: waits, waitingForServer: waitingForServer, serverWaitSeconds: Double(serverWaitNanoseconds) / 1e9)
    }

    /// Asks PostgreSQL to cancel the statement every busy worker runs (at the shutdown
    /// deadline: each job then answers its client).
    public func cancelRunning() {
        condition.lock()
        let running = Array(cancellers.values)
        cancelled.formUnion(cancellers.keys)
        condition.unlock()
        running.forEach { $0.cancel() }
    }

    /// Lets queued jobs finish, then closes every connection and joins the workers.
    public func shutdown() {
        condition.lock()
        stopping = true
        wakeAll()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// The next job for a worker, as the scheduler decides, with the plan generation it runs
    /// under; `finished` says the worker's previous job is done (one lock round per job
    /// instead of two).
    private func nextJob(worker: Int, finished: Bool) -> (job: Job, plans: Int)? {
        condition.lock()
        defer { condition.unlock() }
        if finished {
            scheduler.finished(worker: worker)
            cancellers[worker] = nil
            cancelled.remove(worker)
            // A worker held back for the reserve may go now.
            if scheduler.queued > 1 { wakeAll() }
        }
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            if let job = scheduler.next(worker: worker, now: now) {
                let queued = scheduler.queuedAt(worker: worker) ?? now
                waits.observe(Double(now &- min(now, queued)) / 1e9, Self.waitBuckets)
                return (job, planGeneration)
            }
            if stopping && scheduler.queued == 0 { return nil }
            // Nothing queued, or held back for the reserve until a running job finishes.
            idle.append(worker)
            condition.unlock()
            wakers[worker].wait()
            condition.lock()
        }
    }

    /// Wakes every waiting worker (each looks at the queue again). Under `condition`.
    private func wakeAll() {
        while let worker = idle.popLast() { wakers[worker].signal() }
    }

    fileprivate func wasCancelled(_ worker: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return cancelled.contains(worker)
    }

    private func register(_ worker: Int, _ canceller: Canceller?) {
        condition.lock()
        cancellers[worker] = canceller
        condition.unlock()
    }

    /// A connection used this recently is taken as alive without probing its socket: one
    /// syscall less per job under load, while one idle across a restart is still probed.
    private static let probeAfterIdleNanoseconds: UInt64 = 100_000_000

    /// Every connection plans its statements again before its next job. PostgreSQL re-plans a
    /// prepared statement when a table changes, not when a role gains or loses BYPASSRLS or
    /// SUPERUSER: a plan made while the server's role bypassed the row-level security
    /// policies has no policy in it, and would show every user every row after the bypass ends.
    public func forgetPreparedStatements() {
        condition.lock()
        planGeneration += 1
        condition.unlock()
    }

    private func work(_ index: Int) {
        var connection: Connection?
        var lastUsed: UInt64 = 0
        var finished = false
        var plans = 0
        while let (job, generation) = nextJob(worker: index, finished: finished) {
            finished = true
            if generation != plans {
                connection?.forgetPreparedStatements()
                plans = generation
            }
            let now = DispatchTime.now().uptimeNanoseconds
            if let conn = connection, now - lastUsed > Self.probeAfterIdleNanoseconds || !conn.isHealthy,
               !conn.isAliveWhileIdle() {
                connection = nil
                adjustOpen(-1)
            }
            if connection == nil {
                switch connect(for: job, worker: index) {
                case .opened(let fresh):
                    connection = fresh
                case .failed(let error):
                    job(.failure(error))
                    continue
                case .givenBack(let later):
                    // Others serve the job; this worker comes back with what it could open.
                    finished = false
                    connection = later
                    continue
                }
            }
            let lease = Lease(connection: connection!, open: { [unowned self] () throws(PostgresError) in try open(patience: failoverWait) },
                              replaced: { [weak self] canceller in self?.register(index, canceller) },
                              cancelled: { [weak self] in self?.wasCancelled(index) ?? false })
            register(index, connection!.canceller())
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

    private enum Connecting {
        case opened(Connection)
        case failed(PostgresError)
        /// The job went back to the queue; the connection this worker opened meanwhile, if any.
        case givenBack(Connection?)
    }

    /// A connection for a worker that has none, counted open. Tried once; when that fails and
    /// other workers have connections, the job goes back to them and this worker keeps trying
    /// apart from the jobs; else the server is waited for up to `failoverWait`.
    private func connect(for job: @escaping Job, worker: Int) -> Connecting {
        let outcome: Connecting
        do {
            outcome = .opened(try open(patience: 0))
        } catch where error.kind == .connection {
            if giveBack(job, worker: worker) {
                outcome = .givenBack(connectWhileOthersServe())
            } else if failoverWait > 0 {
                do { outcome = .opened(try open(patience: failoverWait)) } catch { outcome = .failed(error) }
            } else {
                outcome = .failed(error)
            }
        } catch {
            outcome = .failed(error)
        }
        switch outcome {
        case .opened, .givenBack(.some): adjustOpen(+1)
        case .failed, .givenBack(nil): break
        }
        return outcome
    }

    /// A new connection with the pool's session settings; while PostgreSQL cannot be reached,
    /// tried again for up to `patience` seconds (a primary being promoted), unless the pool is
    /// stopping.
    private func open(patience: Double) throws(PostgresError) -> Connection {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(patience * 1e9)
        var pause: UInt32 = 50_000
        while true {
            do throws(PostgresError) {
                let fresh = try Connection(conninfo)
                for statement in setup { try fresh.execute(statement) }
                return fresh
            } catch where error.kind == .connection && DispatchTime.now().uptimeNanoseconds + UInt64(pause) * 1000 < deadline
                && !condition.withLock({ stopping }) {
                pauseForServer(pause)
                pause = min(pause * 2, 500_000)
            }
        }
    }

    /// Puts `job` back at the head of its lane when another worker has a connection to run
    /// it on: a pool that cannot open one more connection (the server's name does not resolve
    /// for a while, its connection slots are full) serves on those it has, instead of failing
    /// the job after `failoverWait`. False: no other connection, the job stays with the caller.
    private func giveBack(_ job: @escaping Job, worker: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard openCount > 0, !stopping else { return false }
        scheduler.giveBack(job, worker: worker)
        cancellers[worker] = nil
        if let other = idle.popLast() { wakers[other].signal() }
        return true
    }

    /// A worker that gave its job back tries to connect, with growing pauses, while another
    /// worker has a connection; nil once none has (the next job then waits `failoverWait` for
    /// the server) or the pool is stopping.
    private func connectWhileOthersServe() -> Connection? {
        var pause: UInt32 = 100_000
        while true {
            pauseForServer(pause)
            guard condition.withLock({ openCount > 0 && !stopping }) else { return nil }
            if let fresh = try? open(patience: 0) { return fresh }
            pause = min(pause * 2, 1_000_000)
        }
    }

    /// Sleeps `microseconds`, counted as waiting for the server.
    private func pauseForServer(_ microseconds: UInt32) {
        condition.withLock { waitingForServer += 1 }
        usleep(microseconds)
        condition.withLock {
            waitingForServer -= 1
            serverWaitNanoseconds += UInt64(microseconds) * 1000
        }
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
    private let replaced: (Canceller?) -> Void
    private let cancelled: () -> Bool

    init(connection: Connection, open: @escaping () throws(PostgresError) -> Connection,
         replaced: @escaping (Canceller?) -> Void, cancelled: @escaping () -> Bool) {
        self.connection = connection
        self.open = open
        self.replaced = replaced
        self.cancelled = cancelled
    }

    /// The pool cancelled this job's statement (the server is stopping).
    public var wasCancelled: Bool { cancelled() }

    /// A fresh connection in place of the current one.
    @discardableResult
    public func reconnect() throws(PostgresError) -> Connection {
        let fresh = try open()
        if connection.isHealthy { connection.close() }
        connection = fresh
        replaced(fresh.canceller())
        return fresh
    }
}
