#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import RecordsProtocol

/// The server's one listening connection: keeps the served model current (every `recordsd
/// migrate` NOTIFYs; SIGHUP asks), follows users being added, and reads the change log for
/// WATCH, handing committed changes to the server, on its own thread.
public final class ModelWatcher: @unchecked Sendable {  // `reloadRequested`/`stopped` guarded by `lock`
    private let conninfo: String
    /// Where the change-feed triggers are installed from when a reload finds new tables: the
    /// migrating login (nil: the server does not migrate, and installs nothing).
    private let installer: String?
    private let schema: String
    private let context: ServerContext
    /// Called when the roles that bypass row-level security change (the pool forgets its
    /// prepared statements: their plans were made under the old rights).
    private let plansStale: (@Sendable () -> Void)?
    private let lock = NSLock()
    private var reloadRequested = false
    private var stopped = false
    private var thread: Thread?
    /// Signalled once the server's liveness lock is first held (`HandOff.holdLiveness`).
    private let live = DispatchSemaphore(value: 0)

    public init(conninfo: String, schema: String, context: ServerContext, installer: String? = nil,
                plansStale: (@Sendable () -> Void)? = nil) {
        self.conninfo = conninfo
        self.installer = installer
        self.schema = schema
        self.context = context
        self.plansStale = plansStale
    }

    /// Seconds between two looks at which roles bypass row-level security.
    static let bypassCheckSeconds = 1.0
    /// Seconds after which the pool plans its statements again even when no change was seen:
    /// a bypass given and taken back between two looks leaves no trace in `pg_roles`, and a
    /// plan made meanwhile would keep showing every row.
    static let plansRenewSeconds = 30.0

    /// The roles that bypass row-level security (superusers, BYPASSRLS), as one text.
    static func bypassingRoles(_ connection: Connection) throws -> String {
        try connection.queryPrepared("SELECT coalesce(string_agg(oid::text, ',' ORDER BY oid), '') FROM pg_roles WHERE rolsuper OR rolbypassrls")
            .string(0, 0) ?? ""
    }

