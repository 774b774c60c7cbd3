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

    /// What the watcher's loop keeps from one turn to the next.
    private struct LoopState {
        var placed: DispatchSemaphore?  // signalled once, after the first read
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
    }

    /// The watcher's thread: connected and listening, it keeps this server's watches
    /// registered, notices role changes, reads the change log when woken or due, and reloads
    /// the model and the users when told.
    private func watch(placed: DispatchSemaphore) {
        var state = LoopState(placed: placed)
        while true {
            var (reload, stop) = take()
            if stop { break }
            if state.connection == nil || !(state.connection!.isHealthy) {
                guard connect(&state, reload: &reload) else {
                    sleep(1)
                    continue
                }
            }
            guard let db = state.connection else { continue }
            keepRegistered(db, &state)
            if Date() >= state.nextBypassCheck { checkRoles(db, &state) }
            let wait = ReadSchedule.pollMilliseconds(min(state.nextRead.timeIntervalSinceNow, state.nextBypassCheck.timeIntervalSinceNow))
            do {
                let notes = try notifications(db, waiting: wait)
                // The log is read when a writer wakes us and as `schedule` says: every few
                // milliseconds while polling or after changes, at least every second (the
                // cursor keeps moving even while nobody watches).
                if notes.contains(where: { $0.channel == ChangeFeed.channel }) || Date() >= state.nextRead {
                    try readLog(db, &state)
                }
                if notes.contains(where: { $0.channel == Migrator.schemaChannel }) { reload = true }
                if notes.contains(where: { $0.channel == Users.channel }) || reload {
                    context.roles = try Users.roles(db)
                }
                if reload { try reloadModel(db) }
            } catch {
                Log.warning("model watcher: \(error); reconnecting")
                state.connection = nil
            }
        }
        state.connection?.close()
    }

    /// A new connection that listens on the three channels and holds this server's liveness
    /// lock; false when there is none yet.
    private func connect(_ state: inout LoopState, reload: inout Bool) -> Bool {
        let connection = try? Connection(conninfo, applicationName: "recordsd-watcher")
        guard let connection, (try? connection.execute("LISTEN \(Migrator.schemaChannel); LISTEN \(Users.channel); LISTEN \(ChangeFeed.channel)")) != nil,
              (try? HandOff.holdLiveness(server: context.serverID, connection)) != nil else {
            state.connection = nil
            return false
        }
        state.connection = connection
        // A new connection holds no quiet lock: it polls until it has taken it.
        state.schedule = ReadSchedule()
        if let taken = try? ChangeFeed.takeQuietLock(connection) { state.schedule.quietLock(taken: taken) }
        if state.reconnected { reload = true }  // a change may have come while we were away
        else { live.signal() }
        state.reconnected = true
        return true
    }

    /// Keeps this server's watched entities registered (the triggers announce only those);
    /// when due, prunes the log and keeps durable sessions open.
    private func keepRegistered(_ db: Connection, _ state: inout LoopState) {
        let due = Date().timeIntervalSince(state.lastRegistration) > Double(ChangeFeed.registrationSeconds) / 3
        guard context.watchesNeedRegistering(always: due) else { return }
        // The list as it is once PostgreSQL's clock is read (see `register`).
        guard (try? ChangeFeed.register(server: context.serverID, db) { context.watchedEntities }) != nil else {
            state.lastRegistration = .distantPast  // try again next turn
            return
        }
        state.lastRegistration = Date()
        guard due else { return }
        try? ChangeFeed.prune(db)
        if let ttl = context.work.durableTTL {
            try? HandOff.keepOpen(server: context.serverID, ttl: ttl, db)
        }
    }

    /// The roles that bypass row-level security, and the formation's topology, looked at
    /// every few seconds: prepared statements are planned again when the roles changed.
    private func checkRoles(_ db: Connection, _ state: inout LoopState) {
        guard let now = try? Self.bypassingRoles(db) else { return }
        let changed = state.bypassing.map { $0 != now } ?? false
        if changed { Log.info("the roles that bypass row-level security changed: prepared statements are planned again") }
        if changed || Date().timeIntervalSince(state.plansRenewed) >= Self.plansRenewSeconds {
            plansStale?()
            state.plansRenewed = Date()
        }
        state.bypassing = now
        state.nextBypassCheck = Date().addingTimeInterval(Self.bypassCheckSeconds)
        // The primary and its standbys, at the same pace (INFO, /ready, /metrics).
        if let look = try? Topology.look(db) { context.observe(look) }
    }

    /// The notifications that came, waiting up to `wait` milliseconds for one. A NOTIFY libpq
    /// took in while it read another statement's result (the registration, the locks) is
    /// queued already: no readiness of the socket announces it, so it is looked for first.
    private func notifications(_ db: Connection, waiting wait: Int32) throws -> [Connection.Notification] {
        let notes = try db.drainNotifications()
        guard notes.isEmpty else { return notes }
        var descriptor = pollfd(fd: db.socket, events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptor, 1, wait)
        return try db.drainNotifications()
    }

    /// Reads the change log, hands the watched entities' changes to the server, and sets when
    /// to read next. Throws when the connection is lost.
    private func readLog(_ db: Connection, _ state: inout LoopState) throws {
        var readInterval: Double
        do {
            let changes = try state.feed.read(db)
            switch state.schedule.read(changes: changes.reduce(0) { $0 + $1.ids.count }) {
            case .none: break
            case .releaseQuietLock: try ChangeFeed.releaseQuietLock(db)
            case .takeQuietLock: state.schedule.quietLock(taken: try ChangeFeed.takeQuietLock(db))
            case .checkSkippers: state.schedule.skippers(inFlight: try ChangeFeed.skippersInFlight(db))
            }
            readInterval = state.schedule.interval
            let watched = Set(context.watchedEntities.map(\.entity))
            let wanted = changes.filter { watched.contains($0.entity) }
            if let lag = state.feed.lag { context.metrics.watchLag(seconds: lag) }
            if !wanted.isEmpty { context.changesReceived(wanted) }
            state.logFailure = true
        } catch where db.isHealthy {
            // No change log (served with --no-migrate, or not allowed to install it): WATCH
            // reports nothing; try again later, and say so once.
            if state.logFailure { Log.warning("WATCH: cannot read the change log (\(error)); trying again every \(Int(Self.failedReadSeconds)) s") }
            state.logFailure = false
            readInterval = Self.failedReadSeconds
        }
        state.nextRead = Date().addingTimeInterval(readInterval)
        state.placed?.signal()
        state.placed = nil
    }

    /// The schema changed: the model is read again, and triggers put on new tables.
    private func reloadModel(_ db: Connection) throws {
        let model = try ModelReflector.reflect(db, schema: schema)
        if !Self.tablesAndKeys(model).isSubset(of: Self.tablesAndKeys(context.model)) { installTriggers(model) }
        context.model = model
        Log.info("model reloaded: \(model.entities.count) entities")
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
