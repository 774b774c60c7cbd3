import Foundation
import Postgres
import RecordsProtocol

/// Limits that protect the server; each has a safe default and is configurable.
public struct Limits: Sendable {
    public var maxPendingChanges = 1_000_000
    /// Bytes of names and values a unit of work holds, every nested scratchpad in full.
    public var maxPendingBytes = 64 << 20
    public init() {}
}

/// What every session shares: the model (swapped whole on reload), server facts for INFO.
public final class ServerContext: @unchecked Sendable {  // mutable state guarded by `lock`
    public static let version = "0.1.0"

    public let startedAt = Date()
    /// Where the data lives, with any password removed.
    public let databaseDescription: String
    public let limits: Limits
    /// What `GET /metrics` reports.
    public let metrics = Metrics(version: ServerContext.version)
    /// Timeouts of SAVE, IMPORT and EXPORT, and the metrics database work adds to.
    public var work = WorkSettings() {
        didSet { work.metrics = metrics }  // never replaced by a copy without them
    }
    public let throttle: LoginThrottle
    /// What seals FIND's cursors (`--cursor-secret-file`'s keys, or the server's own); the keys
    /// rotate inside it, so it is set once, at start.
    public var cursors: any CursorSealing {
        get { lock.lock(); defer { lock.unlock() }; return cursorKeys }
        set { lock.lock(); cursorKeys = newValue; lock.unlock() }
    }
    private var cursorKeys: any CursorSealing = UnsealedCursors()
    /// `--log-slow MS`: database commands at least this long are logged with their text.
    public var slowCommandMilliseconds: Int? {
        get { lock.lock(); defer { lock.unlock() }; return slowMilliseconds }
        set { lock.lock(); slowMilliseconds = newValue; lock.unlock() }
    }
    private var slowMilliseconds: Int?
    private let lock = NSLock()
    private var requiresAuthentication = false
    private var currentModel: Model
    private var statusProvider: @Sendable () -> (sessions: Int, pool: ConnectionPool.Statistics?) = { (0, nil) }

    /// How sign-in is protected, decided at start.
    public struct Security: Sendable {
        /// --insecure-no-auth: never require authentication.
        public var authenticationDisabled = false
        /// A certificate is configured: STARTTLS and the TLS listener are available.
        public var tlsAvailable = false
        /// AUTH from a host other than this one needs an encrypted connection (off unless
        /// --insecure-no-tls).
        public var remoteAuthNeedsTLS = true
        public init() {}
    }
    public let security: Security

    public init(model: Model, databaseDescription: String, limits: Limits = Limits(),
                throttle: LoginThrottle = LoginThrottle(), authenticationRequired: Bool = false, security: Security = Security()) {
        self.currentModel = model
        self.databaseDescription = databaseDescription
        self.limits = limits
        self.throttle = throttle
        self.requiresAuthentication = authenticationRequired
        self.security = security
        work.metrics = metrics
    }

    public var tlsAvailable: Bool { security.tlsAvailable }

    /// True once any user exists (unless the operator chose --insecure-no-auth): sessions that
    /// start then must AUTH. Once true it stays so until the server restarts: removing users
    /// never turns sign-in off under sessions already served.
    public var authenticationRequired: Bool {
        get { lock.lock(); defer { lock.unlock() }; return requiresAuthentication }
        set { lock.lock(); requiresAuthentication = requiresAuthentication || newValue; lock.unlock() }
    }

    private var knownRoles: [String: Users.Grant]?

    /// Every user's current role, as the users table last said (this server's USER commands,
    /// `recordsd user`, other servers: each NOTIFYs). A signed-in session is checked against it
    /// at every command: a removed user's session loses its rights, a changed role applies.
    public var roles: [String: Users.Grant]? {
        get { lock.lock(); defer { lock.unlock() }; return knownRoles }
        set {
            lock.lock()
            knownRoles = newValue
            if let newValue, !newValue.isEmpty { requiresAuthentication = true }
            lock.unlock()
        }
    }

    /// Set with --insecure-no-auth: never require authentication.
    public var authenticationDisabled: Bool { security.authenticationDisabled }

    /// The model a command runs against; a reload replaces it for later commands only.
    public var model: Model {
        get { lock.lock(); defer { lock.unlock() }; return currentModel }
        set {
            lock.lock(); currentModel = newValue; lock.unlock()
            work.keys?.dropAll()  // keys taken ahead belong to the sequences as they were
        }
    }

    private var currentTopology = Topology()
    /// The PostgreSQL written to, as the model watcher last saw it.
    public var topology: Topology { lock.withLock { currentTopology } }

    /// Folds in the watcher's look; a new primary, or the last standby gone, is logged.
    func observe(_ look: Topology.Look) {
        let (before, after) = lock.withLock {
            let before = currentTopology.last
            currentTopology.observe(look)
            return (before, currentTopology)
        }
        guard let before else { return }
        if before.primary != look.primary {
            Log.warning("PostgreSQL's primary is now \(look.primary) (was \(before.primary)); primary changes seen: \(after.primaryChanges)")
        } else if before.standbys > 0 && look.standbys == 0 {
            Log.warning("PostgreSQL's primary \(look.primary) has no standby left: acknowledged saves are on one server until one is back")
        } else if before.standbys == 0 && look.standbys > 0 {
            Log.info("PostgreSQL's primary \(look.primary) has \(look.standbys) standby(s) again")
        }
    }

    private var changeHandler: (@Sendable ([ChangeFeed.Event]) -> Void)?
    /// Entity -> sessions of this server watching it (all, and those with a WHERE); an
    /// entity leaves at zero.
    private var watchers: [String: (sessions: Int, filtered: Int)] = [:]
    private var watchesChanged = false

    /// Identifies this server in `records.watched`.
    public let serverID = "recordsd-" + UUID().uuidString.prefix(8).lowercased()

    /// Entities at least one session of this server watches.
    public var watchedEntities: [ChangeFeed.Watch] {
        lock.lock()
        defer { lock.unlock() }
        return currentWatches
    }

    func watching(_ entity: String, _ delta: Int, filtered: Bool) {
        lock.lock()
        var count = watchers[entity] ?? (0, 0)
        count.sessions += delta
        if filtered { count.filtered += delta }
        watchers[entity] = count.sessions > 0 ? count : nil
        watchesChanged = true
        lock.unlock()
    }

    /// Whether the watched entities changed since the last call (or `always`): then they are
    /// registered again (`ChangeFeed.register` reads them itself, when its clock says).
    func watchesNeedRegistering(always: Bool) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard watchesChanged || always else { return false }
        watchesChanged = false
        return true
    }

    private var currentWatches: [ChangeFeed.Watch] {  // under `lock`
        watchers.keys.sorted().map { ChangeFeed.Watch(entity: $0, filtered: watchers[$0]!.filtered > 0) }
    }

    /// Where committed changes go (the server fans them out to watching sessions).
    public func onChanges(_ handler: @escaping @Sendable ([ChangeFeed.Event]) -> Void) {
        lock.lock()
        changeHandler = handler
        lock.unlock()
    }

    func changesReceived(_ events: [ChangeFeed.Event]) {
        lock.lock()
        let handler = changeHandler
        lock.unlock()
        handler?(events)
    }

    public func setStatusProvider(_ provider: @escaping @Sendable () -> (sessions: Int, pool: ConnectionPool.Statistics?)) {
        lock.lock()
        statusProvider = provider
        lock.unlock()
    }

    public var status: (sessions: Int, pool: ConnectionPool.Statistics?) {
        lock.lock()
        let provider = statusProvider
        lock.unlock()
        return provider()
    }
}