    /// Starts the thread and waits (10 s at most) until it has placed its change-log reader,
    /// so that every change committed after this returns is delivered.
    public func start() {
        let placed = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in watch(placed: placed) }
        thread.name = "model-watcher"
        self.thread = thread
        thread.start()
        if placed.wait(timeout: .now() + 10) == .timedOut {
            Log.warning("model watcher: no first read of the change log yet; changes until it are not reported")
        }
    }

    /// Waits until this server holds its liveness lock: until then another server would take
    /// its durable sessions for a crashed server's. False when `seconds` passed first.
    public func awaitLive(seconds: Int) -> Bool {
        guard live.wait(timeout: .now() + .seconds(seconds)) == .success else { return false }
        live.signal()  // stays signalled for later callers
        return true
    }

    public func requestReload() {
        lock.lock()
        reloadRequested = true
        lock.unlock()
    }

    public func stop() {
        lock.lock()
        stopped = true
        lock.unlock()
    }

    private func take() -> (reload: Bool, stop: Bool) {
        lock.lock()
        defer { lock.unlock() }
        let state = (reloadRequested, stopped)
        reloadRequested = false
        return state
    }

    private static let failedReadSeconds = 10.0

    private func watch(placed: DispatchSemaphore) {
        var placed: DispatchSemaphore? = placed  // signalled once, after the first read
        var connection: Connection?
        var reconnected = false
        var lastRegistration = Date.distantPast
        var feed = ChangeFeed.Reader()
        var schedule = ReadSchedule()
        var nextRead = Date()
        var logFailure = true
        var bypassing: String?
        var nextBypassCheck = Date()
        var plansRenewed = Date()
        while true {
            var (reload, stop) = take()
            if stop { break }
            if connection == nil || !(connection!.isHealthy) {
                connection = try? Connection(conninfo, applicationName: "recordsd-watcher")
                if let connection, (try? connection.execute("LISTEN \(Migrator.schemaChannel); LISTEN \(Users.channel); LISTEN \(ChangeFeed.channel)")) != nil,
                   (try? HandOff.holdLiveness(server: context.serverID, connection)) != nil {
                    // A new connection holds no quiet lock: it polls until it has taken it.
                    schedule = ReadSchedule()
                    if let taken = try? ChangeFeed.takeQuietLock(connection) { schedule.quietLock(taken: taken) }
                    if reconnected { reload = true }  // a change may have come while we were away
                    else { live.signal() }
                    reconnected = true
                } else {
                    connection = nil
                    sleep(1)
                    continue
                }
            }
            guard let db = connection else { continue }
            // Keep this server's watched entities registered (the triggers announce only those).
            let due = Date().timeIntervalSince(lastRegistration) > Double(ChangeFeed.registrationSeconds) / 3
            if context.watchesNeedRegistering(always: due) {
                // The list as it is once PostgreSQL's clock is read (see `register`).
                if (try? ChangeFeed.register(server: context.serverID, db) { context.watchedEntities }) != nil {
                    lastRegistration = Date()
                    if due {
                        try? ChangeFeed.prune(db)
                        if let ttl = context.work.durableTTL {
                            try? HandOff.keepOpen(server: context.serverID, ttl: ttl, db)
                        }
                    }
                } else {
                    lastRegistration = .distantPast  // try again next turn
                }
            }
            if Date() >= nextBypassCheck, let now = try? Self.bypassingRoles(db) {
                let changed = bypassing.map { $0 != now } ?? false
                if changed { Log.info("the roles that bypass row-level security changed: prepared statements are planned again") }
                if changed || Date().timeIntervalSince(plansRenewed) >= Self.plansRenewSeconds {
                    plansStale?()
                    plansRenewed = Date()
                }
                bypassing = now
                nextBypassCheck = Date().addingTimeInterval(Self.bypassCheckSeconds)
                // The primary and its standbys, at the same pace (INFO, /ready, /metrics).
                if let look = try? Topology.look(db) { context.observe(look) }
            }
            let wait = ReadSchedule.pollMilliseconds(min(nextRead.timeIntervalSinceNow, nextBypassCheck.timeIntervalSinceNow))
            do {
                // A NOTIFY libpq took in while it read another statement's result (the
                // registration, the locks) is queued already: no readiness of the socket
                // announces it, so it is looked for before waiting.
                var notes = try db.drainNotifications()
                if notes.isEmpty {
                    var descriptor = pollfd(fd: db.socket, events: Int16(POLLIN), revents: 0)
                    _ = poll(&descriptor, 1, wait)
                    notes = try db.drainNotifications()
                }
                // The log is read when a writer wakes us and as `schedule` says: every few
                // milliseconds while polling or after changes, at least every second (the
                // cursor keeps moving even while nobody watches).
                if notes.contains(where: { $0.channel == ChangeFeed.channel }) || Date() >= nextRead {
                    var readInterval: Double
                    do {
                        let changes = try feed.read(db)
                        switch schedule.read(changes: changes.reduce(0) { $0 + $1.ids.count }) {
                        case .none: break
                        case .releaseQuietLock: try ChangeFeed.releaseQuietLock(db)
                        case .takeQuietLock: schedule.quietLock(taken: try ChangeFeed.takeQuietLock(db))
                        case .checkSkippers: schedule.skippers(inFlight: try ChangeFeed.skippersInFlight(db))
                        }
                        readInterval = schedule.interval
                        let watched = Set(context.watchedEntities.map(\.entity))
                        let wanted = changes.filter { watched.contains($0.entity) }
                        if let lag = feed.lag { context.metrics.watchLag(seconds: lag) }
                        if !wanted.isEmpty { context.changesReceived(wanted) }
                        logFailure = true
                    } catch where db.isHealthy {
                        // No change log (served with --no-migrate, or not allowed to install it):
                        // WATCH reports nothing; try again later, and say so once.
                        if logFailure { Log.warning("WATCH: cannot read the change log (\(error)); trying again every \(Int(Self.failedReadSeconds)) s") }
                        logFailure = false
                        readInterval = Self.failedReadSeconds
                    }
                    nextRead = Date().addingTimeInterval(readInterval)
                    placed?.signal()
                    placed = nil
                }
                if notes.contains(where: { $0.channel == Migrator.schemaChannel }) { reload = true }
                if notes.contains(where: { $0.channel == Users.channel }) || reload {
                    context.roles = try Users.roles(db)
                }
                if reload {
                    let model = try ModelReflector.reflect(db, schema: schema)
                    if !Self.tablesAndKeys(model).isSubset(of: Self.tablesAndKeys(context.model)) { installTriggers(model) }
                    context.model = model
                    Log.info("model reloaded: \(model.entities.count) entities")
                }
            } catch {
                Log.warning("model watcher: \(error); reconnecting")
                connection = nil
            }
        }
        connection?.close()
    }

    /// Each served table with its key columns, and the other relations (a partition attached
    /// since): what the change triggers are made for.
    private static func tablesAndKeys(_ model: Model) -> Set<[String]> {
        Set(model.entities.map { [$0.name] + $0.keyColumns } + model.unserved.map { [$0.name] })
    }

    /// A table created since the start, or whose key changed (picked up by SIGHUP or another
    /// server's migration), gets its change-feed triggers, or a WATCH of it would hear nothing:
    /// the same install as a migration's, under the migration lock when it is free (a
    /// migrating server installs them itself). A reload that finds no such table (a reconnect,
    /// a dropped column) installs nothing.
    private func installTriggers(_ model: Model) {
        guard let installer else { return }
        do {
            let connection = try Connection(installer, applicationName: "recordsd-install")
            defer { connection.close() }
            guard try connection.query("SELECT pg_try_advisory_lock($1::bigint)::text", [Migrator.lockKey]).string(0, 0) == "true" else { return }
            defer { _ = try? connection.query("SELECT pg_advisory_unlock($1::bigint)", [Migrator.lockKey]) }
            try ChangeFeed.install(connection, model: model)
        } catch {
            Log.warning("WATCH: cannot install change triggers for the reloaded model (\(error)); restart to install them")
        }
    }
}
